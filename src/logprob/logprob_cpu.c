/* Token log-probabilities on the CPU, as an application of the LSE library: the row LSE comes
 * from pc_lse_rows (one pass over the logits, SIMD dispatch, OpenMP rows), then each row picks
 * its target logit and subtracts. The rules of pc/logprob.h follow from the LSE's own edge cases:
 *   NaN in the row -> LSE NaN -> NaN;  +inf in the row -> LSE +inf -> -inf, or NaN at a +inf
 *   target;  all -inf -> LSE -inf -> (-inf) - (-inf) = NaN;  -inf target, finite LSE -> -inf.
 * The FP64 paths take pc_lse_rows_ref and subtract in double. */
#include <stdlib.h>
#include <string.h>

#include "base/fail.h"
#include "logprob/logprob_internal.h"

static double logit_at(pc_dtype dtype, const void *logits, int64_t stride, int64_t r, int64_t i) {
    size_t at = (size_t)r * (size_t)stride + (size_t)i;
    if (dtype == PC_F32) return ((const float *)logits)[at];
    uint32_t bits = (uint32_t)((const uint16_t *)logits)[at] << 16; /* bf16: the high half of an f32 */
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

pc_status pc_logprob_rows(pc_lse_kernel kernel, pc_dtype dtype, const void *logits, int64_t rows,
                          int64_t vocab, int64_t stride, const int64_t *targets, float *out,
                          const pc_lse_cpu_opts *opts) {
    pc_status st = pc_logprob_check_args(dtype, logits, rows, vocab, stride, targets, out);
    if (st != PC_OK || (st = pc_logprob_check_targets(targets, rows, vocab)) != PC_OK) return st;
    if (kernel != PC_LSE_REF && kernel != PC_LSE_FUSE && kernel != PC_LSE_INT)
        return pc_fail(PC_ERR_ARG, "logprob: unknown kernel %d", (int)kernel);
    if (kernel == PC_LSE_INT && dtype != PC_F32)
        return pc_fail(PC_ERR_ARG, "logprob: kernel int reads f32 logits only, not %s", pc_dtype_name(dtype));
    if (rows == 0) return PC_OK;
    if (kernel == PC_LSE_REF) {
        double *lse = malloc((size_t)rows * sizeof *lse);
        if (!lse) return pc_fail(PC_ERR_NOMEM, "logprob: %lld doubles of scratch", (long long)rows);
        st = pc_lse_rows_ref(dtype, logits, rows, vocab, stride, lse);
        for (int64_t r = 0; st == PC_OK && r < rows; r++)
            out[r] = (float)(logit_at(dtype, logits, stride, r, targets[r]) - lse[r]);
        free(lse);
        return st;
    }
    /* The LSE lands in out[] and is replaced row by row (pc_lse_rows leaves out[] untouched
     * when it fails, e.g. for an isa this CPU lacks). */
    if ((st = pc_lse_rows(kernel, dtype, logits, rows, vocab, stride, out, opts)) != PC_OK) return st;
    for (int64_t r = 0; r < rows; r++)
        out[r] = (float)logit_at(dtype, logits, stride, r, targets[r]) - out[r];
    return PC_OK;
}

pc_status pc_logprob_rows_ref(pc_dtype dtype, const void *logits, int64_t rows, int64_t vocab,
                              int64_t stride, const int64_t *targets, double *out) {
    pc_status st = pc_logprob_check_args(dtype, logits, rows, vocab, stride, targets, out);
    if (st != PC_OK || (st = pc_logprob_check_targets(targets, rows, vocab)) != PC_OK) return st;
    if (rows == 0) return PC_OK;
    if ((st = pc_lse_rows_ref(dtype, logits, rows, vocab, stride, out)) != PC_OK) return st;
    for (int64_t r = 0; r < rows; r++) out[r] = logit_at(dtype, logits, stride, r, targets[r]) - out[r];
    return PC_OK;
}
