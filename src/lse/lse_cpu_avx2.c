/* The AVX2 CPU path (8 float lanes; compiled with -mavx2 -mfma -mf16c, called only after
 * pc_cpu_best_isa() reports it). Tails of fewer than 8 values run the scalar twins, which give
 * the same results (int: the same bits).
 *
 * exp2: t clamped below at -126, k = round(t), f = t - k, degree-5 polynomial, then k is added
 * to the exponent bits. Values under 2^-126 come out as tiny positive numbers instead of 0:
 * harmless in a sum whose largest term is 1, so the forward pass uses it as is; exp_shifted
 * (backward, weights) gives 0 for lanes under -126 (the value the drivers' flush-to-zero mode
 * gives on every path; -inf must give 0) and sends lanes over 126 to expf. NaN passes through:
 * max returns its second operand (t) when one is NaN, and NaN converts to INT32_MIN, whose
 * shifted exponent bits are 0.
 */
#include <immintrin.h>

#include "lse/lse_cpu.h"

#define W 8

static inline __m256 exp2_v(__m256 t) {
    t = _mm256_max_ps(_mm256_set1_ps(-126.0f), t);
    __m256 k = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_sub_ps(t, k);
    __m256 p = _mm256_set1_ps(PC_EXP2_C5);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(PC_EXP2_C4));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(PC_EXP2_C3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(PC_EXP2_C2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(PC_EXP2_C1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(k), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
}

static inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* A short tail copied into 8 lanes, padded with -inf (which adds nothing to a max or a sum). */
static inline __m256 load_tail(const float *x, int64_t left) {
    float buf[W];
    for (int l = 0; l < W; l++)
        buf[l] = l < left ? x[l] : -INFINITY;
    return _mm256_loadu_ps(buf);
}

/* sum 2^t over x[0:n] with t = x * log2(e) - ml (one FMA; the product is exact inside it), or
 * t = (x - m) * log2(e) when scaled = 0. Prefetches the next chunk into L1 and the chunk
 * PC_CPU_FUSE_FAR ahead into L2 (see the AVX-512 path). */
static inline __attribute__((always_inline)) float exp_sum(const float *x, int64_t n, float m,
                                                           float ml, int scaled) {
    const __m256 vm = _mm256_set1_ps(scaled ? -ml : m), l2e = _mm256_set1_ps(PC_LOG2E_F);
#define TERM(v)                                                                                    \
    exp2_v(scaled ? _mm256_fmadd_ps(v, l2e, vm) : _mm256_mul_ps(_mm256_sub_ps(v, vm), l2e))
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
        pc_fuse_prefetch(x + i, 2);
        s0 = _mm256_add_ps(s0, TERM(_mm256_loadu_ps(x + i)));
        s1 = _mm256_add_ps(s1, TERM(_mm256_loadu_ps(x + i + W)));
        s2 = _mm256_add_ps(s2, TERM(_mm256_loadu_ps(x + i + 2 * W)));
        s3 = _mm256_add_ps(s3, TERM(_mm256_loadu_ps(x + i + 3 * W)));
    }
    for (; i + W <= n; i += W)
        s0 = _mm256_add_ps(s0, TERM(_mm256_loadu_ps(x + i)));
    if (i < n)
        s1 = _mm256_add_ps(s1, TERM(load_tail(x + i, n - i)));
#undef TERM
    return hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

static void fuse_chunk(const float *x, int64_t n, float *m_out, float *s_out) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    int64_t i = 0;
    /* Max ignoring NaN: x is the first operand, so a NaN x leaves the accumulator. */
    for (; i + 4 * W <= n; i += 4 * W) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + W), m1);
        m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 2 * W), m2);
        m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 3 * W), m3);
    }
    for (; i + W <= n; i += W)
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    if (i < n)
        m1 = _mm256_max_ps(load_tail(x + i, n - i), m1);
    float m = hmax(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    *m_out = m;
    if (m == INFINITY) {
        *s_out = NAN;
        return;
    }
    /* An all -inf chunk still runs the exp pass (shift 0) so that a NaN shows in s; its
     * -inf lanes give about 2^-126 each, which the caller ignores with the chunk. */
    float shift = m == -INFINITY ? 0.0f : m, ml = shift * PC_LOG2E_F, s;
    if (fabsf(shift) < PC_CPU_SCALED_MAX) {
        /* The sum used 2^-ml in place of 2^-(shift log2 e): undo the rounding of ml. */
        double err = (double)ml - (double)shift * (double)PC_LOG2E_F;
        s = (float)(exp_sum(x, n, shift, ml, 1) * (1.0 + err * 0.6931471805599453));
    } else {
        s = exp_sum(x, n, shift, ml, 0); /* see PC_CPU_SCALED_MAX */
    }
    *s_out = m == -INFINITY && !isnan(s) ? 0.0f : s;
}

