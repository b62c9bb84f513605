/* pc_learn_smooth_inputs against its definition: random rows (zero probabilities included) of
 * C = 4 .. 256 categories and widths from 0.3 to past the row, each source category's mass
 * scattered to its neighbours by a reference written the other way round; the end categories
 * and the inner mass kept; the same bits for any thread count; weight 0 and C <= 3 change
 * nothing; bad arguments refused with the model untouched. */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pc/learn.h"
#include "pc/rng.h"
#include "testutil.h"

static uint64_t g_seed;

/* A model of V = 3, K = 2 whose input rows are random (a few zeros, ends included); its
 * structure is a chain, and only the input rows matter here. */
static pc_hclt *random_rows(int32_t C, pc_rng *rng) {
    pc_hclt *m = NULL;
    assert_int_equal(pc_hclt_create(3, C, 2, 2, &m), PC_OK);
    const int32_t parent[3] = {-1, 0, 1}, trans[3] = {-1, 0, 1};
    memcpy(m->parent, parent, sizeof parent);
    memcpy(m->trans_index, trans, sizeof trans);
    for (int i = 0; i < 2; i++) m->root_logw[i] = log(0.5);
    for (int i = 0; i < 8; i++) m->trans_logw[i] = log(0.5);
    for (int32_t row = 0; row < 6; row++) {
        double *lp = m->input_logp + (int64_t)row * C, sum = 0;
        for (int32_t c = 0; c < C; c++) {
            /* a spike, zeros, and a spread of magnitudes as a learned row has */
            lp[c] = pc_rng_unit(rng) < 0.2 ? 0 : exp(6 * pc_rng_unit(rng));
            if (c == (int32_t)(row % C)) lp[c] = 0;
            sum += lp[c];
        }
        if (sum == 0) lp[C / 2] = sum = 1;
        for (int32_t c = 0; c < C; c++) lp[c] = log(lp[c] / sum);
    }
    return m;
}

/* The definition, scattering: each inner source s sends (1 - weight) p_s to itself and
 * weight p_s g(c - s) / Z_s to every inner c within the cut. */
static void reference(const double *p, int32_t C, double weight, double width, double *out) {
    const int32_t n = C - 2;
    const double cut = fmin(ceil(4 * width), n - 1);
    for (int32_t c = 0; c < C; c++) out[c] = (c == 0 || c == C - 1) ? p[c] : 0;
    for (int32_t s = 1; s <= n; s++) {
        double z = 0;
        for (int32_t c = 1; c <= n; c++)
            if (fabs((double)(c - s)) <= cut) z += exp(-0.5 * (c - s) * (c - s) / (width * width));
        out[s] += (1 - weight) * p[s];
        for (int32_t c = 1; c <= n; c++)
            if (fabs((double)(c - s)) <= cut)
                out[c] += weight * p[s] * exp(-0.5 * (c - s) * (c - s) / (width * width)) / z;
    }
}

static void test_matches_definition(void **state) {
    (void)state;
    pc_rng rng = {g_seed};
    const int32_t cs[6] = {4, 5, 9, 17, 64, 256};
    const double widths[6] = {0.3, 1, 2.5, 8, 32, 1e6};
    for (int trial = 0; trial < 36; trial++) {
        const int32_t C = cs[trial % 6];
        const double width = widths[trial / 6], weight = trial % 5 ? pc_rng_unit(&rng) : 1.0;
        pc_hclt *m = random_rows(C, &rng);
        const int64_t len = 6 * (int64_t)C;
        double *before = malloc((size_t)len * sizeof *before), want[256];
        assert_non_null(before);
        memcpy(before, m->input_logp, (size_t)len * sizeof *before);
        assert_int_equal(pc_learn_smooth_inputs(m, weight, width), PC_OK);
        assert_int_equal(pc_hclt_validate(m, NULL), PC_OK);
        for (int32_t row = 0; row < 6; row++) {
            double p[256], inner_before = 0, inner_after = 0;
            for (int32_t c = 0; c < C; c++) p[c] = exp(before[row * C + c]);
            reference(p, C, weight, width, want);
            for (int32_t c = 0; c < C; c++) {
                const double got = exp(m->input_logp[row * C + c]);
                if (!(fabs(got - want[c]) <= 1e-12))
                    printf("C %d width %g weight %g row %d c %d: %.15g, want %.15g\n", C, width,
                           weight, row, c, got, want[c]);
                assert_true(fabs(got - want[c]) <= 1e-12);
                if (c > 0 && c < C - 1) inner_before += p[c], inner_after += got;
            }
            /* the ends keep their probability (a zero stays a zero) and the inner mass stays */
            assert_true(fabs(exp(m->input_logp[row * C]) - p[0]) <= 1e-15);
            assert_true(m->input_logp[row * C + C - 1] == -INFINITY ? p[C - 1] == 0
                        : fabs(exp(m->input_logp[row * C + C - 1]) - p[C - 1]) <= 1e-15);
            assert_true(fabs(inner_after - inner_before) <= 1e-13);
        }
        free(before);
        pc_hclt_free(m);
    }
}

