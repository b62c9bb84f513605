/* The queries on the CPU (internal): state, tables, block driver and the block kernels.
 *
 * Passes over the compiled circuit (pc/circuit.h: groups in evaluation order, children before
 * parents, the root last), per block of B samples:
 *   upward (sum-product)  P_g(k) = inputs + child messages, kept as d_g = P_g - max_k P_g
 *                         (FP64 offset moff per group and sample), msg_g(j) = LSE_k(w + P_g)
 *   downward (posterior)  lpost_root(k) = root_logw(k) + P_root(k) - log p(e)
 *                         lpost_c(k) = P_c(k) + LSE_j(lpost_p(j) - msg_c(j) + w_c(j, k))
 *   conditionals          p(X_v = c | e) = sum_k post_g(k) p(X_v = c | Z_g = k) for missing v
 *   sampling              Z_root ~ root_w P_root, Z_c | Z_p = j ~ w_c(j, .) P_c, X_v | Z ~ input
 *   MPE (FP64)            max-product upward, backtracking from the root (query_mpe.c)
 * The sum-product passes come in two flavours, FP64 (ref) and FP32 with FP64 offsets
 * (cpu-fuse, cpu), from one kernel file (query_sp_kernel.h). */
#ifndef PC_EVAL_QUERY_H
#define PC_EVAL_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "pc/circuit.h"
#include "pc/eval.h"
#include "pc/rng.h"
#include "pc/status.h"

typedef enum pc_query_flavour { PC_QUERY_F64 = 0, PC_QUERY_F32 = 1 } pc_query_flavour;

/* One call's arguments, shared by every block (rows b0 .. b0 + nb - 1 of each array). */
typedef struct pc_query_job {
    const uint8_t *x;       /* [n, V]; NULL when sampling from p(x) */
    const uint8_t *missing; /* [n, V] or NULL */
    double *probs64;        /* [n, V, C] conditionals, or NULL */
    float *probs32;         /* [n, V, C] conditionals, or NULL */
    double *logp;           /* [n] or NULL */
    uint8_t *out;           /* [n, V] MPE completions or samples */
    uint64_t seed;
    int64_t first;          /* stream index of row 0 */
    int64_t bad_row;        /* sampling: first row whose evidence has probability 0, or -1 */
} pc_query_job;

typedef struct pc_query_state pc_query_state;

/* Runs one block of nb <= block samples starting at row b0 with one thread's scratch. */
typedef void (*pc_query_block_fn)(const pc_query_state *s, void *scratch, int64_t b0,
                                  int64_t nb, pc_query_job *job);

/* The sum-product block kernels of one flavour and instruction set. */
typedef struct pc_query_kernels {
    pc_query_block_fn conditionals;
    pc_query_block_fn sample;
} pc_query_kernels;

extern const pc_query_kernels pc_query_kernels_f64_base;
extern const pc_query_kernels pc_query_kernels_f64_avx2;
extern const pc_query_kernels pc_query_kernels_f64_avx512;
extern const pc_query_kernels pc_query_kernels_f32_base;
extern const pc_query_kernels pc_query_kernels_f32_avx2;
extern const pc_query_kernels pc_query_kernels_f32_avx512;

/* Byte offsets of one thread's scratch buffers (each 64-byte aligned). */
typedef struct pc_query_layout {
    size_t d, msg;  /* real [G, B, K]: d_g, then msg_g (overwritten by lpost_g downward) */
    size_t moff;    /* double [G, B] */
    size_t logp;    /* double [B] */
    size_t pm;      /* double [G, B, K] MPE: max-product P_g (shares the space of d and msg) */
    size_t wide;    /* double [max(K, C)] */
    size_t exact;   /* double [K]: exact FP64 sums, the sampler's cumulative weights */
    size_t lam;     /* real [K] */
    size_t e, sum;  /* real [k_pad] each */
    size_t acc;     /* real [max(k_pad, C)] */
    size_t row;     /* real [C]: one row of conditionals */
    size_t z;       /* int32 [G] latent states of one sample */
    size_t total;
} pc_query_layout;

