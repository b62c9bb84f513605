/* The AVX-512 CPU path (16 float lanes; compiled with -mavx512f/bw/vl/dq, called only after
 * pc_cpu_best_isa() reports it): lse_cpu_kernel.h over the vocabulary of lse_vec_avx512.h. */
#include "lse/lse_vec_avx512.h"

/* pc_lse_cpu_impl.exp_shifted. Its own per instruction set because the range is handled by
 * the exp2 itself here: scalef gives 0 under the float range and inf over it, so every lane,
 * the tail's too, stays in the vector (AVX2 patches lanes instead). */
static void exp_shifted(const float *x, int64_t n, float shift, float *out) {
    const vf vs = vf_set1(shift), l2e = vf_set1(PC_LOG2E_F);
    int64_t i = 0;
    for (; i + PC_VEC_W <= n; i += PC_VEC_W)
        vf_store(out + i, vf_exp2(vf_mul(vf_sub(vf_load(x + i), vs), l2e)));
    if (i < n)
        vf_store_part(out + i, n - i,
                      vf_exp2(vf_mul(vf_sub(vf_load_part(x + i, n - i, 0.0f), vs), l2e)));
}

#define PC_LSE_CPU_IMPL pc_lse_cpu_avx512
#include "lse/lse_cpu_kernel.h"
