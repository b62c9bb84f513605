/* The cpu (IntLSE) block kernel built for AVX-512 (called only when pc_cpu_best_isa() reports
 * it): each tree step is vi_lse2, one gather of the packed table per 16 lanes. */
#include "lse/lse_vec_avx512.h"

#define PC_INT_BLOCK pc_cpu_int_block_avx512
#include "eval/cpu/cpu_int_kernel.h"
