/* The FP64 reference: max-shift, then a Neumaier-compensated sum of exp(x - max), so the sum
 * is correct to a few double ulps at any N. Every input type is decoded exactly to double. It is
 * the ground truth of the tests and of every accuracy figure, and the fallback the fast kernels
 * use for the rare outputs they cannot get right on their own. */
#include "lse/lse_cpu.h"

/* Rows are decoded in blocks of this many doubles (2 KB on the stack). */
#define REF_BLOCK 256

static void decode(pc_dtype dtype, const void *x, int64_t i0, int64_t n, double *out) {
    switch (dtype) {
    case PC_F32:
        for (int64_t i = 0; i < n; i++)
            out[i] = ((const float *)x)[i0 + i];
        break;
    case PC_F16:
        for (int64_t i = 0; i < n; i++)
            out[i] = pc_f16_to_f32(((const uint16_t *)x)[i0 + i]);
        break;
    case PC_BF16:
        for (int64_t i = 0; i < n; i++)
            out[i] = pc_bf16_to_f32(((const uint16_t *)x)[i0 + i]);
        break;
    case PC_Q10_6:
        for (int64_t i = 0; i < n; i++)
            out[i] = pc_q10_6_to_f64(((const int16_t *)x)[i0 + i]);
        break;
    }
}

/* Element source: a row of `dtype`, or the weighted terms w[i] + x[i] (f32 pair, w != NULL). */
typedef struct ref_src {
    pc_dtype dtype;
    const void *x;
    const float *w;
} ref_src;

static void load(const ref_src *src, int64_t i0, int64_t n, double *out) {
    if (!src->w) {
        decode(src->dtype, src->x, i0, n, out);
        return;
    }
    const float *w = src->w + i0, *x = (const float *)src->x + i0;
    for (int64_t i = 0; i < n; i++)
        out[i] = (double)w[i] + (double)x[i];
}

static double ref_lse(const ref_src *src, int64_t n) {
    double buf[REF_BLOCK];
    double m = -INFINITY;
    int nan = 0;
    for (int64_t i0 = 0; i0 < n; i0 += REF_BLOCK) {
        int64_t len = n - i0 < REF_BLOCK ? n - i0 : REF_BLOCK;
        load(src, i0, len, buf);
        for (int64_t i = 0; i < len; i++) {
            nan |= isnan(buf[i]);
            m = buf[i] > m ? buf[i] : m;
        }
    }
    if (nan)
        return NAN;
    if (m == INFINITY || m == -INFINITY)
        return m; /* any +inf, or empty / all -inf */
    double sum = 0.0, comp = 0.0;
    for (int64_t i0 = 0; i0 < n; i0 += REF_BLOCK) {
        int64_t len = n - i0 < REF_BLOCK ? n - i0 : REF_BLOCK;
        load(src, i0, len, buf);
        for (int64_t i = 0; i < len; i++) {
            double e = exp(buf[i] - m), t = sum + e;
            comp += fabs(sum) >= e ? (sum - t) + e : (e - t) + sum;
            sum = t;
        }
    }
    return m + log(sum + comp);
}

double pc_lse_ref_row(pc_dtype dtype, const void *x, int64_t n) {
    ref_src src = {dtype, x, NULL};
    return ref_lse(&src, n);
}

double pc_lse_ref_weighted_one(const float *w, const float *x, int64_t n) {
    ref_src src = {PC_F32, x, w};
    return ref_lse(&src, n);
}
