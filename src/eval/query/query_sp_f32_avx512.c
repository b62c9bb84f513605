/* FP32 query kernels built for AVX-512. */
#define QSP_KERNELS pc_query_kernels_f32_avx512
#include "eval/query/query_isa_avx512.h"
#include "eval/query/query_sp_f32.h"
