/* FP64 query kernels built for AVX-512. */
#define QSP_KERNELS pc_query_kernels_f64_avx512
#include "eval/query/query_isa_avx512.h"
#include "eval/query/query_sp_f64.h"
