/* The AVX-512 CPU path (16 float lanes; compiled with -mavx512f/bw/vl/dq, called only after
 * pc_cpu_best_isa() reports it). Tails use masks; lanes outside the row are -inf or zero.
 *
 * exp2: f = t - floor(t) in [0, 1) by one VREDUCEPS, a degree-5 polynomial, then
 * scalef(p, t), which scales by 2^floor(t) and underflows to 0 and overflows to inf as IEEE
 * does. No clamping is needed: reduce(+-inf) = 0 and scalef(p, -inf) = 0, scalef(p, +inf) = inf;
 * NaN passes through both. Results under 2^-126 are flushed to 0 by the mode the drivers set
 * (pc_lse_cpu_for): without it every underflowing lane took a microcode assist (13x slower on
 * U(-2000, 0)). */
#include <immintrin.h>

#include "lse/lse_cpu.h"

#define W 16

static inline __mmask16 tail_mask(int64_t left) { return (__mmask16)((1u << left) - 1u); }

static inline __m512 exp2_v(__m512 t) {
    __m512 f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 p = _mm512_set1_ps(PC_EXP2F_C5);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(PC_EXP2F_C4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(PC_EXP2F_C3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(PC_EXP2F_C2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(PC_EXP2F_C1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, t);
}

/* Max ignoring NaN: x is the first operand, so a NaN x leaves the accumulator as it was. */
static float max_pass(const float *x, int64_t n) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
        m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
        m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + W), m1);
        m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 2 * W), m2);
        m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 3 * W), m3);
    }
    for (; i + W <= n; i += W)
        m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
    if (i < n)
        m1 = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, tail_mask(n - i), x + i), m1);
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
}

/* sum 2^t over x[0:n] with t = x * log2(e) - ml (one FMA; the product is exact inside it), or
 * t = (x - m) * log2(e) when scaled = 0. Prefetches the next chunk into L1 (with the max pass
 * and this pass alternating per chunk, nothing else would overlap its memory traffic with
 * arithmetic) and the chunk PC_CPU_FUSE_FAR ahead into L2 (see lse_cpu.h). */
static inline __attribute__((always_inline)) float exp_sum(const float *x, int64_t n, float m,
                                                           float ml, int scaled) {
    const __m512 vm = _mm512_set1_ps(scaled ? -ml : m), l2e = _mm512_set1_ps(PC_LOG2E_F);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
#define TERM(v)                                                                                    \
    exp2_v(scaled ? _mm512_fmadd_ps(v, l2e, vm) : _mm512_mul_ps(_mm512_sub_ps(v, vm), l2e))
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
        pc_fuse_prefetch(x + i, 4);
        s0 = _mm512_add_ps(s0, TERM(_mm512_loadu_ps(x + i)));
        s1 = _mm512_add_ps(s1, TERM(_mm512_loadu_ps(x + i + W)));
        s2 = _mm512_add_ps(s2, TERM(_mm512_loadu_ps(x + i + 2 * W)));
        s3 = _mm512_add_ps(s3, TERM(_mm512_loadu_ps(x + i + 3 * W)));
    }
    for (; i + W <= n; i += W)
        s0 = _mm512_add_ps(s0, TERM(_mm512_loadu_ps(x + i)));
    if (i < n)
        s1 = _mm512_add_ps(s1, TERM(_mm512_mask_loadu_ps(ninf, tail_mask(n - i), x + i)));
#undef TERM
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

static void fuse_chunk(const float *x, int64_t n, float *m_out, float *s_out) {
    float m = max_pass(x, n);
    *m_out = m;
    if (m == INFINITY) {
        *s_out = NAN;
        return;
    }
    /* An all -inf chunk still runs the exp pass (with shift 0) so that a NaN shows in s. */
    float shift = m == -INFINITY ? 0.0f : m, ml = shift * PC_LOG2E_F;
    if (fabsf(shift) < PC_CPU_SCALED_MAX) {
        /* The sum used 2^-ml in place of 2^-(shift log2 e): undo the rounding of ml. */
        double err = (double)ml - (double)shift * (double)PC_LOG2E_F;
        *s_out = (float)(exp_sum(x, n, shift, ml, 1) * (1.0 + err * 0.6931471805599453));
    } else {
        *s_out = exp_sum(x, n, shift, ml, 0); /* see PC_CPU_SCALED_MAX */
    }
}

