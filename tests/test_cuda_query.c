/* The queries of the GPU backends (fuse, int and gemm share one FP64 implementation,
 * src/eval/cuda/query) against brute-force enumeration and against ref:
 *   - conditionals on tiny random models of every shape (chains, stars, shared latents, zero
 *     probabilities) within TOL_ENUM of the enumeration, float output within float rounding
 *     of double (pc_test_tol_f32_conditional);
 *   - MPE: ref's completions and log-probabilities bit for bit (same tables, same additions),
 *     and the enumerated argmax wherever it wins by more than 1e-9 nats (exact ties and sums
 *     800 nats down: test_query_enum.c runs its cases on fuse too where there is a GPU);
 *   - samplers: Pearson's chi-square over all cells with 10^5 draws (p(x) and p(x_missing |
 *     x_observed), 12 models each, alpha 1e-6, as tests/test_query_sample.c); p(x) rows equal
 *     to ref's for the same seed (the same streams and tables), conditional rows nearly so;
 *   - awkward sizes against ref: K = 1 ... 300, C = 256, a chain of 300 layers, V = 1, rows
 *     of probability 0, runs split into calls, in place.
 * Outputs are poisoned before each call. Without a GPU the program exits 77 (skipped). */
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
#include "pc/query.h"
#include "testutil.h"

/* The GPU passes are FP64 like ref: against the enumeration (largest seen: see the report of
 * the run, printed) and against ref on larger models. */
#define TOL_ENUM 1e-11
#define TOL_REF 1e-9
#define MPE_MARGIN 1e-9
#define DRAWS 100000
#define ALPHA 1e-6

static const pc_backend gpus[] = {PC_BACKEND_FUSE, PC_BACKEND_INT, PC_BACKEND_GEMM};

/* A tiny model of shape `rep`: random tree, chain, star, all or no latents shared; zeros in
 * every other one. */
static pc_hclt *tiny_model(int rep, int32_t V, int32_t C, int32_t K) {
    const double share = rep % 5 == 3 ? 1.0 : rep % 5 == 4 ? 0.0 : 0.4;
    pc_hclt *m = pc_hr_model(V, C, K, share, rep % 2);
    int32_t root = 0, prev;
    while (m->parent[root] >= 0) root++;
    prev = root;
    for (int32_t v = 0; v < V; v++) {
        if (v == root || rep % 5 > 2 || rep % 5 == 0) continue;
        m->parent[v] = rep % 5 == 1 ? prev : root; /* 1: chain, 2: star */
        prev = v;
    }
    return m;
}

/* Rows [n, V]: row 0 fully observed, row 1 fully missing, then random masks; odd rows take an
 * x of probability 0 where the model has one. */
static void tiny_rows(const pc_enum *en, int64_t n, uint8_t *x, uint8_t *missing) {
    const int32_t V = en->num_vars;
    int64_t impossible = -1;
    for (int64_t i = 0; i < en->num_x && impossible < 0; i++)
        if (en->px[i] == 0.0) impossible = i;
    for (int64_t r = 0; r < n; r++) {
        pc_enum_decode(en, r % 2 && impossible >= 0 ? impossible : pc_hr_int(0, en->num_x - 1),
                       x + r * V);
        for (int32_t v = 0; v < V; v++) {
            uint8_t *mv = missing + r * V + v;
            *mv = r == 1 || (r > 1 && pc_hr_unit() < 0.5);
            if (*mv) x[r * V + v] = 0xEE; /* never read */
        }
    }
}

static int same(double got, double want, double tol) {
    return (isnan(got) && isnan(want)) || (got == want) || fabs(got - want) <= tol;
}

