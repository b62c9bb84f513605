/* Token log-probabilities on the CPU (pc/logprob.h): fuse, int and ref against the FP64
 * reference on random rows of odd sizes and strides, the special cases, threads, and argument
 * errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "logprob_cases.h"

static const int64_t vocabs[] = {1, 2, 7, 255, 256, 257, 1000, 4099, 32000, 50257};

/* IntLSE: Q16.16 with an interpolated table, a tree of log2(N) pairwise steps of <= 1.4e-5 nats
 * each (src/lse/lse_int.h): 16 levels at N = 50257, plus the conversions. */
#define LP_TOL_INT_ABS 4e-4

/* Runs kernel on rows of one vocabulary and compares each row with pc_logprob_rows_ref. */
static void check_against_ref(pc_lse_kernel kernel, pc_dtype dtype, int64_t vocab, int threads) {
    int64_t rows = vocab >= 4 ? LP_SPECIAL + lp_below(vocab > 20000 ? 8 : 40) : 1 + lp_below(9);
    int64_t stride = vocab + lp_below(5);
    lp_case c = lp_case_new(dtype, rows, vocab, stride);
    float expect[LP_SPECIAL];
    if (vocab >= 4) lp_plant(dtype, c.x, vocab, stride, c.targets, expect);
    for (int64_t r = 0; r < rows; r++) c.out[r] = LP_POISON;

    pc_lse_cpu_opts opts = {threads, PC_ISA_AUTO};
    assert_int_equal(
        pc_logprob_rows(kernel, dtype, c.x, rows, vocab, stride, c.targets, c.out, &opts), PC_OK);
    assert_int_equal(pc_logprob_rows_ref(dtype, c.x, rows, vocab, stride, c.targets, c.ref), PC_OK);
    for (int64_t r = 0; r < rows; r++) {
        if (vocab >= 4 && r < LP_SPECIAL &&
            !(isnan(expect[r]) ? isnan(c.ref[r]) : c.ref[r] == expect[r]))
            fail_msg("ref: special row %lld gives %g, expected %g", (long long)r, c.ref[r],
                     expect[r]);
        double scale = fabs(c.ref[r]),
               lse = lp_lse_of(dtype, c.x, stride, r, c.targets[r], c.ref[r]);
        if (kernel != PC_LSE_REF) scale += fabs(lse); /* subtracted from an LSE rounded to float */
        int ok = kernel == PC_LSE_INT && isfinite(c.ref[r])
                     ? fabs((double)c.out[r] - c.ref[r]) <= LP_TOL_INT_ABS + LP_TOL_REL * scale
                     : lp_close(c.out[r], c.ref[r], scale);
        if (!ok)
            fail_msg("%s %s vocab %lld stride %lld row %lld: got %.9g, ref %.12g",
                     pc_lse_kernel_name(kernel), pc_dtype_name(dtype), (long long)vocab,
                     (long long)stride, (long long)r, c.out[r], c.ref[r]);
    }
    lp_case_free(&c);
}

static void test_fuse_matches_ref(void **state) {
    (void)state;
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        check_against_ref(PC_LSE_FUSE, PC_F32, vocabs[v], 1);
        check_against_ref(PC_LSE_FUSE, PC_BF16, vocabs[v], 1);
        check_against_ref(PC_LSE_REF, PC_F32, vocabs[v], 1);
        check_against_ref(PC_LSE_REF, PC_BF16, vocabs[v], 1);
        check_against_ref(PC_LSE_INT, PC_F32, vocabs[v], 1);
    }
}

static void test_threads(void **state) {
    (void)state;
    check_against_ref(PC_LSE_FUSE, PC_F32, 4099, 2);
    check_against_ref(PC_LSE_REF, PC_BF16, 1000, 3);
}

/* Logits at +-FLT_MAX never overflow. Row {MAX, MAX, -MAX, 0}: the exact answer at a MAX
 * target is -ln 2, but every CPU path subtracts from an LSE that rounds to MAX (even in FP64:
 * an ulp of MAX is 2^75), an error of half an ulp of |LSE| as documented; so [-ln 2, 0]. */
