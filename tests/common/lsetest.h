/* Helpers for the log-sum-exp tests: encoding test rows into each input type, the instruction
 * sets this CPU can run, and error measures against the FP64 reference. */
#ifndef PC_LSETEST_H
#define PC_LSETEST_H

#include <stddef.h>
#include <stdint.h>

#include "pc/lse.h"

/* Writes v[0:n] (nats, double) into dst as `dtype` (f32 cast; f16/bf16 round to nearest even;
 * q10.6 rounds and saturates, -inf -> INT16_MIN, NaN -> 0). NaN and +inf are kept where the
 * type has them; q10.6 has neither. */
void pc_lsetest_encode(pc_dtype dtype, const double *v, int64_t n, void *dst);

/* Fills out with the explicit instruction sets this CPU runs (scalar first); returns the count. */
int pc_lsetest_isas(pc_isa out[3]);

/* The kernel/dtype pairs pc_lse_rows accepts besides ref: fuse f32/f16/bf16, int f32/q10.6. */
typedef struct pc_lsetest_pair {
    pc_lse_kernel kernel;
    pc_dtype dtype;
} pc_lsetest_pair;
extern const pc_lsetest_pair pc_lsetest_pairs[5];

/* |got - ref| / max(1, |ref|), with matching infinities and NaN giving 0 and any other mismatch
 * giving +inf. */
double pc_lsetest_rel_err(double got, double ref);

#endif
