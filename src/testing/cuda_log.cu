/* The sum layers' device log (gpu_log.h) applied to host arrays (testing.h), so that a test
 * can check the GPU's version of it value by value: it differs from the C version (the
 * special-function unit's log2 of the mantissa, subnormals as 0). */
#include "base/cuda_check.cuh"
#include "base/fail.h"
#include "eval/cuda/gpu_log.h"
#include "testing/testing.h"

/* The logs a test applies: of a float (pc_gpu_log, or pc_gpu_log_nonneg), of a double. */
struct log_of_float {
    int nonneg;
    __device__ float operator()(float x) const {
        return nonneg ? pc_gpu_log_nonneg(x) : pc_gpu_log(x);
    }
};
struct log_of_double {
    __device__ float operator()(double x) const { return pc_gpu_log_nonneg_d(x); }
};

template <typename T, typename Log>
static __global__ void log_kernel(const T *x, float *y, int64_t n, Log log_fn) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = log_fn(x[i]);
}

/* y[i] = log_fn(x[i]) on the GPU for n values in host memory; `name` for the error text. */
template <typename T, typename Log>
static pc_status log_apply(const char *name, const T *x, float *y, int64_t n, Log log_fn) {
    pc_status st = PC_OK;
    void *d = NULL;
    if (n < 0 || (n > 0 && (!x || !y)))
        return pc_fail(PC_ERR_ARG, "%s: n = %lld needs x and y", name, (long long)n);
    if (n == 0) return PC_OK;
    {
        /* One buffer: x (T is at least as aligned as float), then y. */
        const size_t x_bytes = (size_t)n * sizeof(T), y_bytes = (size_t)n * sizeof(float);
        PC_CUDA_CHECK(cudaMalloc(&d, x_bytes + y_bytes));
        PC_CUDA_CHECK(cudaMemcpy(d, x, x_bytes, cudaMemcpyHostToDevice));
        log_kernel<<<256, 256>>>((const T *)d, (float *)((char *)d + x_bytes), n, log_fn);
        PC_CUDA_CHECK(cudaGetLastError());
        PC_CUDA_CHECK(cudaMemcpy(y, (char *)d + x_bytes, y_bytes, cudaMemcpyDeviceToHost));
    }
fail:
    cudaFree(d);
    return st;
}

extern "C" pc_status pc_testing_gpu_log(const float *x, float *y, int64_t n, int nonneg) {
    return log_apply("pc_testing_gpu_log", x, y, n, log_of_float{nonneg});
}

extern "C" pc_status pc_testing_gpu_log_d(const double *x, float *y, int64_t n) {
    return log_apply("pc_testing_gpu_log_d", x, y, n, log_of_double{});
}
