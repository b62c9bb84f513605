/* Small host-side helpers for device memory, synchronisation and timing, so that C tools,
 * tests and Python (ctypes) benchmarks can drive the CUDA kernels without CUDA headers.
 * Every call acts on the calling thread's current CUDA device (cudaSetDevice chooses it).
 * In a build without CUDA every call returns PC_ERR_UNSUPPORTED (pc_cuda_free does nothing). */
#ifndef PC_CUDA_H
#define PC_CUDA_H

#include <stddef.h>

#include "pc/export.h"
#include "pc/lse.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build has CUDA and at least one usable GPU is present, else 0. Never fails. */
PC_API int pc_cuda_available(void);
/* The number of usable GPUs: 0 without CUDA or a GPU. Never fails. */
PC_API int pc_cuda_device_count(void);
/* Makes GPU `index` modulo pc_cuda_device_count() the calling thread's current device, so
 * that what it creates next (evaluators, buffers, timers) lives there: a process's rank on
 * its machine picks its GPU. index >= 0; PC_ERR_NO_DEVICE without a GPU. */
PC_API pc_status pc_cuda_set_device(int index);

PC_API pc_status pc_cuda_malloc(void **d_ptr, size_t bytes);
PC_API void pc_cuda_free(void *d_ptr);
PC_API pc_status pc_cuda_memcpy_h2d(void *d_dst, const void *src, size_t bytes);
PC_API pc_status pc_cuda_memcpy_d2h(void *dst, const void *d_src, size_t bytes);
/* Fills bytes of device memory with `byte` (tests poison outputs with 0xFF = NaN). */
PC_API pc_status pc_cuda_memset(void *d_ptr, int byte, size_t bytes);
PC_API pc_status pc_cuda_synchronize(void);
/* "NVIDIA H200, 132 SMs, driver 13.0, runtime 13.0" or similar. */
PC_API pc_status pc_cuda_describe(char *text, size_t len);

/* Event-based timing on a stream: start, queue work, stop; elapsed waits for the stop event. */
typedef struct pc_cuda_timer pc_cuda_timer;
PC_API pc_status pc_cuda_timer_create(pc_cuda_timer **timer);
PC_API pc_status pc_cuda_timer_start(pc_cuda_timer *timer, pc_stream stream);
PC_API pc_status pc_cuda_timer_stop(pc_cuda_timer *timer, pc_stream stream);
PC_API pc_status pc_cuda_timer_elapsed_ms(pc_cuda_timer *timer, float *ms);
PC_API void pc_cuda_timer_free(pc_cuda_timer *timer);

#ifdef __cplusplus
}
#endif

#endif
