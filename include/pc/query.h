/* Queries beyond log p(x): conditionals, the most probable explanation (MPE) and exact
 * sampling, answered on an evaluator (pc/eval.h) by passes over the HCLT's tree of latents.
 *
 * Evidence. Every query that takes data reads it as pc_evaluate does: x is [n, width] host
 * uint8 and missing is NULL (every entry observed) or [n, width] host uint8; entry v of row i
 * is observed unless missing[i * width + v] is nonzero. Unobserved values are never read;
 * observed values must be < C (else PC_ERR_DATA naming the sample and variable). width is the
 * row length of x, missing and the outputs, and must equal the circuit's V (else PC_ERR_DATA,
 * or PC_ERR_ARG for pc_sample, which reads no data).
 *
 * Common rules. Calls are synchronous, take host pointers only and keep none of them. The
 * caller allocates every output; its shape follows from n, width and num_cats as each
 * function states, and nothing beyond it is written. 0 <= n <= the evaluator's max_batch;
 * n = 0 does nothing. An output pointer may be NULL only where a function says so. On an
 * error the outputs' contents are unspecified. An evaluator serves one call at a time: a
 * concurrent second call fails with PC_ERR_ARG (pc/eval.h).
 *
 * Backends. ref answers in FP64 and is the reference. cpu-fuse and cpu share one FP32 form
 * for conditionals and for conditional sampling's upward pass (values kept relative to FP64
 * offsets, as cpu-fuse scores; conditionals within 1e-5 of ref) and answer MPE and the
 * sampling steps in FP64 like ref, so their MPE equals ref's. The GPU backends (fuse, int,
 * gemm) share one FP64 implementation on the evaluator's device: MPE and p(x) samples equal
 * ref's, conditionals agree with ref's to rounding. The first query of each kind on an
 * evaluator builds that query's tables (up to a few V x K x C arrays of doubles, on the GPU
 * also on the device), so it takes longer and may fail with PC_ERR_NOMEM (or
 * PC_ERR_DEVICE_MEMORY); pc_evaluator_free releases them.
 *
 * docs/queries.md gives the passes, their cost and how each backend computes them. */
#ifndef PC_QUERY_H
#define PC_QUERY_H

#include <stdint.h>

#include "pc/eval.h"
#include "pc/export.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Conditionals: probs[(i * width + v) * num_cats + c] = p(X_v = c | observed entries of row
 * i), for every variable v and value c; probs is [n, width, num_cats] host double and
 * num_cats must equal the circuit's C (else PC_ERR_ARG). For an observed v the row is one-hot
 * on its value; every row sums to 1 to rounding. logp is NULL or [n]: log p(x_observed) in
 * nats, as pc_evaluate gives it on this backend. A row whose evidence has probability 0 has
 * no conditionals: its [width, num_cats] block is NaN and its logp -inf (the call still
 * returns PC_OK). */
PC_API pc_status pc_conditionals(pc_evaluator *evaluator, const uint8_t *x,
                                 const uint8_t *missing, int64_t n, int64_t width,
                                 int64_t num_cats, double *probs, double *logp);

/* The same with probs as host float (half the memory; the values are rounded to float from
 * the backend's own precision). The output is large (V C values per row, 800 KB for an MNIST
 * image) and writing it dominates the cost: a 64-byte aligned probs is written with streaming
 * stores, without reading the memory first, and is filled faster. */
PC_API pc_status pc_conditionals_f32(pc_evaluator *evaluator, const uint8_t *x,
                                     const uint8_t *missing, int64_t n, int64_t width,
                                     int64_t num_cats, float *probs, double *logp);

/* MPE: for row i, the completion maximising p(x_observed, x_missing, z) over the missing
 * values and every latent state z (max-product upward, backtracking downward). completed is
 * [n, width] host uint8: the observed values of x and the completion's missing ones; it may
 * be x itself (completed in place), otherwise it must not overlap x. logp is NULL or [n]:
 * log p(x_completed, z*), the joint log-probability of the completion with its best latent
 * states (at most log p(x_completed), which pc_evaluate gives). Ties are broken toward the
 * lowest index, so the answer is unique: from the root down, every latent takes the lowest
 * of its best states given its parent's state, and every missing value the lowest of its best
 * values given its latent. A row whose evidence has probability 0 gets that tie-broken
 * completion and logp -inf. Values are written as uint8: a model with C > 256 gets
 * PC_ERR_UNSUPPORTED. */
PC_API pc_status pc_mpe(pc_evaluator *evaluator, const uint8_t *x, const uint8_t *missing,
                        int64_t n, int64_t width, uint8_t *completed, double *logp);

/* Exact ancestral samples from p(x): samples is [n, width] host uint8, row i drawn
 * independently of the others with the random stream of (seed, first + i) (pc/rng.h). So the
 * same seed gives the same rows for any thread count and any split of a run into calls
 * (calls with first = 0, n1, n1 + n2, ... give the rows of one call with first = 0), and
 * every CPU backend gives the same rows. first >= 0 and first + n must not overflow int64
 * (else PC_ERR_ARG). C > 256 gets PC_ERR_UNSUPPORTED. */
PC_API pc_status pc_sample(pc_evaluator *evaluator, int64_t n, int64_t width, uint64_t seed,
                           int64_t first, uint8_t *samples);

/* Exact samples from p(x_missing | x_observed), one per row of x (an upward pass for the
 * evidence, then ancestral sampling from the root down): samples is [n, width] host uint8
 * with the observed values of x and drawn missing ones; it may be x itself, otherwise it must
 * not overlap x. Streams, seed and first as for pc_sample: the same seed gives the same rows
 * for any thread count and split into calls; backends of different precision draw from the
 * same distribution but may differ in rare rows. A row whose evidence has probability 0 (no
 * conditional distribution) fails the call with PC_ERR_DATA naming the first such row. */
PC_API pc_status pc_sample_conditional(pc_evaluator *evaluator, const uint8_t *x,
                                       const uint8_t *missing, int64_t n, int64_t width,
                                       uint64_t seed, int64_t first, uint8_t *samples);

#ifdef __cplusplus
}
#endif

#endif
