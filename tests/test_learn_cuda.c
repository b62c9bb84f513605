/* EM on the GPU against the CPU's FP64 EM: one step on the shipped model (MNIST, K = 16) within
 * 1e-5 relative in probability (FP64 mode; the FP32 mode is measured and held to 1e-4); random
 * models of awkward shape (K = 1 .. 300, zero probabilities, missing values, passes of a few
 * rows); the same bits on every run, attached or streamed; bad input refused before anything
 * changes. Without a GPU (or without CUDA) the program exits 77 (skipped). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "learn/cuda/em_plan.h"
#include "learn_models.h"
#include "pc/learn.h"
#include "testutil.h"

/* Largest relative difference of two models' parameters in probability; -inf entries must
 * match. */
static double max_rel(const pc_hclt *a, const pc_hclt *b) {
    const int64_t K = a->num_latents;
    const double *pa[3] = {a->root_logw, a->trans_logw, a->input_logp};
    const double *pb[3] = {b->root_logw, b->trans_logw, b->input_logp};
    const int64_t len[3] = {K, (int64_t)a->num_trans * K * K,
                            (int64_t)a->num_vars * K * a->num_cats};
    double worst = 0;
    for (int i = 0; i < 3; i++)
        for (int64_t j = 0; j < len[i]; j++) {
            const double x = exp(pa[i][j]), y = exp(pb[i][j]);
            if (x == y) continue;
            const double d = fabs(x - y) / (x > y ? x : y);
            if (isnan(d)) return NAN; /* a NaN parameter fails, never hides in a comparison */
            worst = d > worst ? d : worst;
        }
    return worst;
}

/* `steps` EM steps (step size, pseudocount) over `rows` [n] from the model m on a device;
 * returns the exported model and the last step's LL. */
static pc_hclt *run_em(const pc_hclt *m, const pc_data *d, const int64_t *rows, int64_t n,
                       int steps, double step, const pc_em_opts *opts, int attach, double *ll) {
    pc_em *em = NULL;
    assert_int_equal(pc_em_create_opts(m, opts, &em), PC_OK);
    if (attach) assert_int_equal(pc_em_attach_data(em, d), PC_OK);
    for (int s = 0; s < steps; s++) {
        *ll = NAN;
        assert_int_equal(pc_em_step(em, d, rows, n, step, 0.1, ll), PC_OK);
    }
    pc_hclt *out = pc_lm_same_shape(m);
    assert_int_equal(pc_em_export(em, out), PC_OK);
    pc_em_free(em);
    return out;
}

/* The shipped model, one mini-batch step (step 0.9, pseudocount 0.1) on 512 and on 3,000
 * training images (one pass each; at 3,000 a fused tile is 3 subtiles of 16 rows, the last tile
 * part-full): FP64 within 1e-5 (it is ~1e-10: the CPU rounds counts per sample), FP32 within
 * 1e-4. */
static void test_shipped_model_step(void **state) {
    (void)state;
    pc_hclt *m = NULL;
    pc_data *d = NULL;
    if (!pc_lm_shipped(&m, &d)) skip();
    enum { most = 3000 };
    int64_t *rows = pc_test_alloc(most * sizeof *rows);
    for (int i = 0; i < most; i++) rows[i] = pc_hr_int(0, d->count - 1);
    const pc_em_opts cpu = {0}, gpu64 = {.device = PC_EM_CUDA}, gpu32 = {.device = PC_EM_CUDA,
                                                                         .f32 = 1};
    const int64_t ns[2] = {512, most};
    for (int i = 0; i < 2; i++) {
        const int64_t n = ns[i];
        double ll_cpu = 0, ll64 = 0, ll32 = 0;
        pc_hclt *want = run_em(m, d, rows, n, 1, 0.9, &cpu, 0, &ll_cpu);
        pc_hclt *got64 = run_em(m, d, rows, n, 1, 0.9, &gpu64, 1, &ll64);
        pc_hclt *got32 = run_em(m, d, rows, n, 1, 0.9, &gpu32, 1, &ll32);
        const double d64 = max_rel(got64, want), d32 = max_rel(got32, want);
        printf("one step on the shipped model, %lld images: FP64 %.3g, FP32 %.3g relative; "
               "LL %.10g (CPU) %.10g (FP64) %.10g (FP32)\n",
               (long long)n, d64, d32, ll_cpu, ll64, ll32);
        assert_true(d64 < 1e-5);
        assert_true(d32 < 1e-4);
        assert_true(fabs(ll64 - ll_cpu) < 1e-9 * fabs(ll_cpu));
        assert_true(fabs(ll32 - ll_cpu) < 1e-6 * fabs(ll_cpu));
        pc_hclt_free(want), pc_hclt_free(got64), pc_hclt_free(got32);
    }
    free(rows);
    pc_hclt_free(m);
    pc_data_free(d);
}

