/* The AVX2 CPU path (8 float lanes; compiled with -mavx2 -mfma -mf16c, called only after
 * pc_cpu_best_isa() reports it): lse_cpu_kernel.h over the vocabulary of lse_vec_avx2.h. */
#include "lse/lse_vec_avx2.h"

/* pc_lse_cpu_impl.exp_shifted. Its own per instruction set because AVX2's exp2 (2^k made in the
 * exponent bits) is right only on [-126, 126]: lanes under -126 give 0 (the value the drivers'
 * flush-to-zero mode gives on every path; -inf must give 0) and lanes over 126 go to expf, as
 * does the tail; AVX-512's scalef covers the whole range in the vector. */
static void exp_shifted(const float *x, int64_t n, float shift, float *out) {
    const vf vs = vf_set1(shift), l2e = vf_set1(PC_LOG2E_F);
    const vf lo = vf_set1(-126.0f), hi = vf_set1(126.0f);
    int64_t i = 0;
    for (; i + PC_VEC_W <= n; i += PC_VEC_W) {
        vf t = vf_mul(vf_sub(vf_load(x + i), vs), l2e);
        vf under = _mm256_cmp_ps(t, lo, _CMP_LT_OQ); /* false for NaN */
        vf_store(out + i, _mm256_andnot_ps(under, vf_exp2(t)));
        int over = _mm256_movemask_ps(_mm256_cmp_ps(t, hi, _CMP_GT_OQ));
        for (int l = 0; over; l++, over >>= 1)
            if (over & 1)
                out[i + l] = expf(x[i + l] - shift);
    }
    for (; i < n; i++)
        out[i] = (x[i] - shift) * PC_LOG2E_F < -126.0f ? 0.0f : expf(x[i] - shift);
}

#define PC_LSE_CPU_IMPL pc_lse_cpu_avx2
#include "lse/lse_cpu_kernel.h"
