/* The GPU engine's hooks for the testing library (internal; src/testing/testing.c). In a build
 * without CUDA, src/nocuda/cuda_backends_nocuda.c stands in. `state` is a GPU backend's state,
 * as pc_evaluator_ops() returns it. */
#ifndef PC_GPU_HOOKS_H
#define PC_GPU_HOOKS_H

#include <stdint.h>

#include "eval/backend.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fuse with its strategy forced ("tile", "persistent" or "warp"); NULL for another name. */
const pc_backend_ops *pc_gpu_fuse_forced_ops(const char *strategy);

/* Whether ops is one of the GPU engine's (fuse, int, gemm, a forced fuse strategy). */
int pc_gpu_owns(const pc_backend_ops *ops);

/* pc_testing_time_forward's contract (src/testing/testing.h), on a GPU backend's state. */
pc_status pc_gpu_time_forward(void *state, int64_t n, int warmup, int reps, uint64_t seed,
                              double *median_ms);

/* Samples per forward pass the state was sized for (its internal batch). */
int64_t pc_gpu_chunk(const void *state);

/* The strategy of the last forward pass, or before any, the one for a single sample. */
const char *pc_gpu_strategy(const void *state);

#ifdef __cplusplus
}
#endif

#endif
