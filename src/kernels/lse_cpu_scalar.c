/* The scalar CPU path: every primitive of lse_cpu.h in plain C. Always available, always
 * correct; the SIMD paths must agree with it (int: bit for bit). */
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "kernels/lse_cpu.h"

/* Max pass then exp pass over one chunk of at most PC_CPU_FUSE_CHUNK floats. */
static void fuse_chunk(const float *x, int64_t n, float *m_out, float *s_out) {
    float m = -INFINITY;
    int nan = 0;
    for (int64_t i = 0; i < n; i++) {
        m = x[i] > m ? x[i] : m;
        nan |= x[i] != x[i];
    }
    *m_out = m;
    if (nan || m == INFINITY) {
        *s_out = NAN;
        return;
    }
    if (m == -INFINITY) {
        *s_out = 0.0f;
        return;
    }
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float t = (x[i] - m) * PC_LOG2E_F; /* <= 0; -inf for -inf inputs */
        s += pc_exp2_poly(t > -126.0f ? t : -126.0f);
    }
    *s_out = s;
}

static void widen(pc_dtype dtype, const uint16_t *src, int64_t n, float *dst) {
    if (dtype == PC_F16)
        for (int64_t i = 0; i < n; i++) dst[i] = pc_f16_to_f32(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = pc_bf16_to_f32(src[i]);
}

static void max_f32(const float *x, int64_t n, float *m_out, int *has_nan) {
    float m = -INFINITY;
    int nan = 0;
    for (int64_t i = 0; i < n; i++) {
        m = x[i] > m ? x[i] : m;
        nan |= x[i] != x[i];
    }
    *m_out = m;
    *has_nan = nan;
}

/* pc_int_from_shifted() with the rounding inlined: lrintf is a library call unless errno is
 * ignored, and cvtss2si rounds the same way (to nearest even, the default mode). */
static inline int32_t from_shifted(float d) {
    float q = d * (float)PC_INT_SCALE_F;
#if defined(__SSE__)
    return q > (float)PC_INT_FLOOR ? _mm_cvtss_si32(_mm_set_ss(q)) : PC_INT_FLOOR;
#else
    return pc_int_from_shifted(d);
#endif
}

static void quantize_f32(const float *x, int64_t n, float m, int32_t *q) {
    for (int64_t i = 0; i < n; i++) q[i] = from_shifted(x[i] - m);
}

static int32_t int_tree(int32_t *buf, int64_t n, const int32_t *table, const uint32_t *packed) {
    (void)packed;
    return pc_int_tree(buf, n, table);
}

static void exp_shifted(const float *x, int64_t n, float shift, float *out) {
    for (int64_t i = 0; i < n; i++) out[i] = expf(x[i] - shift);
}

static float dot(const float *a, const float *b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

const pc_lse_cpu_impl pc_lse_cpu_scalar = {
    .fuse_chunk = fuse_chunk,
    .widen = widen,
    .max_f32 = max_f32,
    .quantize_f32 = quantize_f32,
    .int_tree = int_tree,
    .exp_shifted = exp_shifted,
    .dot = dot,
};
