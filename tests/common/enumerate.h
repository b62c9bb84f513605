/* Brute force for tiny HCLTs: every latent state z and every x enumerated in FP64, straight
 * from the model's definition (HCLT_FORMAT.md: parent, trans_index and the parameters), not
 * from the compiled circuit, so it checks the compiler and the queries alike. Also the
 * chi-square goodness-of-fit test the sampler tests use.
 *
 * x of index i has x_v = (i / C^v) % C. A model fits when K^(T + 1) * C^V <= 2^24. */
#ifndef PC_TEST_ENUMERATE_H
#define PC_TEST_ENUMERATE_H

#include <stdint.h>

#include "pc/circuit.h"
#include "pc/eval.h"
#include "pc/hclt.h"

typedef struct pc_enum {
    int32_t num_vars, num_cats;
    int64_t num_x;     /* C^V */
    double *px;        /* [num_x] p(x) = sum_z p(x, z) */
    double *max_joint; /* [num_x] max_z log p(x, z) */
} pc_enum;

/* Enumerates the model; aborts when it is too large or memory runs out. */
pc_enum *pc_enum_create(const pc_hclt *model);
void pc_enum_free(pc_enum *en);

/* Writes the values of x number i into x [V]. */
void pc_enum_decode(const pc_enum *en, int64_t i, uint8_t *x);
/* The number of the full assignment x [V]. */
int64_t pc_enum_index(const pc_enum *en, const uint8_t *x);
/* 1 when x number i agrees with every observed entry of the row (x, missing [V] or NULL). */
int pc_enum_agrees(const pc_enum *en, int64_t i, const uint8_t *x, const uint8_t *missing);

/* p(evidence): the sum of p(x) over the x that agree with the row. */
double pc_enum_evidence(const pc_enum *en, const uint8_t *x, const uint8_t *missing);
/* probs [V, C] = p(X_v = c | evidence); NaN everywhere when p(evidence) = 0. */
void pc_enum_conditionals(const pc_enum *en, const uint8_t *x, const uint8_t *missing,
                          double *probs);
/* The number of the x agreeing with the row that maximises max_z log p(x, z) (the lowest on
 * ties), its value in *best and the largest value of any other agreeing x in *second (-inf
 * when there is none). */
int64_t pc_enum_mpe(const pc_enum *en, const uint8_t *x, const uint8_t *missing, double *best,
                    double *second);

/* Pearson's chi-square test of `counts` [cells] (summing to draws) against the probabilities
 * `prob` [cells] (summing to 1): cells expected to hold fewer than 5 draws are pooled into one
 * (pooled cells together too thin are merged into the smallest full cell), a draw in a cell of
 * probability 0 gives p-value 0. Returns the p-value; *stat and *df (may be NULL) get the
 * statistic and the degrees of freedom. */
double pc_chi2_test(const double *prob, const int64_t *counts, int64_t cells, int64_t draws,
                    double *stat, int64_t *df);

/* pc_chi2_test of `draws` sampled rows [draws, V] counted over the cells x of the model. */
double pc_enum_chi2_rows(const pc_enum *en, const uint8_t *rows, int64_t draws,
                         const double *prob, double *stat, int64_t *df);

/* The regularised upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a), a > 0,
 * x >= 0: the chi-square tail with 2a degrees of freedom at 2x. */
double pc_gamma_q(double a, double x);

/* The compiled circuit of a model, and an evaluator on it; both abort the test program with
 * the library's message on failure. */
pc_circuit *pc_test_compile(const pc_hclt *model);
pc_evaluator *pc_test_evaluator(const pc_circuit *circuit, pc_backend backend,
                                int64_t max_batch, int threads);

#endif
