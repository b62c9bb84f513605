/* The cpu-fuse block kernel built for AVX-512 (called only when pc_cpu_best_isa() reports
 * it). */
#include <math.h>

#define PC_FUSE_BLOCK pc_cpu_fuse_block_avx512
#define PC_FMA(a, b, c) fmaf((a), (b), (c))
#include "eval/cpu/cpu_fuse_kernel.h"
