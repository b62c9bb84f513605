/* Evaluators on the CPU: ref against the worked example and against exact enumeration,
 * cpu-fuse and cpu against ref on random models and data with missing values, a circuit with
 * zero-probability states added, and the data checks in front of every backend. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eval/cpu/cpu_common.h"
#include "hclt_random.h"
#include "pc/circuit.h"
#include "pc/cuda.h"
#include "pc/eval.h"
#include "pc/hclt.h"

/* Tolerances (nats). The worked example's table is FP64: ref must match it to 1e-12. A float32
 * file stores each parameter with a relative error <= 6e-8 (values of size ~2): 1e-6 total. */
#define TOL_REF 1e-12
#define TOL_F32_FILE 1e-6
/* Against ref, per sample, on random models of <= 120 variables. cpu-fuse holds every K-vector
 * near 0 in FP32: errors ~1e-7 per sum group (2e-5 bounds ~120 groups), plus the FP32 rounding
 * of each input value relative to its variable's offset, up to half an ulp (6e-8 relative) of
 * each, values whose sum is about |log p|. So the bound grows with |log p|: over 2,250 random
 * models the largest error was 1.45e-5 (at log p = -550, 2.6e-8 of it), and one of 2.03e-5 at
 * -550 failed a flat 2e-5 on the scalar path's error of 1.99e-5 (the same arithmetic), a sum
 * of roundings, not a fault. cpu's IntLSE steps err by up to ~1.4e-5 nats each, ~log2(K) + 1
 * steps per group (largest seen 6.4e-4). */
static double tol_fuse(double ref) {
    return isfinite(ref) ? 2e-5 + 6e-8 * fabs(ref) : 0.0; /* an infinite ref must be met */
}
#define TOL_INT 5e-3

static void poison(double *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
}

static pc_circuit *compile_or_fail(const pc_hclt *m) {
    pc_circuit *c = NULL;
    pc_status st = pc_circuit_compile(m, &c);
    if (st != PC_OK) fail_msg("compile: %s", pc_last_error());
    return c;
}

/* Scores n samples with one backend; fails the test on any error. logp is poisoned first. */
static void score(const pc_circuit *c, pc_backend backend, int threads, const uint8_t *x,
                  const uint8_t *missing, int64_t n, double *logp) {
    pc_eval_opts opts = {backend, n > 0 ? n : 1, threads};
    pc_evaluator *e = NULL;
    if (pc_evaluator_create(c, &opts, &e) != PC_OK)
        fail_msg("%s: create: %s", pc_backend_name(backend), pc_last_error());
    poison(logp, n);
    if (pc_evaluate(e, x, missing, n, c->num_vars, logp) != PC_OK)
        fail_msg("%s: evaluate: %s", pc_backend_name(backend), pc_last_error());
    pc_evaluator_free(e);
}

static char *data_path(const char *name) {
    const char *src = getenv("PC_SOURCE_DIR");
    char *p = malloc(4096);
    assert_non_null(p);
    snprintf(p, 4096, "%s/tests/data/%s", src ? src : ".", name);
    return p;
}

/* The worked example of HCLT_FORMAT.md, from the files another HDF5 writer produced. */
static void check_tiny(const char *file, double tol_ref) {
    char *path = data_path(file), *exp_path = data_path("tiny_expected.txt");
    pc_hclt *m = NULL;
    if (pc_hclt_load(path, &m) != PC_OK) fail_msg("%s", pc_last_error());
    pc_circuit *c = compile_or_fail(m);
    assert_int_equal(c->num_groups, 2);
    FILE *f = fopen(exp_path, "r");
    assert_non_null(f);
    uint8_t x[8 * 3];
    double want[8], got[8];
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        int a, b, d;
        double lp;
        if (line[0] == '#') continue;
        assert_int_equal(sscanf(line, "%d %d %d %lf", &a, &b, &d, &lp), 4);
        assert_true(n < 8);
        x[3 * n] = (uint8_t)a, x[3 * n + 1] = (uint8_t)b, x[3 * n + 2] = (uint8_t)d;
        want[n++] = lp;
    }
    fclose(f);
    assert_int_equal(n, 8);
    const struct {
        pc_backend backend;
        double tol;
    } cases[] = {{PC_BACKEND_REF, tol_ref}, {PC_BACKEND_CPU_FUSE, 1e-6}, {PC_BACKEND_CPU, 1e-3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        score(c, cases[i].backend, 1, x, NULL, 8, got);
        for (int s = 0; s < 8; s++)
            if (!(fabs(got[s] - want[s]) <= cases[i].tol))
                fail_msg("%s %s x=(%d,%d,%d): %.17g, expected %.17g", file,
                         pc_backend_name(cases[i].backend), x[3 * s], x[3 * s + 1], x[3 * s + 2],
                         got[s], want[s]);
    }
    pc_circuit_free(c);
    pc_hclt_free(m);
    free(path);
    free(exp_path);
}

