/* The queries on the GPU (internal): conditionals, MPE and both samplers for every GPU backend
 * (fuse, int, gemm), in FP64, over the evaluator's circuit as compiled.
 *
 * Passes, per chunk of n samples (node values [n][G][K] doubles, absolute log values):
 *   gather     P_g(b, k) = sum_{v in vars(g)} in[v][x_bv or C][k], in the order of vars(g)
 *   upward     P_g += the children's msg_c, in child order; then
 *                MPE:          msg_g(j) = max_k (trans_logw[t, j, k] + P_g(k)), and the lowest
 *                              k attaining it
 *                sum-product:  msg_g(j) = m + log sum_k exp(trans_logw[t, j, k]) e^{P_g(k) - m}
 *   downward   MPE: z_g = that argmax at z_parent, from the root; conditionals: posteriors
 *              lpost_g (over msg_g) and their normalised exp (over P_g); samplers: ancestral
 *              draws of Z_g, then of every missing value at once
 * exactly as docs/queries.md states them. The MPE tables and additions are the CPU's, in the
 * CPU's order, so the GPU's MPE is ref's bit for bit. Sum-product sums that underflow (below
 * 2^-960, as ref) are recomputed as an exact LSE.
 *
 * Device. A query state runs on its evaluator's device (the GPU backend's), which it makes
 * current around each call. Calls are synchronous; one stream per state. */
#ifndef PC_GPU_QUERY_CUH
#define PC_GPU_QUERY_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "eval/cuda/query/gpu_query_plan.h"
#include "pc/circuit.h"
#include "pc/status.h"

/* Everything a query kernel reads, by value (device pointers; NULL where a query does not use
 * a field). */
struct pc_gq_args {
    const pc_gpu_query_group *groups; /* [G] */
    const int32_t *layer_start;       /* [L + 1] */
    const int32_t *vars;              /* [V] the circuit's group_vars */
    const int32_t *children;          /* [G - 1] the circuit's group_children */
    const int32_t *var_group;         /* [V] */
    const int32_t *var_draw;          /* p(x) sampler: [V] draw number of X_v */
    const int32_t *range_start;       /* [ranges + 1] the gather's group ranges */
    const double *in;         /* [V][C + 1][K]: MPE's (row C: max) or sum-product's (LSE) */
    const double *logw;       /* [T][K (j)][K (k)] trans_logw */
    const double *logw_t;     /* MPE: [T][K (k)][K (j)] trans_logw */
    const double *wexp;       /* sum-product: [T][j][k] exp(trans_logw) (downward) */
    const double *wexp_t;     /* sum-product: [T][k][j] exp(trans_logw) (upward) */
    const double *root_logw;  /* [K] */
    const double *root_exp;   /* sum-product: [K] */
    const uint8_t *arg;       /* MPE: [V][K] lowest argmax_c input_logp[v, k, c] */
    const double *x_cdf;      /* samplers: [V][K][C] */
    const double *root_cdf;   /* p(x) sampler: [K] */
    const double *prior_cdf;  /* p(x) sampler: [G][K (j)][K (k)] */
    const uint8_t *x;         /* [n][V] */
    const uint8_t *missing;   /* [n][V] or NULL */
    double *P, *M;            /* [n][G][K]: P_g, msg_g (downward: posteriors) */
    uint16_t *zarg;           /* MPE: [n][G][K] the lowest argmax_k of msg_g(j) at [.][.][j] */
    int32_t *z;               /* [n][G] latent states, where they are not in shared memory */
    int32_t *draw;            /* conditional sampler: [n][G] draw number of Z_g */
    int32_t *rank;            /* conditional sampler: [n][V] a missing value's place among its
                                 group's missing values */
    double *logp;             /* [n] */
    uint8_t *out;             /* [n][V] completions or samples */
    unsigned long long *bad;  /* conditional sampler: lowest row of probability 0 */
    uint64_t seed;
    int64_t row0;             /* the chunk's first row in the call */
    int64_t first;            /* stream index of the call's row 0 */
    int32_t n, V, C, K, G, L;
    int32_t ranges;           /* the gather's ranges */
    int32_t rows;             /* samples per block */
    int32_t team;             /* lanes per (group, sample) item */
    int32_t z_shared;         /* the block's latent states [rows][G] in shared memory, after
                                 the teams' (else in z) */
    int32_t half_c, half_k;   /* pc_gpu_query_half(C), pc_gpu_query_half(K) */
};

/* The tree kernels' launch: grid ceil(n / rows) blocks of shape.threads, shape.smem bytes plus
 * the latent states where they fit (pc_gq_smem_bytes). */
struct pc_gq_launch {
    pc_gpu_query_shape shape;
    int32_t sms;
};

/* Shared memory of the block of a kernel with (teams = 1) or without the teams' vectors, and
 * its launch: ceil(n / rows) blocks of shape.threads (teams) or PC_GQ_FLAT_THREADS threads, the
 * kernel taking a pc_gq_args (gpu_query_launch.cu). */
size_t pc_gq_smem_bytes(const pc_gq_launch *l, const pc_gq_args *a, int teams);
pc_status pc_gq_launch_kernel(const void *kernel, const pc_gq_launch *l, const pc_gq_args *a,
                              int teams, cudaStream_t stream);

/* Threads per block of the kernels without teams (the p(x) sampler). */
#define PC_GQ_FLAT_THREADS 256

/* The latent states go to shared memory while the block's shared memory stays within this. */
#define PC_GQ_Z_SMEM_MAX (48 * 1024)

/* Each queues its kernels for the chunk described by a on stream `stream`. */
pc_status pc_gq_launch_mpe(const pc_gq_launch *l, const pc_gq_args *a, cudaStream_t stream);
/* probs: [n][V][C] device float (f64 = 0) or double (f64 = 1); cond the matching table. */
pc_status pc_gq_launch_conditionals(const pc_gq_launch *l, const pc_gq_args *a, cudaStream_t stream,
                                    const void *cond, void *probs, int f64);
pc_status pc_gq_launch_sample_conditional(const pc_gq_launch *l, const pc_gq_args *a,
                                          cudaStream_t stream);
pc_status pc_gq_launch_sample_prior(const pc_gq_launch *l, const pc_gq_args *a,
                                    cudaStream_t stream);

/* The largest K whose posteriors the conditionals' output kernel holds for one sample. */
#define PC_GQ_OUT_MAX_K 6144

#endif