/* See pc_lse_cpu_impl.fuse_chunk_at: one loop takes the chunk max and the sum relative to g
 * together, so the exp arithmetic does not wait at each chunk for a max pass and its reduction,
 * and the chunk is read once. */
static int fuse_chunk_at(const float *x, int64_t n, float g, float *m_out, float *s_out) {
    if (!(fabsf(g) < PC_CPU_SCALED_MAX))
        return 0;
    const float ml = g * PC_LOG2E_F;
    const __m512 vm = _mm512_set1_ps(-ml), l2e = _mm512_set1_ps(PC_LOG2E_F);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
        pc_fuse_prefetch(x + i, 4);
        __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + W);
        __m512 v2 = _mm512_loadu_ps(x + i + 2 * W), v3 = _mm512_loadu_ps(x + i + 3 * W);
        a0 = _mm512_max_ps(v0, a0);
        a1 = _mm512_max_ps(v1, a1);
        a2 = _mm512_max_ps(v2, a2);
        a3 = _mm512_max_ps(v3, a3);
        s0 = _mm512_add_ps(s0, exp2_v(_mm512_fmadd_ps(v0, l2e, vm)));
        s1 = _mm512_add_ps(s1, exp2_v(_mm512_fmadd_ps(v1, l2e, vm)));
        s2 = _mm512_add_ps(s2, exp2_v(_mm512_fmadd_ps(v2, l2e, vm)));
        s3 = _mm512_add_ps(s3, exp2_v(_mm512_fmadd_ps(v3, l2e, vm)));
    }
    for (; i + W <= n; i += W) {
        __m512 v = _mm512_loadu_ps(x + i);
        a0 = _mm512_max_ps(v, a0);
        s0 = _mm512_add_ps(s0, exp2_v(_mm512_fmadd_ps(v, l2e, vm)));
    }
    if (i < n) {
        __m512 v = _mm512_mask_loadu_ps(ninf, tail_mask(n - i), x + i);
        a1 = _mm512_max_ps(v, a1);
        s1 = _mm512_add_ps(s1, exp2_v(_mm512_fmadd_ps(v, l2e, vm)));
    }
    float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3)));
    if (!(m - g <= PC_CPU_AT_SPAN))
        return 0; /* also m = +inf */
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    /* As in fuse_chunk: the sum used 2^-ml in place of 2^-(g log2 e); undo the rounding of ml. */
    double err = (double)ml - (double)g * (double)PC_LOG2E_F;
    *m_out = m;
    *s_out = (float)(s * (1.0 + err * 0.6931471805599453));
    return 1;
}

/* fuse_chunk on 4 rows at once: each loop step feeds four independent chains. Rows that need
 * the unscaled form or report +inf go through fuse_chunk instead (rare). */
