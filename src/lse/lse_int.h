/* IntLSE fixed-point arithmetic, shared by the C and the CUDA kernels.
 *
 * Values are base-2 logarithms in Q16.16 (int32, 16 fraction bits): a natural-log value x is
 * q = round(x * log2(e) * 2^16). The kernels shift every input by its row maximum before the
 * conversion, so the integers only ever hold d = x - max <= 0, clamped at PC_INT_FLOOR. That is
 * what lets `int` take any finite float input: the maximum travels in float beside the integers.
 *
 * Pairwise LSE in base 2:  lse2(a, b) = hi + f(hi - lo),  f(d) = log2(1 + 2^-d),  d >= 0.
 * f comes from a table over d in [0, 24) with 64 entries per unit, interpolated linearly on the
 * 10 low bits of d. Interpolation error is at most h^2/8 * max|f''| = (1/64)^2 / 8 * 0.18
 * = 5.4e-6 log2 units (0.36 Q16.16 ulp); each step's total error stays under ~1.4 ulp (1.4e-5
 * nats) and rounds to nearest, so it is unbiased. Past d = 24, f < 2^-24 / ln 2, which rounds
 * to 0. Combining N values as a balanced tree keeps the error near log2(N) steps' worth; a
 * sequential fold would not (small increments round away: the trap of the paper's GPU kernel).
 *
 * Range: inputs are clamped to [PC_INT_FLOOR, 0] after the max shift; a tree over N values adds
 * at most log2(N) <= 63 to the max, so sums of two clamped values (the weighted form adds a
 * weight and an input) never leave int32.
 */
#ifndef PC_LSE_INT_H
#define PC_LSE_INT_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define PC_INT_FN static __host__ __device__ __forceinline__
#else
#define PC_INT_FN static inline
#endif

#define PC_INT_FRAC_BITS 16
#define PC_INT_ONE (1 << PC_INT_FRAC_BITS)

/* -2^29 Q16.16 = -8192 log2 units (-5678 nats below the max): exp() of that is 0 in any float,
 * and two clamped values still add without overflow. -inf inputs become PC_INT_FLOOR. */
#define PC_INT_FLOOR (-(1 << 29))

#define PC_INT_TABLE_RANGE 24     /* f(d) is tabulated for d in [0, 24) log2 units */
#define PC_INT_TABLE_STEP_BITS 6  /* 64 entries per log2 unit */
#define PC_INT_TABLE_SHIFT (PC_INT_FRAC_BITS - PC_INT_TABLE_STEP_BITS) /* 10 interpolated bits */
#define PC_INT_TABLE_LEN ((PC_INT_TABLE_RANGE << PC_INT_TABLE_STEP_BITS) + 1) /* 1537 */
#define PC_INT_D_MAX ((PC_INT_TABLE_RANGE << PC_INT_FRAC_BITS) - 1)

/* Q16.16 log2 units per nat and nats per unit. */
#define PC_INT_SCALE_F (1.4426950408889634 * 65536.0)
#define PC_INT_UNIT_NATS (0.6931471805599453 / 65536.0)

/* Fills table[i] = round(2^16 (f(d_i) - h^2 f''(d_i) / 12)), d_i = i h, h = 1/64, i <
 * PC_INT_TABLE_LEN. f is convex, so the chord between two exact values lies above it, by
 * h^2 f'' / 12 on average over a step (0.23 Q16.16 ulp at d = 0): a bias of the same sign in
 * every pairwise step, which a circuit adds up over ~550 sum groups and log2(K) + 1 steps each
 * (6.0e-3 nats per MNIST image at K = 64 with the exact values). Lowering each entry by that
 * mean leaves the interpolation unbiased; f''(d) = ln 2 2^-d / (1 + 2^-d)^2. f(0) = 1 stays
 * exact. Host only; both the C and the CUDA paths use this one table so their results agree
 * bit for bit. */
static inline void pc_int_table_fill(int32_t table[PC_INT_TABLE_LEN]) {
    const double h = 1.0 / (double)(1 << PC_INT_TABLE_STEP_BITS);
    for (int i = 0; i < PC_INT_TABLE_LEN; i++) {
        double d = (double)i * h, u = exp2(-d);
        double f2 = 0.6931471805599453 * u / ((1.0 + u) * (1.0 + u));
        table[i] = (int32_t)llround(65536.0 * (log2(1.0 + u) - h * h * f2 / 12.0));
    }
}

/* f(d) for d >= 0 in Q16.16, interpolated; d past the table gives 0. */
PC_INT_FN int32_t pc_int_correction(int32_t d, const int32_t *table) {
    d = d < PC_INT_D_MAX ? d : PC_INT_D_MAX;
    int32_t i = d >> PC_INT_TABLE_SHIFT;
    int32_t t = d & ((1 << PC_INT_TABLE_SHIFT) - 1);
    int32_t f0 = table[i], f1 = table[i + 1];
    return f0 - (((f0 - f1) * t + (1 << (PC_INT_TABLE_SHIFT - 1))) >> PC_INT_TABLE_SHIFT);
}

/* lse2(a, b) in Q16.16 base 2. */
PC_INT_FN int32_t pc_int_lse2(int32_t a, int32_t b, const int32_t *table) {
    int32_t hi = a > b ? a : b;
    int32_t lo = a > b ? b : a;
    return hi + pc_int_correction(hi - lo, table);
}

/* Float d = x - max (<= 0, or -inf) to Q16.16, clamped at PC_INT_FLOOR. */
PC_INT_FN int32_t pc_int_from_shifted(float d) {
    float q = d * (float)PC_INT_SCALE_F;
    return q > (float)PC_INT_FLOOR ? (int32_t)lrintf(q) : PC_INT_FLOOR;
}

/* In-place balanced tree over buf[0:n] (n >= 1); returns the LSE of the n values. Each level
 * combines buf[i] with buf[i + n - n/2], which keeps the pairs contiguous for SIMD. */
PC_INT_FN int32_t pc_int_tree(int32_t *buf, int64_t n, const int32_t *table) {
    while (n > 1) {
        int64_t half = n / 2, rest = n - half;
        for (int64_t i = 0; i < half; i++) buf[i] = pc_int_lse2(buf[i], buf[i + rest], table);
        n = rest;
    }
    return buf[0];
}

#endif
