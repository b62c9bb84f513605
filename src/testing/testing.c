/* The testing hooks (testing.h) over the library's internals: fuse's forced strategies, and
 * the GPU engine's timing, batch and strategy on an evaluator's state (gpu_hooks.h). */
#include "base/fail.h"
#include "testing/testing.h"

#include <string.h>

#include "eval/backend.h"
#include "eval/cuda/gpu_hooks.h"

pc_status pc_testing_evaluator_create(const pc_circuit *circuit, const pc_eval_opts *opts,
                                      const char *strategy, pc_evaluator **out) {
    if (!strategy) return pc_evaluator_create(circuit, opts, out);
    if (out) *out = NULL;
    if (!opts || opts->backend != PC_BACKEND_FUSE)
        return pc_fail(PC_ERR_ARG, "pc_testing_evaluator_create: a strategy ('%s') is fuse's, not "
                                   "backend '%s''s", strategy,
                       opts ? pc_backend_name(opts->backend) : "(NULL opts)");
    const pc_backend_ops *ops = pc_gpu_fuse_forced_ops(strategy);
    if (!ops)
        return pc_fail(PC_ERR_ARG, "pc_testing_evaluator_create: unknown strategy '%s' (tile, "
                                   "persistent, warp)", strategy);
    return pc_evaluator_create_ops(circuit, opts, ops, out);
}

/* The GPU engine's state of e, or NULL for a CPU evaluator (or NULL). */
static void *gpu_state(const pc_evaluator *e) {
    void *state = NULL;
    const pc_backend_ops *ops = pc_evaluator_ops(e, &state);
    return pc_gpu_owns(ops) ? state : NULL;
}

pc_status pc_testing_time_forward(pc_evaluator *evaluator, int64_t n, int warmup, int reps,
                                  uint64_t seed, double *median_ms) {
    void *state = gpu_state(evaluator);
    if (!state) return pc_fail(PC_ERR_ARG, "pc_testing_time_forward: not a GPU evaluator");
    return pc_gpu_time_forward(state, n, warmup, reps, seed, median_ms);
}

int64_t pc_testing_chunk(const pc_evaluator *evaluator) {
    const void *state = gpu_state(evaluator);
    return state ? pc_gpu_chunk(state) : 0;
}

const char *pc_testing_strategy(const pc_evaluator *evaluator) {
    const void *state = gpu_state(evaluator);
    return state ? pc_gpu_strategy(state) : "cpu";
}

#ifndef PC_HAVE_CUDA
/* Without CUDA (with it, cuda_log.cu). */
pc_status pc_testing_gpu_log(const float *x, float *y, int64_t n, int nonneg) {
    (void)x, (void)y, (void)n, (void)nonneg;
    return pc_fail(PC_ERR_UNSUPPORTED, "pc_testing_gpu_log: this build has no CUDA support");
}

pc_status pc_testing_gpu_log_d(const double *x, float *y, int64_t n) {
    (void)x, (void)y, (void)n;
    return pc_fail(PC_ERR_UNSUPPORTED, "pc_testing_gpu_log_d: this build has no CUDA support");
}
#endif