static void test_huge_logits(void **state) {
    (void)state;
    float x[8] = {FLT_MAX, FLT_MAX, -FLT_MAX, 0.0f, FLT_MAX, FLT_MAX, -FLT_MAX, 0.0f};
    int64_t t[2] = {1, 2};
    double ref[2];
    assert_int_equal(pc_logprob_rows_ref(PC_F32, x, 2, 4, 4, t, ref), PC_OK);
    assert_true(ref[0] >= -0.6931472 && ref[0] <= 0.0);
    assert_true(ref[1] < -6e38);
    for (int k = PC_LSE_REF; k <= PC_LSE_INT; k++) {
        float out[2] = {LP_POISON, LP_POISON};
        assert_int_equal(pc_logprob_rows((pc_lse_kernel)k, PC_F32, x, 2, 4, 4, t, out, NULL),
                         PC_OK);
        assert_true(out[0] >= -0.6931472f && out[0] <= 0.0f);
        assert_true(out[1] == -INFINITY); /* -MAX - MAX: the token has probability 0 */
    }
    /* vocab 1: probability 1, whatever the logit. */
    float one = -3.0e38f, lp = LP_POISON;
    int64_t t0 = 0;
    assert_int_equal(pc_logprob_rows(PC_LSE_FUSE, PC_F32, &one, 1, 1, 1, &t0, &lp, NULL), PC_OK);
    assert_true(lp == 0.0f);
}

static void test_argument_errors(void **state) {
    (void)state;
    float x[12] = {0}, out[3] = {LP_POISON, LP_POISON, LP_POISON};
    double dout[3] = {1.5, 1.5, 1.5};
    int64_t t[3] = {0, 1, 3};
    /* target 3 of vocab 3 in row 2: an error naming the row, nothing written */
    assert_int_equal(pc_logprob_rows(PC_LSE_FUSE, PC_F32, x, 3, 3, 4, t, out, NULL), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "targets[2]"));
    assert_int_equal(pc_logprob_rows_ref(PC_F32, x, 3, 3, 4, t, dout), PC_ERR_ARG);
    t[2] = -1;
    assert_int_equal(pc_logprob_rows(PC_LSE_REF, PC_F32, x, 3, 3, 4, t, out, NULL), PC_ERR_ARG);
    t[2] = 2;
    assert_int_equal(pc_logprob_rows(PC_LSE_FUSE, PC_F32, NULL, 3, 3, 4, t, out, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows(PC_LSE_FUSE, PC_F32, x, 3, 3, 4, NULL, out, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows(PC_LSE_FUSE, PC_F32, x, 3, 3, 4, t, NULL, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows(PC_LSE_FUSE, PC_F32, x, -1, 3, 4, t, out, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows(PC_LSE_FUSE, PC_F32, x, 3, 0, 4, t, out, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows(PC_LSE_FUSE, PC_F32, x, 3, 5, 4, t, out, NULL), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "stride"));
    assert_int_equal(pc_logprob_rows(PC_LSE_FUSE, PC_F16, x, 3, 3, 4, t, out, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows(PC_LSE_INT, PC_BF16, x, 3, 3, 4, t, out, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows((pc_lse_kernel)7, PC_F32, x, 3, 3, 4, t, out, NULL),
                     PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows(PC_LSE_FUSE, PC_Q10_6, x, 3, 3, 4, t, out, NULL), PC_ERR_ARG);
    for (int r = 0; r < 3; r++) assert_true(out[r] == LP_POISON && dout[r] == 1.5);
    /* rows == 0 is a valid empty call, even with NULL buffers */
    assert_int_equal(pc_logprob_rows(PC_LSE_FUSE, PC_F32, NULL, 0, 3, 4, NULL, NULL, NULL), PC_OK);
    assert_int_equal(pc_logprob_check_targets(t, 3, 3), PC_OK);
    assert_int_equal(pc_logprob_check_targets(t, 3, 2), PC_ERR_ARG);
}

/* The GPU stand-in of a build without CUDA says so instead of pretending. */
static void test_cuda_entry_without_cuda(void **state) {
    (void)state;
#ifdef PC_HAVE_CUDA
    skip();
#else
    size_t bytes = 0;
    float x = 0.0f, out = LP_POISON;
    int64_t t = 0;
    assert_int_equal(
        pc_logprob_rows_cuda(PC_LSE_FUSE, PC_F32, &x, 1, 1, 1, &t, &out, NULL, &bytes, NULL),
        PC_ERR_UNSUPPORTED);
    assert_true(out == LP_POISON);
#endif
}

int main(void) {
    lp_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuse_matches_ref),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_huge_logits),
        cmocka_unit_test(test_argument_errors),
        cmocka_unit_test(test_cuda_entry_without_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
