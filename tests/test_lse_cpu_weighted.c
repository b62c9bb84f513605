/* CPU weighted form out[b, j] = LSE_k(w[j, k] + x[b, k]) and backward (softmax) pass, against
 * the FP64 reference, on every instruction set, with their edge cases.
 *
 * Bounds: weighted fuse |err| <= 2e-5 max(1, |ref|) (one float dot product of up to 300 terms
 * in place of the exp-sum); weighted int <= 1e-4 max(1, |ref|) per output; backward
 * |g - softmax| <= 1e-6 softmax + 1e-7 |x - lse| softmax (the float difference x - lse) + 1e-30. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lsetest.h"
#include "pc/lse.h"
#include "testutil.h"

#define WFUSE_TOL 2e-5
#define WINT_TOL 1e-4

/* Runs fuse and int on every isa (threads 1 and 2) and compares with the reference. */
static void check_weighted(const float *w, const float *x, int64_t batch, int64_t outs, int64_t ins,
                           int64_t x_stride, const char *what) {
    pc_isa isas[3];
    int nisa = pc_lsetest_isas(isas);
    size_t cells = (size_t)(batch * outs);
    double *ref = pc_test_alloc(cells * sizeof(double));
    float *out = pc_test_alloc(cells * sizeof(float));
    float *int_scalar =
        pc_test_alloc(cells * sizeof(float)); /* int gives the same bits on every path */
    assert_int_equal(pc_lse_weighted_ref(w, x, batch, outs, ins, x_stride, ref), PC_OK);
    for (int k = PC_LSE_REF; k <= PC_LSE_INT; k++)
        for (int i = 0; i < nisa; i++)
            for (int t = 1; t <= 2; t++) {
                pc_lse_cpu_opts opts = {t, isas[i]};
                pc_test_poison_f32(out, cells);
                assert_int_equal(
                    pc_lse_weighted((pc_lse_kernel)k, w, x, batch, outs, ins, x_stride, out, &opts),
                    PC_OK);
                double tol = k == PC_LSE_FUSE ? WFUSE_TOL : k == PC_LSE_INT ? WINT_TOL : 1e-7;
                for (size_t c = 0; c < cells; c++)
                    if (!(pc_lsetest_rel_err(out[c], ref[c]) <= tol))
                        fail_msg("%s: %s %s b %zu j %zu (B %lld, K %lld -> %lld): %.9g vs %.12g",
                                 what, pc_lse_kernel_name((pc_lse_kernel)k), pc_isa_name(isas[i]),
                                 c / (size_t)outs, c % (size_t)outs, (long long)batch,
                                 (long long)ins, (long long)outs, out[c], ref[c]);
                if (k == PC_LSE_INT && i == 0)
                    memcpy(int_scalar, out, cells * sizeof(float));
                if (k == PC_LSE_INT && memcmp(int_scalar, out, cells * sizeof(float)) != 0)
                    fail_msg("%s: int %s threads %d differs from the scalar path", what,
                             pc_isa_name(isas[i]), t);
            }
    free(ref);
    free(out);
    free(int_scalar);
}

static void test_weighted_random(void **state) {
    (void)state;
    pc_rng *rng = pc_test_rng();
    for (int trial = 0; trial < 30; trial++) {
        int64_t batch = pc_rng_int(rng, 1, 9), outs = pc_rng_int(rng, 1, trial % 3 ? 40 : 300);
        int64_t ins = pc_rng_int(rng, 0, trial % 6 ? 300 : 2500);
        int64_t x_stride = ins + pc_rng_int(rng, 0, 5);
        float *w = pc_test_alloc((size_t)(outs * ins) * sizeof(float));
        float *x = pc_test_alloc((size_t)(batch * x_stride) * sizeof(float));
        /* Log-weights of a normalised mixture: log of uniform(0,1) draws; inputs N(-3, 4^2). */
        for (int64_t i = 0; i < outs * ins; i++)
            w[i] = (float)log(pc_rng_uniform(rng, 1e-6, 1.0));
        for (int64_t i = 0; i < batch * x_stride; i++)
            x[i] = i % x_stride < ins ? (float)pc_rng_normal(rng, -3.0, 4.0) : NAN;
        check_weighted(w, x, batch, outs, ins, x_stride, "random");
        free(w);
        free(x);
    }
}

/* Zero weights (-inf), -inf inputs, NaN and +inf in one sample or one weight row, all -inf
 * samples, and maxima of w and x at different k (the exp-once sum underflows: fallback). */
