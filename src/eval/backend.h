/* The interface each evaluation backend implements (internal). pc_evaluate() in
 * src/eval/eval.c checks arguments and data, then calls the backend's ops. */
#ifndef PC_EVAL_BACKEND_H
#define PC_EVAL_BACKEND_H

#include "pc/eval.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pc_backend_ops {
    /* Allocates the backend's state for the circuit and opts (buffers for opts->max_batch). */
    pc_status (*create)(const pc_circuit *circuit, const pc_eval_opts *opts, void **state);
    /* x [n, V] and missing ([n, V] or NULL) are host arrays already checked; logp [n] host. */
    pc_status (*evaluate)(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                          double *logp);
    size_t (*peak_device_bytes)(const void *state);
    void (*destroy)(void *state);
} pc_backend_ops;

/* The queries beyond log p(x) (pc/query.h): on the CPU in src/eval/query/, on the GPU in
 * src/eval/cuda/query/. A query state is
 * separate from the backend's state: the evaluator makes it on its first query. Arguments
 * arrive checked (n >= 1, shapes, observed values < C, C <= 256 where values are written). */
typedef struct pc_query_ops {
    pc_status (*create)(const pc_circuit *circuit, const pc_eval_opts *opts, void **state);
    /* probs [n, V, C]: exactly one of probs64 and probs32 is non-NULL; logp [n] or NULL. */
    pc_status (*conditionals)(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                              double *probs64, float *probs32, double *logp);
    /* completed [n, V] (may be x itself); logp [n] or NULL. */
    pc_status (*mpe)(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                     uint8_t *completed, double *logp);
    /* Row i from the stream of (seed, first + i); x == NULL (and missing == NULL): from p(x),
     * else from p(x_missing | x_observed). samples [n, V] (may be x itself). */
    pc_status (*sample)(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                        uint64_t seed, int64_t first, uint8_t *samples);
    void (*destroy)(void *state);
    /* Optional, used instead of create where set: the same with the backend's state, for
     * queries that run where the backend runs (the GPU ones, on its device). */
    pc_status (*create_with)(const void *backend_state, const pc_circuit *circuit,
                             const pc_eval_opts *opts, void **state);
} pc_query_ops;

/* ref answers queries in FP64; cpu-fuse and cpu share the FP32 form (sum-product in FP32
 * relative to FP64 offsets; MPE and the sampling tables in FP64). */
extern const pc_query_ops pc_query_f64_ops;
extern const pc_query_ops pc_query_f32_ops;
/* The GPU backends (fuse, int, gemm) share one query implementation, in FP64, in
 * src/eval/cuda/query/ (a build without CUDA links a stand-in). */
extern const pc_query_ops pc_query_gpu_ops;

/* One table per backend; the CUDA ones live in src/eval/cuda (fuse/, int/, gemm/; a build
 * without CUDA links stand-ins whose create returns PC_ERR_UNSUPPORTED). */
extern const pc_backend_ops pc_backend_ref_ops;
extern const pc_backend_ops pc_backend_cpu_ops;
extern const pc_backend_ops pc_backend_cpu_fuse_ops;
extern const pc_backend_ops pc_backend_fuse_ops;
extern const pc_backend_ops pc_backend_int_ops;
extern const pc_backend_ops pc_backend_gemm_ops;

/* For the testing hooks (src/testing): an evaluator over the given ops (pc_evaluator_create's
 * checks, then ops->create), and the ops and state of an evaluator. */
pc_status pc_evaluator_create_ops(const pc_circuit *circuit, const pc_eval_opts *opts,
                                  const pc_backend_ops *ops, pc_evaluator **out);
const pc_backend_ops *pc_evaluator_ops(const pc_evaluator *evaluator, void **state);

#ifdef __cplusplus
}
#endif

#endif