/* See pc_lse_cpu_impl.fuse_chunk_at and the AVX-512 path. -inf values give about 2^-126 each
 * here, nothing beside the running sum, which holds at least 1. */
static int fuse_chunk_at(const float *x, int64_t n, float g, float *m_out, float *s_out) {
    if (!(fabsf(g) < PC_CPU_SCALED_MAX))
        return 0;
    const float ml = g * PC_LOG2E_F;
    const __m256 vm = _mm256_set1_ps(-ml), l2e = _mm256_set1_ps(PC_LOG2E_F);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
        pc_fuse_prefetch(x + i, 2);
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + W);
        __m256 v2 = _mm256_loadu_ps(x + i + 2 * W), v3 = _mm256_loadu_ps(x + i + 3 * W);
        a0 = _mm256_max_ps(v0, a0);
        a1 = _mm256_max_ps(v1, a1);
        a2 = _mm256_max_ps(v2, a2);
        a3 = _mm256_max_ps(v3, a3);
        s0 = _mm256_add_ps(s0, exp2_v(_mm256_fmadd_ps(v0, l2e, vm)));
        s1 = _mm256_add_ps(s1, exp2_v(_mm256_fmadd_ps(v1, l2e, vm)));
        s2 = _mm256_add_ps(s2, exp2_v(_mm256_fmadd_ps(v2, l2e, vm)));
        s3 = _mm256_add_ps(s3, exp2_v(_mm256_fmadd_ps(v3, l2e, vm)));
    }
    for (; i + W <= n; i += W) {
        __m256 v = _mm256_loadu_ps(x + i);
        a0 = _mm256_max_ps(v, a0);
        s0 = _mm256_add_ps(s0, exp2_v(_mm256_fmadd_ps(v, l2e, vm)));
    }
    if (i < n) {
        __m256 v = load_tail(x + i, n - i);
        a1 = _mm256_max_ps(v, a1);
        s1 = _mm256_add_ps(s1, exp2_v(_mm256_fmadd_ps(v, l2e, vm)));
    }
    float m = hmax(_mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3)));
    if (!(m - g <= PC_CPU_AT_SPAN))
        return 0; /* also m = +inf */
    float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    /* As in fuse_chunk: the sum used 2^-ml in place of 2^-(g log2 e); undo the rounding of ml. */
    double err = (double)ml - (double)g * (double)PC_LOG2E_F;
    *m_out = m;
    *s_out = (float)(s * (1.0 + err * 0.6931471805599453));
    return 1;
}

/* fuse_chunk on 4 rows at once: each loop step feeds four independent chains. Rows that need
 * the unscaled form or report +inf go through fuse_chunk instead (rare). */
