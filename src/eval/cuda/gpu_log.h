/* log y in FP32 for the GPU sum layers (internal). Plain C, so that a CPU test checks it in CI;
 * CUDA code gets it as a host and device function, and the device takes the special-function
 * unit's log2 of the mantissa instead of the series below (same split, see the function).
 *
 * The sum layers take one log per output of y = sum_k exp(p_k - m) exp(w_jk), a positive
 * number of a few orders of magnitude around 1, and that log was a large part of the tile
 * kernel's instructions when computed through log1pf in FP64 (~80 instructions). Here, about 20:
 *     y = m 2^e with m in [sqrt(1/2), sqrt(2)),  log y = e ln 2 + 2 atanh(s),  s = (m-1)/(m+1),
 * |s| <= 0.1716, atanh(s) = s (1 + s^2/3 + s^4/5 + s^6/7 + s^8/9) with a truncation error under
 * 1e-9; m - 1 is exact and ln 2 is split in two so that e ln 2 is exact, so the result is within
 * a few 1e-8 nats of log y plus its own FP32 rounding. y = 0 gives -inf, +inf gives +inf,
 * y < 0 or NaN gives NaN; subnormal y is scaled first (a GPU with flush-to-zero sees 0). */
#ifndef PC_GPU_LOG_H
#define PC_GPU_LOG_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define PC_GPU_LOG_FN static __host__ __device__ __forceinline__
#else
#define PC_GPU_LOG_FN static inline
#endif

#ifdef __CUDA_ARCH__
/* On the GPU: the same split, log m from the special-function unit (lg2.approx: absolute error
 * under 2^-22 for m in [1, 2), so under 1.7e-7 nats), about 12 instructions instead of 30; for
 * a positive normal y (bits: its bit pattern). */
static __device__ __forceinline__ float pc_gpu_log_normal(int bits) {
    const float e = (float)((bits >> 23) - 127);
    const float m = __int_as_float((bits & 0x007fffff) | 0x3f800000);
    return fmaf(e, 0.693145751953125f, fmaf(e, 1.42860682e-6f, __log2f(m) * 0.693147180559945f));
}
#endif

PC_GPU_LOG_FN float pc_gpu_log(float y) {
#ifdef __CUDA_ARCH__
    /* Positive normal y take pc_gpu_log_normal; 0 gives -inf, +inf +inf, NaN and y < 0 NaN;
     * subnormal y give -inf, as the flush-to-zero arithmetic around it would. */
    {
        const int bits = __float_as_int(y);
        const bool normal = (unsigned)bits - 0x00800000u < 0x7f000000u;
        return normal     ? pc_gpu_log_normal(bits)
               : y >= 0.0f ? (y == INFINITY ? INFINITY : -INFINITY)
                           : NAN;
    }
#else
    /* No branches (a GPU warp would stall resolving them): every case is computed and the
     * special values are selected at the end. */
    const int sub = y < 1.17549435e-38f; /* subnormal (or 0, negative): times 2^24, exact */
    const float ys = sub ? y * 16777216.0f : y;
    int32_t bits;
    memcpy(&bits, &ys, sizeof bits);
    int e = ((bits >> 23) & 0xff) - 127 - (sub ? 24 : 0);
    bits = (bits & 0x007fffff) | 0x3f800000; /* the mantissa as a float in [1, 2) */
    float m;
    memcpy(&m, &bits, sizeof m);
    const int big = m > 1.41421356f;
    m = big ? m * 0.5f : m;
    e += big;
    const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
    float q = 1.0f / 9.0f;
    q = fmaf(q, s2, 1.0f / 7.0f);
    q = fmaf(q, s2, 1.0f / 5.0f);
    q = fmaf(q, s2, 1.0f / 3.0f);
    const float two_s = s + s, log_m = fmaf(two_s * s2, q, two_s);
    const float ln2_hi = 0.693145751953125f, ln2_lo = 1.42860682e-6f; /* ln2_hi has 16 bits */
    const float r = fmaf((float)e, ln2_hi, fmaf((float)e, ln2_lo, log_m));
    return y > 0.0f && y < INFINITY ? r : y == 0.0f ? -INFINITY : y == INFINITY ? y : NAN;
#endif
}

/* pc_gpu_log for y that is +-0 or positive and finite (a sum of products of non-negative
 * finite numbers, as the sum layers' outputs are), the same value there; on the GPU without
 * the cases of infinity, NaN and y < 0 (the warp strategy's chain tops take 32 logs per lane
 * and item). */
PC_GPU_LOG_FN float pc_gpu_log_nonneg(float y) {
#ifdef __CUDA_ARCH__
    const int bits = __float_as_int(y);
    return bits >= 0x00800000 ? pc_gpu_log_normal(bits) : -INFINITY;
#else
    return pc_gpu_log(y);
#endif
}

/* log y in FP32 for a non-negative finite double y (a sum of products of non-negative finite
 * numbers, formed in FP64), without converting y to FP32: the mantissa, rounded to 24 bits by
 * integer operations, as a float m in [1, 2], and log y = e ln 2 + log m with e the double's
 * exponent (so y below FP32's range keeps its log). The error is that of pc_gpu_log(m) plus the
 * mantissa's rounding (at most 2^-24 relative, 6e-8 nats). +0 and subnormal y give -inf (as
 * flush-to-zero would); negative y, infinity and NaN give a meaningless value. */
PC_GPU_LOG_FN float pc_gpu_log_nonneg_d(double y) {
#ifdef __CUDA_ARCH__
    const uint32_t hi = (uint32_t)__double2hiint(y), lo = (uint32_t)__double2loint(y);
#else
    uint64_t u;
    memcpy(&u, &y, sizeof u);
    const uint32_t hi = (uint32_t)(u >> 32), lo = (uint32_t)u;
#endif
    /* The top 23 mantissa bits plus the next one, added: a carry makes m exactly 2. */
    const uint32_t mbits = 0x3f800000u + (((hi & 0xfffffu) << 3) | (lo >> 29)) + ((lo >> 28) & 1u);
    float m;
#ifdef __CUDA_ARCH__
    m = __uint_as_float(mbits);
    const float log_m = __log2f(m) * 0.693147180559945f;
#else
    memcpy(&m, &mbits, sizeof m);
    const float log_m = pc_gpu_log(m);
#endif
    const float e = (float)((int)(hi >> 20) - 1023);
    const float r = fmaf(e, 0.693145751953125f, fmaf(e, 1.42860682e-6f, log_m));
    return hi < 0x00100000u ? -INFINITY : r; /* exponent field 0: zero or subnormal */
}

#endif
