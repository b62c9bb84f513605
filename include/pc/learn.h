/* Learning HCLTs from data: mutual information -> Chow-Liu tree -> HCLT structure -> EM.
 *
 *   pc_learn_mutual_info   MI of every pair of variables, on values quantised into a few bins
 *   pc_learn_chow_liu      maximum spanning tree over the MI, rooted at a centre of the tree
 *   pc_learn_hclt_create   the HCLT over that tree (leaves share their parent's latent)
 *   pc_learn_init_params   random initial parameters from a seed (inputs near the data marginals)
 *   pc_em_*                EM: mini-batch steps (step size a < 1) or full-batch steps (a = 1)
 *   pc_learn_loglik        log p(x) per sample, the same forward pass the EM uses
 *   pc_learn_smooth_inputs the learned input rows smoothed along their (ordered) categories
 *
 * All calls are deterministic for given inputs and seed, whatever the number of OpenMP threads:
 * the expected counts are summed in 64-bit fixed point, whose addition is associative.
 * Observed data values must be < num_cats; a missing mask (pc_data.missing) marginalises those
 * values, which are then never read.
 */
#ifndef PC_LEARN_H
#define PC_LEARN_H

#include <stddef.h>
#include <stdint.h>

#include "pc/export.h"
#include "pc/data.h"
#include "pc/hclt.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Mutual information (nats) of every pair of variables of `data`, written to mi [V, V]
 * (symmetric, 0 on the diagonal), on binned values (2 <= num_bins <= 64). The bins follow the
 * values the rows use: when they use at most num_bins distinct values, each value has a bin of
 * its own; else a value x falls into bin x * num_bins / (hi + 1), hi the largest value used.
 * So data of few values (0/1) keeps them apart whatever num_cats is. Missing values are left
 * out of the pair's counts. When data->count > max_rows (> 0), a fixed sample of max_rows rows
 * drawn from `seed` is used (and decides the bins). Observed values must be < num_cats. */
PC_API pc_status pc_learn_mutual_info(const pc_data *data, int32_t num_cats, int32_t num_bins,
                                      int64_t max_rows, uint64_t seed, double *mi);

/* The categories the observed values of a data set use. */
typedef struct pc_category_use {
    int64_t observed;  /* observed (not missing) values */
    int32_t used;      /* distinct observed values */
    int32_t max_value; /* the largest observed value; -1 when none is observed */
} pc_category_use;

/* Counts what the observed values of data use; a value >= num_cats fails with PC_ERR_DATA
 * naming the row and variable. */
PC_API pc_status pc_learn_category_use(const pc_data *data, int32_t num_cats,
                                       pc_category_use *use);

/* When the data uses fewer than num_cats categories, writes a one-line warning (no newline)
 * that says so into text [len] for a tool to print, and returns 1; else writes "" and returns
 * 0. The model still spends a parameter on every category, and its bits/dim are those of a
 * distribution over num_cats values. */
PC_API int pc_learn_category_warning(const pc_category_use *use, int32_t num_cats, char *text,
                                     size_t len);

/* Maximum spanning tree of the complete graph weighted by mi [V, V] (Prim's algorithm; ties go
 * to the lower variable index), rooted at a centre of the tree: a vertex of least eccentricity
 * (the lower index among two centres). Writes parent [V], -1 for the root. */
PC_API pc_status pc_learn_chow_liu(int32_t num_vars, const double *mi, int32_t *parent);

/* Allocates an HCLT over the rooted tree parent [V] with num_cats categories and num_latents
 * latents: every tree leaf (a non-root variable without children) shares its parent's latent
 * (trans_index -1); every other non-root variable gets a trans row, numbered 0..T-1 in
 * increasing variable order. Parameters are uniform. Free with pc_hclt_free. */
PC_API pc_status pc_learn_hclt_create(int32_t num_vars, const int32_t *parent, int32_t num_cats,
                                      int32_t num_latents, pc_hclt **out);

/* Random initial parameters from `seed`: root and transition rows ~ Dirichlet(1) mixed half
 * and half with uniform; input rows = the data's per-variable marginals (smoothed) times a
 * random factor in [0.5, 1.5) per entry, renormalised. `data` may be NULL (uniform marginals). */
PC_API pc_status pc_learn_init_params(pc_hclt *model, const pc_data *data, uint64_t seed);

/* log p(x) in nats of every sample of data, written to logp [data->count]; samples of zero
 * probability get -inf. */
PC_API pc_status pc_learn_loglik(const pc_hclt *model, const pc_data *data, double *logp);

/* EM state: the parameters in the probability domain plus count buffers, on the CPU (one set
 * per OpenMP thread) or on a GPU. One thread at a time may use a state. */
typedef struct pc_em pc_em;

/* Where EM runs. */
typedef enum pc_em_device { PC_EM_CPU = 0, PC_EM_CUDA = 1 } pc_em_device;

