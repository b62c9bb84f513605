/* Counters between the blocks of one kernel (internal): an item of a persistent kernel
 * raises its counter as a release when its results are stored, and an item that reads them
 * waits on that counter with an acquire. Used by the GPU engine's persistent strategies and
 * by GPU EM's wavefront passes. */
#ifndef PC_BASE_CUDA_COUNTER_CUH
#define PC_BASE_CUDA_COUNTER_CUH

#include <cuda_runtime.h>
#include <stdint.h>

/* Waits until the counter at d reaches need: relaxed polls from L2, NS ns apart, then one
 * acquire load, so that what the counter's release published is visible to this thread (and,
 * after a barrier, to its block). One acquire rather than acquire polls: at GPU scope an
 * acquire invalidates the SM's whole L1 (CCTL.IVALL), every warp's cached lines with it.
 * need by reference: a kernel argument is read where it lives, as in the loop written out. */
template <unsigned NS>
static __device__ __forceinline__ void pc_gpu_acquire_count(const int32_t *d,
                                                            const int &need) {
    int seen;
    for (;;) {
        asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(d) : "memory");
        if (seen >= need) break;
        __nanosleep(NS);
    }
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(d) : "memory");
}

/* Adds v to the counter at d as a release, which pc_gpu_acquire_count's acquire pairs with:
 * the stores this thread made before it, and those of the threads a barrier or __syncwarp
 * just ordered before it, are visible to whoever sees the new count. No fence by every
 * thread. */
static __device__ __forceinline__ void pc_gpu_release_add(int32_t *d, int v) {
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(d), "r"(v) : "memory");
}

#endif