static void fuse4(const float *x, int64_t n, int64_t stride, float *m_out, float *s_out) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY), l2e = _mm256_set1_ps(PC_LOG2E_F);
    const float *r0 = x, *r1 = x + stride, *r2 = x + 2 * stride, *r3 = x + 3 * stride;
    __m256 a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
    int64_t i = 0, left = n % W;
    for (; i + W <= n; i += W) {
        a0 = _mm256_max_ps(_mm256_loadu_ps(r0 + i), a0);
        a1 = _mm256_max_ps(_mm256_loadu_ps(r1 + i), a1);
        a2 = _mm256_max_ps(_mm256_loadu_ps(r2 + i), a2);
        a3 = _mm256_max_ps(_mm256_loadu_ps(r3 + i), a3);
    }
    if (left) {
        a0 = _mm256_max_ps(load_tail(r0 + i, left), a0);
        a1 = _mm256_max_ps(load_tail(r1 + i, left), a1);
        a2 = _mm256_max_ps(load_tail(r2 + i, left), a2);
        a3 = _mm256_max_ps(load_tail(r3 + i, left), a3);
    }
    float m[4] = {hmax(a0), hmax(a1), hmax(a2), hmax(a3)}, ml[4];
    for (int r = 0; r < 4; r++) {
        if (!(fabsf(m[r]) < PC_CPU_SCALED_MAX) && m[r] != -INFINITY) {
            for (int q = 0; q < 4; q++)
                fuse_chunk(x + q * stride, n, &m_out[q], &s_out[q]);
            return;
        }
        ml[r] = (m[r] == -INFINITY ? 0.0f : m[r]) * PC_LOG2E_F;
    }
    const __m256 v0 = _mm256_set1_ps(-ml[0]), v1 = _mm256_set1_ps(-ml[1]);
    const __m256 v2 = _mm256_set1_ps(-ml[2]), v3 = _mm256_set1_ps(-ml[3]);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    /* Prefetch the next 4 rows, one line of each per 16 floats. */
    const char *next = (const char *)(x + 4 * stride);
    const size_t row_bytes = (size_t)stride * sizeof(float);
    for (i = 0; i + W <= n; i += W) {
        if (i % 16 == 0) {
            _mm_prefetch(next + 4 * i, _MM_HINT_T0);
            _mm_prefetch(next + row_bytes + 4 * i, _MM_HINT_T0);
            _mm_prefetch(next + 2 * row_bytes + 4 * i, _MM_HINT_T0);
            _mm_prefetch(next + 3 * row_bytes + 4 * i, _MM_HINT_T0);
        }
        s0 = _mm256_add_ps(s0, exp2_v(_mm256_fmadd_ps(_mm256_loadu_ps(r0 + i), l2e, v0)));
        s1 = _mm256_add_ps(s1, exp2_v(_mm256_fmadd_ps(_mm256_loadu_ps(r1 + i), l2e, v1)));
        s2 = _mm256_add_ps(s2, exp2_v(_mm256_fmadd_ps(_mm256_loadu_ps(r2 + i), l2e, v2)));
        s3 = _mm256_add_ps(s3, exp2_v(_mm256_fmadd_ps(_mm256_loadu_ps(r3 + i), l2e, v3)));
    }
    if (left) {
        s0 = _mm256_add_ps(s0, exp2_v(_mm256_fmadd_ps(load_tail(r0 + i, left), l2e, v0)));
        s1 = _mm256_add_ps(s1, exp2_v(_mm256_fmadd_ps(load_tail(r1 + i, left), l2e, v1)));
        s2 = _mm256_add_ps(s2, exp2_v(_mm256_fmadd_ps(load_tail(r2 + i, left), l2e, v2)));
        s3 = _mm256_add_ps(s3, exp2_v(_mm256_fmadd_ps(load_tail(r3 + i, left), l2e, v3)));
    }
    float s[4] = {hsum(s0), hsum(s1), hsum(s2), hsum(s3)};
    for (int r = 0; r < 4; r++) {
        /* As in fuse_chunk: undo the rounding of ml; an all -inf row's padding terms are
         * dropped (0 unless NaN); +inf rows report NaN for the rescan. */
        double shift = m[r] == -INFINITY ? 0.0 : (double)m[r];
        double err = (double)ml[r] - shift * (double)PC_LOG2E_F;
        float sr = (float)(s[r] * (1.0 + err * 0.6931471805599453));
        m_out[r] = m[r];
        s_out[r] = m[r] == INFINITY ? NAN : m[r] == -INFINITY && !isnan(sr) ? 0.0f : sr;
    }
}

static void fuse_rows(const float *x, int64_t rows, int64_t n, int64_t stride, float *m_out,
                      float *s_out) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4)
        fuse4(x + r * stride, n, stride, m_out + r, s_out + r);
    for (; r < rows; r++)
        fuse_chunk(x + r * stride, n, m_out + r, s_out + r);
}

static void widen(pc_dtype dtype, const uint16_t *src, int64_t n, float *dst) {
    int64_t i = 0;
    if (dtype == PC_F16) {
        for (; i + W <= n; i += W)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
        for (; i < n; i++)
            dst[i] = pc_f16_to_f32(src[i]);
    } else {
        for (; i + W <= n; i += W) {
            __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
            _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
        }
        for (; i < n; i++)
            dst[i] = pc_bf16_to_f32(src[i]);
    }
}

