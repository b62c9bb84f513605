/* Scoring data with a compiled circuit on one backend.
 *
 * Backends:
 *   ref       CPU, FP64: the ground truth.
 *   cpu       CPU, IntLSE integer sum layers (the fallback where no GPU is present).
 *   cpu-fuse  CPU, FP32 sum layers in the exp-once + multiply-add form.
 *   fuse      CUDA, fused FP32 layers (gather, shift by the max, exp once, FMA with exp(w), log).
 *   int       CUDA, IntLSE integer sum layers.
 *   gemm      CUDA, max/exp kernel + cuBLAS batched SGEMM + log kernel per layer.
 * Every backend returns log p(x) per sample in nats as double. Conditionals, MPE and sampling
 * on the same evaluator are in pc/query.h.
 */
#ifndef PC_EVAL_H
#define PC_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "pc/export.h"
#include "pc/circuit.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pc_backend {
    PC_BACKEND_REF = 0,
    PC_BACKEND_CPU = 1,
    PC_BACKEND_CPU_FUSE = 2,
    PC_BACKEND_FUSE = 3,
    PC_BACKEND_INT = 4,
    PC_BACKEND_GEMM = 5,
} pc_backend;

/* "ref", "cpu", "cpu-fuse", "fuse", "int", "gemm". */
PC_API const char *pc_backend_name(pc_backend backend);
PC_API pc_status pc_backend_parse(const char *name, pc_backend *backend);
/* 1 for fuse, int and gemm. */
PC_API int pc_backend_is_gpu(pc_backend backend);

typedef struct pc_eval_opts {
    pc_backend backend;
    int64_t max_batch; /* largest n one pc_evaluate call will be given (buffers are sized once) */
    int threads;       /* CPU backends: OpenMP threads across the batch; <= 0 means all cores */
} pc_eval_opts;

/* An evaluator serves one call at a time. A call made on an evaluator while another thread's
 * call on it is running fails at once with PC_ERR_ARG ("evaluator is in use by another
 * thread") and touches none of its outputs; calls from several threads one after another are
 * fine. For parallel work use one evaluator per thread (each may share the circuit); a CPU
 * evaluator already spreads every batch over opts->threads threads. */
typedef struct pc_evaluator pc_evaluator;

/* Prepares a backend for the circuit: converts and (for GPU backends) uploads the parameters
 * once and allocates buffers for max_batch samples. The circuit must outlive the evaluator.
 * A GPU backend on a machine without a GPU returns PC_ERR_NO_DEVICE (or PC_ERR_UNSUPPORTED in
 * a build without CUDA); a model too large for the GPU returns PC_ERR_DEVICE_MEMORY. A GPU
 * evaluator runs on the calling thread's current CUDA device at its creation, which it keeps
 * and makes current around each of its calls (restoring the caller's). */
PC_API pc_status pc_evaluator_create(const pc_circuit *circuit, const pc_eval_opts *opts,
                                     pc_evaluator **out);
PC_API void pc_evaluator_free(pc_evaluator *evaluator);

/* Scores n samples, 0 <= n <= max_batch: x is [n, width] host uint8, missing is NULL (all
 * observed) or [n, width] host uint8 (nonzero = marginalise x_v, whose value is then not
 * read); logp is [n] host double, log p(x_observed) in nats (-inf for probability 0).
 * Synchronous. width is the row length of x and missing and must equal the circuit's V:
 * another width is rejected with PC_ERR_DATA before anything is read. An observed value >= C
 * is rejected with PC_ERR_DATA naming the sample and variable. */
PC_API pc_status pc_evaluate(pc_evaluator *evaluator, const uint8_t *x, const uint8_t *missing,
                             int64_t n, int64_t width, double *logp);

/* Peak bytes of device memory this evaluator has held (0 for CPU backends). */
PC_API size_t pc_evaluator_peak_device_bytes(const pc_evaluator *evaluator);

#ifdef __cplusplus
}
#endif

#endif
