/* The queries on the shipped model (models/mnist.h5, K = 16, 784 pixels of 256 values) with
 * MNIST test images as evidence: conditionals of every pixel sum to 1, the FP32 backends stay
 * within 1e-5 of ref, MPE is the same on every CPU backend and beats 1000 random completions,
 * and samples do not depend on the thread count. Skipped when the model or MNIST is absent. */
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
#include "hclt_random.h"
#include "mnist_rows.h"
#include "pc/query.h"
#include "testutil.h"

#define ROWS 24
#define SIDE 28
#define V (SIDE * SIDE)
#define C 256
/* The FP32 backends' conditionals against ref (the largest seen over 200 test images, half
 * with the left half missing, half with random masks, was 3.2e-7). */
#define TOL_FAST 1e-5

static pc_hclt *model;
static pc_circuit *circuit;
static uint8_t x[ROWS * V], missing[ROWS * V];

/* Evidence: rows 0-7 the left half missing, 8-15 the top half, 16-21 random masks (10% to
 * 60% missing), 22 everything missing, 23 nothing. */
static void make_evidence(void) {
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < V; i++) {
            const int row = i / SIDE, col = i % SIDE;
            uint8_t miss = r < 8 ? col < SIDE / 2 : r < 16 ? row < SIDE / 2
                         : r < 22 ? pc_hr_unit() < 0.1 * (r - 15) : r == 22;
            missing[r * V + i] = miss;
        }
}

static int setup(void **state) {
    (void)state;
    if (pc_test_mnist_rows(ROWS, &model, x) != 0) return 0;
    circuit = pc_test_compile(model);
    make_evidence();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pc_circuit_free(circuit);
    pc_hclt_free(model);
    return 0;
}

#define REQUIRE_MODEL()    \
    do {                   \
        if (!circuit) skip(); \
    } while (0)

static void test_conditionals(void **state) {
    (void)state;
    REQUIRE_MODEL();
    const size_t cells = (size_t)ROWS * V * C;
    double *ref = pc_test_alloc(cells * sizeof(double)), *got = pc_test_alloc(cells * 8);
    float *got32 = pc_test_alloc(cells * sizeof(float));
    double ref_lp[ROWS], lp[ROWS], score[ROWS];
    pc_evaluator *e = pc_test_evaluator(circuit, PC_BACKEND_REF, ROWS, 0);
    pc_test_poison_f64(ref, cells);
    assert_int_equal(pc_conditionals(e, x, missing, ROWS, V, C, ref, ref_lp), PC_OK);
    assert_int_equal(pc_evaluate(e, x, missing, ROWS, V, score), PC_OK);
    pc_evaluator_free(e);
    double worst_sum = 0.0;
    for (int r = 0; r < ROWS; r++) {
        assert_true(fabs(ref_lp[r] - score[r]) <= 1e-9 * fabs(score[r]) + 1e-12);
        for (int v = 0; v < V; v++) {
            const double *p = ref + ((size_t)r * V + v) * C;
            double sum = 0.0;
            for (int c = 0; c < C; c++) {
                assert_true(p[c] >= 0.0 && p[c] <= 1.0);
                sum += p[c];
            }
            worst_sum = fmax(worst_sum, fabs(sum - 1.0));
            if (!missing[r * V + v]) assert_true(p[x[r * V + v]] == 1.0 && sum == 1.0);
        }
    }
    print_message("  ref: every pixel's row sums to 1 within %.2g\n", worst_sum);
    assert_true(worst_sum <= 1e-12);
    const pc_backend fast[] = {PC_BACKEND_CPU_FUSE, PC_BACKEND_CPU};
    for (int b = 0; b < 2; b++) {
        e = pc_test_evaluator(circuit, fast[b], ROWS, 0);
        pc_test_poison_f64(got, cells), pc_test_poison_f32(got32, cells);
        assert_int_equal(pc_conditionals(e, x, missing, ROWS, V, C, got, lp), PC_OK);
        assert_int_equal(pc_conditionals_f32(e, x, missing, ROWS, V, C, got32, NULL), PC_OK);
        pc_evaluator_free(e);
        double worst = 0.0, worst32 = 0.0, worst_lp = 0.0;
        for (size_t i = 0; i < cells; i++) {
            worst = fmax(worst, fabs(got[i] - ref[i]));
            worst32 = fmax(worst32, fabs((double)got32[i] - ref[i]));
        }
        for (int r = 0; r < ROWS; r++) worst_lp = fmax(worst_lp, fabs(lp[r] - ref_lp[r]));
        print_message("  %-8s max |p - ref| %.2g (float output %.2g), log p(e) within %.2g\n",
                      pc_backend_name(fast[b]), worst, worst32, worst_lp);
        assert_true(worst <= TOL_FAST && worst32 <= TOL_FAST);
        assert_true(worst_lp <= 1e-3);
    }
    free(ref), free(got), free(got32);
}

