/* The cpu-fuse block kernel built for AVX2 + FMA (called only when pc_cpu_best_isa() reports
 * AVX2 or better). */
#include <math.h>

#define PC_FUSE_BLOCK pc_cpu_fuse_block_avx2
#define PC_FMA(a, b, c) fmaf((a), (b), (c))
#include "eval/cpu/cpu_fuse_kernel.h"
