/* The cpu (IntLSE) backend's state and its block kernels (one per instruction set;
 * internal). */
#ifndef PC_LAYERS_CPU_INT_H
#define PC_LAYERS_CPU_INT_H

#include <stdint.h>

#include "kernels/lse_int.h"
#include "pc/circuit.h"

/* Outputs of a sum layer that share one vector lane group: rows of the weight and tree
 * buffers are padded to a multiple of this. */
#define PC_INT_LANES 16

/* The correction table packed for one lookup per step: entry i holds f0 = table[i] (at most
 * 2^16) in bits 0..16 and table[i] - table[i + 1] (at most 510) in bits 17..31. */
#define PC_CPU_INT_PACK_BITS 17
#define PC_CPU_INT_PACKED_LEN (PC_INT_TABLE_LEN - 1)

/* pc_int_correction() from the packed table: the same integers. */
static inline int32_t pc_cpu_int_correction(int32_t d, const uint32_t *packed) {
    d = d < PC_INT_D_MAX ? d : PC_INT_D_MAX;
    uint32_t p = packed[d >> PC_INT_TABLE_SHIFT];
    int32_t f0 = (int32_t)(p & ((1u << PC_CPU_INT_PACK_BITS) - 1));
    int32_t df = (int32_t)(p >> PC_CPU_INT_PACK_BITS);
    int32_t t = d & ((1 << PC_INT_TABLE_SHIFT) - 1);
    return f0 - ((df * t + (1 << (PC_INT_TABLE_SHIFT - 1))) >> PC_INT_TABLE_SHIFT);
}

typedef struct pc_cpu_int_state {
    const pc_circuit *c;
    int threads;
    int64_t block;
    int32_t table[PC_INT_TABLE_LEN];        /* IntLSE correction table (pc_int_table_fill) */
    uint32_t packed[PC_CPU_INT_PACKED_LEN]; /* the same, packed for one lookup per step */
    int64_t k_pad;          /* K rounded up to a multiple of PC_INT_LANES */
    int32_t *in_q;          /* [V, C + 1, K]; category C = missing (the marginal) */
    double *in_off;         /* [V, C + 1] nats */
    int32_t *w_qt;          /* [T, K (k), k_pad (j)]: trans_logw[t, j, k] in Q16.16 log2 units,
                               transposed so that one tree step runs across all outputs j;
                               PC_INT_FLOOR for j >= K */
    int32_t *root_q;        /* [K] */
    int32_t **scratch;      /* per thread: msg [G, B, K], d [K], tree [K, k_pad] */
    int64_t **wide;         /* per thread: P [K] */
    double **offsets;       /* per thread: moff [G, B] */
    void (*kernel)(void *state, int thread, const uint8_t *x, const uint8_t *missing,
                   int64_t nb, double *logp);
} pc_cpu_int_state;

void pc_cpu_int_block_base(void *state, int thread, const uint8_t *x, const uint8_t *missing,
                           int64_t nb, double *logp);
void pc_cpu_int_block_avx2(void *state, int thread, const uint8_t *x, const uint8_t *missing,
                           int64_t nb, double *logp);
void pc_cpu_int_block_avx512(void *state, int thread, const uint8_t *x, const uint8_t *missing,
                             int64_t nb, double *logp);

#endif
