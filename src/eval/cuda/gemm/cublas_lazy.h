/* cuBLAS for the gemm backend, loaded at run time (internal), so that libpcinfer.so loads and
 * runs its other paths on a machine without cuBLAS (or without CUDA at all).
 *
 * pc_cublas_load() opens "libcublas.so.<CUBLAS_VER_MAJOR>" with dlopen, the soname of the
 * cuBLAS this library was compiled against: within one major version its ABI, so the
 * signatures resolved below, is stable, and a different major may differ. It falls back to the
 * unversioned "libcublas.so" (a toolkit's development link on the library path). It resolves
 * the functions the gemm backend calls, once per process (thread-safe); the library stays open.
 * Without cuBLAS it returns PC_ERR_UNSUPPORTED naming what was looked for. */
#ifndef PC_CUBLAS_LAZY_H
#define PC_CUBLAS_LAZY_H

#include <cublas_api.h>

#include "base/cuda_check.cuh"

typedef struct pc_cublas {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetMathMode) set_math_mode;
    decltype(&cublasSetWorkspace_v2) set_workspace;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
    decltype(&cublasGetStatusString) status_string;
} pc_cublas;

pc_status pc_cublas_load(const pc_cublas **api);

/* The loaded cuBLAS's words for a status (after a successful pc_cublas_load). */
const char *pc_cublas_string(cublasStatus_t status);

/* The status of a failed cuBLAS call. */
static inline pc_status pc_cublas_status(cublasStatus_t status) {
    return status == CUBLAS_STATUS_ALLOC_FAILED ? PC_ERR_DEVICE_MEMORY : PC_ERR_CUDA;
}

#define PC_CUBLAS_CHECK(call)                                                                 \
    PC_CHECK_GEN(call, CUBLAS_STATUS_SUCCESS, pc_cublas_status, pc_cublas_string)

#endif