static void fuse4(const float *x, int64_t n, int64_t stride, float *m_out, float *s_out) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY), l2e = _mm512_set1_ps(PC_LOG2E_F);
    const float *r0 = x, *r1 = x + stride, *r2 = x + 2 * stride, *r3 = x + 3 * stride;
    __m512 a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
        a0 = _mm512_max_ps(_mm512_loadu_ps(r0 + i), a0);
        a1 = _mm512_max_ps(_mm512_loadu_ps(r1 + i), a1);
        a2 = _mm512_max_ps(_mm512_loadu_ps(r2 + i), a2);
        a3 = _mm512_max_ps(_mm512_loadu_ps(r3 + i), a3);
    }
    __mmask16 k = i < n ? tail_mask(n - i) : 0;
    if (k) {
        a0 = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, k, r0 + i), a0);
        a1 = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, k, r1 + i), a1);
        a2 = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, k, r2 + i), a2);
        a3 = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, k, r3 + i), a3);
    }
    float m[4] = {_mm512_reduce_max_ps(a0), _mm512_reduce_max_ps(a1), _mm512_reduce_max_ps(a2),
                  _mm512_reduce_max_ps(a3)};
    float ml[4];
    for (int r = 0; r < 4; r++) {
        if (!(fabsf(m[r]) < PC_CPU_SCALED_MAX) && m[r] != -INFINITY) {
            for (int q = 0; q < 4; q++)
                fuse_chunk(x + q * stride, n, &m_out[q], &s_out[q]);
            return;
        }
        ml[r] = (m[r] == -INFINITY ? 0.0f : m[r]) * PC_LOG2E_F;
    }
    const __m512 v0 = _mm512_set1_ps(-ml[0]), v1 = _mm512_set1_ps(-ml[1]);
    const __m512 v2 = _mm512_set1_ps(-ml[2]), v3 = _mm512_set1_ps(-ml[3]);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    /* Prefetch the next 4 rows, one line of each per step (the hardware streams one row well,
     * four interleaved ones less so). */
    const char *next = (const char *)(x + 4 * stride);
    const size_t row_bytes = (size_t)stride * sizeof(float);
    for (i = 0; i + W <= n; i += W) {
        _mm_prefetch(next + 4 * i, _MM_HINT_T0);
        _mm_prefetch(next + row_bytes + 4 * i, _MM_HINT_T0);
        _mm_prefetch(next + 2 * row_bytes + 4 * i, _MM_HINT_T0);
        _mm_prefetch(next + 3 * row_bytes + 4 * i, _MM_HINT_T0);
        s0 = _mm512_add_ps(s0, exp2_v(_mm512_fmadd_ps(_mm512_loadu_ps(r0 + i), l2e, v0)));
        s1 = _mm512_add_ps(s1, exp2_v(_mm512_fmadd_ps(_mm512_loadu_ps(r1 + i), l2e, v1)));
        s2 = _mm512_add_ps(s2, exp2_v(_mm512_fmadd_ps(_mm512_loadu_ps(r2 + i), l2e, v2)));
        s3 = _mm512_add_ps(s3, exp2_v(_mm512_fmadd_ps(_mm512_loadu_ps(r3 + i), l2e, v3)));
    }
    if (k) {
        s0 = _mm512_add_ps(s0,
                           exp2_v(_mm512_fmadd_ps(_mm512_mask_loadu_ps(ninf, k, r0 + i), l2e, v0)));
        s1 = _mm512_add_ps(s1,
                           exp2_v(_mm512_fmadd_ps(_mm512_mask_loadu_ps(ninf, k, r1 + i), l2e, v1)));
        s2 = _mm512_add_ps(s2,
                           exp2_v(_mm512_fmadd_ps(_mm512_mask_loadu_ps(ninf, k, r2 + i), l2e, v2)));
        s3 = _mm512_add_ps(s3,
                           exp2_v(_mm512_fmadd_ps(_mm512_mask_loadu_ps(ninf, k, r3 + i), l2e, v3)));
    }
    float s[4] = {_mm512_reduce_add_ps(s0), _mm512_reduce_add_ps(s1), _mm512_reduce_add_ps(s2),
                  _mm512_reduce_add_ps(s3)};
    for (int r = 0; r < 4; r++) {
        /* As in fuse_chunk: undo the rounding of ml; +inf rows report NaN for the rescan. */
        double shift = m[r] == -INFINITY ? 0.0 : (double)m[r];
        double err = (double)ml[r] - shift * (double)PC_LOG2E_F;
        m_out[r] = m[r];
        s_out[r] = m[r] == INFINITY ? NAN : (float)(s[r] * (1.0 + err * 0.6931471805599453));
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

static inline __m512 widen16(pc_dtype dtype, __m256i h) {
    if (dtype == PC_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static void widen(pc_dtype dtype, const uint16_t *src, int64_t n, float *dst) {
    int64_t i = 0;
    for (; i + W <= n; i += W)
        _mm512_storeu_ps(dst + i, widen16(dtype, _mm256_loadu_si256((const __m256i *)(src + i))));
    if (i < n) {
        __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_ps(dst + i, k, widen16(dtype, _mm256_maskz_loadu_epi16(k, src + i)));
    }
}

static void max_f32(const float *x, int64_t n, float *m_out, int *has_nan) {
    __mmask16 nan = 0;
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m0 = ninf, m1 = ninf;
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + W);
        nan |= _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
        m0 = _mm512_max_ps(a, m0);
        m1 = _mm512_max_ps(b, m1);
    }
    for (; i < n; i += W) {
        __m512 a = _mm512_mask_loadu_ps(ninf, n - i < W ? tail_mask(n - i) : 0xffff, x + i);
        nan |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
        m0 = _mm512_max_ps(a, m0);
    }
    *m_out = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
    *has_nan = nan != 0;
}

static inline __m512i quantize16(__m512 x, __m512 m) {
    __m512 q = _mm512_mul_ps(_mm512_sub_ps(x, m), _mm512_set1_ps((float)PC_INT_SCALE_F));
    /* Out of range and -inf convert to INT32_MIN, which the max lifts to the floor. */
    return _mm512_max_epi32(_mm512_cvtps_epi32(q), _mm512_set1_epi32(PC_INT_FLOOR));
}

static void quantize_f32(const float *x, int64_t n, float m, int32_t *q) {
    const __m512 vm = _mm512_set1_ps(m);
    int64_t i = 0;
    for (; i + W <= n; i += W)
        _mm512_storeu_si512(q + i, quantize16(_mm512_loadu_ps(x + i), vm));
    if (i < n) {
        __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_epi32(q + i, k, quantize16(_mm512_maskz_loadu_ps(k, x + i), vm));
    }
}

/* pc_int_lse2 on 16 lanes with one gather of the packed table. */
static inline __m512i lse2_v(__m512i a, __m512i b, const uint32_t *packed) {
    __m512i hi = _mm512_max_epi32(a, b), lo = _mm512_min_epi32(a, b);
    __m512i d = _mm512_min_epi32(_mm512_sub_epi32(hi, lo), _mm512_set1_epi32(PC_INT_D_MAX));
    __m512i p = _mm512_i32gather_epi32(_mm512_srli_epi32(d, PC_INT_TABLE_SHIFT), packed, 4);
    __m512i t = _mm512_and_si512(d, _mm512_set1_epi32((1 << PC_INT_TABLE_SHIFT) - 1));
    __m512i f0 = _mm512_and_si512(p, _mm512_set1_epi32((1 << PC_INT_PACK_BITS) - 1));
    __m512i df = _mm512_srli_epi32(p, PC_INT_PACK_BITS);
    /* df < 2^9 and t < 2^10 sit in the low 16 bits of each lane: one multiply-add of 16-bit
     * pairs (high halves zero) gives df * t exactly, cheaper than a 32-bit multiply. */
    __m512i r = _mm512_add_epi32(_mm512_madd_epi16(df, t),
                                 _mm512_set1_epi32(1 << (PC_INT_TABLE_SHIFT - 1)));
    return _mm512_add_epi32(hi, _mm512_sub_epi32(f0, _mm512_srai_epi32(r, PC_INT_TABLE_SHIFT)));
}

static int32_t int_tree(int32_t *buf, int64_t n, const int32_t *table, const uint32_t *packed) {
    while (n > 1) {
        int64_t half = n / 2, rest = n - half, i = 0;
        /* Reads buf[i + rest] with i < half <= rest, never a slot this level writes. */
        for (; i + W <= half; i += W) {
            __m512i a = _mm512_loadu_si512(buf + i), b = _mm512_loadu_si512(buf + i + rest);
            _mm512_storeu_si512(buf + i, lse2_v(a, b, packed));
        }
        if (half - i >= 8) {
            __mmask16 k = tail_mask(half - i);
            __m512i a = _mm512_maskz_loadu_epi32(k, buf + i);
            __m512i b = _mm512_maskz_loadu_epi32(k, buf + i + rest);
            _mm512_mask_storeu_epi32(buf + i, k, lse2_v(a, b, packed));
        } else {
            /* A few pairs: scalar steps have less latency than a gather (same integers). */
            for (; i < half; i++)
                buf[i] = pc_int_lse2(buf[i], buf[i + rest], table);
        }
        n = rest;
    }
    return buf[0];
}

static void exp_shifted(const float *x, int64_t n, float shift, float *out) {
    const __m512 vs = _mm512_set1_ps(shift), l2e = _mm512_set1_ps(PC_LOG2E_F);
    int64_t i = 0;
    for (; i + W <= n; i += W)
        _mm512_storeu_ps(out + i,
                         exp2_v(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vs), l2e)));
    if (i < n) {
        __mmask16 k = tail_mask(n - i);
        __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vs), l2e);
        _mm512_mask_storeu_ps(out + i, k, exp2_v(t));
    }
}

