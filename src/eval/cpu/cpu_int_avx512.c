/* The cpu (IntLSE) block kernel built for AVX-512 (called only when pc_cpu_best_isa() reports
 * it). The tree step looks the correction up with one gather of the packed table per 16
 * lanes; the integers are those of pc_int_correction_packed. */
#include <immintrin.h>
#include <stdint.h>

#include "eval/cpu/cpu_int.h"

static inline void tree_step_avx512(int32_t *a, const int32_t *o, int64_t n,
                                    const uint32_t *packed) {
    const __m512i dmax = _mm512_set1_epi32(PC_INT_D_MAX);
    const __m512i tmask = _mm512_set1_epi32((1 << PC_INT_TABLE_SHIFT) - 1);
    const __m512i f0mask = _mm512_set1_epi32((1 << PC_INT_PACK_BITS) - 1);
    const __m512i round = _mm512_set1_epi32(1 << (PC_INT_TABLE_SHIFT - 1));
    for (int64_t j = 0; j < n; j += 16) {
        __m512i x = _mm512_loadu_si512((const void *)(a + j));
        __m512i y = _mm512_loadu_si512((const void *)(o + j));
        __m512i hi = _mm512_max_epi32(x, y), lo = _mm512_min_epi32(x, y);
        __m512i d = _mm512_min_epi32(_mm512_sub_epi32(hi, lo), dmax);
        __m512i p = _mm512_i32gather_epi32(_mm512_srli_epi32(d, PC_INT_TABLE_SHIFT),
                                           (const void *)packed, 4);
        __m512i f0 = _mm512_and_si512(p, f0mask), df = _mm512_srli_epi32(p, PC_INT_PACK_BITS);
        __m512i r = _mm512_add_epi32(_mm512_mullo_epi32(df, _mm512_and_si512(d, tmask)), round);
        r = _mm512_srai_epi32(r, PC_INT_TABLE_SHIFT);
        _mm512_storeu_si512((void *)(a + j), _mm512_add_epi32(hi, _mm512_sub_epi32(f0, r)));
    }
}

#define PC_INT_TREE_STEP tree_step_avx512
#define PC_INT_BLOCK pc_cpu_int_block_avx512
#include "eval/cpu/cpu_int_kernel.h"