static void max_f32(const float *x, int64_t n, float *m_out, int *has_nan) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m0 = ninf, m1 = ninf, nan = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + W);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
        m0 = _mm256_max_ps(a, m0);
        m1 = _mm256_max_ps(b, m1);
    }
    for (; i < n; i += W) {
        __m256 a = n - i < W ? load_tail(x + i, n - i) : _mm256_loadu_ps(x + i);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
        m0 = _mm256_max_ps(a, m0);
    }
    *m_out = hmax(_mm256_max_ps(m0, m1));
    *has_nan = _mm256_movemask_ps(nan) != 0;
}

static void quantize_f32(const float *x, int64_t n, float m, int32_t *q) {
    const __m256 vm = _mm256_set1_ps(m), scale = _mm256_set1_ps((float)PC_INT_SCALE_F);
    const __m256i floor = _mm256_set1_epi32(PC_INT_FLOOR);
    int64_t i = 0;
    for (; i + W <= n; i += W) {
        __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), scale);
        /* Out of range and -inf convert to INT32_MIN, which the max lifts to the floor. */
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_max_epi32(_mm256_cvtps_epi32(d), floor));
    }
    for (; i < n; i++)
        q[i] = pc_int_from_shifted(x[i] - m);
}

/* pc_int_lse2 on 8 lanes with one gather of the packed table. */
static inline __m256i lse2_v(__m256i a, __m256i b, const uint32_t *packed) {
    __m256i hi = _mm256_max_epi32(a, b), lo = _mm256_min_epi32(a, b);
    __m256i d = _mm256_min_epi32(_mm256_sub_epi32(hi, lo), _mm256_set1_epi32(PC_INT_D_MAX));
    __m256i p =
        _mm256_i32gather_epi32((const int *)packed, _mm256_srli_epi32(d, PC_INT_TABLE_SHIFT), 4);
    __m256i t = _mm256_and_si256(d, _mm256_set1_epi32((1 << PC_INT_TABLE_SHIFT) - 1));
    __m256i f0 = _mm256_and_si256(p, _mm256_set1_epi32((1 << PC_INT_PACK_BITS) - 1));
    __m256i df = _mm256_srli_epi32(p, PC_INT_PACK_BITS);
    /* df < 2^9 and t < 2^10 sit in the low 16 bits of each lane: one multiply-add of 16-bit
     * pairs (high halves zero) gives df * t exactly, cheaper than a 32-bit multiply. */
    __m256i r = _mm256_add_epi32(_mm256_madd_epi16(df, t),
                                 _mm256_set1_epi32(1 << (PC_INT_TABLE_SHIFT - 1)));
    return _mm256_add_epi32(hi, _mm256_sub_epi32(f0, _mm256_srai_epi32(r, PC_INT_TABLE_SHIFT)));
}

static int32_t int_tree(int32_t *buf, int64_t n, const int32_t *table, const uint32_t *packed) {
    while (n > 1) {
        int64_t half = n / 2, rest = n - half, i = 0;
        /* Reads buf[i + rest] with i < half <= rest, never a slot this level writes. */
        for (; i + W <= half; i += W) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(buf + i));
            __m256i b = _mm256_loadu_si256((const __m256i *)(buf + i + rest));
            _mm256_storeu_si256((__m256i *)(buf + i), lse2_v(a, b, packed));
        }
        for (; i < half; i++)
            buf[i] = pc_int_lse2(buf[i], buf[i + rest], table);
        n = rest;
    }
    return buf[0];
}

static void exp_shifted(const float *x, int64_t n, float shift, float *out) {
    const __m256 vs = _mm256_set1_ps(shift), l2e = _mm256_set1_ps(PC_LOG2E_F);
    const __m256 lo = _mm256_set1_ps(-126.0f), hi = _mm256_set1_ps(126.0f);
    int64_t i = 0;
    for (; i + W <= n; i += W) {
        __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs), l2e);
        __m256 under = _mm256_cmp_ps(t, lo, _CMP_LT_OQ); /* false for NaN */
        _mm256_storeu_ps(out + i, _mm256_andnot_ps(under, exp2_v(t)));
        int over = _mm256_movemask_ps(_mm256_cmp_ps(t, hi, _CMP_GT_OQ));
        for (int l = 0; over; l++, over >>= 1)
            if (over & 1)
                out[i + l] = expf(x[i + l] - shift);
    }
    for (; i < n; i++)
        out[i] = (x[i] - shift) * PC_LOG2E_F < -126.0f ? 0.0f : expf(x[i] - shift);
}

