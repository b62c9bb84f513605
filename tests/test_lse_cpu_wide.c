/* CPU log-sum-exp on inputs that span thousands of nats, where exp(x - max) falls far under the
 * smallest normal float (2^-126): rows (every kernel/dtype pair, every isa, 1 and 2 threads),
 * the weighted form and the backward pass against the FP64 reference, with -inf, NaN and all
 * -inf rows mixed in; and the caller's floating-point mode (the kernels run with flush-to-zero
 * and must put the caller's mode back).
 *
 * Bounds as in the other CPU tests: rows fuse |err| <= 1e-5 max(1, |ref|), int <= 1e-4;
 * weighted fuse 2e-5, int 1e-4; backward |g - softmax| <= 1e-6 softmax + 1e-7 |x - lse| softmax
 * + 1e-30, and exactly 0 for -inf. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "lsetest.h"
#include "pc/lse.h"
#include "testutil.h"

#define ROWS_FUSE_TOL 1e-5
#define ROWS_INT_TOL 1e-4
#define WFUSE_TOL 2e-5
#define WINT_TOL 1e-4

/* One wide-range value: U(lo, lo + width), -inf with probability p_inf. */
static double wide_value(pc_rng *rng, double lo, double width, double p_inf) {
    return pc_rng_uniform(rng, 0, 1) < p_inf ? -INFINITY : pc_rng_uniform(rng, lo, lo + width);
}

/* Row kinds: 0 plain, 1 with a NaN, 2 all -inf, 3 one finite value among -inf, 4 all -inf
 * but a NaN. */
static void fill_row(pc_rng *rng, double *v, int64_t n, int kind, double lo, double width) {
    for (int64_t i = 0; i < n; i++)
        v[i] = kind >= 2 ? -INFINITY : wide_value(rng, lo, width, 0.2);
    if (kind == 1 || kind == 3 || kind == 4)
        v[pc_rng_int(rng, 0, n - 1)] = kind == 3 ? pc_rng_uniform(rng, lo, lo + width) : NAN;
}

/* Rows of U(lo, lo + 2000) (lo in {-2000, -1e4, +500}) of 1 to 5000 values: short rows go
 * through the blocked fuse_rows, long ones through several chunks. */
static void test_rows_wide(void **state) {
    (void)state;
    pc_rng *rng = pc_test_rng();
    pc_isa isas[3];
    int nisa = pc_lsetest_isas(isas);
    const double los[] = {-2000.0, -1e4, 500.0};
    for (int trial = 0; trial < 24; trial++) {
        int64_t rows = pc_rng_int(rng, 1, 9);
        int64_t cols = pc_rng_int(rng, 1, trial % 3 ? 300 : 5000);
        int64_t stride = cols + pc_rng_int(rng, 0, 3);
        double lo = los[trial % 3];
        double *v = pc_test_alloc((size_t)(rows * stride) * sizeof(double));
        for (int64_t r = 0; r < rows; r++)
            fill_row(rng, v + r * stride, stride, (int)pc_rng_int(rng, 0, 9) % 5 * (r > 0), lo,
                     2000.0);
        void *x = pc_test_alloc((size_t)(rows * stride) * 4);
        double *ref = pc_test_alloc((size_t)rows * sizeof(double));
        float *out = pc_test_alloc((size_t)rows * sizeof(float));
        for (int p = 0; p < 5; p++) {
            pc_lsetest_pair pair = pc_lsetest_pairs[p];
            if (pair.dtype == PC_Q10_6) /* saturates at -512 nats: cannot hold these rows */
                continue;
            pc_lsetest_encode(pair.dtype, v, rows * stride, x);
            assert_int_equal(pc_lse_rows_ref(pair.dtype, x, rows, cols, stride, ref), PC_OK);
            double tol = pair.kernel == PC_LSE_INT ? ROWS_INT_TOL : ROWS_FUSE_TOL;
            for (int i = 0; i < nisa; i++)
                for (int t = 1; t <= 2; t++) {
                    pc_lse_cpu_opts opts = {t, isas[i]};
                    pc_test_poison_f32(out, (size_t)rows);
                    assert_int_equal(
                        pc_lse_rows(pair.kernel, pair.dtype, x, rows, cols, stride, out, &opts),
                        PC_OK);
                    for (int64_t r = 0; r < rows; r++)
                        if (!(pc_lsetest_rel_err(out[r], ref[r]) <= tol))
                            fail_msg("%s/%s %s threads %d, row %lld of %lld x %lld on [%g, %g]: "
                                     "%.9g vs %.12g",
                                     pc_lse_kernel_name(pair.kernel), pc_dtype_name(pair.dtype),
                                     pc_isa_name(isas[i]), t, (long long)r, (long long)rows,
                                     (long long)cols, lo, lo + 2000.0, out[r], ref[r]);
                }
        }
        free(v);
        free(x);
        free(ref);
        free(out);
    }
}

