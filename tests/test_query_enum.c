/* Conditionals and MPE against brute-force enumeration (tests/common/enumerate.h) on tiny
 * random models (V <= 6, K <= 3, C <= 3) of every awkward shape: random trees, chains, stars,
 * every variable sharing the root's latent, none sharing, trans rows in random order, zero
 * probabilities. Evidence rows: nothing missing, everything missing, random masks, and rows of
 * probability 0. Also exact ties and a model whose posteriors live 800 nats below the maxima. */
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
#include "pc/lse.h"
#include "pc/query.h"
#include "testutil.h"

/* Tolerances. ref is FP64 throughout: 1e-12 against the enumeration (probabilities and log
 * p). cpu-fuse and cpu keep node values in FP32 relative to FP64 offsets: conditionals within
 * 1e-5 of ref (the largest seen over ten seeds was 1.2e-7), log p(e) within 2e-5 nats as in
 * pc_evaluate. A float output is within float rounding of the double one
 * (pc_test_tol_f32_conditional: the GPU forms it in float). */
#define TOL_REF 1e-12
#define TOL_FAST 1e-5
#define TOL_FAST_LOGP 2e-5
/* MPE completions must equal the enumerated argmax when it wins by more than this (nats). */
#define MPE_MARGIN 1e-9

enum shape { SHAPE_RANDOM, SHAPE_CHAIN, SHAPE_STAR, SHAPE_ALL_SHARED, SHAPE_NONE_SHARED };

/* A random model whose tree is rewired to the shape (trans rows kept: they belong to edges, so
 * any tree over the same sharing pattern is valid). */
static pc_hclt *shaped_model(int32_t V, int32_t C, int32_t K, enum shape shape) {
    const double share = shape == SHAPE_ALL_SHARED ? 1.0 : shape == SHAPE_NONE_SHARED ? 0.0 : 0.4;
    pc_hclt *m = pc_hr_model(V, C, K, share, (int)pc_hr_int(0, 1));
    int32_t root = 0;
    for (int32_t v = 0; v < V; v++)
        if (m->parent[v] < 0) root = v;
    int32_t prev = root;
    for (int32_t v = 0; v < V; v++) {
        if (v == root) continue;
        if (shape == SHAPE_CHAIN) m->parent[v] = prev, prev = v;
        if (shape == SHAPE_STAR) m->parent[v] = root;
    }
    return m;
}

/* Evidence rows [n, V]: row 0 nothing missing, row 1 everything missing, then random masks;
 * observed values from a random x, or from an x of probability 0 when one exists (odd rows). */
static void evidence_rows(const pc_enum *en, int64_t n, uint8_t *x, uint8_t *missing) {
    const int32_t V = en->num_vars;
    int64_t zero_x = -1;
    for (int64_t i = 0; i < en->num_x; i++)
        if (en->px[i] == 0.0) zero_x = i;
    for (int64_t r = 0; r < n; r++) {
        const int64_t i = zero_x >= 0 && r % 2 ? zero_x : pc_hr_int(0, en->num_x - 1);
        pc_enum_decode(en, i, x + r * V);
        for (int32_t v = 0; v < V; v++) {
            missing[r * V + v] = r == 0 ? 0 : r == 1 ? 1 : pc_hr_unit() < 0.5;
            if (missing[r * V + v]) x[r * V + v] = (uint8_t)pc_hr_int(0, 255); /* never read */
        }
    }
}

/* A model, its circuit and enumeration, n evidence rows and their exact conditionals
 * [n, V, C] and log p(e) [n]. */
typedef struct enum_case {
    pc_hclt *m;
    pc_circuit *c;
    pc_enum *en;
    int64_t n;
    uint8_t *x, *missing;
    double *want, *want_logp;
} enum_case;

static enum_case make_case(int32_t V, int32_t C, int32_t K, enum shape shape, int64_t n) {
    enum_case t;
    t.m = shaped_model(V, C, K, shape);
    t.c = pc_test_compile(t.m);
    t.en = pc_enum_create(t.m);
    t.n = n;
    t.x = pc_test_alloc((size_t)(n * V)), t.missing = pc_test_alloc((size_t)(n * V));
    evidence_rows(t.en, n, t.x, t.missing);
    t.want = pc_test_alloc((size_t)(n * V * C) * sizeof(double));
    t.want_logp = pc_test_alloc((size_t)n * sizeof(double));
    for (int64_t r = 0; r < n; r++) {
        pc_enum_conditionals(t.en, t.x + r * V, t.missing + r * V, t.want + r * V * C);
        t.want_logp[r] = log(pc_enum_evidence(t.en, t.x + r * V, t.missing + r * V));
    }
    return t;
}

