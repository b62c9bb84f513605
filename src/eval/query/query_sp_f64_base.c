/* FP64 query kernels, baseline build. */
#define QSP_KERNELS pc_query_kernels_f64_base
#include "eval/query/query_sp_f64.h"
