/* The cpu-fuse block kernel built for AVX2 + FMA (called only when pc_cpu_best_isa() reports
 * AVX2 or better): register tiles of 4 outputs x 16 samples (8 of the 16 ymm registers hold
 * sums, 2 the e vectors, 1 the broadcast weight). */
#include "lse/lse_vec_avx2.h"

#define PC_FUSE_BLOCK pc_cpu_fuse_block_avx2
#define PC_FUSE_JT 4
#include "eval/cpu/cpu_fuse_kernel.h"
