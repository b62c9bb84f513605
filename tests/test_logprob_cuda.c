/* Token log-probabilities on the GPU against the CPU FP64 reference: shapes that take the
 * one-block-per-row path and the split-row path, odd vocabularies and strides (misaligned rows),
 * f32 and bf16, the special cases, out-of-range targets and argument errors. Skips (exit 77)
 * without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "logprob_cases.h"
#include "pc/cuda.h"
#include "testutil.h"

/* Uploads, runs pc_logprob_rows_cuda with poisoned outputs, downloads into out[rows]. */
static void run_gpu(pc_dtype dtype, const void *x, int64_t rows, int64_t vocab, int64_t stride,
                    const int64_t *targets, float *out) {
    size_t xbytes = (size_t)(rows * stride) * pc_dtype_size(dtype), scratch = 0;
    void *d_x = NULL, *d_scratch = NULL;
    int64_t *d_t = NULL;
    float *d_out = NULL;
    for (int64_t r = 0; r < rows; r++) out[r] = LP_POISON;
    assert_int_equal(pc_cuda_malloc(&d_x, xbytes), PC_OK);
    assert_int_equal(pc_cuda_malloc((void **)&d_t, (size_t)rows * sizeof *targets), PC_OK);
    assert_int_equal(pc_cuda_malloc((void **)&d_out, (size_t)rows * sizeof *out), PC_OK);
    assert_int_equal(pc_cuda_memcpy_h2d(d_x, x, xbytes), PC_OK);
    assert_int_equal(pc_cuda_memcpy_h2d(d_t, targets, (size_t)rows * sizeof *targets), PC_OK);
    assert_int_equal(pc_cuda_memcpy_h2d(d_out, out, (size_t)rows * sizeof *out), PC_OK);
    assert_int_equal(pc_logprob_rows_cuda(PC_LSE_FUSE, dtype, d_x, rows, vocab, stride, d_t, d_out, NULL, &scratch, NULL), PC_OK);
    assert_true(scratch >= 16);
    assert_int_equal(pc_cuda_malloc(&d_scratch, scratch), PC_OK);
    size_t short_by_one = scratch - 1;
    if (scratch > 16) /* too little scratch is refused before launch */
        assert_int_equal(pc_logprob_rows_cuda(PC_LSE_FUSE, dtype, d_x, rows, vocab, stride, d_t, d_out, d_scratch,
                                              &short_by_one, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows_cuda(PC_LSE_FUSE, dtype, d_x, rows, vocab, stride, d_t, d_out, d_scratch, &scratch, NULL), PC_OK);
    assert_int_equal(pc_cuda_synchronize(), PC_OK);
    assert_int_equal(pc_cuda_memcpy_d2h(out, d_out, (size_t)rows * sizeof *out), PC_OK);
    pc_cuda_free(d_x), pc_cuda_free(d_t), pc_cuda_free(d_out), pc_cuda_free(d_scratch);
}

/* Random rows (specials planted when rows >= LP_SPECIAL), GPU vs FP64. */
static void check_shape(pc_dtype dtype, int64_t rows, int64_t vocab) {
    int64_t stride = vocab + lp_below(5);
    lp_case c = lp_case_new(dtype, rows, vocab, stride);
    float expect[LP_SPECIAL];
    int planted = rows >= LP_SPECIAL && vocab >= 4;
    if (planted) lp_plant(dtype, c.x, vocab, stride, c.targets, expect);
    run_gpu(dtype, c.x, rows, vocab, stride, c.targets, c.out);
    assert_int_equal(pc_logprob_rows_ref(dtype, c.x, rows, vocab, stride, c.targets, c.ref), PC_OK);
    double worst = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        if (planted && r < LP_SPECIAL && !(isnan(expect[r]) ? isnan(c.out[r]) : c.out[r] == expect[r]))
            fail_msg("special row %lld: got %g, expected %g", (long long)r, c.out[r], expect[r]);
        if (!lp_close(c.out[r], c.ref[r], fabs(c.ref[r])))
            fail_msg("%s rows %lld vocab %lld stride %lld row %lld: got %.9g, ref %.12g",
                     pc_dtype_name(dtype), (long long)rows, (long long)vocab, (long long)stride,
                     (long long)r, c.out[r], c.ref[r]);
        if (isfinite(c.ref[r]) && fabs(c.out[r] - c.ref[r]) > worst) worst = fabs(c.out[r] - c.ref[r]);
    }
    printf("%-4s rows %6lld vocab %6lld stride %6lld: max |err| %.2e\n", pc_dtype_name(dtype),
           (long long)rows, (long long)vocab, (long long)stride, worst);
    lp_case_free(&c);
}