/* Weighted form with w and x of U(-width, 0): at width 200 the fast forms' products and sums
 * fall under 2^-126 and still hold the answer; at 2000 most outputs need the reference. */
static void test_weighted_wide(void **state) {
    (void)state;
    pc_rng *rng = pc_test_rng();
    pc_isa isas[3];
    int nisa = pc_lsetest_isas(isas);
    const double widths[] = {100.0, 200.0, 2000.0};
    for (int trial = 0; trial < 9; trial++) {
        int64_t batch = pc_rng_int(rng, 1, 5), outs = pc_rng_int(rng, 1, 40);
        int64_t ins = pc_rng_int(rng, 1, 300), stride = ins + pc_rng_int(rng, 0, 3);
        double width = widths[trial % 3];
        float *w = pc_test_alloc((size_t)(outs * ins) * sizeof(float));
        float *x = pc_test_alloc((size_t)(batch * stride) * sizeof(float));
        for (int64_t i = 0; i < outs * ins; i++)
            w[i] = (float)wide_value(rng, -width, width, 0.1);
        for (int64_t i = 0; i < batch * stride; i++)
            x[i] = (float)wide_value(rng, -width, width, 0.1);
        if (outs > 2) { /* a weight row of -inf, one with a NaN */
            for (int64_t k = 0; k < ins; k++)
                w[ins + k] = -INFINITY;
            w[2 * ins + pc_rng_int(rng, 0, ins - 1)] = NAN;
        }
        if (batch > 1)
            x[stride + pc_rng_int(rng, 0, ins - 1)] = NAN;
        size_t cells = (size_t)(batch * outs);
        double *ref = pc_test_alloc(cells * sizeof(double));
        float *out = pc_test_alloc(cells * sizeof(float));
        assert_int_equal(pc_lse_weighted_ref(w, x, batch, outs, ins, stride, ref), PC_OK);
        for (int k = PC_LSE_FUSE; k <= PC_LSE_INT; k++)
            for (int i = 0; i < nisa; i++)
                for (int t = 1; t <= 2; t++) {
                    pc_lse_cpu_opts opts = {t, isas[i]};
                    pc_test_poison_f32(out, cells);
                    assert_int_equal(pc_lse_weighted((pc_lse_kernel)k, w, x, batch, outs, ins,
                                                     stride, out, &opts),
                                     PC_OK);
                    double tol = k == PC_LSE_FUSE ? WFUSE_TOL : WINT_TOL;
                    for (size_t c = 0; c < cells; c++)
                        if (!(pc_lsetest_rel_err(out[c], ref[c]) <= tol))
                            fail_msg("weighted %s %s threads %d, width %g, b %zu j %zu (ins "
                                     "%lld): %.9g vs %.12g",
                                     pc_lse_kernel_name((pc_lse_kernel)k), pc_isa_name(isas[i]), t,
                                     width, c / (size_t)outs, c % (size_t)outs, (long long)ins,
                                     out[c], ref[c]);
                }
        free(w);
        free(x);
        free(ref);
        free(out);
    }
}

