/* cuBLAS for GPU EM (internal): the engine's run-time loader (src/eval/cuda/gemm/cublas_lazy.h)
 * opens the library and resolves what the gemm backend needs; this adds the FP64 batched GEMM
 * from the same, already loaded library. PC_ERR_UNSUPPORTED without cuBLAS. */
#ifndef PC_LEARN_EM_BLAS_H
#define PC_LEARN_EM_BLAS_H

#include "eval/cuda/gemm/cublas_lazy.h"

typedef struct pc_em_blas {
    const pc_cublas *base; /* create, destroy, set_stream, set_workspace, sgemm_strided_batched */
    decltype(&cublasDgemmStridedBatched) dgemm_strided_batched;
} pc_em_blas;

pc_status pc_em_blas_load(const pc_em_blas **api);

#endif