static void gemv_t(const float *at, int64_t ins, int64_t outs, const float *e, float *y) {
    int64_t j = 0;
    /* 128 outputs per pass: eight independent accumulators cover the FMA latency (4 cycles) at
     * two FMAs per cycle; then 64, then 16 at a time. */
    for (; j + 8 * W <= outs; j += 8 * W) {
        __m512 a[8];
        for (int u = 0; u < 8; u++)
            a[u] = _mm512_setzero_ps();
        for (int64_t k = 0; k < ins; k++) {
            const float *row = at + k * outs + j;
            __m512 ek = _mm512_set1_ps(e[k]);
            for (int u = 0; u < 8; u++)
                a[u] = _mm512_fmadd_ps(_mm512_loadu_ps(row + u * W), ek, a[u]);
        }
        for (int u = 0; u < 8; u++)
            _mm512_storeu_ps(y + j + u * W, a[u]);
    }
    for (; j + 4 * W <= outs; j += 4 * W) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t k = 0; k < ins; k++) {
            const float *row = at + k * outs + j;
            __m512 ek = _mm512_set1_ps(e[k]);
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(row), ek, a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(row + W), ek, a1);
            a2 = _mm512_fmadd_ps(_mm512_loadu_ps(row + 2 * W), ek, a2);
            a3 = _mm512_fmadd_ps(_mm512_loadu_ps(row + 3 * W), ek, a3);
        }
        _mm512_storeu_ps(y + j, a0);
        _mm512_storeu_ps(y + j + W, a1);
        _mm512_storeu_ps(y + j + 2 * W, a2);
        _mm512_storeu_ps(y + j + 3 * W, a3);
    }
    for (; j < outs; j += W) {
        __mmask16 m = outs - j < W ? tail_mask(outs - j) : 0xffff;
        __m512 a = _mm512_setzero_ps();
        for (int64_t k = 0; k < ins; k++)
            a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, at + k * outs + j), _mm512_set1_ps(e[k]),
                                a);
        _mm512_mask_storeu_ps(y + j, m, a);
    }
}

