/* FP32 query kernels built for AVX2. */
#define QSP_KERNELS pc_query_kernels_f32_avx2
#include "eval/query/query_isa_avx2.h"
#include "eval/query/query_sp_f32.h"