static void test_conditionals_enumeration(void **state) {
    (void)state;
    double worst = 0.0;
    for (int rep = 0; rep < 40; rep++) {
        const int32_t V = (int32_t)pc_hr_int(1, 6), C = (int32_t)pc_hr_int(2, 3);
        const int32_t K = (int32_t)pc_hr_int(1, 3);
        const double tol32 = pc_test_tol_f32_conditional(K);
        pc_hclt *m = tiny_model(rep, V, C, K);
        pc_circuit *c = pc_test_compile(m);
        pc_enum *en = pc_enum_create(m);
        const int64_t n = 20, cells = n * V * C;
        uint8_t x[20 * 6], miss[20 * 6];
        tiny_rows(en, n, x, miss);
        double *want = pc_test_alloc((size_t)cells * 8), *got = pc_test_alloc((size_t)cells * 8);
        float *got32 = pc_test_alloc((size_t)cells * 4);
        double lp[20];
        for (int64_t r = 0; r < n; r++)
            pc_enum_conditionals(en, x + r * V, miss + r * V, want + r * V * C);
        pc_evaluator *e = pc_test_evaluator(c, gpus[rep % 3], n, 0);
        pc_test_poison_f64(got, (size_t)cells), pc_test_poison_f32(got32, (size_t)cells);
        pc_test_poison_f64(lp, (size_t)n);
        assert_int_equal(pc_conditionals(e, x, miss, n, V, C, got, lp), PC_OK);
        assert_int_equal(pc_conditionals_f32(e, x, miss, n, V, C, got32, NULL), PC_OK);
        for (int64_t r = 0; r < n; r++) {
            const double pe = pc_enum_evidence(en, x + r * V, miss + r * V);
            assert_true(same(lp[r], log(pe), TOL_ENUM));
        }
        for (int64_t i = 0; i < cells; i++) {
            if (!same(got[i], want[i], TOL_ENUM) || !same(got32[i], got[i], tol32))
                fail_msg("model %d (%s) row %lld var %lld value %lld: %.17g (float %.9g), "
                         "enumerated %.17g", rep, pc_backend_name(gpus[rep % 3]),
                         (long long)(i / (V * C)), (long long)(i / C % V), (long long)(i % C),
                         got[i], (double)got32[i], want[i]);
            if (!isnan(want[i])) worst = fmax(worst, fabs(got[i] - want[i]));
        }
        pc_evaluator_free(e);
        free(want), free(got), free(got32);
        pc_enum_free(en);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
    print_message("  conditionals: largest |GPU - enumeration| %.3g\n", worst);
}

/* MPE of a GPU backend equals ref's bit for bit; both are the enumerated argmax where it wins
 * by MPE_MARGIN, and keep the evidence. */
static void test_mpe_enumeration(void **state) {
    (void)state;
    for (int rep = 0; rep < 40; rep++) {
        const int32_t V = (int32_t)pc_hr_int(1, 6), C = (int32_t)pc_hr_int(2, 3);
        pc_hclt *m = tiny_model(rep, V, C, (int32_t)pc_hr_int(1, 3));
        pc_circuit *c = pc_test_compile(m);
        pc_enum *en = pc_enum_create(m);
        const int64_t n = 20;
        uint8_t x[20 * 6], miss[20 * 6], ref[20 * 6], got[20 * 6];
        double ref_lp[20], lp[20];
        tiny_rows(en, n, x, miss);
        pc_evaluator *r = pc_test_evaluator(c, PC_BACKEND_REF, n, 1);
        pc_evaluator *e = pc_test_evaluator(c, gpus[rep % 3], n, 0);
        assert_int_equal(pc_mpe(r, x, miss, n, V, ref, ref_lp), PC_OK);
        pc_test_poison_bytes(got, sizeof got), pc_test_poison_f64(lp, (size_t)n);
        assert_int_equal(pc_mpe(e, x, miss, n, V, got, lp), PC_OK);
        assert_memory_equal(got, ref, (size_t)(n * V));
        assert_memory_equal(lp, ref_lp, (size_t)n * sizeof(double));
        for (int64_t i = 0; i < n; i++) {
            double best, second;
            const int64_t arg = pc_enum_mpe(en, x + i * V, miss + i * V, &best, &second);
            assert_true(same(lp[i], best, TOL_ENUM));
            if (best - second > MPE_MARGIN) assert_int_equal(pc_enum_index(en, got + i * V), arg);
        }
        /* In place. */
        assert_int_equal(pc_mpe(e, x, miss, n, V, x, NULL), PC_OK);
        assert_memory_equal(x, ref, (size_t)(n * V));
        pc_evaluator_free(e);
        pc_evaluator_free(r);
        pc_enum_free(en);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
}

/* Chi-square of DRAWS rows against prob [num_x]. */
static void chi_square(const pc_enum *en, const uint8_t *rows, const double *prob,
                       const char *what, uint64_t seed) {
    double stat;
    int64_t df;
    const double p = pc_enum_chi2_rows(en, rows, DRAWS, prob, &stat, &df);
    if (!(p >= ALPHA))
        fail_msg("%s, seed %llu: chi-square %.1f, %lld degrees of freedom, p = %.3g", what,
                 (unsigned long long)seed, stat, (long long)df, p);
}

/* Both samplers on 12 tiny models: chi-square, and p(x) rows equal to ref's. */
static void test_samplers_chi_square(void **state) {
    (void)state;
    for (int rep = 0; rep < 12; rep++) {
        const int32_t V = (int32_t)pc_hr_int(1, 5), C = (int32_t)pc_hr_int(2, 3);
        pc_hclt *m = tiny_model(rep, V, C, (int32_t)pc_hr_int(1, 3));
        pc_circuit *c = pc_test_compile(m);
        pc_enum *en = pc_enum_create(m);
        uint8_t *rows = pc_test_alloc((size_t)DRAWS * V), *ref = pc_test_alloc((size_t)DRAWS * V);
        uint8_t *x = pc_test_alloc((size_t)DRAWS * V), *miss = pc_test_alloc((size_t)DRAWS * V);
        double *prob = pc_test_alloc((size_t)en->num_x * sizeof(double));
        const uint64_t seed = pc_rng_u64(pc_test_rng());
        pc_evaluator *e = pc_test_evaluator(c, PC_BACKEND_FUSE, DRAWS, 0);
        pc_evaluator *r = pc_test_evaluator(c, PC_BACKEND_REF, DRAWS, 0);
        pc_test_poison_bytes(rows, (size_t)DRAWS * V);
        assert_int_equal(pc_sample(e, DRAWS, V, seed, 3, rows), PC_OK);
        chi_square(en, rows, en->px, "p(x)", seed);
        assert_int_equal(pc_sample(r, DRAWS, V, seed, 3, ref), PC_OK);
        assert_memory_equal(rows, ref, (size_t)DRAWS * V);
        /* One evidence row of positive probability with at least one entry missing. */
        int64_t i;
        do i = pc_hr_int(0, en->num_x - 1);
        while (en->px[i] <= 0.0);
        pc_enum_decode(en, i, x);
        for (int32_t v = 0; v < V; v++) miss[v] = pc_hr_unit() < 0.6;
        miss[pc_hr_int(0, V - 1)] = 1;
        const double pe = pc_enum_evidence(en, x, miss);
        for (int64_t j = 0; j < en->num_x; j++)
            prob[j] = pc_enum_agrees(en, j, x, miss) ? en->px[j] / pe : 0.0;
        for (int64_t d = 1; d < DRAWS; d++) memcpy(x + d * V, x, V), memcpy(miss + d * V, miss, V);
        pc_test_poison_bytes(rows, (size_t)DRAWS * V);
        assert_int_equal(pc_sample_conditional(e, x, miss, DRAWS, V, seed, 0, rows), PC_OK);
        chi_square(en, rows, prob, "p(x_missing | x_observed)", seed);
        pc_evaluator_free(e);
        pc_evaluator_free(r);
        free(rows), free(ref), free(x), free(miss), free(prob);
        pc_enum_free(en);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
}

/* A model of V variables (chain: every variable below the previous one, its own latent). */
static pc_hclt *sized_model(int32_t V, int32_t C, int32_t K, int chain) {
    pc_hclt *m = pc_hr_model(V, C, K, chain ? 0.0 : 0.3, 1);
    if (!chain) return m;
    int32_t root = 0;
    while (m->parent[root] >= 0) root++;
    for (int32_t v = 0, prev = root; v < V; v++)
        if (v != root) m->parent[v] = prev, prev = v;
    return m;
}

/* The rows of b [n, V] that differ from a's; every value of b is < C and keeps x where it is
 * observed. */
static int64_t differing_rows(const uint8_t *a, const uint8_t *b, const uint8_t *x,
                              const uint8_t *miss, int64_t n, int64_t V, int64_t C) {
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) {
        differ += memcmp(a + i * V, b + i * V, (size_t)V) != 0;
        for (int64_t v = 0; v < V; v++) {
            assert_true(b[i * V + v] < C);
            if (!miss[i * V + v]) assert_int_equal(b[i * V + v], x[i * V + v]);
        }
    }
    return differ;
}

/* Every query of fuse against ref on n rows of a larger model: conditionals within TOL_REF,
 * MPE bit for bit, p(x) samples equal (split into two
 * calls on the GPU), conditional samples equal in all but a few rows; a row of probability 0
 * fails conditional sampling by name. */
static void compare_with_ref(const pc_circuit *c, int64_t n) {
    const int64_t V = c->num_vars, C = c->num_cats, cells = n * V * C;
    uint8_t *miss = NULL, *x = pc_hr_data(n, (int32_t)V, (int32_t)C, 0.5, &miss);
    uint8_t *a = pc_test_alloc((size_t)(n * V)), *b = pc_test_alloc((size_t)(n * V));
    double *pa = pc_test_alloc((size_t)cells * 8), *pb = pc_test_alloc((size_t)cells * 8);
    double *la = pc_test_alloc((size_t)n * 8), *lb = pc_test_alloc((size_t)n * 8);
    pc_evaluator *r = pc_test_evaluator(c, PC_BACKEND_REF, n, 0);
    pc_evaluator *e = pc_test_evaluator(c, PC_BACKEND_FUSE, n, 0);
    assert_int_equal(pc_conditionals(r, x, miss, n, V, C, pa, la), PC_OK);
    pc_test_poison_f64(pb, (size_t)cells), pc_test_poison_f64(lb, (size_t)n);
    assert_int_equal(pc_conditionals(e, x, miss, n, V, C, pb, lb), PC_OK);
    double worst = 0.0;
    for (int64_t i = 0; i < cells; i++) {
        if (!same(pb[i], pa[i], TOL_REF))
            fail_msg("K = %d: conditionals %.17g, ref %.17g at %lld", c->num_latents, pb[i],
                     pa[i], (long long)i);
        if (!isnan(pa[i])) worst = fmax(worst, fabs(pb[i] - pa[i]));
    }
    for (int64_t i = 0; i < n; i++) assert_true(same(lb[i], la[i], TOL_REF * fabs(la[i]) + 1e-12));
    assert_int_equal(pc_mpe(r, x, miss, n, V, a, la), PC_OK);
    pc_test_poison_bytes(b, (size_t)(n * V));
    assert_int_equal(pc_mpe(e, x, miss, n, V, b, lb), PC_OK);
    assert_memory_equal(a, b, (size_t)(n * V));
    assert_memory_equal(la, lb, (size_t)n * 8);
    const uint64_t seed = pc_rng_u64(pc_test_rng());
    const int64_t n1 = n / 3;
    assert_int_equal(pc_sample(r, n, V, seed, 11, a), PC_OK);
    pc_test_poison_bytes(b, (size_t)(n * V));
    assert_int_equal(pc_sample(e, n1, V, seed, 11, b), PC_OK);
    assert_int_equal(pc_sample(e, n - n1, V, seed, 11 + n1, b + n1 * V), PC_OK);
    assert_memory_equal(a, b, (size_t)(n * V));
    /* Conditional sampling needs evidence of positive probability in every row. */
    uint8_t *miss0 = pc_test_alloc((size_t)(n * V));
    memcpy(miss0, miss, (size_t)(n * V));
    assert_int_equal(pc_evaluate(r, x, miss, n, V, la), PC_OK);
    int64_t impossible = -1;
    for (int64_t i = 0; i < n; i++)
        if (la[i] == -INFINITY) {
            if (impossible < 0) impossible = i;
            memset(miss + i * V, 1, (size_t)V);
        }
    assert_int_equal(pc_sample_conditional(r, x, miss, n, V, seed, 0, a), PC_OK);
    pc_test_poison_bytes(b, (size_t)(n * V));
    assert_int_equal(pc_sample_conditional(e, x, miss, n, V, seed, 0, b), PC_OK);
    const int64_t differ = differing_rows(a, b, x, miss, n, V, C);
    print_message("  K = %d, V = %d, %d layers: conditionals within %.2g of ref; conditional "
                  "samples differing from ref's: %lld of %lld rows\n",
                  c->num_latents, c->num_vars, c->num_layers, worst, (long long)differ,
                  (long long)n);
    assert_true(differ <= n / 50);
    if (impossible >= 0) { /* the first row of probability 0 back: an error naming it */
        char want[64];
        snprintf(want, sizeof want, "sample %lld:", (long long)impossible);
        assert_int_equal(pc_sample_conditional(e, x, miss0, n, V, seed, 0, b), PC_ERR_DATA);
        assert_non_null(strstr(pc_last_error(), want));
    }
    free(miss0);
    pc_evaluator_free(e);
    pc_evaluator_free(r);
    free(x), free(miss), free(a), free(b), free(pa), free(pb), free(la), free(lb);
}

static void test_sizes_against_ref(void **state) {
    (void)state;
    const struct {
        int32_t V, C, K, chain;
        int64_t n;
    } cases[] = {{1, 2, 1, 0, 50},   {20, 256, 1, 0, 40},  {30, 5, 3, 0, 257},
                 {50, 256, 16, 0, 33}, {40, 256, 17, 0, 65}, {300, 4, 7, 1, 20},
                 {60, 256, 33, 0, 18}, {30, 32, 100, 0, 9},   {12, 8, 300, 0, 5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pc_hclt *m = sized_model(cases[i].V, cases[i].C, cases[i].K, cases[i].chain);
        pc_circuit *c = pc_test_compile(m);
        compare_with_ref(c, cases[i].n);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
}

int main(void) {
    pc_test_require_gpu_or_exit("test_cuda_query");
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conditionals_enumeration),
        cmocka_unit_test(test_mpe_enumeration),
        cmocka_unit_test(test_samplers_chi_square),
        cmocka_unit_test(test_sizes_against_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
