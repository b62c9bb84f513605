/* The GPU queries on the shipped model (models/mnist.h5, K = 16, 784 pixels of 256 values)
 * with MNIST test images as evidence, against ref on the same inputs: conditionals of every
 * pixel sum to 1 and stay within TOL_GPU of ref's (float output too); MPE is ref's (a row may
 * differ only on a near-tie: then both completions attain the same joint within MPE_TIE) and
 * beats 1000 random and sampled completions; p(x) samples are ref's rows, conditional samples
 * ref's in nearly every row. Skipped without a GPU, or when the model or MNIST is absent. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "enumerate.h"
#include "eval/evaluator.h"
#include "hclt_random.h"
#include "mnist_rows.h"
#include "pc/query.h"
#include "testutil.h"

#define ROWS 32
#define SIDE 28
#define V (SIDE * SIDE)
#define C 256
#define TOL_GPU 1e-5
#define TOL_LOGP 1e-9 /* log p(e): the same FP64 sums as ref's, up to their order */
#define MPE_TIE 1e-9

static pc_circuit *circuit;
static pc_hclt *model;
static uint8_t x[ROWS * V], missing[ROWS * V];

/* Rows 0-9 the left half missing, 10-19 the top half, 20-29 random masks (5% to 95%), 30
 * everything missing, 31 nothing. */
static int setup(void **state) {
    (void)state;
    if (pc_test_mnist_rows(ROWS, &model, x) != 0) return 0;
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < V; i++)
            missing[r * V + i] = r < 10   ? i % SIDE < SIDE / 2
                                 : r < 20 ? i / SIDE < SIDE / 2
                                 : r < 30 ? pc_hr_unit() < 0.05 + 0.1 * (r - 20)
                                          : r == 30;
    circuit = pc_test_compile(model);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pc_circuit_free(circuit);
    pc_hclt_free(model);
    return 0;
}

#define REQUIRE_MODEL()           \
    do {                          \
        if (!circuit) skip();     \
    } while (0)

/* fuse's conditionals (double and float) of the rows against ref's: every row sums to 1,
 * observed rows are one-hot, values within TOL_GPU of ref's, log p(e) within TOL_LOGP. */
static void check_conditionals(pc_evaluator *e, const double *ref, const double *ref_lp) {
    const size_t cells = (size_t)ROWS * V * C;
    double *got = pc_test_alloc(cells * 8), lp[ROWS];
    float *got32 = pc_test_alloc(cells * 4);
    pc_test_poison_f64(got, cells), pc_test_poison_f32(got32, cells);
    pc_test_poison_f64(lp, ROWS);
    assert_int_equal(pc_conditionals(e, x, missing, ROWS, V, C, got, lp), PC_OK);
    assert_int_equal(pc_conditionals_f32(e, x, missing, ROWS, V, C, got32, NULL), PC_OK);
    double worst = 0.0, worst32 = 0.0, worst_sum = 0.0, worst_lp = 0.0;
    for (size_t i = 0; i < cells; i += C) {
        double sum = 0.0;
        for (size_t k = i; k < i + C; k++) {
            assert_true(got[k] >= 0.0 && got[k] <= 1.0);
            sum += got[k];
            worst = fmax(worst, fabs(got[k] - ref[k]));
            worst32 = fmax(worst32, fabs((double)got32[k] - ref[k]));
        }
        worst_sum = fmax(worst_sum, fabs(sum - 1.0));
        if (!missing[i / C]) assert_true(got[i + x[i / C]] == 1.0 && sum == 1.0);
    }
    for (int i = 0; i < ROWS; i++) worst_lp = fmax(worst_lp, fabs(lp[i] - ref_lp[i]));
    print_message("  fuse: max |p - ref| %.2g (float output %.2g), rows sum to 1 within %.2g, "
                  "log p(e) within %.2g of ref\n", worst, worst32, worst_sum, worst_lp);
    assert_true(worst <= TOL_GPU && worst32 <= TOL_GPU && worst_sum <= 1e-12);
    assert_true(worst_lp <= TOL_LOGP);
    free(got), free(got32);
}

static void test_conditionals(void **state) {
    (void)state;
    REQUIRE_MODEL();
    double *ref = pc_test_alloc((size_t)ROWS * V * C * 8), ref_lp[ROWS];
    pc_evaluator *r = pc_test_evaluator(circuit, PC_BACKEND_REF, ROWS, 0);
    pc_evaluator *e = pc_test_evaluator(circuit, PC_BACKEND_FUSE, ROWS, 0);
    assert_int_equal(pc_conditionals(r, x, missing, ROWS, V, C, ref, ref_lp), PC_OK);
    check_conditionals(e, ref, ref_lp);
    pc_evaluator_free(e);
    pc_evaluator_free(r);
    free(ref);
}