static void free_case(enum_case *t) {
    free(t->x), free(t->missing), free(t->want), free(t->want_logp);
    pc_enum_free(t->en);
    pc_circuit_free(t->c);
    pc_hclt_free(t->m);
}

static int close_or_both_nan(double got, double want, double tol) {
    return (isnan(got) && isnan(want)) || fabs(got - want) <= tol;
}

static int same_logp(double got, double want, double tol) {
    return (got == -INFINITY && want == -INFINITY) || fabs(got - want) <= tol;
}

/* Conditionals of one backend for the rows, checked against want [n, V, C] and want_logp. */
static void check_conditionals(const pc_circuit *c, pc_backend backend, const uint8_t *x,
                               const uint8_t *missing, int64_t n, const double *want,
                               const double *want_logp, double tol, double tol_logp,
                               const char *what) {
    const int64_t V = c->num_vars, C = c->num_cats, cells = n * V * C;
    const double tol32 = pc_test_tol_f32_conditional(c->num_latents);
    pc_evaluator *e = pc_test_evaluator(c, backend, n, (int)pc_hr_int(1, 2));
    double *p64 = pc_test_alloc((size_t)cells * sizeof(double)), *lp = pc_test_alloc(n * 8);
    float *p32 = pc_test_alloc((size_t)cells * sizeof(float));
    pc_test_poison_f64(p64, (size_t)cells), pc_test_poison_f64(lp, (size_t)n);
    pc_test_poison_f32(p32, (size_t)cells);
    assert_int_equal(pc_conditionals(e, x, missing, n, V, C, p64, lp), PC_OK);
    assert_int_equal(pc_conditionals_f32(e, x, missing, n, V, C, p32, NULL), PC_OK);
    for (int64_t r = 0; r < n; r++) {
        if (!same_logp(lp[r], want_logp[r], tol_logp))
            fail_msg("%s %s row %lld: log p(e) %.17g, expected %.17g", what,
                     pc_backend_name(backend), (long long)r, lp[r], want_logp[r]);
        for (int64_t j = r * V * C; j < (r + 1) * V * C; j++) {
            if (!close_or_both_nan(p64[j], want[j], tol))
                fail_msg("%s %s row %lld var %lld cat %lld: %.17g, expected %.17g", what,
                         pc_backend_name(backend), (long long)r, (long long)(j / C % V),
                         (long long)(j % C), p64[j], want[j]);
            if (!close_or_both_nan((double)p32[j], p64[j], tol32))
                fail_msg("%s %s: float output %.9g vs double %.17g", what,
                         pc_backend_name(backend), (double)p32[j], p64[j]);
        }
    }
    free(p64), free(p32), free(lp);
    pc_evaluator_free(e);
}

static void test_conditionals_match_enumeration(void **state) {
    (void)state;
    for (int rep = 0; rep < 60; rep++) {
        const int32_t V = (int32_t)pc_hr_int(1, 6), C = (int32_t)pc_hr_int(2, 3);
        enum_case t = make_case(V, C, (int32_t)pc_hr_int(1, 3), (enum shape)(rep % 5), 24);
        check_conditionals(t.c, PC_BACKEND_REF, t.x, t.missing, t.n, t.want, t.want_logp,
                           TOL_REF, TOL_REF, "enumeration");
        check_conditionals(t.c, PC_BACKEND_CPU_FUSE, t.x, t.missing, t.n, t.want, t.want_logp,
                           TOL_FAST, TOL_FAST_LOGP, "enumeration");
        check_conditionals(t.c, PC_BACKEND_CPU, t.x, t.missing, t.n, t.want, t.want_logp,
                           TOL_FAST, TOL_FAST_LOGP, "enumeration");
        free_case(&t);
    }
}

/* MPE of one backend: logp equals the enumerated best, the completion attains it and keeps
 * the evidence, and it is the enumerated argmax whenever that wins by MPE_MARGIN. Returns the
 * completions [n, V] and logp [n] (malloc'ed) for comparing backends. */
