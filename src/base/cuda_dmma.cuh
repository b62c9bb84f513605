/* The FP64 tensor-core tile (internal), used by the GPU engine's warp and persistent strategies
 * and by GPU EM's fused wavefront. */
#ifndef PC_BASE_CUDA_DMMA_CUH
#define PC_BASE_CUDA_DMMA_CUH

#include <cuda_runtime.h>

/* d += a b for one 16 x 8 x 4S FP64 tile on the tensor cores (mma.m16n8k8 for S = 2,
 * m16n8k16 for S = 4; products and sums in FP64). Lane 4 g + t gives, for its k slots
 * j = 0 .. S - 1 (k = t + 4 j), A[g][k] = a0[j], A[g + 8][k] = a1[j] and B[k][g] = b[j], and
 * holds D[g][2 t + c] in d0[c], D[g + 8][2 t + c] in d1[c]. These shapes run at the FP64
 * tensor cores' full rate, the 8 x 8 x 4 shape (mma.m8n8k4) at half of it (tuning.md#dmma). */
template <int S>
static __device__ __forceinline__ void pc_gpu_dmma16(double (&d0)[2], double (&d1)[2],
                                                     const double *a0, const double *a1,
                                                     const double *b) {
    static_assert(S == 2 || S == 4, "k slots per lane: 2 or 4");
    if constexpr (S == 2)
        asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
            : "+d"(d0[0]), "+d"(d0[1]), "+d"(d1[0]), "+d"(d1[1])
            : "d"(a0[0]), "d"(a1[0]), "d"(a0[1]), "d"(a1[1]), "d"(b[0]), "d"(b[1]));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};"
            : "+d"(d0[0]), "+d"(d0[1]), "+d"(d1[0]), "+d"(d1[1])
            : "d"(a0[0]), "d"(a1[0]), "d"(a0[1]), "d"(a1[1]), "d"(a0[2]), "d"(a1[2]),
              "d"(a0[3]), "d"(a1[3]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}

#endif