/* max_z log p(x, z) of full rows [n, V]: MPE with nothing missing. */
static void best_joint(pc_evaluator *e, const uint8_t *rows, int64_t n, double *out) {
    uint8_t *same = pc_test_alloc((size_t)(n * V));
    assert_int_equal(pc_mpe(e, rows, NULL, n, V, same, out), PC_OK);
    assert_memory_equal(same, rows, (size_t)(n * V));
    free(same);
}

static void test_mpe(void **state) {
    (void)state;
    REQUIRE_MODEL();
    static uint8_t ref[ROWS * V], got[ROWS * V];
    double ref_lp[ROWS], lp[ROWS], joint[ROWS];
    const int64_t n = 1000;
    pc_evaluator *r = pc_test_evaluator(circuit, PC_BACKEND_REF, n, 0);
    pc_evaluator *e = pc_test_evaluator(circuit, PC_BACKEND_FUSE, n, 0);
    assert_int_equal(pc_mpe(r, x, missing, ROWS, V, ref, ref_lp), PC_OK);
    pc_test_poison_bytes(got, sizeof got), pc_test_poison_f64(lp, ROWS);
    assert_int_equal(pc_mpe(e, x, missing, ROWS, V, got, lp), PC_OK);
    best_joint(r, got, ROWS, joint);
    int ties = 0;
    for (int i = 0; i < ROWS; i++) {
        for (int v = 0; v < V; v++)
            if (!missing[i * V + v]) assert_int_equal(got[i * V + v], x[i * V + v]);
        assert_true(fabs(lp[i] - ref_lp[i]) <= MPE_TIE && fabs(joint[i] - ref_lp[i]) <= MPE_TIE);
        ties += memcmp(got + i * V, ref + i * V, V) != 0;
    }
    print_message("  fuse: MPE equal to ref's in %d of %d rows (others: near-ties)\n",
                  ROWS - ties, ROWS);
    assert_int_equal(ties, 0); /* the same FP64 sums as ref: a difference would be a bug */
    /* Row 0 against 1000 completions: 500 uniform random, 500 drawn on the GPU. */
    uint8_t *rows = pc_test_alloc((size_t)(n * V)), *masks = pc_test_alloc((size_t)(n * V));
    for (int64_t i = 0; i < n; i++) {
        memcpy(rows + i * V, x, V), memcpy(masks + i * V, missing, V);
        for (int v = 0; v < V; v++)
            if (missing[v] && i < n / 2) rows[i * V + v] = (uint8_t)pc_hr_int(0, C - 1);
    }
    assert_int_equal(pc_sample_conditional(e, rows + n / 2 * V, masks + n / 2 * V, n / 2, V,
                                           pc_rng_u64(pc_test_rng()), 0, rows + n / 2 * V),
                     PC_OK);
    double *all = pc_test_alloc((size_t)n * sizeof(double)), top = -INFINITY;
    best_joint(e, rows, n, all);
    for (int64_t i = 0; i < n; i++) top = fmax(top, all[i]);
    print_message("  row 0: MPE log p(x*, z*) %.3f; best of 1000 completions %.3f\n", lp[0], top);
    assert_true(top <= lp[0] + MPE_TIE);
    free(rows), free(masks), free(all);
    pc_evaluator_free(e);
    pc_evaluator_free(r);
}

static void test_samples(void **state) {
    (void)state;
    REQUIRE_MODEL();
    static uint8_t ref[ROWS * V], got[ROWS * V];
    const uint64_t seed = pc_rng_u64(pc_test_rng());
    pc_evaluator *r = pc_test_evaluator(circuit, PC_BACKEND_REF, ROWS, 0);
    pc_evaluator *e = pc_test_evaluator(circuit, PC_BACKEND_FUSE, ROWS, 0);
    assert_int_equal(pc_sample(r, ROWS, V, seed, 7, ref), PC_OK);
    pc_test_poison_bytes(got, sizeof got);
    assert_int_equal(pc_sample(e, ROWS, V, seed, 7, got), PC_OK);
    assert_memory_equal(got, ref, sizeof got);
    assert_int_equal(pc_sample_conditional(r, x, missing, ROWS, V, seed, 7, ref), PC_OK);
    pc_test_poison_bytes(got, sizeof got);
    assert_int_equal(pc_sample_conditional(e, x, missing, ROWS, V, seed, 7, got), PC_OK);
    int differ = 0;
    for (int i = 0; i < ROWS; i++) {
        differ += memcmp(got + i * V, ref + i * V, V) != 0;
        for (int v = 0; v < V; v++)
            if (!missing[i * V + v]) assert_int_equal(got[i * V + v], x[i * V + v]);
    }
    print_message("  fuse: conditional samples differing from ref's: %d of %d rows\n", differ,
                  ROWS);
    assert_true(differ <= 2);
    pc_evaluator_free(e);
    pc_evaluator_free(r);
}

int main(void) {
    pc_test_require_gpu_or_exit("test_cuda_query_mnist");
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conditionals),
        cmocka_unit_test(test_mpe),
        cmocka_unit_test(test_samples),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
