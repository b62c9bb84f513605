/* The particle filter tool (tools/pfilter.c), run as a program: it must track the state far
 * better than the guess 0, its LSE kernels must agree with the FP64 run within their documented
 * error, a `ref` run must reproduce the FP64 run exactly (same random numbers), and bad options
 * must be refused with exit status 2. Needs PC_BINARY_DIR (set by ctest); skips without it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

static char tool[4096];
static unsigned long long seed;

/* Value of "key": in a one-line JSON object (numbers only). */
static double field(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p) fail_msg("no %s in %s", key, json);
    return strtod(p + strlen(pat), NULL);
}

/* Runs pfilter with extra options and returns its JSON line in line[len]. */
static void run(const char *opts, char *line, size_t len) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' --seed %llu --json %s", tool, seed, opts);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    line[0] = '\0';
    if (!fgets(line, (int)len, f)) line[0] = '\0';
    int status = pclose(f);
    if (status != 0 || line[0] != '{') fail_msg("'%s' failed (status %d): %s", cmd, status, line);
}

static int exit_status(const char *opts) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>&1", tool, opts);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Tolerances (nats for the LSE, state units for the estimate), from the kernels' documented
 * error: IntLSE ~2e-5 per LSE over 2000 log-weights, fuse FP32 rounding ~2e-7. The estimate moves
 * by about |x^| * |LSE error| (|x^| <= ~30). */
static void check_kernel(const char *kernel, double lse_tol, double est_tol) {
    char line[2048], opts[256];
    snprintf(opts, sizeof opts, "--particles 2000 --steps 40 --kernel %s", kernel);
    run(opts, line, sizeof line);
    double rmse = field(line, "rmse"), rmse_ref = field(line, "rmse_ref"),
           base = field(line, "rms_truth");
    printf("%s: %s", kernel, line);
    /* Measured over 25 seeds: RMSE / RMS(truth) <= 0.68. */
    assert_true(rmse < 0.85 * base);
    assert_true(rmse_ref < 0.85 * base);
    assert_true(field(line, "mean_lse_abs_err") <= lse_tol);
    assert_true(field(line, "mean_abs_diff_same_particles") <= est_tol);
    assert_true(field(line, "lse_ms") > 0.0 && field(line, "step_ms") >= field(line, "lse_ms"));
}

static void test_int(void **state) {
    (void)state;
    check_kernel("int", 1e-4, 3e-3);
}

static void test_fuse(void **state) {
    (void)state;
    check_kernel("fuse", 2e-6, 1e-4);
}

/* ref: the same arithmetic as the FP64 run, so both runs resample identically. */
static void test_ref_reproduces(void **state) {
    (void)state;
    char line[2048];
    run("--particles 1000 --steps 20 --kernel ref", line, sizeof line);
    assert_true(field(line, "mean_abs_diff_vs_ref") == 0.0);
}

static void test_bad_options(void **state) {
    (void)state;
    assert_int_equal(exit_status("--particles 0"), 2);
    assert_int_equal(exit_status("--particles 100 --kernel nope"), 2);
    assert_int_equal(exit_status("--particles 100 --steps x"), 2);
    assert_int_equal(exit_status("--steps 10"), 2);
    assert_int_equal(exit_status("--particles 100 --bogus 1"), 2);
}

int main(void) {
    const char *dir = getenv("PC_BINARY_DIR");
    if (!dir) {
        printf("PC_BINARY_DIR is not set (run through ctest): skipped\n");
        return 77;
    }
    snprintf(tool, sizeof tool, "%s/pfilter", dir);
    const char *env = getenv("PC_TEST_SEED");
    seed = env ? strtoull(env, NULL, 10) : (unsigned long long)time(NULL);
    printf("seed %llu (replay: PC_TEST_SEED=%llu)\n", seed, seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int),
        cmocka_unit_test(test_fuse),
        cmocka_unit_test(test_ref_reproduces),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
