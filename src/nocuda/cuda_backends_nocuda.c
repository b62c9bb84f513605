/* The GPU backends (fuse, int, gemm) and the GPU engine's testing hooks in a build without CUDA:
 * each says so. Not compiled when CUDA is on (src/eval/cuda defines them then). */
#include "base/fail.h"
#include "eval/backend.h"
#include <string.h>

#include "eval/cuda/gpu_hooks.h"

static pc_status no_cuda_create(const pc_circuit *circuit, const pc_eval_opts *opts, void **state) {
    (void)circuit, (void)state;
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

#define PC_NO_CUDA_OPS                                                                           \
    {.create = no_cuda_create, .evaluate = no_cuda_evaluate, .peak_device_bytes = no_cuda_peak,  \
     .destroy = no_cuda_destroy}
const pc_backend_ops pc_backend_fuse_ops = PC_NO_CUDA_OPS;
const pc_backend_ops pc_backend_int_ops = PC_NO_CUDA_OPS;
const pc_backend_ops pc_backend_gemm_ops = PC_NO_CUDA_OPS;

/* Every forced strategy is the fuse stand-in: creating it says this build has no CUDA. */
const pc_backend_ops *pc_gpu_fuse_forced_ops(const char *strategy) {
    if (!strategy) return NULL;
    for (const char *const *s = (const char *const[]){"tile", "persistent", "warp", NULL}; *s; s++)
        if (!strcmp(strategy, *s)) return &pc_backend_fuse_ops;
    return NULL;
}

int pc_gpu_owns(const pc_backend_ops *ops) { (void)ops; return 0; }

pc_status pc_gpu_time_forward(void *state, int64_t n, int warmup, int reps, uint64_t seed,
                              double *median_ms) {
    (void)state, (void)n, (void)warmup, (void)reps, (void)seed, (void)median_ms;
    return pc_fail(PC_ERR_UNSUPPORTED, "this build has no CUDA support");
}

int64_t pc_gpu_chunk(const void *state) { (void)state; return 0; }

const char *pc_gpu_strategy(const void *state) { (void)state; return "cpu"; }
