/* The cpu (IntLSE) block kernel built for AVX2 (called only when pc_cpu_best_isa() reports
 * AVX2 or better). The tree step looks the correction up with one gather of the packed table
 * per 8 lanes; the integers are those of pc_int_correction_packed. */
#include <immintrin.h>
#include <stdint.h>

#include "eval/cpu/cpu_int.h"

static inline void tree_step_avx2(int32_t *a, const int32_t *o, int64_t n,
                                  const uint32_t *packed) {
    const __m256i dmax = _mm256_set1_epi32(PC_INT_D_MAX);
    const __m256i tmask = _mm256_set1_epi32((1 << PC_INT_TABLE_SHIFT) - 1);
    const __m256i f0mask = _mm256_set1_epi32((1 << PC_INT_PACK_BITS) - 1);
    const __m256i round = _mm256_set1_epi32(1 << (PC_INT_TABLE_SHIFT - 1));
    for (int64_t j = 0; j < n; j += 8) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(a + j));
        __m256i y = _mm256_loadu_si256((const __m256i *)(o + j));
        __m256i hi = _mm256_max_epi32(x, y), lo = _mm256_min_epi32(x, y);
        __m256i d = _mm256_min_epi32(_mm256_sub_epi32(hi, lo), dmax);
        __m256i p = _mm256_i32gather_epi32((const int *)packed,
                                           _mm256_srli_epi32(d, PC_INT_TABLE_SHIFT), 4);
        __m256i f0 = _mm256_and_si256(p, f0mask), df = _mm256_srli_epi32(p, PC_INT_PACK_BITS);
        __m256i r = _mm256_add_epi32(_mm256_mullo_epi32(df, _mm256_and_si256(d, tmask)), round);
        r = _mm256_srai_epi32(r, PC_INT_TABLE_SHIFT);
        _mm256_storeu_si256((__m256i *)(a + j), _mm256_add_epi32(hi, _mm256_sub_epi32(f0, r)));
    }
}

#define PC_INT_TREE_STEP tree_step_avx2
#define PC_INT_BLOCK pc_cpu_int_block_avx2
#include "eval/cpu/cpu_int_kernel.h"