/* The tree of pc_int_tree over n vectors of 16 lanes, lane by lane. */
static __m512i lane_tree(__m512i *v, int64_t n, const uint32_t *packed) {
    while (n > 1) {
        int64_t half = n / 2, rest = n - half;
        for (int64_t i = 0; i < half; i++)
            _mm512_storeu_si512(
                v + i, lse2_v(_mm512_loadu_si512(v + i), _mm512_loadu_si512(v + i + rest), packed));
        n = rest;
    }
    return _mm512_loadu_si512(v);
}

static void int_terms_t(const int32_t *wqt, int64_t ins, int64_t outs, const int32_t *xq,
                        int32_t *scratch, const int32_t *table, const uint32_t *packed,
                        int32_t *q) {
    (void)table;
    __m512i *buf = (__m512i *)scratch, *res = buf + PC_CPU_INT_CHUNK;
    for (int64_t j = 0; j < outs; j += W) {
        /* Lanes past outs hold zeros: lse2(0, 0) reads table entry 0, and nothing is stored. */
        __mmask16 m = outs - j < W ? tail_mask(outs - j) : 0xffff;
        int64_t nc = 0;
        for (int64_t c0 = 0; c0 < ins; c0 += PC_CPU_INT_CHUNK) {
            int64_t len = ins - c0 < PC_CPU_INT_CHUNK ? ins - c0 : PC_CPU_INT_CHUNK;
            for (int64_t i = 0; i < len; i++)
                _mm512_storeu_si512(buf + i,
                                    _mm512_maskz_add_epi32(
                                        m, _mm512_maskz_loadu_epi32(m, wqt + (c0 + i) * outs + j),
                                        _mm512_set1_epi32(xq[c0 + i])));
            _mm512_storeu_si512(res + nc++, lane_tree(buf, len, packed));
        }
        _mm512_mask_storeu_epi32(q + j, m, lane_tree(res, nc, packed));
    }
}

const pc_lse_cpu_impl pc_lse_cpu_avx512 = {
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