/* Options of pc_em_create_opts; all zero is EM on the CPU. */
typedef struct pc_em_opts {
    pc_em_device device;
    /* CUDA: 1 keeps the per-node values and messages in FP32 (products, posteriors and counts
     * are still formed in FP64; faster, parameters within about 1e-5 of FP64's after a step);
     * 0 keeps them in FP64. */
    int f32;
    /* CUDA: rows per forward/backward pass, > 0; 0 = up to 8192 as the GPU's memory allows. */
    int64_t max_chunk;
    /* CUDA: the GPU, this number modulo the GPUs present (so a process's rank can pick one);
     * negative: the calling thread's current device. */
    int cuda_device;
} pc_em_opts;

/* Takes the model's current parameters (model is not kept); EM on the CPU. */
PC_API pc_status pc_em_create(const pc_hclt *model, pc_em **out);
/* The same with options (NULL: the CPU). PC_EM_CUDA: PC_ERR_UNSUPPORTED in a build without
 * CUDA or for K > 1024, PC_ERR_NO_DEVICE without a GPU, PC_ERR_DEVICE_MEMORY when the model
 * does not fit. A GPU state works on its device and stream; its calls are synchronous. */
PC_API pc_status pc_em_create_opts(const pc_hclt *model, const pc_em_opts *opts, pc_em **out);
PC_API void pc_em_free(pc_em *em);

/* GPU states: keeps a device copy of data (its values checked here, once), from which
 * pc_em_step gathers the rows of that same pc_data on the GPU instead of copying them in each
 * step; data must not change while attached. NULL drops the copy. Other data still works,
 * streamed through the host. CPU states: nothing to do, PC_OK. */
PC_API pc_status pc_em_attach_data(pc_em *em, const pc_data *data);

/* Data-parallel EM over several processes (MPI ranks, say). `sum` must replace values [count]
 * by their elementwise sum over all the processes; every process calls it with the same count
 * at the same point of the same step. */
typedef pc_status (*pc_em_sum_fn)(void *ctx, int64_t *values, int64_t count);

/* Makes em the process `rank` of `ranks` (1 <= ranks, 0 <= rank < ranks): from now on each
 * pc_em_step handles only this process's share of the step's rows (the rows in fixed chunks of
 * 32, rank r taking the r-th of `ranks` contiguous runs of chunks) and sums the counts and the
 * log-likelihood over the processes with `sum` before the M-step, so every process ends the
 * step with the same parameters. On the CPU these are bit for bit those of one process, for
 * any number of ranks: counts are 64-bit integers, summed exactly. Every process must give
 * every step the same data, rows and arguments. A step that fails on one process fails on
 * all (the failure is summed too), so none waits forever. ranks = 1 makes em a lone process. */
PC_API pc_status pc_em_set_shard(pc_em *em, int rank, int ranks, pc_em_sum_fn sum, void *ctx);

/* One EM step on the rows rows[0..n-1] of data (rows NULL: rows 0..n-1): computes the expected
 * counts N under the current parameters and moves every distribution p towards the estimate
 *     est = (N + pseudocount / size) / (sum N + pseudocount)
 * as p <- (1 - step) * p + step * est, 0 < step <= 1 (step = 1: full EM). `size` is the
 * number of entries of the distribution (K or C). Writes the sum of log p(x) over the rows
 * under the parameters before the step to *loglik_sum (may be NULL), summed per chunk of 32
 * rows in row order, then over the chunks in order. Rows with a value >= num_cats fail with
 * PC_ERR_DATA before anything changes; any later failure (a GPU error) leaves the parameters
 * as they were and the counts cleared. */
PC_API pc_status pc_em_step(pc_em *em, const pc_data *data, const int64_t *rows, int64_t n,
                            double step, double pseudocount, double *loglik_sum);

/* Writes the EM's current parameters (as natural logs) into model, which must have the shape
 * and structure pc_em_create was given. */
PC_API pc_status pc_em_export(const pc_em *em, pc_hclt *model);

/* Smooths every input row p = p(X_v = . | latent state) of a learned model along its
 * categories, which must be ordered (pixel intensities): the inner categories 1..C-2 become
 *     p_c <- (1 - weight) p_c + weight sum_s g(c - s) p_s / Z_s        (0 < c, s < C - 1)
 * with g(d) = exp(-d^2 / (2 width^2)) cut at |d| <= 4 width and Z_s = sum_c g(c - s) over
 * the inner categories, so that each category's mass moves to its neighbours and the inner
 * mass stays; the end categories 0 and C - 1 keep theirs (for 8-bit pixels they are where
 * intensities saturate: most MNIST pixels are 0 or 255). weight in [0, 1] (0: no change),
 * width > 0 categories; models with C <= 3 have nothing to smooth. EM leaves a state's
 * inner values it never saw in training with only the pseudocount's share, which the
 * test images then pay for: on MNIST, weight 0.1 and width 8 lowered held-out bits/dim at
 * every K from 16 to 256 (docs/learning.md, "Smoothing the inputs"). */
PC_API pc_status pc_learn_smooth_inputs(pc_hclt *model, double weight, double width);

#ifdef __cplusplus
}
#endif

#endif
