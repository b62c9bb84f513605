/* Token log-probabilities on the CPU: the FP64 reference and the FP32 one-pass `fuse` path.
 *
 * fuse walks a row in blocks of PC_LP_BLOCK logits (1 KiB of f32, L1-resident): the block's max,
 * then the sum of exp(x - block max), then one merge into the row's running (max, sum). Memory
 * sees each logit once; the second look at a block hits L1. */
#include <math.h>
#include <string.h>

#include "kernels/logprob_internal.h"

#define PC_LP_BLOCK 256

static float bf16_to_f32(uint16_t u) {
    uint32_t bits = (uint32_t)u << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float logit_at(pc_dtype dtype, const void *row, int64_t i) {
    return dtype == PC_F32 ? ((const float *)row)[i] : bf16_to_f32(((const uint16_t *)row)[i]);
}

/* The edge-case rule of the header, from the row's max m (NaN when a NaN was seen) and the
 * target logit xt; returns 1 and sets *lp when the row is one of the special cases. */
static int special_row(double m, double xt, double *lp) {
    if (isnan(m)) *lp = NAN;
    else if (m == INFINITY) *lp = xt == INFINITY ? NAN : -INFINITY;
    else if (m == -INFINITY) *lp = NAN;
    else if (xt == -INFINITY) *lp = -INFINITY;
    else return 0;
    return 1;
}

static double ref_row(pc_dtype dtype, const void *row, int64_t vocab, int64_t target) {
    double m = -INFINITY;
    for (int64_t i = 0; i < vocab; i++) {
        double x = logit_at(dtype, row, i);
        if (isnan(x)) { m = NAN; break; }
        if (x > m) m = x;
    }
    double xt = logit_at(dtype, row, target), lp;
    if (special_row(m, xt, &lp)) return lp;
    /* Terms are in (0, 1] and at least one is 1: a plain double sum of <= 2^20 of them loses
     * under 2^20 * 2^-53 relative, far below any FP32 path's error. */
    double s = 0.0;
    for (int64_t i = 0; i < vocab; i++) s += exp((double)logit_at(dtype, row, i) - m);
    return (xt - m) - log(s);
}

/* One block of n <= PC_LP_BLOCK logits as f32 in buf: merges it into (*m, *s); *nan set on NaN. */
static void fuse_block(const float *buf, int n, float *m, float *s, int *nan) {
    float bm = -INFINITY;
    for (int i = 0; i < n; i++) {
        *nan |= buf[i] != buf[i];
        bm = buf[i] > bm ? buf[i] : bm;
    }
    if (bm == -INFINITY || bm == INFINITY) {
        /* All -inf adds nothing; +inf decides the row and is resolved by special_row. */
        if (bm > *m) *m = bm;
        return;
    }
    float bs = 0.0f;
    for (int i = 0; i < n; i++) bs += expf(buf[i] - bm);
    if (bm > *m) {
        *s = *m == -INFINITY ? bs : *s * expf(*m - bm) + bs;
        *m = bm;
    } else if (*m != INFINITY) {
        *s += bs * expf(bm - *m);
    }
}

static float fuse_row(pc_dtype dtype, const void *row, int64_t vocab, int64_t target) {
    float buf[PC_LP_BLOCK], m = -INFINITY, s = 0.0f;
    int nan = 0;
    for (int64_t i0 = 0; i0 < vocab; i0 += PC_LP_BLOCK) {
        int n = vocab - i0 < PC_LP_BLOCK ? (int)(vocab - i0) : PC_LP_BLOCK;
        const float *block = buf;
        if (dtype == PC_F32) block = (const float *)row + i0;
        else for (int i = 0; i < n; i++) buf[i] = bf16_to_f32(((const uint16_t *)row)[i0 + i]);
        fuse_block(block, n, &m, &s, &nan);
    }
    float xt = logit_at(dtype, row, target);
    double lp;
    if (special_row(nan ? NAN : m, xt, &lp)) return (float)lp;
    return (xt - m) - logf(s);
}

pc_status pc_logprob_rows(pc_lse_kernel kernel, pc_dtype dtype, const void *logits, int64_t rows,
                          int64_t vocab, int64_t stride, const int64_t *targets, float *out,
                          const pc_lse_cpu_opts *opts) {
    pc_status st = pc_logprob_check_args(dtype, logits, rows, vocab, stride, targets, out);
    if (st != PC_OK) return st;
    if (kernel != PC_LSE_REF && kernel != PC_LSE_FUSE)
        return pc_fail(PC_ERR_ARG, "logprob: kernel %s is not offered on the CPU (ref, fuse)",
                       pc_lse_kernel_name(kernel));
    if (opts && opts->isa != PC_ISA_AUTO && opts->isa != PC_ISA_SCALAR)
        return pc_fail(PC_ERR_UNSUPPORTED, "logprob: only the portable C path exists (isa auto or scalar)");
    if ((st = pc_logprob_check_targets(targets, rows, vocab)) != PC_OK) return st;
    int threads = opts && opts->threads > 1 ? opts->threads : 1;
    size_t esize = pc_dtype_size(dtype);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t r = 0; r < rows; r++) {
        const void *row = (const char *)logits + (size_t)r * (size_t)stride * esize;
        out[r] = kernel == PC_LSE_REF ? (float)ref_row(dtype, row, vocab, targets[r])
                                      : fuse_row(dtype, row, vocab, targets[r]);
    }
    return PC_OK;
}

pc_status pc_logprob_rows_ref(pc_dtype dtype, const void *logits, int64_t rows, int64_t vocab,
                              int64_t stride, const int64_t *targets, double *out) {
    pc_status st = pc_logprob_check_args(dtype, logits, rows, vocab, stride, targets, out);
    if (st != PC_OK) return st;
    if ((st = pc_logprob_check_targets(targets, rows, vocab)) != PC_OK) return st;
    size_t esize = pc_dtype_size(dtype);
    for (int64_t r = 0; r < rows; r++)
        out[r] = ref_row(dtype, (const char *)logits + (size_t)r * (size_t)stride * esize, vocab,
                         targets[r]);
    return PC_OK;
}
