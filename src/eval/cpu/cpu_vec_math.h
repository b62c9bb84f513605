/* FP32 exp and log of the lane-layout sum layers, over the vector vocabulary the including file
 * brought in (lse/lse_vec_<isa>.h): PC_VEC_W lanes, no branches, no division. */
#ifndef PC_EVAL_CPU_VEC_MATH_H
#define PC_EVAL_CPU_VEC_MATH_H

#include <stdint.h>

/* Bit pattern of 2^-60: sums at or above it take the FP32 path (pc_cpu_fuse_exp_nonpos). */
#define PC_FUSE_SAFE_BITS 0x21800000

/* e^d for d <= 0 or -inf: 2^t, t = d log2 e clamped at -100, so every result is a normal float
 * (no denormal ever reaches the multiply-adds, where each would cost a microcode assist) and a
 * term that should be below 2^-100 counts as 2^-100. Against a sum of at least 2^-60
 * (PC_FUSE_SAFE_BITS) such terms, at most K of them with weights <= 1, weigh under K 2^-40 of
 * it; a smaller sum goes to the exact FP64 path. 2^t = 2^k 2^f with k = round(t) (the magic
 * number's addition rounds, and its low bits then hold k), f in [-1/2, 1/2], 2^f by a degree-6
 * polynomial fitted for relative error: 1.0e-7 at most in float with FMA, mean bias 1e-9. The
 * degree-5 ones err by up to 2e-7 with a bias of 2e-8, and that bias adds up over a circuit's
 * ~550 sum groups (1.7e-5 nats on MNIST instead of 7e-6). d = 0 gives exactly 1. */
static inline vf pc_fuse_exp_nonpos(vf d) {
    const vf magic = vf_set1(12582912.0f); /* 1.5 * 2^23 */
    vf t = vf_max(vf_mul(d, vf_set1(1.4426950408889634f)), vf_set1(-100.0f));
    vf r = vf_add(t, magic);
    vf f = vf_sub(t, vf_sub(r, magic));
    vf p = vf_set1(1.535327901e-04f);
    p = vf_fma(p, f, vf_set1(1.339881914e-03f));
    p = vf_fma(p, f, vf_set1(9.618436918e-03f));
    p = vf_fma(p, f, vf_set1(5.550332740e-02f));
    p = vf_fma(p, f, vf_set1(2.402264774e-01f));
    p = vf_fma(p, f, vf_set1(6.931471825e-01f));
    p = vf_fma(p, f, vf_set1(1.0f));
    vi k = vi_sub(vf_bits(r), vf_bits(magic));
    return vi_bits(vi_add(vf_bits(p), vi_slli(k, 23)));
}

/* Natural log of normal positive floats, 4.6e-8 absolute at most (float arithmetic with FMA),
 * mean bias under 1e-9: s = 2^e m with m in [sqrt(1/2), sqrt(2)) by integer steps on the bits
 * (subtracting the bits of sqrt(1/2) carries into the exponent exactly when m would pass
 * sqrt(2)), then log m = u + u^2 q(u), u = m - 1, q of degree 7 fitted for absolute error on
 * that interval; e ln 2 in two parts so that no exponent adds rounding beyond one ulp. */
static inline vf pc_fuse_log_normal(vf s) {
    const vi sqrt_half = vi_set1(0x3f3504f3);
    vi ix = vi_sub(vf_bits(s), sqrt_half);
    vf e = vi_to_vf(vi_srai(ix, 23));
    vf u = vf_sub(vi_bits(vi_add(vi_and(ix, vi_set1(0x007fffff)), sqrt_half)), vf_set1(1.0f));
    vf q = vf_set1(8.729849756e-02f);
    q = vf_fma(q, u, vf_set1(-1.443892270e-01f));
    q = vf_fma(q, u, vf_set1(1.497942209e-01f));
    q = vf_fma(q, u, vf_set1(-1.655279994e-01f));
    q = vf_fma(q, u, vf_set1(1.995364130e-01f));
    q = vf_fma(q, u, vf_set1(-2.500246763e-01f));
    q = vf_fma(q, u, vf_set1(3.333422542e-01f));
    q = vf_fma(q, u, vf_set1(-4.999998212e-01f));
    vf r = vf_fma(vf_mul(u, u), q, u);
    const float ln2_hi = 0.693145751953125f, ln2_lo = 1.42860682030941723e-6f;
    return vf_fma(e, vf_set1(ln2_hi), vf_fma(e, vf_set1(ln2_lo), r));
}

#endif
