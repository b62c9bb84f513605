/* Token log-probabilities over a vocabulary, the reduction at the end of every language-model
 * scoring step (RLHF, perplexity):
 *
 *   logprob[r] = logits[r, y_r] - LSE(logits[r, 0:vocab])      (natural log, r < rows)
 *
 * logits is [rows, stride] (stride >= vocab elements between row starts), targets is [rows] of
 * int64 token indices, out is [rows]. Every path reads each logit once: the online (max, sum)
 * of the LSE and the pick of the target share one pass.
 *
 * Input types: PC_F32 and PC_BF16 (stored as uint16_t); the math is FP32 (ref: FP64).
 *
 * Edge cases, identical on the CPU and the GPU:
 *   a -inf logit at the target -> -inf (the token has probability 0);
 *   any NaN in the row -> NaN;
 *   else a +inf anywhere in the row -> -inf at a finite target, NaN at a +inf target;
 *   a row that is all -inf -> NaN (the distribution is undefined);
 *   finite logits up to +-FLT_MAX never overflow.
 *
 * Targets out of [0, vocab):
 *   CPU: checked before anything is computed: PC_ERR_ARG naming the row, out untouched.
 *   CUDA: the targets live on the device and are not copied back to check them (that would cost
 *   a synchronisation per call); such a row gets NaN, and no logit outside the row is read.
 *   A caller who wants an error instead validates the host copy of its targets with
 *   pc_logprob_check_targets() before the upload.
 *
 * All functions check their other arguments (NULL pointers, negative sizes, stride < vocab,
 * vocab == 0, an unknown kernel or dtype) and return PC_ERR_ARG with a message; outputs are
 * untouched on error.
 */
#ifndef PC_LOGPROB_H
#define PC_LOGPROB_H

#include <stddef.h>
#include <stdint.h>

#include "pc/export.h"
#include "pc/lse.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PC_OK when every targets[r] (r < rows) is in [0, vocab); else PC_ERR_ARG naming the first
 * bad row. Host pointer. */
PC_API pc_status pc_logprob_check_targets(const int64_t *targets, int64_t rows, int64_t vocab);

/* CPU, synchronous, host pointers. The row LSE comes from pc_lse_rows with `kernel` (one pass
 * over the logits; pairs as there: ref with f32 or bf16, fuse with f32 or bf16, int with f32),
 * then the target logit is picked and the LSE subtracted. fuse and int subtract from the LSE
 * rounded to float, so their error is the LSE kernel's plus half an ulp of |LSE| (1e-6 for
 * logits of size ~30; a large common offset costs more: use ref, which subtracts in FP64, or
 * the GPU path, which subtracts the row max before rounding). opts as in pc_lse_rows (NULL:
 * one thread, best isa). */
PC_API pc_status pc_logprob_rows(pc_lse_kernel kernel, pc_dtype dtype, const void *logits,
                                 int64_t rows, int64_t vocab, int64_t stride,
                                 const int64_t *targets, float *out, const pc_lse_cpu_opts *opts);

/* The FP64 reference with double output: the ground truth of every test and error figure. */
PC_API pc_status pc_logprob_rows_ref(pc_dtype dtype, const void *logits, int64_t rows,
                                     int64_t vocab, int64_t stride, const int64_t *targets,
                                     double *out);

/* CUDA, the same contract as pc_logprob_rows with the arguments of pc_lse_rows_cuda: the GPU
 * offers kernel fuse (FP32 online (max, sum) with exp2, the target picked in the same pass; any
 * other kernel is PC_ERR_ARG). d_logits, d_targets, d_out and d_scratch are device pointers;
 * the call is asynchronous on `stream` and returns once the work is queued. Scratch is CUB
 * style: with d_scratch == NULL the call only stores the bytes it needs in *scratch_bytes
 * (never 0) and returns PC_OK; otherwise d_scratch must hold *scratch_bytes bytes that nobody
 * else touches until the queued work finishes. The shape picks the grid (one block per row, or
 * several blocks per row plus a combine step when the rows alone cannot fill the GPU). In a
 * build without CUDA it returns PC_ERR_UNSUPPORTED. */
PC_API pc_status pc_logprob_rows_cuda(pc_lse_kernel kernel, pc_dtype dtype, const void *d_logits,
                                      int64_t rows, int64_t vocab, int64_t stride,
                                      const int64_t *d_targets, float *d_out, void *d_scratch,
                                      size_t *scratch_bytes, pc_stream stream);

#ifdef __cplusplus
}
#endif

#endif
