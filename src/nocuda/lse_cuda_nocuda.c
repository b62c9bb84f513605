/* The CUDA entry points of lse.h in a build without CUDA (PC_CUDA=OFF): no GPU is available and
 * every call says so. Not compiled when CUDA is on. */
#include "base/fail.h"
#include "pc/lse.h"

static pc_status no_cuda(void) {
    return pc_fail(PC_ERR_UNSUPPORTED, "this build of pcinfer has no CUDA support (PC_CUDA=OFF)");
}

pc_status pc_lse_rows_cuda(pc_lse_kernel kernel, pc_dtype dtype, const void *d_x, int64_t rows,
                           int64_t cols, int64_t stride, float *d_out, void *d_scratch,
                           size_t *scratch_bytes, pc_stream stream) {
    (void)kernel, (void)dtype, (void)d_x, (void)rows, (void)cols, (void)stride, (void)d_out;
    (void)d_scratch, (void)scratch_bytes, (void)stream;
    return no_cuda();
}

pc_status pc_lse_weighted_cuda(pc_lse_kernel kernel, const float *d_w, const float *d_x,
                               int64_t batch, int64_t outs, int64_t ins, int64_t x_stride,
                               float *d_out, pc_stream stream) {
    (void)kernel, (void)d_w, (void)d_x, (void)batch, (void)outs, (void)ins, (void)x_stride;
    (void)d_out, (void)stream;
    return no_cuda();
}

pc_status pc_lse_backward_cuda(const float *d_x, const float *d_lse, int64_t rows, int64_t cols,
                               int64_t stride, float *d_grad, int64_t grad_stride,
                               pc_stream stream) {
    (void)d_x, (void)d_lse, (void)rows, (void)cols, (void)stride, (void)d_grad;
    (void)grad_stride, (void)stream;
    return no_cuda();
}
