/* The AVX2 vocabulary of the shared CPU kernels (lse_cpu_kernel.h, eval/cpu/cpu_int_kernel.h):
 * vf holds 8 floats, vi 8 int32s, vh 8 f16/bf16 values, vmask one flag per float lane. Included
 * only by files built with -mavx2 -mfma -mf16c (*_avx2.c), which run only after
 * pc_cpu_best_isa() reports AVX2 or better. The _part loads and stores take 0 < n < 8 lanes;
 * AVX2 masks are vectors (maskload/maskstore on 32-bit lanes), so a lane mask comes from a
 * window of a constant table.
 *
 * exp2: t clamped below at -126, k = round(t), f = t - k, a degree-5 polynomial p(f), times
 * 2^k. The rounding adds and subtracts 1.5 * 2^23 (ties to even, as VROUNDPS would, so k and f
 * are the same): r = t + 1.5 * 2^23 holds k in its low mantissa bits, so bits(r) << 23 is k's
 * exponent field with no conversion. Two float adds, an integer add and a product in place of
 * VROUNDPS (2 uops), VCVTPS2DQ and an integer add to p's bits: the adds need not run on the two
 * ports that also run every FMA. Values under 2^-126 come out as 2^-126 instead of 0: harmless
 * in a sum whose largest term is 1, so the forward pass uses it as is. NaN passes through: max
 * returns its second operand (t) when one is NaN, and the product keeps p's NaN. */
#ifndef PC_LSE_VEC_AVX2_H
#define PC_LSE_VEC_AVX2_H

#include <immintrin.h>

#include "lse/lse_cpu.h"

#define PC_VEC_W 8
typedef __m256 vf;
typedef __m256i vi;
typedef __m128i vh;
typedef __m256 vmask;

static inline vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf vf_set1(float x) { return _mm256_set1_ps(x); }
static inline vf vf_zero(void) { return _mm256_setzero_ps(); }
static inline vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
/* a * b + c with one rounding. */
static inline vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
/* Lane max; b where either lane is NaN (so max(x, acc) ignores a NaN x). */
static inline vf vf_max(vf a, vf b) { return _mm256_max_ps(a, b); }

