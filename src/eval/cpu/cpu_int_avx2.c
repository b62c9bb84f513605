/* The cpu (IntLSE) block kernel built for AVX2 (called only when pc_cpu_best_isa() reports
 * AVX2 or better): each tree step is vi_lse2, one gather of the packed table per 8 lanes. */
#include "lse/lse_vec_avx2.h"

#define PC_INT_BLOCK pc_cpu_int_block_avx2
#include "eval/cpu/cpu_int_kernel.h"
