/* Vector operations written once over the vocabulary of lse_vec_avx2.h or lse_vec_avx512.h
 * (included at the end of each, so PC_VEC_W lanes of vf / vi are defined here). */
#ifndef PC_LSE_VEC_H
#define PC_LSE_VEC_H

#include "lse/lse_cpu.h"

/* pc_int_lse2 on every lane, with one gather of the packed table (pc_int_correction_packed:
 * the same integers). */
static inline vi vi_lse2(vi a, vi b, const uint32_t *packed) {
    vi hi = vi_max(a, b), lo = vi_min(a, b);
    vi d = vi_min(vi_sub(hi, lo), vi_set1(PC_INT_D_MAX));
    vi p = vi_gather(packed, vi_srli(d, PC_INT_TABLE_SHIFT));
    vi t = vi_and(d, vi_set1((1 << PC_INT_TABLE_SHIFT) - 1));
    vi f0 = vi_and(p, vi_set1((1 << PC_INT_PACK_BITS) - 1));
    vi df = vi_srli(p, PC_INT_PACK_BITS);
    /* df < 2^9 and t < 2^10 sit in the low 16 bits of each lane: one multiply-add of 16-bit
     * pairs (high halves zero) gives df * t exactly, cheaper than a 32-bit multiply. */
    vi r = vi_add(vi_madd16(df, t), vi_set1(1 << (PC_INT_TABLE_SHIFT - 1)));
    return vi_add(hi, vi_sub(f0, vi_srai(r, PC_INT_TABLE_SHIFT)));
}

#endif
