/* Input data for the log-sum-exp tools: a seeded generator and encoders into each pc_dtype. */
#ifndef PC_TOOLS_LSEDATA_H
#define PC_TOOLS_LSEDATA_H

#include <stddef.h>
#include <stdint.h>

#include "pc/lse.h"

/* Fills v[0:n] with U(lo, hi) draws, or with N(0, sd^2) draws when normal_sd > 0, from a
 * splitmix64 stream seeded with `seed` (the same seed gives the same data). */
void pc_lsedata_fill(uint64_t seed, double lo, double hi, double normal_sd, float *v, size_t n);

/* Writes the floats v[0:n] into dst as `dtype` (f16/bf16: round to nearest even; q10.6:
 * round(x / ln2 * 64) saturated to +-32767, -inf -> INT16_MIN, NaN -> 0). */
void pc_lsedata_encode(pc_dtype dtype, const float *v, size_t n, void *dst);

#endif
