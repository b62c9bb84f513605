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

static __global__ void log_d_kernel(const double *x, float *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = pc_gpu_log_nonneg_d(x[i]);
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

extern "C" pc_status pc_gpu_log_d_apply(const double *x, float *y, int64_t n) {
    pc_status st = PC_OK;
    double *dx = NULL;
    float *dy = NULL;
    cudaError_t e = cudaSuccess;
    if (n < 0 || (n > 0 && (!x || !y)))
        return pc_fail(PC_ERR_ARG, "pc_gpu_log_d_apply: n = %lld needs x and y", (long long)n);
    if (n == 0) return PC_OK;
    if ((e = cudaMalloc((void **)&dx, (size_t)n * sizeof(double))) != cudaSuccess) goto fail;
    if ((e = cudaMalloc((void **)&dy, (size_t)n * sizeof(float))) != cudaSuccess) goto fail;
    if ((e = cudaMemcpy(dx, x, (size_t)n * sizeof(double), cudaMemcpyHostToDevice)) != cudaSuccess)
        goto fail;
    log_d_kernel<<<256, 256>>>(dx, dy, n);
    if ((e = cudaGetLastError()) != cudaSuccess) goto fail;
    if ((e = cudaMemcpy(y, dy, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess)
        goto fail;
fail:
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        st = pc_fail(e == cudaErrorMemoryAllocation ? PC_ERR_DEVICE_MEMORY : PC_ERR_CUDA,
                     "pc_gpu_log_d_apply: %s", cudaGetErrorString(e));
    }
    cudaFree(dx);
    cudaFree(dy);
    return st;
}
