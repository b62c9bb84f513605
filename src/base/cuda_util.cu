/* pc/cuda.h: device memory, synchronisation, a description of the GPU and event timers, for C
 * tools, tests and ctypes benchmarks that do not include CUDA headers; and the engine's named
 * device allocation (pc_cuda_alloc_for, base/cuda_check.cuh). */
#include <stdio.h>
#include <stdlib.h>

#include "base/cuda_check.cuh"
#include "base/fail.h"
#include "pc/cuda.h"

struct pc_cuda_timer {
    cudaEvent_t start, stop;
};

extern "C" int pc_cuda_available(void) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        cudaGetLastError(); /* clear it: "no device" must not leak into later calls */
        return 0;
    }
    return count > 0;
}

extern "C" int pc_cuda_device_count(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

extern "C" pc_status pc_cuda_set_device(int index) {
    pc_status st = PC_OK;
    if (index < 0) return pc_fail(PC_ERR_ARG, "pc_cuda_set_device: index %d < 0", index);
    const int count = pc_cuda_device_count();
    if (count < 1) return pc_fail(PC_ERR_NO_DEVICE, "pc_cuda_set_device: no GPU found");
    PC_CUDA_CHECK(cudaSetDevice(index % count));
fail:
    return st;
}

extern "C" pc_status pc_cuda_malloc(void **d_ptr, size_t bytes) {
    pc_status st = PC_OK;
    if (!d_ptr) return pc_fail(PC_ERR_ARG, "pc_cuda_malloc: d_ptr is NULL");
    *d_ptr = NULL;
    PC_CUDA_CHECK(cudaMalloc(d_ptr, bytes));
fail:
    return st;
}

pc_status pc_cuda_alloc_for(void **ptr, size_t bytes, const char *who, const char *what) {
    pc_status st = PC_OK;
    *ptr = NULL;
    if (bytes == 0) return PC_OK;
    PC_CUDA_CHECK(cudaMalloc(ptr, bytes));
    return PC_OK;
fail:
    *ptr = NULL;
    char why[256];
    snprintf(why, sizeof why, "%s", pc_last_error());
    return pc_fail(st, "%s: %.1f MiB of GPU memory for %s: %s", who, bytes / 1048576.0, what,
                   why);
}

extern "C" void pc_cuda_free(void *d_ptr) {
    if (d_ptr) cudaFree(d_ptr);
}

extern "C" pc_status pc_cuda_memcpy_h2d(void *d_dst, const void *src, size_t bytes) {
    pc_status st = PC_OK;
    if (bytes && (!d_dst || !src)) return pc_fail(PC_ERR_ARG, "pc_cuda_memcpy_h2d: NULL pointer");
    PC_CUDA_CHECK(cudaMemcpy(d_dst, src, bytes, cudaMemcpyHostToDevice));
fail:
    return st;
}

extern "C" pc_status pc_cuda_memcpy_d2h(void *dst, const void *d_src, size_t bytes) {
    pc_status st = PC_OK;
    if (bytes && (!dst || !d_src)) return pc_fail(PC_ERR_ARG, "pc_cuda_memcpy_d2h: NULL pointer");
    PC_CUDA_CHECK(cudaMemcpy(dst, d_src, bytes, cudaMemcpyDeviceToHost));
fail:
    return st;
}

extern "C" pc_status pc_cuda_memset(void *d_ptr, int byte, size_t bytes) {
    pc_status st = PC_OK;
    if (bytes && !d_ptr) return pc_fail(PC_ERR_ARG, "pc_cuda_memset: d_ptr is NULL");
    PC_CUDA_CHECK(cudaMemset(d_ptr, byte, bytes));
fail:
    return st;
}

extern "C" pc_status pc_cuda_synchronize(void) {
    pc_status st = PC_OK;
    PC_CUDA_CHECK(cudaDeviceSynchronize());
fail:
    return st;
}

extern "C" pc_status pc_cuda_describe(char *text, size_t len) {
    pc_status st = PC_OK;
    int dev = 0, driver = 0, runtime = 0;
    cudaDeviceProp prop;
    if (!text || len == 0) return pc_fail(PC_ERR_ARG, "pc_cuda_describe: empty text buffer");
    PC_CUDA_CHECK(cudaGetDevice(&dev));
    PC_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    PC_CUDA_CHECK(cudaDriverGetVersion(&driver));
    PC_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    snprintf(text, len, "%s, %d SMs, %.0f MiB, driver %d.%d, runtime %d.%d", prop.name,
             prop.multiProcessorCount, prop.totalGlobalMem / 1048576.0, driver / 1000,
             driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
fail:
    return st;
}

extern "C" pc_status pc_cuda_timer_create(pc_cuda_timer **timer) {
    pc_status st = PC_OK;
    pc_cuda_timer *t = NULL;
    if (!timer) return pc_fail(PC_ERR_ARG, "pc_cuda_timer_create: timer is NULL");
    *timer = NULL;
    t = (pc_cuda_timer *)calloc(1, sizeof(*t));
    if (!t) return pc_fail(PC_ERR_NOMEM, "pc_cuda_timer_create: out of memory");
    PC_CUDA_CHECK(cudaEventCreate(&t->start));
    PC_CUDA_CHECK(cudaEventCreate(&t->stop));
    *timer = t;
    t = NULL;
fail:
    pc_cuda_timer_free(t);
    return st;
}

extern "C" pc_status pc_cuda_timer_start(pc_cuda_timer *timer, pc_stream stream) {
    pc_status st = PC_OK;
    if (!timer) return pc_fail(PC_ERR_ARG, "pc_cuda_timer_start: timer is NULL");
    PC_CUDA_CHECK(cudaEventRecord(timer->start, (cudaStream_t)stream));
fail:
    return st;
}

extern "C" pc_status pc_cuda_timer_stop(pc_cuda_timer *timer, pc_stream stream) {
    pc_status st = PC_OK;
    if (!timer) return pc_fail(PC_ERR_ARG, "pc_cuda_timer_stop: timer is NULL");
    PC_CUDA_CHECK(cudaEventRecord(timer->stop, (cudaStream_t)stream));
fail:
    return st;
}

extern "C" pc_status pc_cuda_timer_elapsed_ms(pc_cuda_timer *timer, float *ms) {
    pc_status st = PC_OK;
    if (!timer || !ms) return pc_fail(PC_ERR_ARG, "pc_cuda_timer_elapsed_ms: NULL argument");
    PC_CUDA_CHECK(cudaEventSynchronize(timer->stop));
    PC_CUDA_CHECK(cudaEventElapsedTime(ms, timer->start, timer->stop));
fail:
    return st;
}

extern "C" void pc_cuda_timer_free(pc_cuda_timer *timer) {
    if (!timer) return;
    if (timer->start) cudaEventDestroy(timer->start);
    if (timer->stop) cudaEventDestroy(timer->stop);
    free(timer);
}
