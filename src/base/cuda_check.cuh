/* The one way CUDA runtime and cuBLAS calls are checked in pcinfer's .cu files.
 *
 * PC_CHECK_GEN(call, ok, status_of, string_of) evaluates `call` once; if it did not return
 * `ok`, it records "<call text> failed (<file>:<line>): <string_of(error)>" through pc_fail,
 * stores status_of(error) in the enclosing function's `pc_status st` and jumps to its `fail:`
 * label, where the function releases what it holds and returns st. Nothing exits.
 *
 *   PC_CUDA_CHECK(call)    the CUDA runtime (this header);
 *   PC_CUBLAS_CHECK(call)  cuBLAS (src/eval/cuda/gemm/cublas_lazy.h, which loads cuBLAS).
 *
 * A CUDA error maps to PC_ERR_DEVICE_MEMORY (an allocation), PC_ERR_NO_DEVICE (no GPU or no
 * driver) or PC_ERR_CUDA. Once recorded, the runtime's last-error slot is cleared: an error
 * already returned must not resurface at the next launch check. Every kernel launch is followed
 * by PC_CUDA_CHECK(cudaGetLastError()). */
#ifndef PC_CUDA_CHECK_CUH
#define PC_CUDA_CHECK_CUH

#include <cuda_runtime.h>
#include <string.h>

#include "base/fail.h"
#include "pc/status.h"

/* File name without its directories: messages stay short and machine-independent. */
static inline const char *pc_check_file_base(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Records a failed call and returns `status`. */
static inline pc_status pc_check_failed(pc_status status, const char *call, const char *file,
                                        int line, const char *why) {
    return pc_fail(status, "%s failed (%s:%d): %s", call, pc_check_file_base(file), line, why);
}

#define PC_CHECK_GEN(call, ok, status_of, string_of)                                          \
    do {                                                                                      \
        const auto pc_check_err_ = (call);                                                    \
        if (pc_check_err_ != (ok)) {                                                          \
            st = pc_check_failed(status_of(pc_check_err_), #call, __FILE__, __LINE__,        \
                                 string_of(pc_check_err_));                                   \
            goto fail;                                                                        \
        }                                                                                     \
    } while (0)

/* The status of a failed CUDA runtime call; clears the last-error slot. */
static inline pc_status pc_cuda_status(cudaError_t err) {
    (void)cudaGetLastError();
    if (err == cudaErrorMemoryAllocation) return PC_ERR_DEVICE_MEMORY;
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) return PC_ERR_NO_DEVICE;
    return PC_ERR_CUDA;
}

#define PC_CUDA_CHECK(call) PC_CHECK_GEN(call, cudaSuccess, pc_cuda_status, cudaGetErrorString)

/* cudaMalloc of `bytes` into *ptr (NULL for 0 bytes, and on failure), whose failure says
 * "<who>: <MiB> MiB of GPU memory for <what>: <CUDA's error>" (base/cuda_util.cu). */
pc_status pc_cuda_alloc_for(void **ptr, size_t bytes, const char *who, const char *what);

#endif