static inline float vf_hmax(vf v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static inline float vf_hsum(vf v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* All ones in the first n lanes (0 <= n <= 8), zeros after. */
static inline __m256i lane_mask(int64_t n) {
    static const int32_t window[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(window + 8 - n));
}

/* The first n values of p, the other lanes `pad`. */
static inline vf vf_load_part(const float *p, int64_t n, float pad) {
    __m256i m = lane_mask(n);
    return _mm256_blendv_ps(_mm256_set1_ps(pad), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}

static inline void vf_store_part(float *p, int64_t n, vf v) {
    _mm256_maskstore_ps(p, lane_mask(n), v);
}

/* NaN flags: lanes where a or b is NaN, their union, and whether any lane is set. */
static inline vmask vf_unordered(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_UNORD_Q); }
static inline vmask vmask_none(void) { return _mm256_setzero_ps(); }
static inline vmask vmask_or(vmask a, vmask b) { return _mm256_or_ps(a, b); }
static inline int vmask_any(vmask m) { return _mm256_movemask_ps(m) != 0; }

static inline vi vi_load(const int32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline void vi_store(int32_t *p, vi v) { _mm256_storeu_si256((__m256i *)p, v); }
static inline vi vi_set1(int32_t x) { return _mm256_set1_epi32(x); }
static inline vi vi_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
static inline vi vi_sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
static inline vi vi_max(vi a, vi b) { return _mm256_max_epi32(a, b); }
static inline vi vi_min(vi a, vi b) { return _mm256_min_epi32(a, b); }
static inline vi vi_and(vi a, vi b) { return _mm256_and_si256(a, b); }
static inline vi vi_slli(vi a, int s) { return _mm256_slli_epi32(a, s); }
static inline vi vi_srli(vi a, int s) { return _mm256_srli_epi32(a, s); }
static inline vi vi_srai(vi a, int s) { return _mm256_srai_epi32(a, s); }
/* Per 32-bit lane: lo16(a) lo16(b) + hi16(a) hi16(b), signed 16-bit products. */
static inline vi vi_madd16(vi a, vi b) { return _mm256_madd_epi16(a, b); }
/* table[idx] per lane. */
static inline vi vi_gather(const uint32_t *table, vi idx) {
    return _mm256_i32gather_epi32((const int *)table, idx, 4);
}
/* Float lanes to int32, rounded to nearest even; NaN and out of range give INT32_MIN. */
static inline vi vf_to_vi(vf v) { return _mm256_cvtps_epi32(v); }
static inline vf vi_to_vf(vi v) { return _mm256_cvtepi32_ps(v); }
/* The same 32 bits seen as the other type. */
static inline vi vf_bits(vf v) { return _mm256_castps_si256(v); }
static inline vf vi_bits(vi v) { return _mm256_castsi256_ps(v); }
/* r[i] lane l = r[l] lane i: an 8 x 8 transpose in 24 shuffles. */
static inline void vf_transpose(vf r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++)
        for (int h = 0; h < 2; h++) {
            u[4 * i + 2 * h] = _mm256_shuffle_ps(t[4 * i + h], t[4 * i + h + 2], 0x44);
            u[4 * i + 2 * h + 1] = _mm256_shuffle_ps(t[4 * i + h], t[4 * i + h + 2], 0xee);
        }
    /* u[4i + j] holds column 4q + j of rows 4i..4i+3 in its 128-bit lane q. */
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
}
/* Smallest lane, as int32. */
static inline int32_t vi_hmin(vi v) {
    __m128i m = _mm_min_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_min_epi32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_min_epi32(m, _mm_shuffle_epi32(m, 0xb1));
    return _mm_cvtsi128_si32(m);
}

/* The first n int32s of p, the other lanes 0. */
static inline vi vi_load_part(const int32_t *p, int64_t n) {
    return _mm256_maskload_epi32((const int *)p, lane_mask(n));
}

static inline void vi_store_part(int32_t *p, int64_t n, vi v) {
    _mm256_maskstore_epi32((int *)p, lane_mask(n), v);
}

static inline vh vh_load(const uint16_t *p) { return _mm_loadu_si128((const __m128i *)p); }
/* The first n 16-bit values of p, the other lanes 0. */
static inline vh vh_load_part(const uint16_t *p, int64_t n) {
    uint16_t buf[8] = {0};
    for (int64_t l = 0; l < n; l++)
        buf[l] = p[l];
    return _mm_loadu_si128((const __m128i *)buf);
}
static inline vf vf_from_f16(vh h) { return _mm256_cvtph_ps(h); }
static inline vf vf_from_bf16(vh h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline vf vf_exp2(vf t) {
    const __m256 magic = _mm256_set1_ps(12582912.0f); /* 1.5 * 2^23 */
    t = _mm256_max_ps(_mm256_set1_ps(-126.0f), t);
    __m256 r = _mm256_add_ps(t, magic);
    __m256 f = _mm256_sub_ps(t, _mm256_sub_ps(r, magic));
    __m256 p = _mm256_set1_ps(PC_EXP2_C5);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(PC_EXP2_C4));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(PC_EXP2_C3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(PC_EXP2_C2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(PC_EXP2_C1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    /* bits(r) = bits(1.5 * 2^23) + k: the shift drops the constant's bits (all at 22 and up),
     * leaving k's exponent field; adding 1.0's bits makes it the float 2^k (k >= -126). A
     * product, not an integer add to p's bits: a NaN input's payload bits reach the shifted
     * field, and added to a NaN p they could make it a number. */
    __m256i e = _mm256_slli_epi32(_mm256_castps_si256(r), 23);
    __m256 scale = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
    return _mm256_mul_ps(p, scale);
}

#include "lse/lse_vec.h"

#endif