static void gemv_t(const float *at, int64_t ins, int64_t outs, const float *e, float *y) {
    int64_t j = 0;
    /* 32 outputs per pass: four independent accumulators hide the FMA latency. */
    for (; j + 4 * W <= outs; j += 4 * W) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t k = 0; k < ins; k++) {
            const float *row = at + k * outs + j;
            __m256 ek = _mm256_set1_ps(e[k]);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(row), ek, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(row + W), ek, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(row + 2 * W), ek, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(row + 3 * W), ek, a3);
        }
        _mm256_storeu_ps(y + j, a0);
        _mm256_storeu_ps(y + j + W, a1);
        _mm256_storeu_ps(y + j + 2 * W, a2);
        _mm256_storeu_ps(y + j + 3 * W, a3);
    }
    for (; j + W <= outs; j += W) {
        __m256 a = _mm256_setzero_ps();
        for (int64_t k = 0; k < ins; k++)
            a = _mm256_fmadd_ps(_mm256_loadu_ps(at + k * outs + j), _mm256_set1_ps(e[k]), a);
        _mm256_storeu_ps(y + j, a);
    }
    for (; j < outs; j++) {
        float a = 0.0f;
        for (int64_t k = 0; k < ins; k++)
            a += at[k * outs + j] * e[k];
        y[j] = a;
    }
}

/* The tree of pc_int_tree over n vectors of 8 lanes, lane by lane. */
static __m256i lane_tree(__m256i *v, int64_t n, const uint32_t *packed) {
    while (n > 1) {
        int64_t half = n / 2, rest = n - half;
        for (int64_t i = 0; i < half; i++)
            _mm256_storeu_si256(
                v + i, lse2_v(_mm256_loadu_si256(v + i), _mm256_loadu_si256(v + i + rest), packed));
        n = rest;
    }
    return _mm256_loadu_si256(v);
}

static void int_terms_t(const int32_t *wqt, int64_t ins, int64_t outs, const int32_t *xq,
                        int32_t *scratch, const int32_t *table, const uint32_t *packed,
                        int32_t *q) {
    __m256i *buf = (__m256i *)scratch, *res = buf + PC_CPU_INT_CHUNK;
    int64_t j = 0;
    for (; j + W <= outs; j += W) {
        int64_t nc = 0;
        for (int64_t c0 = 0; c0 < ins; c0 += PC_CPU_INT_CHUNK) {
            int64_t len = ins - c0 < PC_CPU_INT_CHUNK ? ins - c0 : PC_CPU_INT_CHUNK;
            for (int64_t i = 0; i < len; i++)
                _mm256_storeu_si256(
                    buf + i, _mm256_add_epi32(
                                 _mm256_loadu_si256((const __m256i *)(wqt + (c0 + i) * outs + j)),
                                 _mm256_set1_epi32(xq[c0 + i])));
            _mm256_storeu_si256(res + nc++, lane_tree(buf, len, packed));
        }
        _mm256_storeu_si256((__m256i *)(q + j), lane_tree(res, nc, packed));
    }
    /* The last outs % 8 outputs one at a time, with the same trees. */
    int32_t *sbuf = scratch, *sres = scratch + PC_CPU_INT_CHUNK;
    for (; j < outs; j++) {
        int64_t nc = 0;
        for (int64_t c0 = 0; c0 < ins; c0 += PC_CPU_INT_CHUNK) {
            int64_t len = ins - c0 < PC_CPU_INT_CHUNK ? ins - c0 : PC_CPU_INT_CHUNK;
            for (int64_t i = 0; i < len; i++)
                sbuf[i] = wqt[(c0 + i) * outs + j] + xq[c0 + i];
            sres[nc++] = int_tree(sbuf, len, table, packed);
        }
        q[j] = int_tree(sres, nc, table, packed);
    }
}

const pc_lse_cpu_impl pc_lse_cpu_avx2 = {
    .fuse_chunk = fuse_chunk,
    .fuse_chunk_at = fuse_chunk_at,
    .fuse_rows = fuse_rows,
    .widen = widen,
    .max_f32 = max_f32,
    .quantize_f32 = quantize_f32,
    .int_tree = int_tree,
    .exp_shifted = exp_shifted,
    .gemv_t = gemv_t,
    .int_terms_t = int_terms_t,
};