/* Random models against the CPU, 3 steps: K of every kernel shape (values per lane 1 to 16 on
 * the GEMM path; on the fused one odd and even K, and both sides of the bound between the
 * paths: K = 16 and 17), zero probabilities, missing values, passes of 37 rows (several per
 * step, the last subtile of a fused tile part-full), rows repeated. */
static void test_random_models(void **state) {
    (void)state;
    const int32_t ks[11] = {1, 3, 6, 12, 16, 17, 32, 33, 100, 128, 300};
    for (int trial = 0; trial < 22; trial++) {
        const int32_t K = ks[trial % 11];
        const int32_t V = (int32_t)pc_hr_int(1, K > 100 ? 12 : 40);
        const int32_t C = (int32_t)pc_hr_int(2, trial % 4 == 0 ? 256 : 9);
        pc_hclt *m = pc_hr_model(V, C, K, 0.3, trial % 3 == 0);
        uint8_t *missing = NULL;
        const int64_t count = 120;
        uint8_t *values = pc_hr_data(count, V, C, trial % 2 ? 0.15 : 0.0, &missing);
        pc_data d = {.count = count, .width = V, .values = values, .missing = missing};
        int64_t rows[101];
        for (int i = 0; i < 101; i++) rows[i] = pc_hr_int(0, count - 1);
        const pc_em_opts cpu = {0}, gpu = {.device = PC_EM_CUDA, .max_chunk = 37};
        double ll_cpu = 0, ll_gpu = 0;
        pc_hclt *want = run_em(m, &d, rows, 101, 3, 0.7, &cpu, 0, &ll_cpu);
        pc_hclt *got = run_em(m, &d, rows, 101, 3, 0.7, &gpu, trial % 2, &ll_gpu);
        const double diff = max_rel(got, want);
        if (diff > 1e-9 || !(fabs(ll_gpu - ll_cpu) <= 1e-9 * fabs(ll_cpu)))
            printf("V %d C %d K %d: %.3g relative, LL %.12g vs %.12g\n", V, C, K, diff, ll_gpu,
                   ll_cpu);
        assert_true(diff < 1e-9);
        assert_true(ll_gpu == ll_cpu || fabs(ll_gpu - ll_cpu) <= 1e-9 * fabs(ll_cpu));
        pc_hclt_free(want), pc_hclt_free(got);
        free(values), free(missing);
        pc_hclt_free(m);
    }
}

/* The GPU's FP64 and FP32 models (their largest relative differences from the CPU's) and last
 * LLs against the CPU's, after a few steps: FP64 within 1e-9, FP32 within 1e-4 (LL 1e-6). */
static void assert_near_cpu(double diff, double diff32, double ll_cpu, double ll_gpu,
                            double ll32) {
    assert_true(diff < 1e-9);
    assert_true(ll_gpu == ll_cpu || fabs(ll_gpu - ll_cpu) <= 1e-9 * fabs(ll_cpu));
    assert_true(diff32 < 1e-4);
    assert_true(fabs(ll32 - ll_cpu) < 1e-6 * fabs(ll_cpu));
}

/* The fused path (K = 13 and 7: odd, rows of unaligned pairs) on passes of 6,000 rows,
 * whose tiles hold several subtiles (the plan says so, or the test would not test it), 2 steps
 * against the CPU: FP64 within 1e-9, FP32 within 1e-4. */
