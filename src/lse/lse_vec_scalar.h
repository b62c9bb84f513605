/* The one-lane vocabulary of the shared CPU kernels, in plain C: the baseline build of the
 * circuit block kernels (eval/cpu/cpu_*_kernel.h) over the same source as lse_vec_avx2.h and
 * lse_vec_avx512.h, for CPUs without AVX2 and for other architectures. Only the operations
 * those kernels use are here. vf_fma rounds twice (a * b + c): a baseline x86-64 build has no
 * FMA instruction and fmaf() would be a library call. */
#ifndef PC_LSE_VEC_SCALAR_H
#define PC_LSE_VEC_SCALAR_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lse/lse_cpu.h"

#define PC_VEC_W 1
typedef float vf;
typedef int32_t vi;

static inline vf vf_load(const float *p) { return *p; }
static inline void vf_store(float *p, vf v) { *p = v; }
static inline vf vf_set1(float x) { return x; }
static inline vf vf_zero(void) { return 0.0f; }
static inline vf vf_add(vf a, vf b) { return a + b; }
static inline vf vf_sub(vf a, vf b) { return a - b; }
static inline vf vf_mul(vf a, vf b) { return a * b; }
static inline vf vf_fma(vf a, vf b, vf c) { return a * b + c; }
/* Lane max; b where either lane is NaN (so max(x, acc) ignores a NaN x). */
static inline vf vf_max(vf a, vf b) { return a > b ? a : b; }

static inline vi vi_load(const int32_t *p) { return *p; }
static inline void vi_store(int32_t *p, vi v) { *p = v; }
static inline vi vi_set1(int32_t x) { return x; }
static inline vi vi_add(vi a, vi b) { return (vi)((uint32_t)a + (uint32_t)b); }
static inline vi vi_sub(vi a, vi b) { return (vi)((uint32_t)a - (uint32_t)b); }
static inline vi vi_max(vi a, vi b) { return a > b ? a : b; }
static inline vi vi_min(vi a, vi b) { return a < b ? a : b; }
static inline vi vi_and(vi a, vi b) { return a & b; }
static inline vi vi_slli(vi a, int s) { return (vi)((uint32_t)a << s); }
static inline vi vi_srli(vi a, int s) { return (vi)((uint32_t)a >> s); }
/* Arithmetic shift, as the vector instructions do (>> of a negative int is
 * implementation-defined in C; GCC and Clang shift arithmetically). */
static inline vi vi_srai(vi a, int s) { return a >> s; }
/* lo16(a) lo16(b) + hi16(a) hi16(b), signed 16-bit products. */
static inline vi vi_madd16(vi a, vi b) {
    return (vi)((int16_t)a * (int16_t)b + (int16_t)(a >> 16) * (int16_t)(b >> 16));
}
static inline vi vi_gather(const uint32_t *table, vi idx) { return (vi)table[idx]; }
static inline vf vi_to_vf(vi v) { return (vf)v; }
static inline vi vf_bits(vf v) { return (vi)pc_f32_to_bits(v); }
static inline vf vi_bits(vi v) { return pc_bits_to_f32((uint32_t)v); }
static inline int32_t vi_hmin(vi v) { return v; }
static inline void vf_transpose(vf r[1]) { (void)r; }
/* 2^t for t in [-126, 0] (the scalar twin of the SIMD exp2). */
static inline vf vf_exp2(vf t) { return pc_exp2_poly(t); }

#include "lse/lse_vec.h"

#endif
