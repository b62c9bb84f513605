/* Hooks of the GPU queries for benchmarks (internal; C). `state` is a GPU evaluator's query
 * state (the evaluator's query_state, made by its first query; eval/evaluator.h). Only in a
 * build with CUDA. */
#ifndef PC_GPU_QUERY_H
#define PC_GPU_QUERY_H

#include <stdint.h>

#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Uploads the n rows x [n][V] and missing ([n][V] or NULL; both ignored for "sample") once,
 * runs the kernels of `query` ("mpe", "conditionals_f32", "conditionals_f64",
 * "sample_conditional" or "sample") once untimed, then `reps` times between CUDA events, and
 * gives the median in milliseconds: the device's time alone, no copies. n must fit one chunk
 * (PC_ERR_ARG otherwise). */
pc_status pc_gpu_query_time(void *state, const char *query, const uint8_t *x,
                            const uint8_t *missing, int64_t n, int reps, double *median_ms);

/* Forces the samples per block of the query kernels (0: the state's own choice). */
void pc_gpu_query_force_rows(void *state, int32_t rows);

/* Forces the rows per piece of an MPE or sampling call, at most the state's chunk (0: the
 * state's own choice). */
void pc_gpu_query_force_piece(void *state, int64_t rows);

#ifdef __cplusplus
}
#endif

#endif