static void test_worked_example_f64(void **state) {
    (void)state;
    check_tiny("tiny_f64.h5", TOL_REF);
}

static void test_worked_example_f32_gzip(void **state) {
    (void)state;
    check_tiny("tiny_f32_gzip.h5", TOL_F32_FILE);
}

/* Every x of a small random model: the probabilities sum to 1, and marginalising one variable
 * equals the sum over its values. */
static void test_ref_sums_to_one(void **state) {
    (void)state;
    const int32_t Ks[] = {1, 2, 3, 5};
    for (int rep = 0; rep < 24; rep++) {
        const int32_t K = Ks[rep % 4], C = 2 + (int32_t)pc_hr_int(0, 1);
        const int32_t V = (int32_t)pc_hr_int(1, C == 2 ? 8 : 5);
        pc_hclt *m = pc_hr_model(V, C, K, 0.35, rep % 2);
        if (rep % 3 == 2) {
            /* Hard ranges: push one trans row and one input row to ~1e-300 differences, so the
             * exp-once sums underflow and the exact fallback must carry them. */
            m->input_logp[0] = -800.0;
            double rest = log1p(-exp(-800.0));
            for (int32_t cc = 1; cc < C; cc++) m->input_logp[cc] = rest - log((double)(C - 1));
        }
        pc_circuit *c = compile_or_fail(m);
        int64_t n = 1;
        for (int32_t v = 0; v < V; v++) n *= C;
        uint8_t *x = malloc((size_t)(n * V));
        uint8_t *mask = calloc((size_t)(n * V), 1);
        double *lp = malloc((size_t)n * sizeof *lp), *lpm = malloc((size_t)n * sizeof *lpm);
        assert_true(x && mask && lp && lpm);
        for (int64_t i = 0; i < n; i++)
            for (int64_t v = 0, r = i; v < V; v++, r /= C) x[i * V + v] = (uint8_t)(r % C);
        score(c, PC_BACKEND_REF, 1, x, NULL, n, lp);
        double total = 0.0;
        for (int64_t i = 0; i < n; i++) total += exp(lp[i]);
        if (!(fabs(total - 1.0) <= TOL_REF))
            fail_msg("V=%d C=%d K=%d: probabilities sum to %.17g", V, C, K, total);
        /* Marginalise variable 0: sample i with x_0 missing = sum over x_0 of p(x). */
        for (int64_t i = 0; i < n; i++) mask[i * V] = 1;
        score(c, PC_BACKEND_REF, 2, x, mask, n, lpm);
        for (int64_t i = 0; i < n; i += C) {
            double sum = 0.0;
            for (int32_t cc = 0; cc < C; cc++) sum += exp(lp[i + cc]);
            if (!(fabs(exp(lpm[i]) - sum) <= TOL_REF))
                fail_msg("V=%d C=%d K=%d: marginal %.17g vs sum %.17g", V, C, K, exp(lpm[i]), sum);
        }
        /* Everything missing: log p = 0. */
        memset(mask, 1, (size_t)(n * V));
        score(c, PC_BACKEND_REF, 1, x, mask, 1, lpm);
        assert_true(fabs(lpm[0]) <= TOL_REF);
        free(x), free(mask), free(lp), free(lpm);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
}

/* cpu-fuse and cpu against ref, per sample, with missing values and zero probabilities. */
static void test_backends_agree(void **state) {
    (void)state;
    const int32_t Ks[] = {1, 2, 3, 5, 16};
    for (int rep = 0; rep < 15; rep++) {
        const int32_t K = Ks[rep % 5], C = rep % 3 == 2 ? 256 : 2 + (int32_t)pc_hr_int(0, 1);
        const int32_t V = (int32_t)pc_hr_int(1, 120);
        const int64_t n = pc_hr_int(1, 150);
        pc_hclt *m = pc_hr_model(V, C, K, pc_hr_unit() * 0.6, rep % 2);
        pc_circuit *c = compile_or_fail(m);
        uint8_t *missing = NULL;
        uint8_t *x = pc_hr_data(n, V, C, rep % 4 == 0 ? 0.0 : 0.2, &missing);
        double *ref = malloc((size_t)n * sizeof *ref), *got = malloc((size_t)n * sizeof *got);
        assert_true(ref && got);
        score(c, PC_BACKEND_REF, 1, x, missing, n, ref);
        const pc_backend backends[] = {PC_BACKEND_CPU_FUSE, PC_BACKEND_CPU};
        for (size_t b = 0; b < 2; b++)
            for (int threads = 1; threads <= 2; threads++) {
                score(c, backends[b], threads, x, missing, n, got);
                for (int64_t i = 0; i < n; i++) {
                    int same_inf = isinf(ref[i]) && got[i] == ref[i];
                    double tol = b == 0 ? tol_fuse(ref[i]) : TOL_INT;
                    if (!same_inf && !(fabs(got[i] - ref[i]) <= tol))
                        fail_msg("%s, %d threads, V=%d C=%d K=%d, sample %lld: %.17g vs ref "
                                 "%.17g",
                                 pc_backend_name(backends[b]), threads, V, C, K, (long long)i,
                                 got[i], ref[i]);
                }
            }
        /* ref is deterministic across thread counts. */
        score(c, PC_BACKEND_REF, 2, x, missing, n, got);
        assert_memory_equal(got, ref, (size_t)n * sizeof *ref);
        free(ref), free(got), free(x), free(missing);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
}

/* pc_circuit_pad_latents: the added states have zero probability, so ref gives the same
 * log p(x) on the padded circuit (to rounding: the sums take extra zero terms), with missing
 * values and zero probabilities, and cpu-fuse stays within its tolerance of it. */
static void test_pad_latents(void **state) {
    (void)state;
    const int32_t Ks[] = {1, 2, 3, 5, 17};
    for (int rep = 0; rep < 10; rep++) {
        const int32_t K = Ks[rep % 5], K2 = K + (int32_t)pc_hr_int(rep < 5 ? 0 : 1, 6);
        const int32_t C = rep % 3 == 2 ? 256 : 2 + (int32_t)pc_hr_int(0, 1);
        const int32_t V = (int32_t)pc_hr_int(1, 80);
        const int64_t n = pc_hr_int(1, 120);
        pc_hclt *m = pc_hr_model(V, C, K, pc_hr_unit() * 0.6, rep % 2);
        pc_circuit *c = compile_or_fail(m), *p = NULL;
        assert_int_equal(pc_circuit_pad_latents(c, K2, &p), PC_OK);
        assert_int_equal(p->num_latents, K2);
        assert_int_equal(p->num_groups, c->num_groups);
        assert_int_equal(p->num_layers, c->num_layers);
        assert_memory_equal(p->group_vars, c->group_vars, (size_t)V * sizeof(int32_t));
        assert_memory_equal(p->group_trans, c->group_trans,
                            (size_t)c->num_groups * sizeof(int32_t));
        uint8_t *missing = NULL;
        uint8_t *x = pc_hr_data(n, V, C, rep % 4 == 0 ? 0.0 : 0.2, &missing);
        double *ref = malloc((size_t)n * sizeof *ref), *got = malloc((size_t)n * sizeof *got);
        assert_true(ref && got);
        score(c, PC_BACKEND_REF, 1, x, missing, n, ref);
        score(p, PC_BACKEND_REF, 1, x, missing, n, got);
        for (int64_t i = 0; i < n; i++)
            if (!(got[i] == ref[i] || fabs(got[i] - ref[i]) <= 1e-12 * fabs(ref[i])))
                fail_msg("ref, V=%d C=%d K=%d padded to %d, sample %lld: %.17g vs %.17g", V, C,
                         K, K2, (long long)i, got[i], ref[i]);
        score(p, PC_BACKEND_CPU_FUSE, 2, x, missing, n, got);
        for (int64_t i = 0; i < n; i++)
            if (!((isinf(ref[i]) && got[i] == ref[i]) || fabs(got[i] - ref[i]) <= tol_fuse(ref[i])))
                fail_msg("cpu-fuse, V=%d C=%d K=%d padded to %d, sample %lld: %.17g vs ref %.17g",
                         V, C, K, K2, (long long)i, got[i], ref[i]);
        free(ref), free(got), free(x), free(missing);
        pc_circuit_free(p);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
    /* Fewer states than the circuit has, and no output pointer. */
    pc_hclt *m = pc_hr_model(4, 2, 3, 0.0, 0);
    pc_circuit *c = compile_or_fail(m), *p = (pc_circuit *)m;
    assert_int_equal(pc_circuit_pad_latents(c, 2, &p), PC_ERR_ARG);
    assert_null(p);
    assert_non_null(strstr(pc_last_error(), "fewer"));
    assert_int_equal(pc_circuit_pad_latents(c, 4, NULL), PC_ERR_ARG);
    pc_circuit_free(c);
    pc_hclt_free(m);
}

/* Every instruction-set build of the block kernels (PC_CPU_ISA picks one), on random models at
 * K = 1..128, odd K included: cpu gives the same bits on each (integer arithmetic), cpu-fuse
 * stays within tol_fuse of ref on each. K covers partial register tiles (16 and 4 outputs) and
 * partial transposes (16 and 8 lanes); n covers several blocks of 64 samples and partial ones
 * of 16 lanes; C = 256 with missing values puts category 256 in the kernels' 16-bit data. */
static void test_isa_paths(void **state) {
    (void)state;
    const int32_t Ks[] = {1, 2, 3, 5, 7, 9, 16, 17, 20, 31, 33, 48, 64, 65, 100, 128};
    const pc_isa best = pc_cpu_best_isa();
    for (int rep = 0; rep < (int)(sizeof Ks / sizeof Ks[0]); rep++) {
        const int32_t K = Ks[rep], C = rep % 3 == 2 ? 256 : 5;
        const int32_t V = (int32_t)pc_hr_int(1, K > 48 ? 30 : 80);
        const int64_t n = pc_hr_int(1, 150);
        pc_hclt *m = pc_hr_model(V, C, K, 0.3, rep % 2);
        pc_circuit *c = compile_or_fail(m);
        uint8_t *missing = NULL;
        uint8_t *x = pc_hr_data(n, V, C, 0.15, &missing);
        double *ref = malloc((size_t)n * sizeof *ref), *first = malloc((size_t)n * sizeof *first);
        double *got = malloc((size_t)n * sizeof *got);
        assert_true(ref && first && got);
        score(c, PC_BACKEND_REF, 1, x, missing, n, ref);
        for (int isa = PC_ISA_SCALAR; isa <= (int)best; isa++) {
            setenv("PC_CPU_ISA", pc_isa_name((pc_isa)isa), 1);
            score(c, PC_BACKEND_CPU, 2, x, missing, n, got);
            if (isa == PC_ISA_SCALAR) memcpy(first, got, (size_t)n * sizeof *got);
            else if (memcmp(first, got, (size_t)n * sizeof *got) != 0)
                fail_msg("cpu on %s differs from scalar (K=%d)", pc_isa_name((pc_isa)isa), K);
            score(c, PC_BACKEND_CPU_FUSE, 1 + isa % 2, x, missing, n, got);
            for (int64_t i = 0; i < n; i++)
                if (!(got[i] == ref[i] || fabs(got[i] - ref[i]) <= tol_fuse(ref[i])))
                    fail_msg("cpu-fuse on %s, V=%d C=%d K=%d, sample %lld: %.17g vs ref %.17g",
                             pc_isa_name((pc_isa)isa), V, C, K, (long long)i, got[i], ref[i]);
        }
        unsetenv("PC_CPU_ISA");
        for (int64_t i = 0; i < n; i++)
            if (!(first[i] == ref[i] || fabs(first[i] - ref[i]) <= TOL_INT))
                fail_msg("cpu, K=%d, sample %lld: %.17g vs ref %.17g", K, (long long)i, first[i],
                         ref[i]);
        free(ref), free(first), free(got), free(x), free(missing);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
}

/* The lane kernels' schedule: every group once, children before their parent, a child's slot
 * not reused before its parent has read it, and few slots for a chain (1) and a star (one per
 * leaf: all wait for the root). */
static void check_schedule(const pc_circuit *c, int32_t want_slots) {
    pc_cpu_schedule s;
    assert_true(pc_cpu_schedule_make(c, &s));
    const int32_t G = c->num_groups;
    int32_t *pos = malloc((size_t)G * sizeof *pos), *holder = malloc((size_t)G * sizeof *holder);
    assert_true(pos && holder);
    for (int32_t g = 0; g < G; g++) pos[g] = -1;
    for (int32_t i = 0; i < G; i++) {
        assert_true(pos[s.order[i]] < 0);
        pos[s.order[i]] = i;
    }
    assert_int_equal(s.order[G - 1], G - 1);
    for (int32_t i = 0; i < G; i++) holder[i] = -1;
    for (int32_t i = 0; i < G; i++) {
        const int32_t g = s.order[i];
        for (int32_t k = c->child_start[g]; k < c->child_start[g + 1]; k++) {
            const int32_t ch = c->group_children[k];
            assert_true(pos[ch] < i);
            assert_int_equal(holder[s.slot[ch]], ch); /* still there when the parent reads it */
            holder[s.slot[ch]] = -1;
        }
        assert_true(s.slot[g] >= 0 && s.slot[g] < s.num_slots);
        assert_int_equal(holder[s.slot[g]], -1);
        holder[s.slot[g]] = g;
    }
    if (want_slots > 0) assert_int_equal(s.num_slots, want_slots);
    free(pos), free(holder);
    pc_cpu_schedule_free(&s);
}

static void test_schedule(void **state) {
    (void)state;
    for (int rep = 0; rep < 20; rep++) {
        pc_hclt *m = pc_hr_model((int32_t)pc_hr_int(1, 300), 2, 2, pc_hr_unit() * 0.5, 0);
        pc_circuit *c = compile_or_fail(m);
        check_schedule(c, 0);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
    const int32_t V = 9;
    for (int shape = 0; shape < 2; shape++) {
        pc_hclt *m = NULL;
        assert_int_equal(pc_hclt_create(V, 2, 2, V - 1, &m), PC_OK);
        for (int32_t v = 1; v < V; v++) {
            m->parent[v] = shape == 0 ? v - 1 : 0; /* a chain, then a star */
            m->trans_index[v] = v - 1;
        }
        for (int32_t i = 0; i < 2; i++) m->root_logw[i] = log(0.5); /* uniform: K = C = 2 */
        for (int32_t i = 0; i < (V - 1) * 4; i++) m->trans_logw[i] = log(0.5);
        for (int32_t i = 0; i < V * 4; i++) m->input_logp[i] = log(0.5);
        pc_circuit *c = compile_or_fail(m);
        check_schedule(c, shape == 0 ? 1 : V - 1);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
}

/* A model whose answer lives 800 nats below the maxima, where the exp-once sums underflow even
 * in FP64: ref must take its exact path. V = 2, K = 2, C = 2, variable 1 below variable 0.
 * For x = (0, 0): msg_1(1) = LSE(-800 + 0, 0 - 800) = -800 + log 2, and the root weight on
 * state 0 is e^-800, so log p = log 0.5 + LSE(-800 + 0, 0 - 800 + log 2) = -800 + log 1.5.
 * cpu-fuse gets the message exactly too, but stores it as an FP32 value 800 below its group's
 * maximum, where one ulp is 6e-5: hence its looser bound here. */
static void test_underflow_paths(void **state) {
    (void)state;
    pc_hclt *m = NULL;
    assert_int_equal(pc_hclt_create(2, 2, 2, 1, &m), PC_OK);
    m->parent[1] = 0;
    m->trans_index[1] = 0;
    const double tiny = -800.0, big = log1p(-exp(-800.0)); /* big rounds to -0 */
    const double root[2] = {tiny, big}, trans[4] = {big, tiny, tiny, big};
    const double input[8] = {log(0.5), log(0.5), log(0.5), log(0.5), /* v = 0 */
                             big, tiny, tiny, big};                   /* v = 1 */
    memcpy(m->root_logw, root, sizeof root);
    memcpy(m->trans_logw, trans, sizeof trans);
    memcpy(m->input_logp, input, sizeof input);
    pc_circuit *c = compile_or_fail(m);
    const uint8_t x[2] = {0, 0};
    const double want = -800.0 + log(1.5);
    const struct {
        pc_backend backend;
        double tol;
    } cases[] = {{PC_BACKEND_REF, 1e-12}, {PC_BACKEND_CPU_FUSE, 1e-4}, {PC_BACKEND_CPU, 1e-3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got;
        score(c, cases[i].backend, 1, x, NULL, 1, &got);
        print_message("  %-8s %.17g (expected %.17g)\n", pc_backend_name(cases[i].backend), got,
                      want);
        if (!(fabs(got - want) <= cases[i].tol))
            fail_msg("%s: %.17g, expected %.17g", pc_backend_name(cases[i].backend), got, want);
    }
    pc_circuit_free(c);
    pc_hclt_free(m);
}

static void test_bad_data(void **state) {
    (void)state;
    pc_hclt *m = pc_hr_model(7, 3, 2, 0.3, 0);
    pc_circuit *c = compile_or_fail(m);
    const pc_backend backends[] = {PC_BACKEND_REF, PC_BACKEND_CPU, PC_BACKEND_CPU_FUSE};
    for (int b = 0; b < 3; b++) {
        pc_eval_opts opts = {backends[b], 4, 1};
        pc_evaluator *e = NULL;
        assert_int_equal(pc_evaluator_create(c, &opts, &e), PC_OK);
        uint8_t *missing = NULL;
        uint8_t *x = pc_hr_data(4, 7, 3, 0.0, &missing);
        double lp[4];
        x[2 * 7 + 5] = 3; /* sample 2, variable 5: value 3 with C = 3 */
        poison(lp, 4);
        assert_int_equal(pc_evaluate(e, x, NULL, 4, 7, lp), PC_ERR_DATA);
        assert_non_null(strstr(pc_last_error(), "sample 2, variable 5"));
        /* The same value under a missing mask is ignored. */
        missing[2 * 7 + 5] = 1;
        assert_int_equal(pc_evaluate(e, x, missing, 4, 7, lp), PC_OK);
        for (int i = 0; i < 4; i++) assert_true(lp[i] <= 0.0);
        /* More samples than max_batch, and NULL pointers. */
        assert_int_equal(pc_evaluate(e, x, NULL, 5, 7, lp), PC_ERR_ARG);
        assert_int_equal(pc_evaluate(e, NULL, NULL, 1, 7, lp), PC_ERR_ARG);
        assert_int_equal(pc_evaluate(e, x, NULL, 0, 7, lp), PC_OK);
        pc_evaluator_free(e);
        free(x), free(missing);
    }
    pc_circuit_free(c);
    pc_hclt_free(m);
}

static void test_backend_names(void **state) {
    (void)state;
    for (int b = PC_BACKEND_REF; b <= PC_BACKEND_GEMM; b++) {
        pc_backend parsed;
        assert_int_equal(pc_backend_parse(pc_backend_name((pc_backend)b), &parsed), PC_OK);
        assert_int_equal(parsed, b);
        assert_int_equal(pc_backend_is_gpu((pc_backend)b), b >= PC_BACKEND_FUSE);
    }
    pc_backend b;
    assert_int_equal(pc_backend_parse("fast", &b), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "fast"));
}

/* A GPU backend on a machine or build without a GPU says so instead of running. */
static void test_gpu_backend_without_gpu(void **state) {
    (void)state;
    if (pc_cuda_available()) skip();
    pc_hclt *m = pc_hr_model(5, 2, 2, 0.0, 0);
    pc_circuit *c = compile_or_fail(m);
    pc_eval_opts opts = {PC_BACKEND_FUSE, 8, 1};
    pc_evaluator *e = (pc_evaluator *)&opts; /* must be reset to NULL on failure */
    pc_status st = pc_evaluator_create(c, &opts, &e);
    assert_true(st == PC_ERR_UNSUPPORTED || st == PC_ERR_NO_DEVICE);
    assert_null(e);
    pc_circuit_free(c);
    pc_hclt_free(m);
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example_f64),
        cmocka_unit_test(test_worked_example_f32_gzip),
        cmocka_unit_test(test_ref_sums_to_one),
        cmocka_unit_test(test_backends_agree),
        cmocka_unit_test(test_pad_latents),
        cmocka_unit_test(test_isa_paths),
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_underflow_paths),
        cmocka_unit_test(test_bad_data),
        cmocka_unit_test(test_backend_names),
        cmocka_unit_test(test_gpu_backend_without_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
