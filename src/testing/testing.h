/* Hooks for tests and benchmarks: forced strategies, timers and device-side checks. They live
 * in libpcinfer_testing.a, which links the static library and may reach internals; they are
 * never part of libpcinfer.so nor installed. Same error rules as the library: a pc_status and
 * pc_last_error(), never an exit. */
#ifndef PC_TESTING_H
#define PC_TESTING_H

#include <stdint.h>

#include "pc/eval.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Like pc_evaluator_create, but for opts->backend == PC_BACKEND_FUSE the strategy is forced:
 * "tile", "persistent" or "warp" (NULL: fuse's own choice per pass). A strategy that cannot
 * run the circuit (tile and warp above their largest K) returns PC_ERR_UNSUPPORTED with a
 * message; a strategy for a backend other than fuse is PC_ERR_ARG. */
pc_status pc_testing_evaluator_create(const pc_circuit *circuit, const pc_eval_opts *opts,
                                      const char *strategy, pc_evaluator **out);

/* GPU evaluators only: uploads n <= pc_testing_chunk() random samples (values < C, drawn from
 * seed, none missing) once, runs the forward pass's CUDA graph `warmup` times, then `reps`
 * times between CUDA events, and returns the median of the timed runs in milliseconds. Copies
 * in and out are not timed. PC_ERR_ARG for a CPU evaluator. */
pc_status pc_testing_time_forward(pc_evaluator *evaluator, int64_t n, int warmup, int reps,
                                  uint64_t seed, double *median_ms);

/* Samples per forward pass a GPU evaluator was sized for (its internal batch); 0 for CPU. */
int64_t pc_testing_chunk(const pc_evaluator *evaluator);

/* How a GPU evaluator scheduled its last forward pass ("tile", "warp", "persistent" or
 * "layered"; before any pass, its choice for small batches); "cpu" for CPU evaluators. */
const char *pc_testing_strategy(const pc_evaluator *evaluator);

/* y[i] = the GPU sum layers' FP32 log of x[i] (nonneg: the form for x >= 0), evaluated on the
 * device for n host values; PC_ERR_UNSUPPORTED without CUDA, PC_ERR_NO_DEVICE without a GPU. */
pc_status pc_testing_gpu_log(const float *x, float *y, int64_t n, int nonneg);
/* y[i] = the GPU's log of the double x[i] >= 0 into FP32, likewise. */
pc_status pc_testing_gpu_log_d(const double *x, float *y, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
