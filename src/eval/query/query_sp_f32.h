/* The FP32 flavour of the sum-product query kernels (cpu-fuse's and cpu's): the branch-free
 * exp and log of query_math.h and FP32 sums checked by pc_cpu_sum_is_safe (the rule of
 * cpu-fuse's forward pass: small sums go to FP64). The including file defines QSP_KERNELS and
 * includes the header of its instruction set first (without one: no FMA, since a * b + c
 * rounds twice). */
#include <math.h>

#include "eval/query/query_math.h"

#define QSP_REAL float
#define QSP_EXP(x) pc_cpu_exp_nonpos(x)
#define QSP_LOG(s) pc_cpu_log_normal(s)
#define QSP_SAFE(s) pc_cpu_sum_is_safe(s)
#ifdef QSP_HAVE_FMA
#define QSP_FMA(a, b, c) fmaf((a), (b), (c))
#else
#define QSP_FMA(a, b, c) ((a) * (b) + (c))
#endif
#include "eval/query/query_sp_kernel.h"
