/* The lsebench program's command line: --help and -h print the usage with every option to
 * stdout and exit 0; no arguments, a missing value and an unknown option exit 2 with a message
 * on stderr; a small run exits 0. Runs the built program from PC_BINARY_DIR (set by ctest);
 * skipped without it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char program[4096], out_path[] = "/tmp/lsebench_cli_out_XXXXXX",
                           err_path[] = "/tmp/lsebench_cli_err_XXXXXX";
static char out_text[16384], err_text[16384];

static int setup(void **state) {
    (void)state;
    const char *bin = getenv("PC_BINARY_DIR");
    if (bin)
        snprintf(program, sizeof program, "%s/lsebench", bin);
    if (!bin || access(program, X_OK) != 0)
        program[0] = '\0';
    int fo = mkstemp(out_path), fe = mkstemp(err_path);
    if (fo < 0 || fe < 0)
        return -1;
    close(fo);
    close(fe);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(out_path);
    unlink(err_path);
    return 0;
}

static void slurp(const char *path, char *text, size_t cap) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, cap - 1, f);
    text[n] = '\0';
    fclose(f);
}

/* Runs lsebench with `args` (no shell quoting needed); returns the exit status, fails on a
 * signal. stdout and stderr land in out_text and err_text. */
static int run(const char *args) {
    if (!program[0])
        skip();
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", program, args, out_path, err_path);
    int st = system(cmd);
    assert_true(st != -1 && WIFEXITED(st));
    slurp(out_path, out_text, sizeof out_text);
    slurp(err_path, err_text, sizeof err_text);
    return WEXITSTATUS(st);
}

static const char *const options[] = {"--device", "--kernel",  "--dtype",  "--rows",
                                      "--cols",   "--range",   "--normal", "--threads",
                                      "--isa",    "--repeats", "--seed",   "--json"};

static void test_help(void **state) {
    (void)state;
    const char *forms[] = {"--help", "-h", "--device cpu --help", "--rows 3 -h"};
    for (int f = 0; f < 4; f++) {
        assert_int_equal(run(forms[f]), 0);
        assert_non_null(strstr(out_text, "usage: lsebench"));
        assert_string_equal(err_text, "");
        /* Each option has a line of its own: "  --name ...", after the synopsis. */
        for (size_t o = 0; o < sizeof options / sizeof options[0]; o++) {
            char line[64];
            snprintf(line, sizeof line, "\n  %s ", options[o]);
            if (!strstr(out_text, line))
                fail_msg("%s: no description line for %s", forms[f], options[o]);
        }
    }
}

static void test_usage_errors(void **state) {
    (void)state;
    assert_int_equal(run(""), 2);
    assert_non_null(strstr(err_text, "--device is required"));
    assert_string_equal(out_text, "");
    assert_int_equal(run("--device cpu --rows"), 2);
    assert_non_null(strstr(err_text, "--rows needs a value"));
    assert_int_equal(run("--device cpu --frobnicate 3"), 2);
    assert_non_null(strstr(err_text, "unknown option '--frobnicate'"));
    assert_int_equal(run("--device gpu"), 2);
    assert_non_null(strstr(err_text, "usage: lsebench"));
}

static void test_small_run(void **state) {
    (void)state;
    assert_int_equal(run("--device cpu --kernel fuse --rows 2 --cols 16 --repeats 3 --json"), 0);
    assert_non_null(strstr(out_text, "\"ns_per_elem\""));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_small_run),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
