/* The cpu-fuse backend's state and its block kernels (one per instruction set; internal). */
#ifndef PC_LAYERS_CPU_FUSE_H
#define PC_LAYERS_CPU_FUSE_H

#include <stdint.h>

#include "eval/cpu/cpu_common.h"
#include "pc/circuit.h"

/* Rows of the transposed weights are padded to a multiple of this many outputs (the smallest
 * register tile of the sum layer's product). */
#define PC_FUSE_PAD 4

typedef struct pc_cpu_fuse_state {
    const pc_circuit *c;
    int threads;
    int64_t block;    /* samples per block: a multiple of PC_CPU_LANE_BLOCK */
    pc_cpu_schedule sched;
    float *in_rel;    /* [V, C + 1, K] + PC_CPU_LANE_BLOCK; category C = missing (the
                         marginal) */
    double *in_off;   /* [V, C + 1] */
    int64_t k_pad;    /* K rounded up to a multiple of PC_FUSE_PAD */
    float *w_t;       /* [T, K (k), k_pad (j)]: exp(trans_logw[t, j, k]), transposed so that the
                         weights of consecutive outputs are consecutive; zero for j >= K */
    float *root_exp;  /* [K] */
    /* Per thread, with B = block: float scratch: msg [num_slots, K, B], d [K, B], e [K, B],
     * raw [16 x 16] (a register tile's sums, for its exact fallback), root [B];
     * double offsets: tot [B]; wide (uint16): x [V, B] (category C for a missing value),
     * transposed so that a variable's values of a block are consecutive. */
    pc_cpu_thread_bufs bufs;
    /* The block kernel for this CPU's instruction set. */
    void (*kernel)(void *state, int thread, const uint8_t *x, const uint8_t *missing,
                   int64_t nb, double *logp);
} pc_cpu_fuse_state;

/* Scores nb samples of one block with thread `thread`'s scratch (pc_cpu_block_fn). */
void pc_cpu_fuse_block_base(void *state, int thread, const uint8_t *x, const uint8_t *missing,
                            int64_t nb, double *logp);
void pc_cpu_fuse_block_avx2(void *state, int thread, const uint8_t *x, const uint8_t *missing,
                            int64_t nb, double *logp);
void pc_cpu_fuse_block_avx512(void *state, int thread, const uint8_t *x, const uint8_t *missing,
                              int64_t nb, double *logp);

#endif