/* A lone inner value spreads as the Gaussian: symmetric around it away from the edges, its
 * neighbours at exp(-1/2) of its own share for width 1. */
static void test_spike_spreads_as_gaussian(void **state) {
    (void)state;
    pc_rng rng = {g_seed ^ 1};
    pc_hclt *m = random_rows(256, &rng);
    double *lp = m->input_logp;
    for (int32_t c = 0; c < 256; c++) lp[c] = c == 100 ? 0 : -INFINITY;
    assert_int_equal(pc_learn_smooth_inputs(m, 1.0, 1.0), PC_OK);
    const double z = 1 + 2 * (exp(-0.5) + exp(-2.0) + exp(-4.5) + exp(-8.0));
    assert_true(fabs(exp(lp[100]) - 1 / z) < 1e-14);
    for (int d = 1; d <= 4; d++) {
        assert_true(fabs(exp(lp[100 + d]) - exp(-0.5 * d * d) / z) < 1e-14);
        assert_true(exp(lp[100 - d]) == exp(lp[100 + d]));
    }
    assert_true(lp[95] == -INFINITY && lp[105] == -INFINITY && lp[0] == -INFINITY);
    pc_hclt_free(m);
}

/* A copy of a model's input rows [6 * C] (free it). */
static double *rows_copy(const pc_hclt *m) {
    const size_t bytes = 6 * (size_t)m->num_cats * sizeof(double);
    double *copy = malloc(bytes);
    assert_non_null(copy);
    memcpy(copy, m->input_logp, bytes);
    return copy;
}

static void test_threads_and_no_ops(void **state) {
    (void)state;
    pc_rng rng = {g_seed ^ 2};
    pc_hclt *a = random_rows(256, &rng);
    double *start = rows_copy(a);
    const size_t bytes = 6 * 256 * sizeof(double);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(pc_learn_smooth_inputs(a, 0.3, 5), PC_OK);
    double *one = rows_copy(a);
    memcpy(a->input_logp, start, bytes);
    omp_set_num_threads(3);
    assert_int_equal(pc_learn_smooth_inputs(a, 0.3, 5), PC_OK);
    omp_set_num_threads(threads);
    assert_memory_equal(a->input_logp, one, bytes);
    assert_true(memcmp(a->input_logp, start, bytes) != 0);
    memcpy(a->input_logp, start, bytes);
    assert_int_equal(pc_learn_smooth_inputs(a, 0, 5), PC_OK); /* weight 0 */
    assert_memory_equal(a->input_logp, start, bytes);
    for (int32_t C = 2; C <= 3; C++) { /* nothing inner to spread over */
        pc_hclt *small = random_rows(C, &rng);
        double *same = rows_copy(small);
        assert_int_equal(pc_learn_smooth_inputs(small, 1.0, 2), PC_OK);
        assert_memory_equal(small->input_logp, same, 6 * (size_t)C * sizeof(double));
        pc_hclt_free(small), free(same);
    }
    pc_hclt_free(a), free(start), free(one);
}

static void test_bad_arguments(void **state) {
    (void)state;
    pc_rng rng = {g_seed ^ 3};
    pc_hclt *m = random_rows(16, &rng);
    double *same = rows_copy(m);
    const double weights[4] = {-0.1, 1.5, NAN, 0.5}, widths[4] = {1, 1, 1, 0};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pc_learn_smooth_inputs(m, weights[i], widths[i]), PC_ERR_ARG);
        assert_non_null(strstr(pc_last_error(), i < 3 ? "weight" : "width"));
    }
    const double bad_widths[3] = {-2, INFINITY, NAN};
    for (int i = 0; i < 3; i++)
        assert_int_equal(pc_learn_smooth_inputs(m, 0.5, bad_widths[i]), PC_ERR_ARG);
    assert_int_equal(pc_learn_smooth_inputs(NULL, 0.5, 1), PC_ERR_ARG);
    assert_memory_equal(m->input_logp, same, 6 * 16 * sizeof(double));
    pc_hclt_free(m), free(same);
}

int main(void) {
    g_seed = pc_test_seed(); /* printed; PC_TEST_SEED replays a failing run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_definition),
        cmocka_unit_test(test_spike_spreads_as_gaussian),
        cmocka_unit_test(test_threads_and_no_ops),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
