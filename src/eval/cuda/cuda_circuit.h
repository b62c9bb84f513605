/* Timing hook of the GPU circuit engine for benchmarks (internal; CUDA builds only).
 *
 * `state` is what pc_backend_{fuse,int,gemm}_ops.create returned. Uploads n <= the evaluator's
 * internal batch of random samples (values < C, drawn from seed, none missing) once, then runs
 * the forward pass's CUDA graph `warmup` times and `reps` times more between CUDA events, and
 * returns the median of the timed runs in milliseconds. Copies in and out are not timed. */
#ifndef PC_LAYERS_CUDA_CIRCUIT_H
#define PC_LAYERS_CUDA_CIRCUIT_H

#include <stdint.h>

#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

pc_status pc_gpu_time_forward(void *state, int64_t n, int warmup, int reps, uint64_t seed,
                              double *median_ms);

/* Samples per forward pass the evaluator was sized for (its internal batch). */
int64_t pc_gpu_chunk(const void *state);

/* How the backend scheduled its last forward pass ("tile", "warp", "persistent" or "layered";
 * fuse picks per batch size, so before any pass it names its choice for small batches). */
const char *pc_gpu_strategy(const void *state);

#ifdef __cplusplus
}
#endif

#endif