static void test_fused_big_passes(void **state) {
    (void)state;
    const int32_t ks[2] = {13, 7};
    for (int trial = 0; trial < 2; trial++) {
        const int32_t K = ks[trial], V = 300, C = 6;
        const int64_t n = 6000;
        pc_hclt *m = pc_hr_model(V, C, K, 0.3, trial == 1);
        pc_em_plan *plan = NULL;
        assert_int_equal(pc_em_plan_create(m, n, &plan), PC_OK);
        assert_true(pc_em_plan_fused(plan) && pc_em_plan_fused_iter(plan, n) > 1);
        pc_em_plan_free(plan);
        uint8_t *missing = NULL;
        uint8_t *values = pc_hr_data(n, V, C, trial ? 0.1 : 0.0, &missing);
        pc_data d = {.count = n, .width = V, .values = values, .missing = missing};
        const pc_em_opts cpu = {0}, gpu = {.device = PC_EM_CUDA, .max_chunk = n};
        const pc_em_opts gpu32 = {.device = PC_EM_CUDA, .f32 = 1, .max_chunk = n};
        double ll_cpu = 0, ll_gpu = 0, ll32 = 0;
        pc_hclt *want = run_em(m, &d, NULL, n, 2, 0.7, &cpu, 0, &ll_cpu);
        pc_hclt *got = run_em(m, &d, NULL, n, 2, 0.7, &gpu, 1, &ll_gpu);
        pc_hclt *got32 = run_em(m, &d, NULL, n, 2, 0.7, &gpu32, 1, &ll32);
        const double diff = max_rel(got, want), diff32 = max_rel(got32, want);
        printf("fused K %d, %lld rows a pass: FP64 %.3g, FP32 %.3g relative\n", K, (long long)n,
               diff, diff32);
        assert_near_cpu(diff, diff32, ll_cpu, ll_gpu, ll32);
        pc_hclt_free(want), pc_hclt_free(got), pc_hclt_free(got32);
        free(values), free(missing);
        pc_hclt_free(m);
    }
}

/* Chains on the GEMM path (em_chain.cuh): two-branch trees, whose layers below the root are
 * one chain, at K = 17 .. 64 (one and two states a lane), 3 steps against the CPU to 1e-9, and
 * in FP32 storage (the same kernels' float instances) to 1e-4 as on the shipped model; passes
 * of 37 rows, and of 8,192 (layer by layer: more rows than PC_EM_STEP_CHAIN_MAX_ROW_STATES
 * allows) then 808 (a chain) in one step. */
static void test_chains_on_the_gemm_path(void **state) {
    (void)state;
    const int32_t ks[4] = {17, 32, 40, 64};
    for (int trial = 0; trial < 8; trial++) {
        const int32_t K = ks[trial % 4], V = (int32_t)pc_hr_int(5, 30);
        const int32_t C = (int32_t)pc_hr_int(2, trial % 2 ? 256 : 9);
        pc_hclt *m = pc_hr_two_branches(V, C, K, trial % 3 == 0);
        pc_em_plan *plan = NULL;
        assert_int_equal(pc_em_plan_create(m, 64, &plan), PC_OK);
        assert_true(plan->num_chains == 1 && !pc_em_plan_fused(plan) &&
                    pc_em_plan_chained(plan, 0, 37));
        pc_em_plan_free(plan);
        const int big = trial >= 4;
        const int64_t n = big ? 9000 : 101, count = big ? n : 300; /* a step takes <= count */
        uint8_t *missing = NULL;
        uint8_t *values = pc_hr_data(count, V, C, trial % 2 ? 0.15 : 0.0, &missing);
        pc_data d = {.count = count, .width = V, .values = values, .missing = missing};
        int64_t *rows = pc_test_alloc((size_t)n * sizeof(int64_t));
        for (int64_t i = 0; i < n; i++) rows[i] = pc_hr_int(0, count - 1);
        const pc_em_opts cpu = {0};
        const pc_em_opts gpu = {.device = PC_EM_CUDA, .max_chunk = big ? 8192 : 37};
        const pc_em_opts gpu32 = {.device = PC_EM_CUDA, .f32 = 1, .max_chunk = gpu.max_chunk};
        double ll_cpu = 0, ll_gpu = 0, ll32 = 0;
        pc_hclt *want = run_em(m, &d, rows, n, 3, 0.7, &cpu, 0, &ll_cpu);
        pc_hclt *got = run_em(m, &d, rows, n, 3, 0.7, &gpu, 1, &ll_gpu);
        pc_hclt *got32 = run_em(m, &d, rows, n, 3, 0.7, &gpu32, 1, &ll32);
        const double diff = max_rel(got, want), diff32 = max_rel(got32, want);
        printf("chain V %d C %d K %d n %lld: FP64 %.3g, FP32 %.3g relative; LL %.12g (CPU) "
               "%.12g (FP64) %.12g (FP32)\n", V, C, K, (long long)n, diff, diff32, ll_cpu,
               ll_gpu, ll32);
        assert_near_cpu(diff, diff32, ll_cpu, ll_gpu, ll32);
        pc_hclt_free(want), pc_hclt_free(got), pc_hclt_free(got32);
        free(rows), free(values), free(missing);
        pc_hclt_free(m);
    }
}

/* The same steps twice, attached and streamed, FP64 and FP32, on the fused path (K = 13) and
 * the GEMM path (K = 24): the same bits every time. */
