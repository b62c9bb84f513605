/* The GPU sum layers' log (src/eval/cuda/gpu_log.h), checked on the CPU against the C library's
 * log in FP64: random y over the whole positive float range (log-uniform), y near 1 and near
 * the mantissa split sqrt(2), powers of two, subnormals, and the special values. The bound is
 * 6e-8 nats plus the FP32 rounding of the result (|log y| 2^-24). With a GPU, the device's own
 * version (the special-function unit's log2 of the mantissa) is checked the same way, to 2e-7
 * nats plus 2^-23 |log y|, subnormals giving -inf as under the kernels' flush-to-zero.
 * pc_gpu_log_nonneg_d (log of an FP64 y >= 0 to FP32) likewise, over every normal double: to
 * 2e-7 nats plus 2^-23 |log y| on the CPU, 3e-7 plus 2^-23 |log y| on the GPU, where it also
 * equals pc_gpu_log bit for bit at every y an FP32 holds exactly. */
#include <math.h>
#include <string.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "eval/cuda/gpu_log.h"
#include "pc/cuda.h"
#include "testing/testing.h"
#include "testutil.h"

static double worst_excess = 0.0; /* largest error over its bound seen, as a fraction */

static double uniform(double lo, double hi) { return lo + (hi - lo) * pc_hr_unit(); }

static void check(float y) {
    const double want = log((double)y), got = (double)pc_gpu_log(y);
    const double bound = 6e-8 + fabs(want) * 0x1p-24;
    const double err = fabs(got - want);
    if (!(err <= bound))
        fail_msg("log(%.9g): got %.17g, want %.17g (error %.3g > %.3g)", y, got, want, err, bound);
    if (err / bound > worst_excess) worst_excess = err / bound;
}

static void test_random_range(void **state) {
    (void)state;
    for (int i = 0; i < 2000000; i++) {
        /* log-uniform over [2^-149, 2^127] */
        const double l2 = uniform(-149.0, 127.9);
        check((float)exp2(l2));
    }
    for (int i = 0; i < 1000000; i++) check((float)(1.0 + uniform(-0.01, 0.01)));
    for (int i = 0; i < 1000000; i++)
        check((float)(1.41421356 * (1.0 + uniform(-1e-4, 1e-4))));
    for (int i = 0; i < 1000000; i++) check((float)uniform(1e-6, 300.0));
    print_message("  worst error / bound: %.3f\n", worst_excess);
}

static void test_exact_points(void **state) {
    (void)state;
    for (int e = -149; e <= 127; e++) check(ldexpf(1.0f, e));
    check(1.0f);
    assert_true(pc_gpu_log(1.0f) == 0.0f);
    check(nextafterf(1.0f, 2.0f));
    check(nextafterf(1.0f, 0.0f));
    check(1.17549435e-38f);                /* smallest normal */
    check(nextafterf(1.17549435e-38f, 0)); /* largest subnormal */
    check(1e-45f);
    check(3.4028235e38f);
}

static void test_special_values(void **state) {
    (void)state;
    assert_true(isinf(pc_gpu_log(0.0f)) && pc_gpu_log(0.0f) < 0);
    assert_true(isinf(pc_gpu_log(-0.0f)) && pc_gpu_log(-0.0f) < 0);
    assert_true(isinf(pc_gpu_log(INFINITY)) && pc_gpu_log(INFINITY) > 0);
    assert_true(isnan(pc_gpu_log(-1.0f)));
    assert_true(isnan(pc_gpu_log(-INFINITY)));
    assert_true(isnan(pc_gpu_log(NAN)));
    /* The form for y >= 0: the same values there (on the host it is pc_gpu_log). */
    assert_true(isinf(pc_gpu_log_nonneg(0.0f)) && pc_gpu_log_nonneg(0.0f) < 0);
    assert_true(pc_gpu_log_nonneg(1.0f) == 0.0f);
}

/* Doubles for pc_gpu_log_nonneg_d: log-uniform over the normal doubles, near 1, just below 2 (the
 * mantissa rounds up to 2), at FP32's smallest normal and below it, powers of two. */
static int log_d_inputs(double *x, int n) {
    int i = 0;
    for (int e = -1022; e <= 1023 && i < n; e++) x[i++] = ldexp(1.0, e);
    while (i < n / 2) x[i++] = exp2(uniform(-1022.0, 1023.9));
    while (i < 5 * n / 8) x[i++] = 1.0 + uniform(-0.01, 0.01);
    while (i < 3 * n / 4)
        x[i++] = ldexp(2.0 - ldexp(uniform(0.0, 1.0), -23), (int)uniform(-60, 60));
    while (i < 7 * n / 8) x[i++] = exp2(uniform(-160.0, -120.0));
    while (i < n) x[i++] = uniform(1e-6, 300.0);
    return i;
}

static void check_d(double y, float got_f, double tol) {
    const double want = log(y), got = (double)got_f;
    const double bound = tol + fabs(want) * 0x1p-23, err = fabs(got - want);
    if (!(err <= bound))
        fail_msg("log_d(%.17g): got %.17g, want %.17g (error %.3g > %.3g)", y, got, want, err,
                 bound);
    if (err / bound > worst_excess) worst_excess = err / bound;
}