static void test_weighted_edges(void **state) {
    (void)state;
    enum { B = 6, J = 5, K = 37 };
    float w[J * K], x[B * K];
    pc_rng *rng = pc_test_rng();
    for (int i = 0; i < J * K; i++)
        w[i] = (float)pc_rng_uniform(rng, -5.0, 0.0);
    for (int i = 0; i < B * K; i++)
        x[i] = (float)pc_rng_uniform(rng, -5.0, 0.0);
    for (int k = 0; k < K; k += 3)
        w[0 * K + k] = -INFINITY; /* sparse weights */
    for (int k = 0; k < K; k += 4)
        x[0 * K + k] = -INFINITY; /* sparse input */
    for (int k = 0; k < K; k++)
        x[1 * K + k] = -INFINITY; /* all -inf sample */
    x[2 * K + 7] = NAN;           /* NaN sample */
    x[3 * K + 10] = INFINITY;     /* +inf sample */
    w[1 * K + 11] = NAN;          /* NaN weight row */
    w[2 * K + 13] = INFINITY;     /* +inf weight row */
    for (int k = 0; k < K; k++)
        w[3 * K + k] = -INFINITY; /* all -inf weight row */
    /* Sample 4 peaks at k = 0 and weight row 4 at k = K - 1; elsewhere both are -300: the
     * best term is -300 below m + wmax, the exp-once sum is 0 in float. */
    for (int k = 0; k < K; k++)
        x[4 * K + k] = k == 0 ? 0.0f : -300.0f;
    for (int k = 0; k < K; k++)
        w[4 * K + k] = k == K - 1 ? 0.0f : -300.0f;
    /* Sample 5 near the float range's ends. */
    for (int k = 0; k < K; k++)
        x[5 * K + k] = k % 2 ? 3.0e38f : -3.0e38f;
    check_weighted(w, x, B, J, K, K, "edges");

    double ref[B * J];
    assert_int_equal(pc_lse_weighted_ref(w, x, B, J, K, K, ref), PC_OK);
    for (int j = 0; j < J; j++) {
        assert_true(ref[1 * J + j] == -INFINITY || isnan(ref[1 * J + j]) ||
                    ref[1 * J + j] == INFINITY);
        assert_true(isnan(ref[2 * J + j]));
    }
    assert_true(ref[3 * J + 0] == INFINITY);
    assert_true(isnan(ref[0 * J + 1]));
    assert_true(ref[0 * J + 3] == -INFINITY);
    assert_true(fabs(ref[4 * J + 4] - (-300.0 + log(2.0 + (K - 2) * exp(-300.0)))) < 1e-9);
}

static void test_weighted_empty(void **state) {
    (void)state;
    float w[1] = {0}, x[1] = {0}, out[4];
    pc_test_poison_f32(out, 4);
    assert_int_equal(pc_lse_weighted(PC_LSE_FUSE, w, x, 2, 2, 0, 0, out, NULL), PC_OK);
    for (int i = 0; i < 4; i++)
        assert_true(out[i] == -INFINITY);
    pc_test_poison_f32(out, 4);
    assert_int_equal(pc_lse_weighted(PC_LSE_INT, w, x, 2, 2, 0, 0, out, NULL), PC_OK);
    for (int i = 0; i < 4; i++)
        assert_true(out[i] == -INFINITY);
}

/* Backward against the FP64 softmax, and the row sums to 1. */
static void test_backward_vs_softmax(void **state) {
    (void)state;
    pc_rng *rng = pc_test_rng();
    pc_isa isas[3];
    int nisa = pc_lsetest_isas(isas);
    for (int trial = 0; trial < 30; trial++) {
        int64_t rows = pc_rng_int(rng, 1, 6), cols = pc_rng_int(rng, 1, trial % 5 ? 200 : 5000);
        int64_t stride = cols + pc_rng_int(rng, 0, 4), gstride = cols + pc_rng_int(rng, 0, 4);
        float *x = pc_test_alloc((size_t)(rows * stride) * sizeof(float));
        float *g = pc_test_alloc((size_t)(rows * gstride) * sizeof(float));
        float lse[6];
        double dlse[6];
        for (int64_t i = 0; i < rows * stride; i++)
            x[i] =
                pc_rng_uniform(rng, 0, 1) < 0.05 ? -INFINITY : (float)pc_rng_normal(rng, 0.0, 4.0);
        assert_int_equal(pc_lse_rows_ref(PC_F32, x, rows, cols, stride, dlse), PC_OK);
        for (int64_t r = 0; r < rows; r++)
            lse[r] = (float)dlse[r];
        for (int i = 0; i < nisa; i++) {
            pc_lse_cpu_opts opts = {1 + trial % 2, isas[i]};
            for (int64_t c = 0; c < rows * gstride; c++)
                g[c] = 777.0f; /* gap must stay */
            for (int64_t r = 0; r < rows; r++)
                pc_test_poison_f32(g + r * gstride, (size_t)cols);
            assert_int_equal(pc_lse_backward(x, lse, rows, cols, stride, g, gstride, &opts), PC_OK);
            for (int64_t r = 0; r < rows; r++) {
                double sum = 0.0;
                for (int64_t c = 0; c < cols; c++) {
                    double xv = x[r * stride + c], want = exp(xv - (double)lse[r]);
                    double got = g[r * gstride + c];
                    double tol =
                        want == 0.0 ? 1e-30 : 1e-6 * want + 1e-7 * fabs(xv - lse[r]) * want + 1e-30;
                    if (!(fabs(got - want) <= tol))
                        fail_msg("%s row %lld col %lld: %.9g vs %.12g", pc_isa_name(isas[i]),
                                 (long long)r, (long long)c, got, want);
                    if (xv == -INFINITY)
                        assert_true(got == 0.0f);
                    sum += got;
                }
                assert_true(fabs(sum - 1.0) < 1e-5);
                for (int64_t c = cols; c < gstride; c++)
                    assert_true(g[r * gstride + c] == 777.0f);
            }
        }
        free(x);
        free(g);
    }
}