/* max_z log p(x, z) for n full rows [n, V] (MPE with nothing missing). */
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
    double ref_lp[ROWS], lp[ROWS], marginal[ROWS];
    pc_evaluator *e = pc_test_evaluator(circuit, PC_BACKEND_REF, 1000, 0);
    assert_int_equal(pc_mpe(e, x, missing, ROWS, V, ref, ref_lp), PC_OK);
    assert_int_equal(pc_evaluate(e, ref, NULL, ROWS, V, marginal), PC_OK);
    for (int r = 0; r < ROWS; r++) {
        assert_true(ref_lp[r] <= marginal[r] + 1e-9); /* joint with z* <= marginal */
        for (int v = 0; v < V; v++)
            if (!missing[r * V + v]) assert_int_equal(ref[r * V + v], x[r * V + v]);
    }
    const pc_backend fast[] = {PC_BACKEND_CPU_FUSE, PC_BACKEND_CPU};
    for (int b = 0; b < 2; b++) {
        pc_evaluator *f = pc_test_evaluator(circuit, fast[b], ROWS, 2);
        assert_int_equal(pc_mpe(f, x, missing, ROWS, V, got, lp), PC_OK);
        assert_memory_equal(got, ref, sizeof got);
        assert_memory_equal(lp, ref_lp, sizeof lp);
        pc_evaluator_free(f);
    }
    /* Row 0 (left half missing) against 1000 completions: 500 with uniform random values,
     * 500 drawn from p(x_missing | x_observed). */
    const int64_t n = 1000;
    uint8_t *rows = pc_test_alloc((size_t)(n * V)), *masks = pc_test_alloc((size_t)(n * V));
    for (int64_t i = 0; i < n; i++) {
        memcpy(rows + i * V, x, V);
        memcpy(masks + i * V, missing, V);
        for (int v = 0; v < V; v++)
            if (missing[v] && i < n / 2) rows[i * V + v] = (uint8_t)pc_hr_int(0, C - 1);
    }
    assert_int_equal(pc_sample_conditional(e, rows + n / 2 * V, masks + n / 2 * V, n / 2, V,
                                           pc_rng_u64(pc_test_rng()), 0, rows + n / 2 * V),
                     PC_OK);
    double *joint = pc_test_alloc((size_t)n * sizeof(double));
    double *lpx = pc_test_alloc((size_t)n * sizeof(double));
    best_joint(e, rows, n, joint);
    assert_int_equal(pc_evaluate(e, rows, NULL, n, V, lpx), PC_OK);
    double top_joint = -INFINITY, top_marginal = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        top_joint = fmax(top_joint, joint[i]);
        top_marginal = fmax(top_marginal, lpx[i]);
    }
    print_message("  row 0: MPE log p(x*, z*) %.3f, log p(x*) %.3f; best of 1000 completions: "
                  "max_z log p(x, z) %.3f, log p(x) %.3f\n",
                  ref_lp[0], marginal[0], top_joint, top_marginal);
    assert_true(top_joint <= ref_lp[0] + 1e-9);
    assert_true(top_marginal <= marginal[0]);
    free(rows), free(masks), free(joint), free(lpx);
    pc_evaluator_free(e);
}

/* Samples of the shipped model: the same for 1 and 2 threads and for any split into calls. */
static void test_samples_thread_independent(void **state) {
    (void)state;
    REQUIRE_MODEL();
    const uint64_t seed = pc_rng_u64(pc_test_rng());
    static uint8_t one[ROWS * V], two[ROWS * V];
    for (int cond = 0; cond < 2; cond++) {
        pc_evaluator *e1 = pc_test_evaluator(circuit, PC_BACKEND_CPU_FUSE, ROWS, 1);
        pc_evaluator *e2 = pc_test_evaluator(circuit, PC_BACKEND_CPU_FUSE, ROWS, 2);
        if (cond) {
            assert_int_equal(pc_sample_conditional(e1, x, missing, ROWS, V, seed, 5, one), PC_OK);
            assert_int_equal(pc_sample_conditional(e2, x, missing, 10, V, seed, 5, two), PC_OK);
            assert_int_equal(pc_sample_conditional(e2, x + 10 * V, missing + 10 * V, ROWS - 10,
                                                   V, seed, 15, two + 10 * V),
                             PC_OK);
        } else {
            assert_int_equal(pc_sample(e1, ROWS, V, seed, 5, one), PC_OK);
            assert_int_equal(pc_sample(e2, 10, V, seed, 5, two), PC_OK);
            assert_int_equal(pc_sample(e2, ROWS - 10, V, seed, 15, two + 10 * V), PC_OK);
        }
        assert_memory_equal(one, two, sizeof one);
        pc_evaluator_free(e1);
        pc_evaluator_free(e2);
    }
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conditionals),
        cmocka_unit_test(test_mpe),
        cmocka_unit_test(test_samples_thread_independent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
