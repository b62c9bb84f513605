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
