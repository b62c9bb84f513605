/* The cpu (IntLSE) backend's state and its block kernels (one per instruction set;
 * internal). */
#ifndef PC_LAYERS_CPU_INT_H
#define PC_LAYERS_CPU_INT_H

#include <stdint.h>

#include "lse/lse_cpu.h"
#include "eval/cpu/cpu_common.h"
#include "lse/lse_int.h"
#include "pc/circuit.h"

/* Outputs of a sum layer that share one vector lane group: rows of the weight and tree
 * buffers are padded to a multiple of this. */
#define PC_INT_LANES 16

typedef struct pc_cpu_int_state {
    const pc_circuit *c;
    int threads;
    int64_t block;
    const int32_t *table;   /* IntLSE correction table, and the same packed for one lookup per */
    const uint32_t *packed; /* step (PC_INT_PACK_BITS): the process-wide pc_lse_int_table() */
    int64_t k_pad;          /* K rounded up to a multiple of PC_INT_LANES */
    int32_t *in_q;          /* [V, C + 1, K]; category C = missing (the marginal) */
    double *in_off;         /* [V, C + 1] nats */
    int32_t *w_qt;          /* [T, K (k), k_pad (j)]: trans_logw[t, j, k] in Q16.16 log2 units,
                               transposed so that one tree step runs across all outputs j;
                               PC_INT_FLOOR for j >= K */
    int32_t *root_q;        /* [K] */
    pc_cpu_thread_bufs bufs; /* int32 scratch: msg [G, B, K], d [K], tree [K, k_pad];
                                double offsets: moff [G, B]; int64 wide: P [K] */
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
