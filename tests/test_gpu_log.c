/* The GPU sum layers' log (src/layers/gpu_log.h), checked on the CPU against the C library's
 * log in FP64: random y over the whole positive float range (log-uniform), y near 1 and near
 * the mantissa split sqrt(2), powers of two, subnormals, and the special values. The bound is
 * 6e-8 nats plus the FP32 rounding of the result (|log y| 2^-24). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "layers/gpu_log.h"

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
}

int main(void) {
    fprintf(stderr, "seed %llu\n", (unsigned long long)pc_hr_seed());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_range),
        cmocka_unit_test(test_exact_points),
        cmocka_unit_test(test_special_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
