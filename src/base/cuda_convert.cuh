/* FP32 <-> FP64 conversions for kernels built with --use_fast_math (internal).
 *
 * Under --use_fast_math a plain cast is a conversion wrapped in flush-to-zero fix-ups: an FMUL
 * after FP64 -> FP32, a compare and a select around FP32 -> FP64, three or four instructions
 * for one. These are the bare PTX conversions: an FP32 subnormal is kept (more exactly) by
 * FP64 arithmetic and flushed by the next FTZ instruction that takes it. In GPU EM's fused
 * K = 16 kernels (FP32 storage, H200) the fix-ups were 14-17 % of the executed instructions. */
#ifndef PC_BASE_CUDA_CONVERT_CUH
#define PC_BASE_CUDA_CONVERT_CUH

#include <cuda_runtime.h>

static __device__ __forceinline__ double pc_gpu_f2d(float x) {
    double r;
    asm("cvt.f64.f32 %0, %1;" : "=d"(r) : "f"(x));
    return r;
}
static __device__ __forceinline__ float pc_gpu_d2f(double x) {
    float r;
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(x));
    return r;
}

/* A stored value of type T as FP64, and FP64 rounded to T (to nearest, even). */
static __device__ __forceinline__ double pc_gpu_widen(double x) { return x; }
static __device__ __forceinline__ double pc_gpu_widen(float x) { return pc_gpu_f2d(x); }
template <typename T> static __device__ __forceinline__ T pc_gpu_narrow(double x);
template <> __device__ __forceinline__ double pc_gpu_narrow<double>(double x) { return x; }
template <> __device__ __forceinline__ float pc_gpu_narrow<float>(double x) {
    return pc_gpu_d2f(x);
}

/* x rounded to T and back: the value the next step reads once x is stored as T. */
template <typename T> static __device__ __forceinline__ double pc_gpu_round(double x) {
    return pc_gpu_widen(pc_gpu_narrow<T>(x));
}

#endif
