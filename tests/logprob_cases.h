/* Inputs shared by the CPU and GPU token log-probability tests: random logits with padded rows
 * and rows planted with the header's special cases. */
#ifndef PC_TEST_LOGPROB_CASES_H
#define PC_TEST_LOGPROB_CASES_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pc/logprob.h"
#include "testutil.h"

/* Unwritten outputs keep this value, which no case expects. */
#define LP_POISON 7777.0f
/* |fast - ref| <= LP_TOL_ABS + LP_TOL_REL * |ref| for every FP32 path (measured worst cases
 * are ~10x below: the terms are FP32 roundings of (x_t - max) and of a sum of <= 256k terms). */
#define LP_TOL_ABS 3e-5
#define LP_TOL_REL 2e-6

/* The program's seed and generator are testutil's (printed once; PC_TEST_SEED replays). */
static uint64_t lp_seed(void) { return pc_test_seed(); }
static uint64_t lp_next(void) { return pc_rng_u64(pc_test_rng()); }

static double lp_uniform(void) { return ((double)(lp_next() >> 11) + 0.5) / 9007199254740992.0; }
static int64_t lp_below(int64_t n) { return (int64_t)(lp_next() % (uint64_t)n); }
static double lp_normal(void) { return sqrt(-2.0 * log(lp_uniform())) * cos(6.283185307179586 * lp_uniform()); }

/* Writes value v at [r, i] of a [rows, stride] array of dtype. */
static void lp_set(pc_dtype dtype, void *x, int64_t stride, int64_t r, int64_t i, float v) {
    if (dtype == PC_F32) ((float *)x)[r * stride + i] = v;
    else ((uint16_t *)x)[r * stride + i] = pc_test_f32_to_bf16(v); /* NaN: 0x7fc0 */
}

/* Random logits: per row an offset and a spread (sd 0.5 to 30, offsets up to +-1e4), padding
 * filled with NaN so that a read past vocab shows; random targets. */
static void lp_fill(pc_dtype dtype, void *x, int64_t rows, int64_t vocab, int64_t stride,
                    int64_t *targets) {
    for (int64_t r = 0; r < rows; r++) {
        double sd = 0.5 * pow(60.0, lp_uniform()), off = (lp_uniform() - 0.5) * 2e4 * (lp_below(3) == 0);
        for (int64_t i = 0; i < stride; i++)
            lp_set(dtype, x, stride, r, i, i < vocab ? (float)(off + sd * lp_normal()) : NAN);
        targets[r] = lp_below(vocab);
    }
}

/* The host buffers of one random case: x [rows, stride] of dtype and its targets, filled by
 * lp_fill, and room for the outputs and the FP64 reference (the includer has cmocka.h). */
typedef struct lp_case {
    void *x;
    int64_t *targets;
    float *out;
    double *ref;
} lp_case;

static lp_case lp_case_new(pc_dtype dtype, int64_t rows, int64_t vocab, int64_t stride) {
    lp_case c = {malloc((size_t)(rows * stride) * pc_dtype_size(dtype)),
                 malloc((size_t)rows * sizeof *c.targets), malloc((size_t)rows * sizeof *c.out),
                 malloc((size_t)rows * sizeof *c.ref)};
    assert_non_null(c.x), assert_non_null(c.targets), assert_non_null(c.out), assert_non_null(c.ref);
    lp_fill(dtype, c.x, rows, vocab, stride, c.targets);
    return c;
}

static void lp_case_free(lp_case *c) { free(c->x), free(c->targets), free(c->out), free(c->ref); }

/* Plants the special cases in rows 0..LP_SPECIAL-1 (needs rows >= LP_SPECIAL, vocab >= 4) and
 * returns through expect[] the value each must give (NaN or +-inf), other rows untouched. */
#define LP_SPECIAL 6
static void lp_plant(pc_dtype dtype, void *x, int64_t vocab, int64_t stride, int64_t *targets,
                     float *expect) {
    int64_t far = vocab - 1 - lp_below(vocab / 2); /* somewhere in the second half */
    targets[0] = lp_below(vocab);                  /* -inf at the target */
    lp_set(dtype, x, stride, 0, targets[0], -INFINITY);
    expect[0] = -INFINITY;
    targets[1] = 0;                                /* a NaN far from the target */
    lp_set(dtype, x, stride, 1, far, NAN);
    expect[1] = NAN;
    targets[2] = 0;                                /* +inf elsewhere, finite target */
    lp_set(dtype, x, stride, 2, far, INFINITY);
    expect[2] = -INFINITY;
    targets[3] = far;                              /* +inf at the target */
    lp_set(dtype, x, stride, 3, far, INFINITY);
    expect[3] = NAN;
    for (int64_t i = 0; i < vocab; i++) lp_set(dtype, x, stride, 4, i, -INFINITY); /* all -inf */
    targets[4] = far;
    expect[4] = NAN;
    /* NaN and +inf in one row: NaN wins. */
    targets[5] = 0;
    lp_set(dtype, x, stride, 5, far, INFINITY);
    lp_set(dtype, x, stride, 5, 1 + lp_below(far), NAN);
    expect[5] = NAN;
}

/* 1 when got matches the FP64 reference (NaN and infinities exactly, else within tolerance
 * LP_TOL_ABS + LP_TOL_REL * scale: scale is |ref| for paths that subtract before rounding,
 * |ref| + |LSE| for those that subtract from an LSE rounded to float). */
static int lp_close(float got, double ref, double scale) {
    if (isnan(ref)) return isnan(got);
    if (isinf(ref)) return got == (float)ref;
    return fabs((double)got - ref) <= LP_TOL_ABS + LP_TOL_REL * scale;
}

/* The row's FP64 LSE, recovered from its reference log-probability: LSE = x_t - logprob. */
static inline double lp_lse_of(pc_dtype dtype, const void *x, int64_t stride, int64_t r, int64_t t, double ref) {
    double xt = dtype == PC_F32 ? ((const float *)x)[r * stride + t]
                                : pc_test_bf16_to_f32(((const uint16_t *)x)[r * stride + t]);
    return xt - ref;
}

#endif