/* Softmax of U(-2000, 0) rows with -inf: almost every entry is under 2^-126. */
static void test_backward_wide(void **state) {
    (void)state;
    pc_rng *rng = pc_test_rng();
    pc_isa isas[3];
    int nisa = pc_lsetest_isas(isas);
    for (int trial = 0; trial < 8; trial++) {
        int64_t rows = pc_rng_int(rng, 1, 4), cols = pc_rng_int(rng, 1, 3000);
        float *x = pc_test_alloc((size_t)(rows * cols) * sizeof(float));
        float *g = pc_test_alloc((size_t)(rows * cols) * sizeof(float));
        float lse[4];
        double dlse[4];
        for (int64_t i = 0; i < rows * cols; i++)
            x[i] = (float)wide_value(rng, -2000.0, 2000.0, 0.1);
        for (int64_t r = 0; r < rows; r++)
            x[r * cols + pc_rng_int(rng, 0, cols - 1)] = (float)pc_rng_uniform(rng, -2000.0, 0.0);
        assert_int_equal(pc_lse_rows_ref(PC_F32, x, rows, cols, cols, dlse), PC_OK);
        for (int64_t r = 0; r < rows; r++)
            lse[r] = (float)dlse[r];
        for (int i = 0; i < nisa; i++)
            for (int t = 1; t <= 2; t++) {
                pc_lse_cpu_opts opts = {t, isas[i]};
                pc_test_poison_f32(g, (size_t)(rows * cols));
                assert_int_equal(pc_lse_backward(x, lse, rows, cols, cols, g, cols, &opts), PC_OK);
                for (int64_t c = 0; c < rows * cols; c++) {
                    double xv = x[c], l = lse[c / cols], want = exp(xv - l), got = g[c];
                    double tol =
                        want == 0.0 ? 1e-30 : 1e-6 * want + 1e-7 * fabs(xv - l) * want + 1e-30;
                    if (!(fabs(got - want) <= tol) || (xv == -INFINITY && got != 0.0))
                        fail_msg("backward %s threads %d, row %lld col %lld: %.9g vs %.12g",
                                 pc_isa_name(isas[i]), t, (long long)(c / cols),
                                 (long long)(c % cols), got, want);
                }
            }
        free(x);
        free(g);
    }
}

#if defined(__SSE__)
#define FLUSH_BITS 0x8040u /* MXCSR FTZ | DAZ */

/* Runs each entry point (1 and 2 threads) from a caller in `mode`; the FTZ/DAZ bits must be as
 * before on this thread and on the OpenMP pool's threads, and a subnormal must still come out
 * of a product when the caller did not ask for flushing. The pool's threads keep their mode
 * after the test: the next check sets it again. */
static void check_mode_kept(unsigned mode) {
    float x[64], w[64], g[64], out[8];
    for (int i = 0; i < 64; i++)
        x[i] = w[i] = (float)pc_rng_uniform(pc_test_rng(), -2000.0, 0.0);
    unsigned saved = _mm_getcsr();
    _mm_setcsr((saved & ~FLUSH_BITS) | mode);
#ifdef _OPENMP
    /* The kernels' OpenMP threads come from the same pool: give them the caller's mode too. */
#pragma omp parallel num_threads(2)
    _mm_setcsr((_mm_getcsr() & ~FLUSH_BITS) | mode);
#endif
    for (int t = 1; t <= 2; t++) {
        pc_lse_cpu_opts opts = {t, PC_ISA_AUTO};
        assert_int_equal(pc_lse_rows(PC_LSE_FUSE, PC_F32, x, 8, 8, 8, out, &opts), PC_OK);
        assert_int_equal(pc_lse_rows(PC_LSE_FUSE, PC_F32, x, 2, 32, 32, out, &opts), PC_OK);
        assert_int_equal(pc_lse_weighted(PC_LSE_FUSE, w, x, 2, 4, 16, 16, out, &opts), PC_OK);
        assert_int_equal(pc_lse_backward(x, out, 2, 32, 32, g, 32, &opts), PC_OK);
        assert_int_equal(_mm_getcsr() & FLUSH_BITS, mode);
    }
    int workers_ok = 1;
#ifdef _OPENMP
#pragma omp parallel num_threads(2) reduction(&& : workers_ok)
    workers_ok = (_mm_getcsr() & FLUSH_BITS) == mode;
#endif
    volatile float a = 0x1p-65f;
    float sub = a * a; /* 2^-130: subnormal, or 0 under FTZ */
    _mm_setcsr(saved);
    assert_true(workers_ok);
    assert_true(mode ? sub == 0.0f : sub == 0x1p-130f);
}

static void test_caller_fp_mode_kept(void **state) {
    (void)state;
    check_mode_kept(0);
    check_mode_kept(FLUSH_BITS);
}
#endif

int main(void) {
    pc_test_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_wide),
        cmocka_unit_test(test_weighted_wide),
        cmocka_unit_test(test_backward_wide),
#if defined(__SSE__)
        cmocka_unit_test(test_caller_fp_mode_kept),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