static void test_shapes(void **state) {
    (void)state;
    /* (rows, vocab): split rows (few rows, large vocab) and one block per row (many rows). */
    static const int64_t shapes[][2] = {{1, 32000}, {3, 50257}, {8, 128256}, {2, 256000},
                                        {9, 1},     {7, 3},     {600, 4099}, {1030, 50257},
                                        {40, 1000}, {6, 17}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        check_shape(PC_F32, shapes[i][0], shapes[i][1]);
        check_shape(PC_BF16, shapes[i][0], shapes[i][1]);
    }
}

/* Targets outside [0, vocab) give NaN in their row only. */
static void test_out_of_range_targets(void **state) {
    (void)state;
    for (int split = 0; split < 2; split++) {
        int64_t rows = split ? 4 : 700, vocab = split ? 100000 : 300;
        float *x = malloc((size_t)(rows * vocab) * sizeof *x), *out = malloc((size_t)rows * sizeof *out);
        int64_t *t = malloc((size_t)rows * sizeof *t);
        assert_non_null(x), assert_non_null(out), assert_non_null(t);
        lp_fill(PC_F32, x, rows, vocab, vocab, t);
        t[0] = vocab, t[1] = -1, t[2] = INT64_MAX;
        run_gpu(PC_F32, x, rows, vocab, vocab, t, out);
        assert_true(isnan(out[0]) && isnan(out[1]) && isnan(out[2]));
        assert_true(isfinite(out[3]) && out[3] <= 0.0f);
        free(x), free(out), free(t);
    }
}

/* Logits at +-FLT_MAX: the GPU subtracts the row max before rounding, so a MAX target of
 * {MAX, MAX, -MAX, 0} gets -ln 2 to float precision, and the -MAX target -inf. */
static void test_huge_logits(void **state) {
    (void)state;
    float x[8] = {FLT_MAX, FLT_MAX, -FLT_MAX, 0.0f, FLT_MAX, FLT_MAX, -FLT_MAX, 0.0f}, out[2];
    int64_t t[2] = {1, 2};
    run_gpu(PC_F32, x, 2, 4, 4, t, out);
    assert_float_equal(out[0], -0.69314718f, 1e-6);
    assert_true(out[1] == -INFINITY);
}

static void test_argument_errors(void **state) {
    (void)state;
    size_t scratch = 0;
    void *d = NULL;
    assert_int_equal(pc_cuda_malloc(&d, 64), PC_OK);
    assert_int_equal(pc_logprob_rows_cuda(PC_LSE_FUSE, PC_F32, NULL, 1, 4, 4, d, d, NULL, &scratch, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows_cuda(PC_LSE_FUSE, PC_F32, d, 1, 4, 3, d, d, NULL, &scratch, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows_cuda(PC_LSE_FUSE, PC_F16, d, 1, 4, 4, d, d, NULL, &scratch, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows_cuda(PC_LSE_FUSE, PC_F32, d, 1, 0, 4, d, d, NULL, &scratch, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows_cuda(PC_LSE_FUSE, PC_F32, d, -2, 4, 4, d, d, NULL, &scratch, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows_cuda(PC_LSE_FUSE, PC_F32, d, 1, 4, 4, d, d, NULL, NULL, NULL), PC_ERR_ARG);
    assert_int_equal(pc_logprob_rows_cuda(PC_LSE_FUSE, PC_F32, d, 0, 4, 4, d, d, NULL, &scratch, NULL), PC_OK);
    /* The GPU offers kernel fuse only. */
    assert_int_equal(pc_logprob_rows_cuda(PC_LSE_INT, PC_F32, d, 1, 4, 4, d, d, NULL, &scratch, NULL), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "int"));
    assert_int_equal(pc_logprob_rows_cuda(PC_LSE_REF, PC_F32, d, 1, 4, 4, d, d, NULL, &scratch, NULL), PC_ERR_ARG);
    pc_cuda_free(d);
}

int main(void) {
    pc_test_require_gpu_or_exit("test_logprob_cuda");
    lp_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_out_of_range_targets),
        cmocka_unit_test(test_huge_logits),
        cmocka_unit_test(test_argument_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