static void test_log_d(void **state) {
    (void)state;
    enum { N = 1 << 20 };
    static double x[N];
    log_d_inputs(x, N);
    worst_excess = 0.0;
    for (int i = 0; i < N; i++) check_d(x[i], pc_gpu_log_nonneg_d(x[i]), 2e-7);
    assert_true(isinf(pc_gpu_log_nonneg_d(0.0)) && pc_gpu_log_nonneg_d(0.0) < 0);
    assert_true(isinf(pc_gpu_log_nonneg_d(0x1p-1030)) && pc_gpu_log_nonneg_d(0x1p-1030) < 0);
    assert_true(isinf(pc_gpu_log_nonneg_d(0x1.fffffp-1023)));
    assert_true(pc_gpu_log_nonneg_d(1.0) == 0.0f);
    print_message("  log_d: worst error / bound: %.3f\n", worst_excess);
}

/* The device's log on a fresh random set and every special case; outputs poisoned first. */
static void test_device_log(void **state) {
    (void)state;
    PC_TEST_REQUIRE_GPU();
    enum { N = 1 << 21 };
    static float x[N], y[N], x2[N], y2[N];
    int i = 0;
    const float special[] = {0.0f, -0.0f, INFINITY, -1.0f, -INFINITY, NAN, 1e-40f, 1e-45f,
                             1.0f, 1.17549435e-38f, 3.4028235e38f, 2.0f, 0.5f};
    const int ns = (int)(sizeof special / sizeof special[0]);
    for (; i < ns; i++) x[i] = special[i];
    for (int e = -126; e <= 127; e++) x[i++] = ldexpf(1.0f, e);
    while (i < N / 2) x[i++] = (float)exp2(uniform(-126.0, 127.9));
    while (i < 3 * N / 4) x[i++] = (float)(1.0 + uniform(-0.01, 0.01));
    while (i < N) x[i++] = (float)uniform(1e-6, 300.0);
    for (int j = 0; j < N; j++) y[j] = 12345.0f;
    if (pc_testing_gpu_log(x, y, N, 0) != PC_OK) fail_msg("pc_testing_gpu_log: %s", pc_last_error());
    assert_true(isinf(y[0]) && y[0] < 0 && isinf(y[1]) && y[1] < 0);
    assert_true(isinf(y[2]) && y[2] > 0);
    assert_true(isnan(y[3]) && isnan(y[4]) && isnan(y[5]));
    assert_true(isinf(y[6]) && y[6] < 0 && isinf(y[7]) && y[7] < 0); /* subnormal: as 0 */
    double worst = 0.0;
    for (int j = 8; j < N; j++) {
        const double want = log((double)x[j]), got = (double)y[j];
        const double bound = 2e-7 + fabs(want) * 0x1p-23, err = fabs(got - want);
        if (!(err <= bound))
            fail_msg("device log(%.9g): got %.17g, want %.17g (error %.3g > %.3g)", x[j], got,
                     want, err, bound);
        worst = err / bound > worst ? err / bound : worst;
    }
    print_message("  device: worst error / bound: %.3f\n", worst);
    /* pc_gpu_log_nonneg on the same values, those outside its domain (infinity, NaN, y < 0)
     * replaced by 1: bit for bit pc_gpu_log's result, and 0 for the replaced ones. */
    for (int j = 0; j < N; j++) {
        x2[j] = isfinite(x[j]) && !(x[j] < 0.0f) ? x[j] : 1.0f;
        y2[j] = 12345.0f;
    }
    if (pc_testing_gpu_log(x2, y2, N, 1) != PC_OK)
        fail_msg("pc_testing_gpu_log (nonneg): %s", pc_last_error());
    for (int j = 0; j < N; j++) {
        const float want = x2[j] == x[j] ? y[j] : 0.0f;
        if (memcmp(&y2[j], &want, sizeof want) != 0)
            fail_msg("device log_nonneg(%.9g): got %.9g, want %.9g", x2[j], y2[j], want);
    }
    /* pc_gpu_log_nonneg_d: the same normal floats as doubles give the same bits; then the
     * doubles of test_log_d, fresh, and 0. */
    static double xd[N];
    static float yf[N / 2]; /* pc_gpu_log's result for xd[j], j < nf */
    int nd = 0;
    for (int j = 8; j < N && nd < N / 2; j++)
        if (x[j] >= 1.17549435e-38f && isfinite(x[j])) yf[nd] = y[j], xd[nd++] = x[j];
    const int nf = nd;
    xd[nd++] = 0.0;
    xd[nd++] = 0x1p-1030; /* subnormal: as 0 */
    nd += log_d_inputs(xd + nd, N - nd);
    for (int j = 0; j < nd; j++) y2[j] = 12345.0f;
    if (pc_testing_gpu_log_d(xd, y2, nd) != PC_OK)
        fail_msg("pc_testing_gpu_log_d: %s", pc_last_error());
    for (int j = 0; j < nf; j++) {
        if (memcmp(&y2[j], &yf[j], sizeof yf[j]) != 0)
            fail_msg("device log_nonneg_d(%.9g): got %.9g, want %.9g", xd[j], y2[j], yf[j]);
    }
    assert_true(isinf(y2[nf]) && y2[nf] < 0 && isinf(y2[nf + 1]) && y2[nf + 1] < 0);
    worst_excess = 0.0;
    for (int j = nf + 2; j < nd; j++) check_d(xd[j], y2[j], 3e-7);
    print_message("  device log_d: worst error / bound: %.3f\n", worst_excess);
}

int main(void) {
    fprintf(stderr, "seed %llu\n", (unsigned long long)pc_hr_seed());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_range),
        cmocka_unit_test(test_exact_points),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_log_d),
        cmocka_unit_test(test_device_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
