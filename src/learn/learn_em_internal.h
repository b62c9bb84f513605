/* EM internals shared by learn_em.c and the per-instruction-set copies of the per-sample
 * kernels (learn_em_kern*.c, all made from learn_em_kern.h). */
#ifndef PC_LEARN_EM_INTERNAL_H
#define PC_LEARN_EM_INTERNAL_H

#include <stdint.h>

#include "pc/learn.h"

/* Rows per chunk: a chunk's transition sums are kept in double, in sample order, and then
 * added to the thread's fixed-point counts. */
#define PC_EM_CHUNK 32

typedef struct pc_em_thread {
    double *e;        /* [V, K] scaled P_v, then e_v */
    double *s;        /* [V, K] message s_v of a child with a transition row */
    int64_t *off;     /* [V] P_v = e_v 2^off[v] (base-2 exponent of the scale) */
    double *q;        /* [V, K] posterior of the latent of v */
    double *tacc;     /* [T, K, K] chunk sums of r(j) e_c(k) */
    int64_t *n_root;  /* [K] fixed-point counts */
    int64_t *n_trans; /* [T, K, K] */
    int64_t *n_input; /* [V, C, K] */
    uint8_t *touched; /* [V, C] 1 when n_input[v, c, :] may be non-zero */
} pc_em_thread;

typedef struct pc_em_kernels {
    /* log p(x) of one sample (-inf if zero); fills t->e, t->s, t->off */
    double (*forward)(const pc_em *em, pc_em_thread *t, const uint8_t *x, const uint8_t *miss);
    /* after forward: posteriors, chunk transition sums, fixed-point input and root counts */
    void (*backward)(const pc_em *em, pc_em_thread *t, const uint8_t *x, const uint8_t *miss,
                     double scale);
} pc_em_kernels;

struct pc_em {
    int32_t num_vars, num_cats, num_latents, num_trans;
    int32_t *parent, *trans; /* [V] copies of the model's structure */
    int32_t *order;          /* [V] breadth-first from the root: parents before children */
    double *root_w;          /* [K] */
    double *trans_w;         /* [T, K, K] W[j, k] = p(Z_v = k | Z_parent = j) */
    double *trans_wt;        /* [T, K, K] the same transposed: wt[k, j] = W[j, k] */
    double *input_w;         /* [V, C, K] (transposed so one observed value is K contiguous) */
    double *ones;            /* [K] the input row of a missing value */
    int num_threads;
    pc_em_thread *thr;
    pc_em_kernels kern;
    /* GPU states: the GPU's own (learn/cuda/em_gpu.h); of the fields above only the sizes,
     * parent and trans are set. */
    struct pc_em_gpu *gpu;
    /* data-parallel EM (pc_em_set_shard): this process among `ranks`, and the sum over them */
    int rank, ranks;
    pc_em_sum_fn sum;
    void *sum_ctx;
    int64_t *host_counts;  /* GPU states in a shard: root [K], trans [T, K, K], input [V, C, K] */
    uint8_t *host_touched; /* [V, C] */
};

/* The counts of a step as host arrays, for the sum over processes. */
typedef struct pc_em_counts {
    int64_t *root, *trans, *input; /* [K], [T, K, K], [V, C, K] */
    uint8_t *touched;              /* [V, C] 1 where input[v, c, :] may be non-zero */
} pc_em_counts;

/* After this process counted rows positions [lo, hi) of the step's n rows (local: how that
 * went), sums over the processes: first the failures and the touched input rows, then the
 * root and transition counts, the touched input rows' counts and the log-likelihood per chunk
 * (sums [chunks], 0 outside this process's chunks). Fails on every process when one failed.
 * learn_em_shard.c. */
pc_status pc_em_shard_sum(pc_em *em, const pc_data *data, const int64_t *rows, int64_t lo,
                          int64_t hi, pc_status local, const pc_em_counts *counts, double *sums,
                          int64_t chunks);

/* The same kernels compiled for three instruction sets. Without reassociation and without
 * FMA contraction (ISO C mode), every copy rounds exactly like the others, so the choice never
 * changes a result. */
extern const pc_em_kernels pc_em_kernels_generic;
extern const pc_em_kernels pc_em_kernels_avx2;
extern const pc_em_kernels pc_em_kernels_avx512;

/* Sets em->kern to the best copy the CPU can run (tests may set em->kern themselves). */
void pc_em_pick_kernels(pc_em *em);

#endif
