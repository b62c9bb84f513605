/* PC_CUDA_CHECK: the one way CUDA and cuBLAS calls are checked in pcinfer's .cu files.
 *
 * A failing call records "<call text> failed (<file>:<line>): <error string>" through pc_fail
 * with PC_ERR_CUDA, stores that code in the enclosing function's `pc_status st`, and jumps to its
 * `cleanup:` label, so device memory and events are released on every path and nothing exits.
 * The runtime's last-error slot is cleared once the error is recorded: otherwise an error that
 * was already returned would be reported again by the next cudaGetLastError() after a launch.
 * Kernel launches are followed by PC_CUDA_CHECK(cudaGetLastError()). */
#ifndef PC_CUDA_CHECK_CUH
#define PC_CUDA_CHECK_CUH

#include <cuda_runtime.h>
#include <string.h>

#include "base/fail.h"
#include "pc/status.h"

/* File name without its directories: messages stay short and machine-independent. */
static inline const char *pc_cuda_file_base(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

#define PC_CUDA_CHECK(call)                                                                   \
    do {                                                                                      \
        cudaError_t pc_cuda_err_ = (call);                                                    \
        if (pc_cuda_err_ != cudaSuccess) {                                                    \
            st = pc_fail(PC_ERR_CUDA, "%s failed (%s:%d): %s", #call,                         \
                         pc_cuda_file_base(__FILE__), __LINE__,                               \
                         cudaGetErrorString(pc_cuda_err_));                                   \
            cudaGetLastError(); /* reported: do not let it resurface at a later launch check */ \
            goto cleanup;                                                                     \
        }                                                                                     \
    } while (0)

#endif
