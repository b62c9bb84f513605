/* The FP64 flavour of the sum-product query kernels (ref's): libm exp and log; a sum is exact
 * enough from 2^-960 up (terms lost below 2^-1074 weigh under K 2^-114 of it). The including
 * file defines QSP_KERNELS and includes the header of its instruction set first. */
#include <math.h>

#define QSP_REAL double
#define QSP_EXP(x) exp(x)
#define QSP_LOG(s) log(s)
#define QSP_SAFE(s) ((s) >= 0x1p-960)
#ifdef QSP_HAVE_FMA
#define QSP_FMA(a, b, c) fma((a), (b), (c))
#else
#define QSP_FMA(a, b, c) ((a) * (b) + (c))
#endif
#include "eval/query/query_sp_kernel.h"
