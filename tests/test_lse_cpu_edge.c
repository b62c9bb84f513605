/* CPU log-sum-exp: the edge cases of lse.h in every kernel, input type and instruction set;
 * bad arguments; SIMD paths against the scalar path; threads against one thread. */
#include <float.h>
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

/* Row lengths that hit: one value, a partial vector, several vectors plus a tail, and more than
 * one fuse chunk (2048) and int chunk (1024). */
static const int64_t edge_lengths[] = {1, 3, 17, 100, 2048, 4101};
#define N_LENGTHS ((int)(sizeof edge_lengths / sizeof edge_lengths[0]))

/* Runs one row through kernel/dtype on every instruction set; returns results in got[isa]. */
static int run_all_isas(pc_lse_kernel kernel, pc_dtype dtype, const double *v, int64_t n,
                        float got[3]) {
    pc_isa isas[3];
    int count = pc_lsetest_isas(isas);
    void *x = pc_test_alloc((size_t)(n ? n : 1) * 4);
    pc_lsetest_encode(dtype, v, n, x);
    for (int i = 0; i < count; i++) {
        pc_lse_cpu_opts opts = {1, isas[i]};
        got[i] = 12345.0f; /* poison: a value no case expects, so an unwritten output fails */
        assert_int_equal(pc_lse_rows(kernel, dtype, x, 1, n, n, &got[i], &opts), PC_OK);
    }
    free(x);
    return count;
}

/* Every kernel (ref included) with every dtype it takes, on one row of values v. */
static void expect_all(const double *v, int64_t n, double want, int allow_q10_6) {
    for (int p = -1; p < 5; p++) {
        pc_lse_kernel kernel = p < 0 ? PC_LSE_REF : pc_lsetest_pairs[p].kernel;
        pc_dtype dtype = p < 0 ? PC_F32 : pc_lsetest_pairs[p].dtype;
        if (dtype == PC_Q10_6 && !allow_q10_6)
            continue;
        float got[3];
        int count = run_all_isas(kernel, dtype, v, n, got);
        for (int i = 0; i < count; i++) {
            if (isnan(want)) {
                if (!isnan(got[i]))
                    fail_msg("%s/%s isa %d n=%lld: got %g, want NaN", pc_lse_kernel_name(kernel),
                             pc_dtype_name(dtype), i, (long long)n, got[i]);
            } else if (got[i] != (float)want) {
                fail_msg("%s/%s isa %d n=%lld: got %g, want %g", pc_lse_kernel_name(kernel),
                         pc_dtype_name(dtype), i, (long long)n, got[i], want);
            }
        }
    }
}

