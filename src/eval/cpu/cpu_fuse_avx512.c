/* The cpu-fuse block kernel built for AVX-512 (called only when pc_cpu_best_isa() reports
 * it): register tiles of 16 outputs x 16 samples (16 of the 32 zmm registers hold sums; each
 * multiply-add takes its weight as an embedded broadcast from memory). */
#include "lse/lse_vec_avx512.h"

#define PC_FUSE_BLOCK pc_cpu_fuse_block_avx512
#define PC_FUSE_JT 16
#include "eval/cpu/cpu_fuse_kernel.h"
