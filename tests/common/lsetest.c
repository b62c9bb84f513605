/* Helpers for the log-sum-exp tests (see lsetest.h). */
#include "lsetest.h"

#include <math.h>

#include "testutil.h"

void pc_lsetest_encode(pc_dtype dtype, const double *v, int64_t n, void *dst) {
    for (int64_t i = 0; i < n; i++) {
        switch (dtype) {
        case PC_F32:
            ((float *)dst)[i] = (float)v[i];
            break;
        case PC_F16:
            ((uint16_t *)dst)[i] = pc_test_f32_to_f16((float)v[i]);
            break;
        case PC_BF16:
            ((uint16_t *)dst)[i] = pc_test_f32_to_bf16((float)v[i]);
            break;
        case PC_Q10_6:
            ((int16_t *)dst)[i] = pc_test_nats_to_q10_6(v[i]);
            break;
        }
    }
}

int pc_lsetest_isas(pc_isa out[3]) {
    pc_isa best = pc_cpu_best_isa();
    int n = 0;
    for (int isa = PC_ISA_SCALAR; isa <= (int)best; isa++)
        out[n++] = (pc_isa)isa;
    return n;
}

const pc_lsetest_pair pc_lsetest_pairs[5] = {
    {PC_LSE_FUSE, PC_F32}, {PC_LSE_FUSE, PC_F16},  {PC_LSE_FUSE, PC_BF16},
    {PC_LSE_INT, PC_F32},  {PC_LSE_INT, PC_Q10_6},
};

double pc_lsetest_rel_err(double got, double ref) {
    if (isnan(ref) || isnan(got))
        return isnan(ref) && isnan(got) ? 0.0 : INFINITY;
    if (isinf(ref) || isinf(got))
        return got == ref ? 0.0 : INFINITY;
    return fabs(got - ref) / fmax(1.0, fabs(ref));
}