static double *fill_finite(int64_t n) {
    double *v = pc_test_alloc((size_t)(n ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        v[i] = pc_rng_uniform(pc_test_rng(), -10.0, 0.0);
    return v;
}

static void test_empty_row(void **state) {
    (void)state;
    expect_all(NULL, 0, -INFINITY, 1);
}

static void test_all_neg_inf(void **state) {
    (void)state;
    for (int l = 0; l < N_LENGTHS; l++) {
        double *v = fill_finite(edge_lengths[l]);
        for (int64_t i = 0; i < edge_lengths[l]; i++)
            v[i] = -INFINITY;
        expect_all(v, edge_lengths[l], -INFINITY, 1);
        free(v);
    }
}

static void test_nan_anywhere(void **state) {
    (void)state;
    for (int l = 0; l < N_LENGTHS; l++) {
        int64_t n = edge_lengths[l];
        double *v = fill_finite(n);
        v[pc_rng_int(pc_test_rng(), 0, n - 1)] = NAN;
        expect_all(v, n, NAN, 0);
        /* NaN beside +inf is still NaN; NaN inside an otherwise all -inf row too. */
        for (int64_t i = 0; i < n; i++)
            v[i] = isnan(v[i]) ? v[i] : (i % 2 ? INFINITY : v[i]);
        expect_all(v, n, NAN, 0);
        for (int64_t i = 0; i < n; i++)
            v[i] = isnan(v[i]) ? v[i] : -INFINITY;
        expect_all(v, n, NAN, 0);
        free(v);
    }
}

/* A float NaN with the given sign and payload (1 <= payload < 2^23; bit 22 set is quiet). */
static float nan_with_payload(uint32_t sign, uint32_t payload) {
    uint32_t bits = sign << 31 | 0x7f800000u | payload;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* NaNs whose payload bits are not the default's: the SIMD exp2 paths build 2^k in the exponent
 * bits, and a NaN's low payload bits reach those bits; the result must stay NaN in the row
 * kernels (fuse, int, ref on f32), the weighted form (a NaN in x or in w) and the backward. */
static void test_nan_payloads(void **state) {
    (void)state;
    pc_isa isas[3];
    int count = pc_lsetest_isas(isas);
    const pc_lse_kernel kernels[] = {PC_LSE_REF, PC_LSE_FUSE, PC_LSE_INT};
    for (int l = 0; l < N_LENGTHS; l++) {
        int64_t n = edge_lengths[l];
        double *v = fill_finite(n);
        float *x = pc_test_alloc((size_t)n * sizeof(float));
        float *grad = pc_test_alloc((size_t)n * sizeof(float));
        for (int trial = 0; trial < 8; trial++) {
            /* Low payload bits set always (trial 0: all of them; then random ones), quiet or
             * signalling, either sign. */
            uint32_t payload = trial == 0 ? 0x7fffffu
                                          : (uint32_t)pc_rng_int(pc_test_rng(), 1, 1 << 23) | 1u;
            float bad = nan_with_payload((uint32_t)(trial & 1), payload);
            int64_t at = pc_rng_int(pc_test_rng(), 0, n - 1);
            for (int64_t i = 0; i < n; i++)
                x[i] = i == at ? bad : (float)v[i];
            for (int i = 0; i < count; i++) {
                pc_lse_cpu_opts opts = {1, isas[i]};
                for (int k = 0; k < 3; k++) {
                    float got = 12345.0f;
                    assert_int_equal(pc_lse_rows(kernels[k], PC_F32, x, 1, n, n, &got, &opts),
                                     PC_OK);
                    if (!isnan(got))
                        fail_msg("%s %s n=%lld payload %#x at %lld: got %g, want NaN",
                                 pc_lse_kernel_name(kernels[k]), pc_isa_name(isas[i]),
                                 (long long)n, payload, (long long)at, got);
                }
                /* Weighted: one output over the row, the NaN in x, then in w. */
                for (int in_w = 0; in_w < 2; in_w++) {
                    for (int k = 1; k < 3; k++) {
                        float got = 12345.0f;
                        const float *w = in_w ? x : grad, *xx = in_w ? grad : x;
                        for (int64_t j = 0; j < n; j++)
                            grad[j] = -1.0f;
                        assert_int_equal(pc_lse_weighted(kernels[k], w, xx, 1, 1, n, n, &got,
                                                         &opts),
                                         PC_OK);
                        if (!isnan(got))
                            fail_msg("weighted %s %s n=%lld NaN in %s: got %g",
                                     pc_lse_kernel_name(kernels[k]), pc_isa_name(isas[i]),
                                     (long long)n, in_w ? "w" : "x", got);
                    }
                }
                /* Backward with a finite lse: the NaN's own gradient is NaN, the others are
                 * numbers. */
                float lse = 0.0f;
                for (int64_t j = 0; j < n; j++)
                    grad[j] = 12345.0f;
                assert_int_equal(pc_lse_backward(x, &lse, 1, n, n, grad, n, &opts), PC_OK);
                for (int64_t j = 0; j < n; j++)
                    if (isnan(grad[j]) != (j == at))
                        fail_msg("backward %s n=%lld payload %#x: grad[%lld] = %g (NaN at %lld)",
                                 pc_isa_name(isas[i]), (long long)n, payload, (long long)j,
                                 grad[j], (long long)at);
            }
        }
        free(grad);
        free(x);
        free(v);
    }
}

static void test_pos_inf(void **state) {
    (void)state;
    for (int l = 0; l < N_LENGTHS; l++) {
        int64_t n = edge_lengths[l];
        double *v = fill_finite(n);
        v[pc_rng_int(pc_test_rng(), 0, n - 1)] = INFINITY;
        expect_all(v, n, INFINITY, 0);
        for (int64_t i = 0; i < n; i++)
            v[i] = v[i] == INFINITY ? v[i] : -INFINITY;
        expect_all(v, n, INFINITY, 0);
        free(v);
    }
}

/* -inf elements contribute nothing: the reference of the row equals that of its finite part,
 * and every kernel matches the reference of its own encoded row. */
static void test_neg_inf_contributes_nothing(void **state) {
    (void)state;
    for (int l = 0; l < N_LENGTHS; l++) {
        int64_t n = edge_lengths[l], kept = 0;
        double *v = fill_finite(n), *finite = fill_finite(n);
        for (int64_t i = 0; i < n; i++) {
            if (pc_rng_uniform(pc_test_rng(), 0, 1) < 0.3 && i != n / 2)
                v[i] = -INFINITY;
            else
                finite[kept++] = v[i];
        }
        for (int p = 0; p < 5; p++) {
            pc_dtype dtype = pc_lsetest_pairs[p].dtype;
            void *x = pc_test_alloc((size_t)n * 4), *xf = pc_test_alloc((size_t)n * 4);
            pc_lsetest_encode(dtype, v, n, x);
            pc_lsetest_encode(dtype, finite, kept, xf);
            double ref, ref_finite;
            assert_int_equal(pc_lse_rows_ref(dtype, x, 1, n, n, &ref), PC_OK);
            assert_int_equal(pc_lse_rows_ref(dtype, xf, 1, kept, kept, &ref_finite), PC_OK);
            assert_true(fabs(ref - ref_finite) <= 1e-12 * fmax(1.0, fabs(ref)));
            float got[3];
            int count = run_all_isas(pc_lsetest_pairs[p].kernel, dtype, v, n, got);
            double tol = pc_lsetest_pairs[p].kernel == PC_LSE_INT ? 2e-3 : 1e-5;
            for (int i = 0; i < count; i++)
                if (!(pc_lsetest_rel_err(got[i], ref) <= tol))
                    fail_msg("%s/%s isa %d n=%lld: got %.9g, ref %.9g",
                             pc_lse_kernel_name(pc_lsetest_pairs[p].kernel), pc_dtype_name(dtype),
                             i, (long long)n, got[i], ref);
            free(x);
            free(xf);
        }
        free(v);
        free(finite);
    }
}

/* Values at the edge of each type's range: no overflow to inf, no NaN. */
static void test_huge_finite(void **state) {
    (void)state;
    const double top[] = {FLT_MAX, 65504.0, 3.3895313892515355e38,
                          32767.0 / 64.0 * 0.6931471805599453};
    const pc_dtype types[] = {PC_F32, PC_F16, PC_BF16, PC_Q10_6};
    for (int t = 0; t < 4; t++) {
        for (int l = 0; l < N_LENGTHS; l++) {
            int64_t n = edge_lengths[l];
            double *v = fill_finite(n);
            /* Both ends: the max at the top, the rest at the bottom or in between. */
            for (int64_t i = 0; i < n; i++)
                v[i] = i % 3 == 0 ? -top[t] : (i % 3 == 1 ? top[t] : 0.0);
            for (int pass = 0; pass < 2; pass++) {
                if (pass == 1)
                    for (int64_t i = 0; i < n; i++)
                        v[i] = -top[t]; /* all at the bottom */
                void *x = pc_test_alloc((size_t)n * 4);
                pc_lsetest_encode(types[t], v, n, x);
                double ref;
                assert_int_equal(pc_lse_rows_ref(types[t], x, 1, n, n, &ref), PC_OK);
                assert_true(isfinite(ref));
                for (int p = 0; p < 5; p++) {
                    if (pc_lsetest_pairs[p].dtype != types[t])
                        continue;
                    float got[3];
                    int count = run_all_isas(pc_lsetest_pairs[p].kernel, types[t], v, n, got);
                    for (int i = 0; i < count; i++)
                        if (!isfinite(got[i]) || fabs(got[i] - ref) > 1e-6 * fabs(ref) + 1e-3)
                            fail_msg("%s/%s isa %d n=%lld pass %d: got %.9g, ref %.9g",
                                     pc_lse_kernel_name(pc_lsetest_pairs[p].kernel),
                                     pc_dtype_name(types[t]), i, (long long)n, pass, got[i], ref);
                }
                free(x);
            }
            free(v);
        }
    }
}

/* q10.6: INT16_MIN is -inf; a row of it alone is -inf; it contributes nothing. */
static void test_q10_6_neg_inf(void **state) {
    (void)state;
    int16_t x[5] = {INT16_MIN, 64, INT16_MIN, 0, INT16_MIN};
    float out = NAN;
    double ref;
    assert_int_equal(pc_lse_rows(PC_LSE_INT, PC_Q10_6, x, 1, 5, 5, &out, NULL), PC_OK);
    assert_int_equal(pc_lse_rows_ref(PC_Q10_6, x, 1, 5, 5, &ref), PC_OK);
    /* log(2 + 1) in base-2 units: LSE of ln2 and 0 = log(3). */
    assert_true(fabs(ref - log(3.0)) < 1e-12);
    assert_true(fabs(out - ref) < 1e-4);
    int16_t all[3] = {INT16_MIN, INT16_MIN, INT16_MIN};
    assert_int_equal(pc_lse_rows(PC_LSE_INT, PC_Q10_6, all, 1, 3, 3, &out, NULL), PC_OK);
    assert_true(out == -INFINITY);
}

/* Edge-case rows side by side in one call (paths may handle several short rows at once): every
 * row must come out as if alone. Rows: finite, NaN, +inf, all -inf, sparse -inf, huge finite,
 * NaN with +inf, finite again (a block boundary after 4 rows), repeated to 19 rows. */
static void test_edge_rows_together(void **state) {
    (void)state;
    static const int64_t widths[] = {1, 17, 100, 2048, 2100};
    pc_isa isas[3];
    int nisa = pc_lsetest_isas(isas);
    for (int w = 0; w < 5; w++) {
        int64_t rows = 19, cols = widths[w], stride = cols + 3;
        double *v = pc_test_alloc((size_t)(rows * stride) * sizeof(double));
        for (int64_t r = 0; r < rows; r++) {
            double *row = v + r * stride;
            for (int64_t i = 0; i < stride; i++)
                row[i] = pc_rng_uniform(pc_test_rng(), -10.0, 0.0);
            int64_t at = pc_rng_int(pc_test_rng(), 0, cols - 1);
            switch (r % 8) {
            case 1:
                row[at] = NAN;
                break;
            case 2:
                row[at] = INFINITY;
                break;
            case 3:
                for (int64_t i = 0; i < cols; i++)
                    row[i] = -INFINITY;
                break;
            case 4:
                for (int64_t i = 0; i < cols; i += 2)
                    row[i] = i == at ? row[i] : -INFINITY;
                break;
            case 5:
                row[at] = 3.0e38;
                break;
            case 6:
                row[at] = NAN;
                row[(at + 1) % cols] = INFINITY;
                break;
            default:
                break;
            }
        }
        for (int p = 0; p < 5; p++) {
            pc_dtype dtype = pc_lsetest_pairs[p].dtype;
            void *x = pc_test_alloc((size_t)(rows * stride) * 4);
            pc_lsetest_encode(dtype, v, rows * stride, x);
            double ref[19];
            float out[19];
            assert_int_equal(pc_lse_rows_ref(dtype, x, rows, cols, stride, ref), PC_OK);
            for (int i = 0; i < nisa; i++) {
                pc_lse_cpu_opts opts = {1, isas[i]};
                for (int r = 0; r < 19; r++)
                    out[r] = 12345.0f;
                assert_int_equal(pc_lse_rows(pc_lsetest_pairs[p].kernel, dtype, x, rows, cols,
                                             stride, out, &opts),
                                 PC_OK);
                double tol = pc_lsetest_pairs[p].kernel == PC_LSE_INT ? 1e-4 : 1e-5;
                for (int r = 0; r < 19; r++)
                    if (!(pc_lsetest_rel_err(out[r], ref[r]) <= tol))
                        fail_msg("%s/%s %s cols %lld row %d: got %.9g, ref %.9g",
                                 pc_lse_kernel_name(pc_lsetest_pairs[p].kernel),
                                 pc_dtype_name(dtype), pc_isa_name(isas[i]), (long long)cols, r,
                                 out[r], ref[r]);
            }
            free(x);
        }
        free(v);
    }
}

/* Bad arguments: PC_ERR_ARG naming the argument, output untouched. */
static void expect_arg_error(pc_status st, const char *word, const float *out) {
    assert_int_equal(st, PC_ERR_ARG);
    if (!strstr(pc_last_error(), word))
        fail_msg("message '%s' does not name '%s'", pc_last_error(), word);
    if (out)
        assert_true(*out == 777.0f);
}

static void test_bad_arguments(void **state) {
    (void)state;
    float x[8] = {0}, out = 777.0f;
    double dout = 0.0;
    pc_lse_cpu_opts bad_isa = {1, (pc_isa)99};
    expect_arg_error(pc_lse_rows(PC_LSE_FUSE, PC_F32, NULL, 1, 8, 8, &out, NULL), "x", &out);
    expect_arg_error(pc_lse_rows(PC_LSE_FUSE, PC_F32, x, 1, 8, 8, NULL, NULL), "out", NULL);
    expect_arg_error(pc_lse_rows(PC_LSE_FUSE, PC_F32, x, -1, 8, 8, &out, NULL), "rows", &out);
    expect_arg_error(pc_lse_rows(PC_LSE_INT, PC_F32, x, 1, -2, 8, &out, NULL), "cols", &out);
    expect_arg_error(pc_lse_rows(PC_LSE_INT, PC_F32, x, 1, 8, 7, &out, NULL), "stride", &out);
    expect_arg_error(pc_lse_rows((pc_lse_kernel)7, PC_F32, x, 1, 8, 8, &out, NULL), "kernel", &out);
    expect_arg_error(pc_lse_rows(PC_LSE_FUSE, (pc_dtype)9, x, 1, 8, 8, &out, NULL), "dtype", &out);
    expect_arg_error(pc_lse_rows(PC_LSE_FUSE, PC_Q10_6, x, 1, 8, 8, &out, NULL), "q10.6", &out);
    expect_arg_error(pc_lse_rows(PC_LSE_INT, PC_F16, x, 1, 8, 8, &out, NULL), "f16", &out);
    expect_arg_error(pc_lse_rows(PC_LSE_INT, PC_BF16, x, 1, 8, 8, &out, NULL), "bf16", &out);
    expect_arg_error(pc_lse_rows(PC_LSE_FUSE, PC_F32, x, 1, 8, 8, &out, &bad_isa), "isa", &out);
    assert_int_equal(pc_lse_rows_ref(PC_F32, NULL, 1, 8, 8, &dout), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_ref((pc_dtype)-1, x, 1, 8, 8, &dout), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_ref(PC_F32, x, 1, 8, 4, &dout), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "stride"));

    float w[4] = {0}, wout[4] = {777.0f, 777.0f, 777.0f, 777.0f};
    expect_arg_error(pc_lse_weighted(PC_LSE_FUSE, NULL, x, 1, 2, 2, 2, wout, NULL), "w", wout);
    expect_arg_error(pc_lse_weighted(PC_LSE_FUSE, w, NULL, 1, 2, 2, 2, wout, NULL), "x", wout);
    expect_arg_error(pc_lse_weighted(PC_LSE_INT, w, x, 1, 2, 2, 2, NULL, NULL), "out", NULL);
    expect_arg_error(pc_lse_weighted(PC_LSE_INT, w, x, -1, 2, 2, 2, wout, NULL), "batch", wout);
    expect_arg_error(pc_lse_weighted(PC_LSE_INT, w, x, 1, -2, 2, 2, wout, NULL), "outs", wout);
    expect_arg_error(pc_lse_weighted(PC_LSE_INT, w, x, 1, 2, -2, 2, wout, NULL), "ins", wout);
    expect_arg_error(pc_lse_weighted(PC_LSE_INT, w, x, 1, 2, 2, 1, wout, NULL), "x_stride", wout);
    expect_arg_error(pc_lse_weighted((pc_lse_kernel)5, w, x, 1, 2, 2, 2, wout, NULL), "kernel",
                     wout);
    expect_arg_error(pc_lse_weighted(PC_LSE_FUSE, w, x, 1, 2, 2, 2, wout, &bad_isa), "isa", wout);
    double wd[4];
    assert_int_equal(pc_lse_weighted_ref(w, x, 1, 2, 2, 1, wd), PC_ERR_ARG);

    float lse[1] = {0}, grad[8];
    for (int i = 0; i < 8; i++)
        grad[i] = 777.0f;
    expect_arg_error(pc_lse_backward(NULL, lse, 1, 8, 8, grad, 8, NULL), "x", grad);
    expect_arg_error(pc_lse_backward(x, NULL, 1, 8, 8, grad, 8, NULL), "lse", grad);
    expect_arg_error(pc_lse_backward(x, lse, 1, 8, 8, NULL, 8, NULL), "grad", NULL);
    expect_arg_error(pc_lse_backward(x, lse, 1, 8, 8, grad, 7, NULL), "grad_stride", grad);
    expect_arg_error(pc_lse_backward(x, lse, 1, 8, 6, grad, 8, NULL), "stride", grad);
    expect_arg_error(pc_lse_backward(x, lse, -3, 8, 8, grad, 8, NULL), "rows", grad);

    /* An instruction set the CPU lacks is UNSUPPORTED, not a wrong answer. */
    if (pc_cpu_best_isa() < PC_ISA_AVX512) {
        pc_lse_cpu_opts want = {1, PC_ISA_AVX512};
        assert_int_equal(pc_lse_rows(PC_LSE_FUSE, PC_F32, x, 1, 8, 8, &out, &want),
                         PC_ERR_UNSUPPORTED);
        assert_true(out == 777.0f);
    }
}

/* SIMD paths against the scalar path on random shapes: fuse within 2e-6 relative (different
 * summation order and exp polynomial rounding), int bit for bit. */
static void test_simd_matches_scalar(void **state) {
    (void)state;
    pc_isa isas[3];
    int count = pc_lsetest_isas(isas);
    pc_rng *rng = pc_test_rng();
    for (int trial = 0; trial < 40; trial++) {
        int64_t rows = pc_rng_int(rng, 1, 5), cols = pc_rng_int(rng, 0, 5000);
        int64_t stride = cols + pc_rng_int(rng, 0, 9);
        double *v = pc_test_alloc((size_t)(rows * stride + 1) * sizeof(double));
        for (int64_t i = 0; i < rows * stride; i++)
            v[i] = pc_rng_uniform(rng, 0, 1) < 0.05 ? -INFINITY : pc_rng_normal(rng, 0.0, 4.0);
        for (int p = 0; p < 5; p++) {
            pc_dtype dtype = pc_lsetest_pairs[p].dtype;
            void *x = pc_test_alloc((size_t)(rows * stride + 1) * 4);
            pc_lsetest_encode(dtype, v, rows * stride, x);
            float got[3][5];
            for (int i = 0; i < count; i++) {
                pc_lse_cpu_opts opts = {1, isas[i]};
                pc_test_poison_f32(got[i], 5);
                assert_int_equal(pc_lse_rows(pc_lsetest_pairs[p].kernel, dtype, x, rows, cols,
                                             stride, got[i], &opts),
                                 PC_OK);
            }
            for (int i = 1; i < count; i++)
                for (int64_t r = 0; r < rows; r++) {
                    int same = pc_lsetest_pairs[p].kernel == PC_LSE_INT
                                   ? memcmp(&got[i][r], &got[0][r], sizeof(float)) == 0
                                   : pc_lsetest_rel_err(got[i][r], got[0][r]) <= 2e-6;
                    if (!same)
                        fail_msg("%s/%s isa %s row %lld cols %lld: %.9g vs scalar %.9g",
                                 pc_lse_kernel_name(pc_lsetest_pairs[p].kernel),
                                 pc_dtype_name(dtype), pc_isa_name(isas[i]), (long long)r,
                                 (long long)cols, got[i][r], got[0][r]);
                }
            free(x);
        }
        free(v);
    }
}

/* Rows are independent, so any thread count gives the same bits. */
static void test_threads_match_one(void **state) {
    (void)state;
    pc_rng *rng = pc_test_rng();
    int64_t rows = 37, stride = 3005;
    float *x = pc_test_alloc((size_t)(rows * stride) * sizeof(float));
    for (int64_t i = 0; i < rows * stride; i++)
        x[i] = (float)pc_rng_normal(rng, 0.0, 4.0);
    float one[37], many[37];
    /* Long rows (several chunks) and short ones (several rows per work item). */
    for (int k = 0; k < 6; k++) {
        int64_t cols = k < 3 ? 3001 : 100;
        pc_lse_kernel kernel = (pc_lse_kernel)(k % 3);
        pc_lse_cpu_opts o1 = {1, PC_ISA_AUTO};
        pc_test_poison_f32(one, 37);
        assert_int_equal(pc_lse_rows(kernel, PC_F32, x, rows, cols, stride, one, &o1), PC_OK);
        for (int t = 2; t <= 3; t++) {
            pc_lse_cpu_opts ot = {t, PC_ISA_AUTO};
            pc_test_poison_f32(many, 37);
            assert_int_equal(pc_lse_rows(kernel, PC_F32, x, rows, cols, stride, many, &ot), PC_OK);
            assert_memory_equal(one, many, sizeof one);
        }
    }
    free(x);
}

/* int gives a row the same bits whether it is computed alone or beside others (short rows
 * share vector lanes). */
static void test_int_rows_alone_match_block(void **state) {
    (void)state;
    static const int64_t widths[] = {1, 7, 100, 192, 193};
    pc_isa isas[3];
    int nisa = pc_lsetest_isas(isas);
    int64_t rows = 37;
    for (int w = 0; w < 5; w++) {
        int64_t cols = widths[w], stride = cols + 1;
        double *v = pc_test_alloc((size_t)(rows * stride) * sizeof(double));
        for (int64_t i = 0; i < rows * stride; i++)
            v[i] = pc_rng_normal(pc_test_rng(), -2.0, 4.0);
        for (int d = 0; d < 2; d++) {
            pc_dtype dtype = d ? PC_Q10_6 : PC_F32;
            void *x = pc_test_alloc((size_t)(rows * stride) * 4);
            pc_lsetest_encode(dtype, v, rows * stride, x);
            float block[37], alone;
            for (int i = 0; i < nisa; i++) {
                pc_lse_cpu_opts opts = {1, isas[i]};
                pc_test_poison_f32(block, 37);
                assert_int_equal(
                    pc_lse_rows(PC_LSE_INT, dtype, x, rows, cols, stride, block, &opts), PC_OK);
                for (int64_t r = 0; r < rows; r++) {
                    const char *row = (const char *)x + (size_t)(r * stride) * pc_dtype_size(dtype);
                    alone = NAN;
                    assert_int_equal(
                        pc_lse_rows(PC_LSE_INT, dtype, row, 1, cols, stride, &alone, &opts), PC_OK);
                    if (memcmp(&alone, &block[r], sizeof alone) != 0)
                        fail_msg("int/%s %s cols %lld row %lld: alone %.9g, in a block %.9g",
                                 pc_dtype_name(dtype), pc_isa_name(isas[i]), (long long)cols,
                                 (long long)r, alone, block[r]);
                }
            }
            free(x);
        }
        free(v);
    }
}

static void test_best_isa_names(void **state) {
    (void)state;
    pc_isa best = pc_cpu_best_isa();
    assert_true(best >= PC_ISA_SCALAR && best <= PC_ISA_AVX512);
    pc_isa parsed;
    assert_int_equal(pc_isa_parse(pc_isa_name(best), &parsed), PC_OK);
    assert_int_equal(parsed, best);
}

int main(void) {
    pc_test_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_row),
        cmocka_unit_test(test_all_neg_inf),
        cmocka_unit_test(test_nan_anywhere),
        cmocka_unit_test(test_nan_payloads),
        cmocka_unit_test(test_pos_inf),
        cmocka_unit_test(test_neg_inf_contributes_nothing),
        cmocka_unit_test(test_huge_finite),
        cmocka_unit_test(test_q10_6_neg_inf),
        cmocka_unit_test(test_edge_rows_together),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_simd_matches_scalar),
        cmocka_unit_test(test_threads_match_one),
        cmocka_unit_test(test_int_rows_alone_match_block),
        cmocka_unit_test(test_best_isa_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
