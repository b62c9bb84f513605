/* Vectorisable FP32 exp and log for the queries' FP32 sum-product passes: plain C without
 * branches or calls, so the compiler turns the loops that use them into SIMD code for whatever
 * instruction set the including file is built for (query_sp_f32_avx2.c, _avx512.c, or the
 * baseline). The likelihood backend cpu-fuse holds its values in vector lanes and has its own
 * forms over the vector vocabulary (eval/cpu/cpu_vec_math.h); the queries' loops run over a
 * group's K values per sample, which these scalar forms serve. */
#ifndef PC_EVAL_QUERY_MATH_H
#define PC_EVAL_QUERY_MATH_H

#include <float.h>
#include <stdint.h>

#include "lse/lse_cpu.h" /* pc_f32_to_bits, pc_bits_to_f32 */

/* 2^t for t in [-100, 0]: k = round(t), f = t - k in [-1/2, 1/2], the degree-6 Taylor
 * polynomial of 2^f (truncation <= 1.7e-7 relative, about one ulp: a degree-5 one errs by up
 * to 2.4e-6, always low, and that bias adds up over a circuit's ~550 sum groups), then k is
 * added to the exponent bits. */
static inline float exp2_deg6(float t) {
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float k = (t + magic) - magic;
    float f = t - k;
    float p = 1.5403530393381606e-4f; /* (ln 2)^n / n!, n = 6 .. 1 */
    p = p * f + 1.3333558146428443e-3f;
    p = p * f + 9.6181291076284772e-3f;
    p = p * f + 5.5504108664821580e-2f;
    p = p * f + 2.4022650695910071e-1f;
    p = p * f + 6.9314718055994531e-1f;
    p = p * f + 1.0f;
    return pc_bits_to_f32(pc_f32_to_bits(p) + ((uint32_t)(int32_t)k << 23));
}

/* e^x for x <= 0 or -inf (never NaN): exp2 of x log2(e) by exp2_deg6 (about 1 ulp). Terms below
 * 2^-100 are 0 (the exponent arithmetic stays far from subnormals); pc_cpu_sum_is_safe then decides
 * whether the dropped terms could matter. x = 0 gives exactly 1. */
static inline float pc_cpu_exp_nonpos(float x) {
    /* The clamp and the select work on bit patterns: for x <= 0 (-0, -inf included) a larger
     * magnitude is a larger unsigned pattern. Integer min and masks cannot trap, so the
     * compiler keeps the loop branch-free and vectorises it (a float compare here would be
     * turned into a branch under the default -ftrapping-math). */
    const uint32_t lim = 0xC2C80000u; /* -100.0f */
    uint32_t tb = pc_f32_to_bits(x * 1.4426950408889634f /* log2(e) */);
    float e = exp2_deg6(pc_bits_to_f32(tb < lim ? tb : lim));
    uint32_t keep = 0u - (uint32_t)(tb <= lim);
    return pc_bits_to_f32(pc_f32_to_bits(e) & keep);
}

/* Natural log of a normal positive float (FLT_MIN <= x < inf), ~1e-7 relative:
 * x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(u), u = (m - 1) / (m + 1),
 * |u| <= 0.1716, series to u^9 (truncation 7e-10); e ln 2 split in two parts so that even
 * e = -126 adds no rounding beyond one ulp. */
static inline float pc_cpu_log_normal(float x) {
    /* Integer steps only, for the same reason as in pc_cpu_exp_nonpos: mb holds m in [1, 2);
     * past sqrt(2) (0x3FB504F3) halve it by lowering its exponent and raise e. */
    uint32_t bits = pc_f32_to_bits(x);
    uint32_t mb = (bits & 0x007fffffu) | 0x3f800000u;
    uint32_t big = mb > 0x3FB504F3u;
    int32_t e = (int32_t)(bits >> 23) - 127 + (int32_t)big;
    float m = pc_bits_to_f32(mb - (big << 23));
    float u = (m - 1.0f) / (m + 1.0f), u2 = u * u;
    float p = 1.0f / 9.0f;
    p = p * u2 + 1.0f / 7.0f;
    p = p * u2 + 1.0f / 5.0f;
    p = p * u2 + 1.0f / 3.0f;
    p = p * u2 + 1.0f;
    const float ln2_hi = 0.693145751953125f, ln2_lo = 1.42860682030941723e-6f;
    float fe = (float)e;
    return fe * ln2_hi + (fe * ln2_lo + 2.0f * u * p);
}

/* Whether a sum s of terms w e_k (w <= 1, each e_k dropped below 2^-100) is exact to FP32:
 * with s >= 2^-60 the dropped part is under K 2^-40 of s. Smaller sums, 0 included, go to the
 * exact FP64 path; the bound also keeps pc_cpu_log_normal's input normal. */
static inline int pc_cpu_sum_is_safe(float s) { return s >= 0x1p-60f && s <= FLT_MAX; }

#endif
