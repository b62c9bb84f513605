/* The GPU backends (fuse, int, gemm) and the device log check in a build without CUDA: each says
 * so. Not compiled when CUDA is on (src/eval/cuda/cuda_*.cu define them then). */
#include "base/fail.h"
#include "eval/backend.h"
#include "eval/cuda/gpu_log.h"

static pc_status no_cuda_create(const pc_circuit *circuit, const pc_eval_opts *opts, void **state) {
    (void)circuit, (void)opts, (void)state;
    return pc_fail(PC_ERR_UNSUPPORTED, "backend '%s' needs CUDA, and this build has none (PC_CUDA=OFF)",
                   pc_backend_name(opts ? opts->backend : PC_BACKEND_FUSE));
}

static pc_status no_cuda_evaluate(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                                  double *logp) {
    (void)state, (void)x, (void)missing, (void)n, (void)logp;
    return pc_fail(PC_ERR_UNSUPPORTED, "this build has no CUDA support");
}

static size_t no_cuda_peak(const void *state) { (void)state; return 0; }
static void no_cuda_destroy(void *state) { (void)state; }

#define PC_NO_CUDA_OPS {no_cuda_create, no_cuda_evaluate, no_cuda_peak, no_cuda_destroy}
const pc_backend_ops pc_backend_fuse_ops = PC_NO_CUDA_OPS;
const pc_backend_ops pc_backend_int_ops = PC_NO_CUDA_OPS;
const pc_backend_ops pc_backend_gemm_ops = PC_NO_CUDA_OPS;
const pc_backend_ops pc_backend_fuse_tile_ops = PC_NO_CUDA_OPS;
const pc_backend_ops pc_backend_fuse_persistent_ops = PC_NO_CUDA_OPS;
const pc_backend_ops pc_backend_fuse_warp_ops = PC_NO_CUDA_OPS;

pc_status pc_gpu_log_apply(const float *x, float *y, int64_t n, int nonneg) {
    (void)x, (void)y, (void)n, (void)nonneg;
    return pc_fail(PC_ERR_UNSUPPORTED, "pc_gpu_log_apply: this build has no CUDA support");
}

pc_status pc_gpu_log_d_apply(const double *x, float *y, int64_t n) {
    (void)x, (void)y, (void)n;
    return pc_fail(PC_ERR_UNSUPPORTED, "pc_gpu_log_d_apply: this build has no CUDA support");
}
