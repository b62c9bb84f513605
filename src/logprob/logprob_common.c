/* Argument checks shared by the CPU and CUDA token log-probability entry points. */
#include <inttypes.h>

#include "base/fail.h"
#include "logprob/logprob_internal.h"

pc_status pc_logprob_check_args(pc_dtype dtype, const void *logits, int64_t rows, int64_t vocab,
                                int64_t stride, const void *targets, const void *out) {
    if (dtype != PC_F32 && dtype != PC_BF16)
        return pc_fail(PC_ERR_ARG, "logprob: dtype %s is not offered (f32, bf16)", pc_dtype_name(dtype));
    if (rows < 0) return pc_fail(PC_ERR_ARG, "logprob: rows = %" PRId64 " is negative", rows);
    if (vocab <= 0) return pc_fail(PC_ERR_ARG, "logprob: vocab = %" PRId64 " must be >= 1", vocab);
    if (stride < vocab)
        return pc_fail(PC_ERR_ARG, "logprob: stride = %" PRId64 " is less than vocab = %" PRId64,
                       stride, vocab);
    if (rows > 0 && !logits) return pc_fail(PC_ERR_ARG, "logprob: logits is NULL");
    if (rows > 0 && !targets) return pc_fail(PC_ERR_ARG, "logprob: targets is NULL");
    if (rows > 0 && !out) return pc_fail(PC_ERR_ARG, "logprob: out is NULL");
    return PC_OK;
}

pc_status pc_logprob_check_targets(const int64_t *targets, int64_t rows, int64_t vocab) {
    if (rows < 0) return pc_fail(PC_ERR_ARG, "logprob: rows = %" PRId64 " is negative", rows);
    if (rows > 0 && !targets) return pc_fail(PC_ERR_ARG, "logprob: targets is NULL");
    for (int64_t r = 0; r < rows; r++)
        if (targets[r] < 0 || targets[r] >= vocab)
            return pc_fail(PC_ERR_ARG, "logprob: targets[%" PRId64 "] = %" PRId64
                           " is outside [0, %" PRId64 ")", r, targets[r], vocab);
    return PC_OK;
}