/* The gradient matches central differences of the FP64 reference: (LSE(x + h e_i) -
 * LSE(x - h e_i)) / 2h, h = 1e-3 on doubles held as floats near 0 (error O(h^2) ~ 1e-7). */
static void test_backward_finite_differences(void **state) {
    (void)state;
    pc_rng *rng = pc_test_rng();
    enum { N = 24 };
    float x[N], g[N], lse;
    double dl;
    for (int i = 0; i < N; i++)
        x[i] = (float)pc_rng_normal(rng, 0.0, 2.0);
    assert_int_equal(pc_lse_rows_ref(PC_F32, x, 1, N, N, &dl), PC_OK);
    lse = (float)dl;
    pc_test_poison_f32(g, N);
    assert_int_equal(pc_lse_backward(x, &lse, 1, N, N, g, N, NULL), PC_OK);
    for (int i = 0; i < N; i++) {
        float xp[N], xm[N];
        memcpy(xp, x, sizeof x);
        memcpy(xm, x, sizeof x);
        const double h = 1.0 / 1024.0; /* exact in float, so x +- h is exact for |x| < 16 */
        xp[i] = (float)(x[i] + h);
        xm[i] = (float)(x[i] - h);
        double lp, lm;
        assert_int_equal(pc_lse_rows_ref(PC_F32, xp, 1, N, N, &lp), PC_OK);
        assert_int_equal(pc_lse_rows_ref(PC_F32, xm, 1, N, N, &lm), PC_OK);
        double fd = (lp - lm) / (2.0 * h);
        if (!(fabs(g[i] - fd) <= 1e-5))
            fail_msg("col %d: grad %.9g, differences %.9g", i, g[i], fd);
    }
}

static void test_backward_edges(void **state) {
    (void)state;
    pc_isa isas[3];
    int nisa = pc_lsetest_isas(isas);
    enum { N = 21 };
    float x[3 * N], g[3 * N];
    for (int i = 0; i < 3 * N; i++)
        x[i] = (float)(i % N) * 0.1f;
    x[2 * N + 4] = NAN;
    x[2 * N + 5] = -INFINITY;
    float lse[3] = {NAN, -INFINITY, 3.0f};
    for (int i = 0; i < nisa; i++) {
        pc_lse_cpu_opts opts = {1, isas[i]};
        for (int c = 0; c < 3 * N; c++)
            g[c] = 777.0f;
        assert_int_equal(pc_lse_backward(x, lse, 3, N, N, g, N, &opts), PC_OK);
        for (int c = 0; c < 2 * N; c++)
            assert_true(isnan(g[c])); /* lse NaN or -inf */
        assert_true(isnan(g[2 * N + 4]));
        assert_true(g[2 * N + 5] == 0.0f);
        assert_true(fabs(g[2 * N + 6] - exp(0.6 - 3.0)) < 1e-7);
    }
    /* An lse below the data overflows to +inf, never to garbage. */
    float big[2] = {100.0f, 0.0f}, gb[2], low = -20.0f;
    for (int i = 0; i < nisa; i++) {
        pc_lse_cpu_opts opts = {1, isas[i]};
        assert_int_equal(pc_lse_backward(big, &low, 1, 2, 2, gb, 2, &opts), PC_OK);
        assert_true(gb[0] == INFINITY);
        assert_true(fabs(gb[1] - exp(20.0)) < 1e-6 * exp(20.0));
    }
}

int main(void) {
    pc_test_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weighted_random),
        cmocka_unit_test(test_weighted_edges),
        cmocka_unit_test(test_weighted_empty),
        cmocka_unit_test(test_backward_vs_softmax),
        cmocka_unit_test(test_backward_finite_differences),
        cmocka_unit_test(test_backward_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