static void test_deterministic(void **state) {
    (void)state;
    const int64_t count = 3000;
    uint8_t *values = pc_hr_data(count, 60, 16, 0.0, NULL);
    pc_data d = {.count = count, .width = 60, .values = values};
    for (int run = 0; run < 4; run++) {
        const int f32 = run % 2;
        pc_hclt *m = pc_hr_model(60, 16, run < 2 ? 13 : 24, 0.3, 0);
        const pc_em_opts gpu = {.device = PC_EM_CUDA, .f32 = f32, .max_chunk = 1000};
        double ll[3];
        pc_hclt *a = run_em(m, &d, NULL, count, 4, 0.8, &gpu, 1, &ll[0]);
        pc_hclt *b = run_em(m, &d, NULL, count, 4, 0.8, &gpu, 1, &ll[1]);
        pc_hclt *c = run_em(m, &d, NULL, count, 4, 0.8, &gpu, 0, &ll[2]);
        assert_true(ll[0] == ll[1] && ll[0] == ll[2]);
        assert_true(max_rel(a, b) == 0 && max_rel(a, c) == 0);
        pc_hclt_free(a), pc_hclt_free(b), pc_hclt_free(c);
        pc_hclt_free(m);
    }
    free(values);
}

/* Full-batch EM on the GPU never lowers the likelihood. */
static void test_full_batch_monotone(void **state) {
    (void)state;
    pc_hclt *m = pc_hr_model(30, 8, 12, 0.3, 0);
    uint8_t *values = pc_hr_data(2000, 30, 8, 0.0, NULL);
    pc_data d = {.count = 2000, .width = 30, .values = values};
    const pc_em_opts gpu = {.device = PC_EM_CUDA, .max_chunk = 512};
    pc_em *em = NULL;
    assert_int_equal(pc_em_create_opts(m, &gpu, &em), PC_OK);
    assert_int_equal(pc_em_attach_data(em, &d), PC_OK);
    double prev = -INFINITY;
    for (int s = 0; s < 8; s++) {
        double ll = NAN;
        assert_int_equal(pc_em_step(em, &d, NULL, 2000, 1.0, 0.0, &ll), PC_OK);
        assert_true(ll >= prev - 1e-9 * fabs(ll));
        prev = ll;
    }
    pc_em_free(em);
    free(values);
    pc_hclt_free(m);
}

/* Bad values (attached or not), bad rows, K too large: refused, parameters unchanged. */
static void test_bad_input(void **state) {
    (void)state;
    pc_hclt *m = pc_hr_model(5, 4, 3, 0.3, 0);
    uint8_t *values = pc_hr_data(50, 5, 4, 0.0, NULL);
    pc_data d = {.count = 50, .width = 5, .values = values};
    const pc_em_opts gpu = {.device = PC_EM_CUDA};
    pc_em *em = NULL;
    assert_int_equal(pc_em_create_opts(m, &gpu, &em), PC_OK);
    values[7 * 5 + 2] = 4;
    assert_int_equal(pc_em_attach_data(em, &d), PC_ERR_DATA);
    assert_non_null(strstr(pc_last_error(), "row 7, variable 2"));
    assert_int_equal(pc_em_step(em, &d, NULL, 50, 1.0, 0.1, NULL), PC_ERR_DATA);
    values[7 * 5 + 2] = 0;
    const int64_t bad_rows[2] = {3, 50};
    assert_int_equal(pc_em_attach_data(em, &d), PC_OK);
    assert_int_equal(pc_em_step(em, &d, bad_rows, 2, 1.0, 0.1, NULL), PC_ERR_ARG);
    pc_hclt *out = pc_lm_same_shape(m);
    assert_int_equal(pc_em_export(em, out), PC_OK);
    assert_true(max_rel(out, m) < 1e-15);
    pc_hclt_free(out);
    pc_em_free(em);
    pc_hclt *big = pc_hr_model(2, 2, 1025, 0.0, 0);
    assert_int_equal(pc_em_create_opts(big, &gpu, &em), PC_ERR_UNSUPPORTED);
    assert_null(em);
    pc_hclt_free(big);
    free(values);
    pc_hclt_free(m);
}

int main(void) {
    pc_test_require_gpu_or_exit("test_learn_cuda");
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_model_step),
        cmocka_unit_test(test_random_models),
        cmocka_unit_test(test_fused_big_passes),
        cmocka_unit_test(test_chains_on_the_gemm_path),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_full_batch_monotone),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
