/* The sum layers' device log (gpu_log.h) applied to host arrays, so that a test can check the
 * GPU's version of it value by value: it differs from the C version (the special-function
 * unit's log2 of the mantissa, subnormals as 0). */
#include <cuda_runtime.h>

#include "layers/gpu_log.h"

static __global__ void log_kernel(const float *x, float *y, int64_t n, int nonneg) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = nonneg ? pc_gpu_log_nonneg(x[i]) : pc_gpu_log(x[i]);
}

extern "C" pc_status pc_gpu_log_apply(const float *x, float *y, int64_t n, int nonneg) {
    pc_status st = PC_OK;
    float *d = NULL;
    cudaError_t e = cudaSuccess;
    if (n < 0 || (n > 0 && (!x || !y)))
        return pc_fail(PC_ERR_ARG, "pc_gpu_log_apply: n = %lld needs x and y", (long long)n);
    if (n == 0) return PC_OK;
    const size_t bytes = (size_t)n * sizeof(float);
    if ((e = cudaMalloc((void **)&d, 2 * bytes)) != cudaSuccess) goto fail;
    if ((e = cudaMemcpy(d, x, bytes, cudaMemcpyHostToDevice)) != cudaSuccess) goto fail;
    log_kernel<<<256, 256>>>(d, d + n, n, nonneg);
    if ((e = cudaGetLastError()) != cudaSuccess) goto fail;
    if ((e = cudaMemcpy(y, d + n, bytes, cudaMemcpyDeviceToHost)) != cudaSuccess) goto fail;
fail:
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        st = pc_fail(e == cudaErrorMemoryAllocation ? PC_ERR_DEVICE_MEMORY : PC_ERR_CUDA,
                     "pc_gpu_log_apply: %s", cudaGetErrorString(e));
    }
    cudaFree(d);
    return st;
}
