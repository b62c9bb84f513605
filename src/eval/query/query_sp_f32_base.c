/* FP32 query kernels, baseline build. */
#define QSP_KERNELS pc_query_kernels_f32_base
#include "eval/query/query_sp_f32.h"