struct pc_query_state {
    const pc_circuit *c;
    pc_query_flavour flavour;
    size_t real_bytes; /* 8 (FP64) or 4 (FP32) */
    int threads;
    int64_t block;
    int64_t k_pad; /* K rounded up to a multiple of 16 (the kernels' tile of outputs) */
    pc_query_kernels kern;
    pc_query_layout lay;
    void **scratch; /* [threads] */
    /* Sum-product tables in the flavour's real type (pc_query_need_sum_product). */
    void *in_rel;     /* [V, C + 1, K] input_logp[v, k, c] - in_off[v, c]; c = C: the marginal
                         LSE_c, the input term of a missing value */
    double *in_off;   /* [V, C + 1] max_k of the row */
    void *w_up;       /* [T, K (k), k_pad (j)] exp(trans_logw[t, j, k]), 0 for j >= K */
    void *w_down;     /* [T, K (j), k_pad (k)] exp(trans_logw[t, j, k]), 0 for k >= K */
    void *root_exp;   /* [K] */
    void *cond;       /* [V, K, C] p(X_v = c | Z = k) (pc_query_need_conditionals) */
    /* FP64 for every flavour. */
    double *mpe_in;    /* [V, C + 1, K] input_logp[v, k, c]; c = C: max_c (pc_query_need_mpe) */
    double *mpe_w_t;   /* [T, K (k), K (j)] trans_logw[t, j, k]: elementwise max over j */
    uint8_t *mpe_arg;  /* [V, K] lowest argmax_c input_logp[v, k, c] */
    double *x_cdf;     /* [V, K, C] cumulative p(X_v = c | Z = k) (pc_query_need_sampling) */
    double *root_cdf;  /* [K] cumulative prior of Z_root */
    double *prior_cdf; /* [G, K (j), K (k)] cumulative p(Z_g = k | Z_parent(g) = j) */
};

/* Tables a query needs, built on its first call (PC_ERR_NOMEM when memory runs out). */
pc_status pc_query_need_sum_product(pc_query_state *s);
pc_status pc_query_need_conditionals(pc_query_state *s);
pc_status pc_query_need_mpe(pc_query_state *s);
pc_status pc_query_need_sampling(pc_query_state *s);

/* Runs fn over the n rows in blocks across the state's threads. */
void pc_query_run_blocks(const pc_query_state *s, pc_query_block_fn fn, int64_t n,
                         pc_query_job *job);

/* The FP64 block kernels shared by every flavour. */
void pc_query_mpe_block(const pc_query_state *s, void *scratch, int64_t b0, int64_t nb,
                        pc_query_job *job);
void pc_query_prior_sample_block(const pc_query_state *s, void *scratch, int64_t b0,
                                 int64_t nb, pc_query_job *job);

/* Records that row `row` has evidence of probability 0 (keeps the lowest such row). */
void pc_query_mark_bad_row(pc_query_job *job, int64_t row);

/* The random stream of sample `index` under `seed`: the seed and the index are each mixed
 * through splitmix64, so neighbouring indices get unrelated streams. */
static inline pc_rng pc_query_stream(uint64_t seed, int64_t index) {
    pc_rng r;
    pc_rng_init(&r, seed);
    pc_rng_init(&r, pc_rng_u64(&r) ^ (uint64_t)index);
    pc_rng_init(&r, pc_rng_u64(&r));
    return r;
}

/* The lowest i < n with cdf[i] > u * cdf[n - 1] (u uniform in [0, 1)): a draw from the
 * distribution whose cumulative sums cdf holds (cdf[n - 1] > 0); entries of probability 0
 * are never drawn. */
static inline int32_t pc_query_draw_cdf(const double *cdf, int32_t n, pc_rng *rng) {
    const double target = pc_rng_unit(rng) * cdf[n - 1];
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] > target) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

#endif
