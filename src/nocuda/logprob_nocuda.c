/* pc_logprob_rows_cuda in a build without CUDA (PC_CUDA=OFF). Not compiled when CUDA is on. */
#include "base/fail.h"
#include "pc/logprob.h"

pc_status pc_logprob_rows_cuda(pc_lse_kernel kernel, pc_dtype dtype, const void *d_logits,
                               int64_t rows, int64_t vocab, int64_t stride,
                               const int64_t *d_targets, float *d_out, void *d_scratch,
                               size_t *scratch_bytes, pc_stream stream) {
    (void)kernel, (void)dtype, (void)d_logits, (void)rows, (void)vocab, (void)stride;
    (void)d_targets, (void)d_out, (void)d_scratch, (void)scratch_bytes, (void)stream;
    return pc_fail(PC_ERR_UNSUPPORTED, "this build of pcinfer has no CUDA support (PC_CUDA=OFF)");
}