static void check_mpe(const pc_circuit *c, const pc_enum *en, pc_backend backend,
                      const uint8_t *x, const uint8_t *missing, int64_t n, uint8_t **out,
                      double **out_logp) {
    const int64_t V = c->num_vars;
    pc_evaluator *e = pc_test_evaluator(c, backend, n, (int)pc_hr_int(1, 2));
    uint8_t *done = pc_test_alloc((size_t)(n * V));
    double *lp = pc_test_alloc((size_t)n * sizeof(double));
    pc_test_poison_bytes(done, (size_t)(n * V)), pc_test_poison_f64(lp, (size_t)n);
    assert_int_equal(pc_mpe(e, x, missing, n, V, done, lp), PC_OK);
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *xr = x + r * V, *mr = missing + r * V, *dr = done + r * V;
        double best, second;
        const int64_t arg = pc_enum_mpe(en, xr, mr, &best, &second);
        for (int64_t v = 0; v < V; v++) {
            assert_true(dr[v] < c->num_cats);
            if (!mr[v]) assert_int_equal(dr[v], xr[v]);
        }
        const double attained = en->max_joint[pc_enum_index(en, dr)];
        if (!same_logp(lp[r], best, TOL_REF) || !same_logp(attained, best, TOL_REF))
            fail_msg("%s row %lld: MPE log p %.17g (completion attains %.17g), enumerated %.17g",
                     pc_backend_name(backend), (long long)r, lp[r], attained, best);
        if (best - second > MPE_MARGIN && pc_enum_index(en, dr) != arg)
            fail_msg("%s row %lld: completion differs from the enumerated argmax",
                     pc_backend_name(backend), (long long)r);
    }
    pc_evaluator_free(e);
    *out = done, *out_logp = lp;
}

static void test_mpe_matches_enumeration(void **state) {
    (void)state;
    for (int rep = 0; rep < 60; rep++) {
        const int32_t V = (int32_t)pc_hr_int(1, 6), C = (int32_t)pc_hr_int(2, 3);
        enum_case t = make_case(V, C, (int32_t)pc_hr_int(1, 3), (enum shape)(rep % 5), 24);
        uint8_t *ref, *got;
        double *ref_lp, *got_lp;
        check_mpe(t.c, t.en, PC_BACKEND_REF, t.x, t.missing, t.n, &ref, &ref_lp);
        const pc_backend fast[] = {PC_BACKEND_CPU_FUSE, PC_BACKEND_CPU};
        for (int b = 0; b < 2; b++) {
            check_mpe(t.c, t.en, fast[b], t.x, t.missing, t.n, &got, &got_lp);
            assert_memory_equal(got, ref, (size_t)(t.n * V));
            assert_memory_equal(got_lp, ref_lp, (size_t)t.n * sizeof(double));
            free(got), free(got_lp);
        }
        /* In place: completed = x gives the same completion. */
        pc_evaluator *e = pc_test_evaluator(t.c, PC_BACKEND_REF, t.n, 1);
        assert_int_equal(pc_mpe(e, t.x, t.missing, t.n, V, t.x, NULL), PC_OK);
        assert_memory_equal(t.x, ref, (size_t)(t.n * V));
        pc_evaluator_free(e);
        free(ref), free(ref_lp);
        free_case(&t);
    }
}

/* Exact ties: uniform root and transitions, and p(X_v = c | k) = 0.6 for c = k, else 0.2, so
 * every latent state ties and each state's best value is the state itself. The lowest-index
 * rule sets every latent to 0 except the one holding v1, which its evidence x1 = 2 pins to 2;
 * so the completion is (0, 2, 0, 0, 0) with log p = (T + 1) log(1/3) + 5 log 0.6. */
static void test_mpe_ties_lowest_index(void **state) {
    (void)state;
    const int32_t V = 5, C = 3, K = 3;
    pc_hclt *m = pc_hr_model(V, C, K, 0.0, 0); /* every variable has a latent of its own */
    for (int32_t k = 0; k < K; k++) m->root_logw[k] = -log((double)K);
    for (int64_t i = 0; i < (int64_t)m->num_trans * K * K; i++) m->trans_logw[i] = -log((double)K);
    for (int64_t i = 0; i < (int64_t)V * K * C; i++)
        m->input_logp[i] = log(i / C % K == i % C ? 0.6 : 0.2);
    pc_circuit *c = pc_test_compile(m);
    /* With a GPU, fuse too (its queries are tests/test_cuda_query.c's). */
    const pc_backend backends[] = {PC_BACKEND_REF, PC_BACKEND_CPU_FUSE, PC_BACKEND_CPU,
                                   PC_BACKEND_FUSE};
    for (int b = 0; b < 3 + pc_test_gpu_present(); b++) {
        pc_evaluator *e = pc_test_evaluator(c, backends[b], 1, 1);
        uint8_t x[5] = {0, 2, 0, 0, 0}, missing[5] = {1, 0, 1, 1, 1}, done[5];
        double lp;
        assert_int_equal(pc_mpe(e, x, missing, 1, V, done, &lp), PC_OK);
        const uint8_t want[5] = {0, 2, 0, 0, 0};
        assert_memory_equal(done, want, 5);
        const double expect = (m->num_trans + 1) * -log((double)K) + V * log(0.6);
        assert_true(fabs(lp - expect) <= 1e-12);
        pc_evaluator_free(e);
    }
    pc_circuit_free(c);
    pc_hclt_free(m);
}

