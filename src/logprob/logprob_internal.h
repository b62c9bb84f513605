/* Shared by the CPU and CUDA paths of pc/logprob.h: argument checks and the rule that turns a
 * row's (max, sum, nan) summary and its target logit into the log-probability. */
#ifndef PC_LOGPROB_INTERNAL_H
#define PC_LOGPROB_INTERNAL_H

#include <stdint.h>

#include "pc/logprob.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every check of pc/logprob.h except the target range (pointers may be host or device). */
pc_status pc_logprob_check_args(pc_dtype dtype, const void *logits, int64_t rows, int64_t vocab,
                                int64_t stride, const void *targets, const void *out);

#ifdef __cplusplus
}
#endif

#endif
