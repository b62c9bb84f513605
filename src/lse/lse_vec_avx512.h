/* The AVX-512 vocabulary of the shared CPU kernels (lse_cpu_kernel.h, eval/cpu/cpu_int_kernel.h):
 * vf holds 16 floats, vi 16 int32s, vh 16 f16/bf16 values, vmask one bit per float lane.
 * Included only by files built with -mavx512f/bw/vl/dq (*_avx512.c), which run only after
 * pc_cpu_best_isa() reports AVX-512. The _part loads and stores take 0 < n < 16 lanes through
 * mask registers.
 *
 * exp2: f = t - floor(t) in [0, 1) by one VREDUCEPS, a degree-5 polynomial, then
 * scalef(p, t), which scales by 2^floor(t) and underflows to 0 and overflows to inf as IEEE
 * does. No clamping is needed: reduce(+-inf) = 0 and scalef(p, -inf) = 0, scalef(p, +inf) = inf;
 * NaN passes through both. Results under 2^-126 are flushed to 0 by the mode the drivers set
 * (pc_lse_cpu_for): without it every underflowing lane took a microcode assist (13x slower on
 * U(-2000, 0)). */
#ifndef PC_LSE_VEC_AVX512_H
#define PC_LSE_VEC_AVX512_H

#include <immintrin.h>

#include "lse/lse_cpu.h"

#define PC_VEC_W 16
typedef __m512 vf;
typedef __m512i vi;
typedef __m256i vh;
typedef __mmask16 vmask;

static inline vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf vf_set1(float x) { return _mm512_set1_ps(x); }
static inline vf vf_zero(void) { return _mm512_setzero_ps(); }
static inline vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
/* a * b + c with one rounding. */
static inline vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
/* Lane max; b where either lane is NaN (so max(x, acc) ignores a NaN x). */
static inline vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline float vf_hmax(vf v) { return _mm512_reduce_max_ps(v); }
static inline float vf_hsum(vf v) { return _mm512_reduce_add_ps(v); }

/* The first n lanes (0 <= n <= 16). */
static inline __mmask16 lane_mask(int64_t n) { return (__mmask16)((1u << n) - 1u); }

/* The first n values of p, the other lanes `pad`. */
static inline vf vf_load_part(const float *p, int64_t n, float pad) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(pad), lane_mask(n), p);
}

static inline void vf_store_part(float *p, int64_t n, vf v) {
    _mm512_mask_storeu_ps(p, lane_mask(n), v);
}

/* NaN flags: lanes where a or b is NaN, their union, and whether any lane is set. */
static inline vmask vf_unordered(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }
static inline vmask vmask_none(void) { return 0; }
static inline vmask vmask_or(vmask a, vmask b) { return a | b; }
static inline int vmask_any(vmask m) { return m != 0; }

static inline vi vi_load(const int32_t *p) { return _mm512_loadu_si512(p); }
static inline void vi_store(int32_t *p, vi v) { _mm512_storeu_si512(p, v); }
static inline vi vi_set1(int32_t x) { return _mm512_set1_epi32(x); }
static inline vi vi_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
static inline vi vi_sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
static inline vi vi_max(vi a, vi b) { return _mm512_max_epi32(a, b); }
static inline vi vi_min(vi a, vi b) { return _mm512_min_epi32(a, b); }
static inline vi vi_and(vi a, vi b) { return _mm512_and_si512(a, b); }
static inline vi vi_slli(vi a, int s) { return _mm512_slli_epi32(a, (unsigned)s); }
static inline vi vi_srli(vi a, int s) { return _mm512_srli_epi32(a, (unsigned)s); }
static inline vi vi_srai(vi a, int s) { return _mm512_srai_epi32(a, (unsigned)s); }
/* Per 32-bit lane: lo16(a) lo16(b) + hi16(a) hi16(b), signed 16-bit products. */
static inline vi vi_madd16(vi a, vi b) { return _mm512_madd_epi16(a, b); }
/* table[idx] per lane. */
static inline vi vi_gather(const uint32_t *table, vi idx) {
    return _mm512_i32gather_epi32(idx, table, 4);
}
/* Float lanes to int32, rounded to nearest even; NaN and out of range give INT32_MIN. */
static inline vi vf_to_vi(vf v) { return _mm512_cvtps_epi32(v); }
static inline vf vi_to_vf(vi v) { return _mm512_cvtepi32_ps(v); }
/* The same 32 bits seen as the other type. */
static inline vi vf_bits(vf v) { return _mm512_castps_si512(v); }
static inline vf vi_bits(vi v) { return _mm512_castsi512_ps(v); }
/* r[i] lane l = r[l] lane i: a 16 x 16 transpose in 64 shuffles (pairs, then quads, then
 * 128-bit lanes twice). */
static inline void vf_transpose(vf r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++)
        for (int h = 0; h < 2; h++) {
            __m512d a = _mm512_castps_pd(t[4 * i + h]), b = _mm512_castps_pd(t[4 * i + h + 2]);
            u[4 * i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
            u[4 * i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        }
    /* u[4i + j] holds column 4q + j of rows 4i..4i+3 in its 128-bit lane q. */
    for (int j = 0; j < 4; j++) {
        __m512 a = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
        __m512 b = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
        __m512 c = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
        __m512 d = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
        r[j] = _mm512_shuffle_f32x4(a, c, 0x88);
        r[4 + j] = _mm512_shuffle_f32x4(b, d, 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(a, c, 0xdd);
        r[12 + j] = _mm512_shuffle_f32x4(b, d, 0xdd);
    }
}
/* Smallest lane, as int32. */
static inline int32_t vi_hmin(vi v) { return _mm512_reduce_min_epi32(v); }

/* The first n int32s of p, the other lanes 0. */
static inline vi vi_load_part(const int32_t *p, int64_t n) {
    return _mm512_maskz_loadu_epi32(lane_mask(n), p);
}

static inline void vi_store_part(int32_t *p, int64_t n, vi v) {
    _mm512_mask_storeu_epi32(p, lane_mask(n), v);
}

static inline vh vh_load(const uint16_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
/* The first n 16-bit values of p, the other lanes 0. */
static inline vh vh_load_part(const uint16_t *p, int64_t n) {
    return _mm256_maskz_loadu_epi16(lane_mask(n), p);
}
static inline vf vf_from_f16(vh h) { return _mm512_cvtph_ps(h); }
static inline vf vf_from_bf16(vh h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline vf vf_exp2(vf t) {
    __m512 f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 p = _mm512_set1_ps(PC_EXP2F_C5);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(PC_EXP2F_C4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(PC_EXP2F_C3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(PC_EXP2F_C2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(PC_EXP2F_C1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, t);
}

#include "lse/lse_vec.h"

#endif