/* Posteriors computed 800 nats below the maxima, where every exp-once sum underflows (the
 * model of test_eval's underflow test plus a variable v2 sharing v1's latent): with x0 = 0,
 * x1 = 0 observed, p(Z_1 = .) = (2/3, 1/3), so p(X_2 = 0 | e) = 2/3 0.3 + 1/3 0.6 = 0.4. */
static void test_conditionals_underflow(void **state) {
    (void)state;
    pc_hclt *m = NULL;
    assert_int_equal(pc_hclt_create(3, 2, 2, 1, &m), PC_OK);
    m->parent[1] = 0, m->trans_index[1] = 0;
    m->parent[2] = 1, m->trans_index[2] = -1;
    const double tiny = -800.0, big = log1p(-exp(-800.0));
    const double root[2] = {tiny, big}, trans[4] = {big, tiny, tiny, big};
    const double input[12] = {log(0.5), log(0.5), log(0.5), log(0.5), big, tiny, tiny, big,
                              log(0.3), log(0.7), log(0.6), log(0.4)};
    memcpy(m->root_logw, root, sizeof root);
    memcpy(m->trans_logw, trans, sizeof trans);
    memcpy(m->input_logp, input, sizeof input);
    pc_circuit *c = pc_test_compile(m);
    const uint8_t x[3] = {0, 0, 0}, missing[3] = {0, 0, 1};
    const struct {
        pc_backend backend;
        double tol;
    } cases[] = {{PC_BACKEND_REF, TOL_REF}, {PC_BACKEND_CPU_FUSE, 1e-4}, {PC_BACKEND_CPU, 1e-4},
                 {PC_BACKEND_FUSE, TOL_REF}}; /* fuse with a GPU */
    for (int i = 0; i < 3 + pc_test_gpu_present(); i++) {
        pc_evaluator *e = pc_test_evaluator(c, cases[i].backend, 1, 1);
        double p[6], lp;
        pc_test_poison_f64(p, 6);
        assert_int_equal(pc_conditionals(e, x, missing, 1, 3, 2, p, &lp), PC_OK);
        print_message("  %-8s p(X2 = 0 | e) = %.17g, log p(e) = %.17g\n",
                      pc_backend_name(cases[i].backend), p[4], lp);
        assert_true(fabs(p[4] - 0.4) <= cases[i].tol && fabs(p[5] - 0.6) <= cases[i].tol);
        assert_true(p[0] == 1.0 && p[1] == 0.0 && p[2] == 1.0 && p[3] == 0.0);
        assert_true(fabs(lp - (-800.0 + log(1.5))) <= 1e-4);
        pc_evaluator_free(e);
    }
    pc_circuit_free(c);
    pc_hclt_free(m);
}

/* Every instruction-set build of the sum-product kernels (PC_CPU_ISA picks one when the
 * evaluator is made): ref's stays within TOL_REF of the enumeration, cpu-fuse's within
 * TOL_FAST, on K values with tails of the 16-wide tiles and rows of C = 20 values (a tail of
 * the conditionals' tiles). */
static void test_isa_builds(void **state) {
    (void)state;
    const int32_t Ks[] = {1, 3, 17};
    const pc_isa best = pc_cpu_best_isa();
    for (int rep = 0; rep < 3; rep++) {
        const int32_t V = rep == 2 ? 2 : 3, C = rep == 2 ? 20 : 3;
        enum_case t = make_case(V, C, Ks[rep], (enum shape)rep, 12);
        for (int isa = PC_ISA_SCALAR; isa <= (int)best; isa++) {
            const char *name = pc_isa_name((pc_isa)isa);
            setenv("PC_CPU_ISA", name, 1);
            check_conditionals(t.c, PC_BACKEND_REF, t.x, t.missing, t.n, t.want, t.want_logp,
                               TOL_REF, TOL_REF, name);
            check_conditionals(t.c, PC_BACKEND_CPU_FUSE, t.x, t.missing, t.n, t.want,
                               t.want_logp, TOL_FAST, TOL_FAST_LOGP, name);
        }
        unsetenv("PC_CPU_ISA");
        free_case(&t);
    }
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conditionals_match_enumeration),
        cmocka_unit_test(test_mpe_matches_enumeration),
        cmocka_unit_test(test_mpe_ties_lowest_index),
        cmocka_unit_test(test_conditionals_underflow),
        cmocka_unit_test(test_isa_builds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
