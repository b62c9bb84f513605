/* The scalar CPU path: every primitive of lse_cpu.h in plain C. Always available, always
 * correct; the SIMD paths must agree with it (int: bit for bit). */
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "lse/lse_cpu.h"

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

/* Max pass then exp pass over one chunk of at most PC_CPU_FUSE_CHUNK floats. */
static void fuse_chunk(const float *x, int64_t n, float *m_out, float *s_out) {
    float m;
    int nan;
    max_f32(x, n, &m, &nan);
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
        for (int64_t i = 0; i < n; i++)
            dst[i] = pc_f16_to_f32(src[i]);
    else
        for (int64_t i = 0; i < n; i++)
            dst[i] = pc_bf16_to_f32(src[i]);
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
    for (int64_t i = 0; i < n; i++)
        q[i] = from_shifted(x[i] - m);
}

static int32_t int_tree(int32_t *buf, int64_t n, const int32_t *table, const uint32_t *packed) {
    (void)packed;
    return pc_int_tree(buf, n, table);
}

/* Results under 2^-126 are 0, as on the SIMD paths (and as flush-to-zero would make them), and
 * skip expf's underflow handling, which costs several times a plain expf. */
static void exp_shifted(const float *x, int64_t n, float shift, float *out) {
    for (int64_t i = 0; i < n; i++)
        out[i] = (x[i] - shift) * PC_LOG2E_F < -126.0f ? 0.0f : expf(x[i] - shift);
}

static void gemv_t(const float *at, int64_t ins, int64_t outs, const float *e, float *y) {
    for (int64_t j = 0; j < outs; j++)
        y[j] = 0.0f;
    for (int64_t k = 0; k < ins; k++)
        for (int64_t j = 0; j < outs; j++)
            y[j] += at[k * outs + j] * e[k];
}

static void int_terms_t(const int32_t *wqt, int64_t ins, int64_t outs, const int32_t *xq,
                        int32_t *scratch, const int32_t *table, const uint32_t *packed,
                        int32_t *q) {
    (void)packed;
    int32_t *buf = scratch, *res = scratch + PC_CPU_INT_CHUNK;
    for (int64_t j = 0; j < outs; j++) {
        int64_t nc = 0;
        for (int64_t c0 = 0; c0 < ins; c0 += PC_CPU_INT_CHUNK) {
            int64_t len = ins - c0 < PC_CPU_INT_CHUNK ? ins - c0 : PC_CPU_INT_CHUNK;
            for (int64_t i = 0; i < len; i++)
                buf[i] = wqt[(c0 + i) * outs + j] + xq[c0 + i];
            res[nc++] = pc_int_tree(buf, len, table);
        }
        q[j] = pc_int_tree(res, nc, table);
    }
}

const pc_lse_cpu_impl pc_lse_cpu_scalar = {
    .fuse_chunk = fuse_chunk,
    .widen = widen,
    .max_f32 = max_f32,
    .quantize_f32 = quantize_f32,
    .int_tree = int_tree,
    .exp_shifted = exp_shifted,
    .gemv_t = gemv_t,
    .int_terms_t = int_terms_t,
};
