/* The cpu-fuse backend's state and its block kernels (one per instruction set; internal). */
#ifndef PC_LAYERS_CPU_FUSE_H
#define PC_LAYERS_CPU_FUSE_H

#include <stdint.h>

#include "eval/cpu/cpu_common.h"
#include "pc/circuit.h"

/* Outputs of a sum layer computed together in registers: one AVX-512 vector, two AVX2 ones. */
#define PC_FUSE_TILE 16

typedef struct pc_cpu_fuse_state {
    const pc_circuit *c;
    int threads;
    int64_t block;
    float *in_rel;    /* [V, C + 1, K]; category C = missing (the marginal) */
    double *in_off;   /* [V, C + 1] */
    int64_t k_pad;    /* K rounded up to a multiple of PC_FUSE_TILE */
    float *w_t;       /* [T, K (k), k_pad (j)]: exp(trans_logw[t, j, k]), transposed for axpy
                         over j; zero for j >= K */
    float *root_exp;  /* [K] */
    pc_cpu_thread_bufs bufs; /* float scratch: msg [G, B, K], d [K], e [K], s [k_pad];
                                double offsets: moff [G, B]; double wide: P [K] */
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
