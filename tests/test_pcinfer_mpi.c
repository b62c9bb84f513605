/* pcinfer's scoring under mpirun on CPU ranks: with 1, 2, 3 and 4 ranks over an odd number of
 * images (uneven shards), and more ranks than images (ranks with none), from plain IDX, gzip
 * IDX and .npy data, with and without --missing (random:P, a mask file, a half) and --compare
 * ref, the --output file is byte for byte and the JSON figures are digit for digit those of
 * one process started without mpirun. A run that fails (a missing data file, a gzip file that
 * ends in the last rank's rows, a bad output path, a query, which runs as one process) exits
 * 1 with one message, under a timeout. Needs PC_MPIEXEC (ctest sets it in a build with MPI,
 * PC_MPI) and the program from PC_BINARY_DIR; skipped otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <zlib.h>

#include "hclt_random.h"
#include "pcinfer_cli.h"

#define SIDE 4
#define NV (SIDE * SIDE)
#define N 37

static const char *g_mpiexec;
static pc_cli_fixture g_fx;

/* pcinfer args with `ranks` processes under mpirun (0: one process without it), under a 120 s
 * timeout; stdout into out.json, stderr into err.txt. Returns the exit status. */
static int run(int ranks, const char *args) {
    char cmd[8192], launcher[1200] = "";
    if (ranks > 0)
        snprintf(launcher, sizeof launcher, "'%s' --oversubscribe -np %d ", g_mpiexec, ranks);
    snprintf(cmd, sizeof cmd, "timeout 120 %s'%s' %s >'%s' 2>'%s'", launcher, pc_cli_program(),
             args, pc_cli_path("out.json"), pc_cli_path("err.txt"));
    const int st = system(cmd);
    assert_true(st != -1 && WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* The whole file, malloc'ed and NUL-terminated (*len: its bytes). */
static char *slurp(const char *name, size_t *len) {
    FILE *f = fopen(pc_cli_path(name), "rb");
    if (!f) fail_msg("%s was not written", name);
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    if (len) *len = (size_t)n;
    return buf;
}

/* The JSON without the values that may differ between runs: times, rates and the rank count
 * (checked apart). */
static void strip_times(const char *json, char *out, size_t cap) {
    static const char *const keys[] = {"seconds\": ", "second\": ", "ranks\": "};
    size_t w = 0;
    for (const char *p = json; *p && w + 1 < cap; p++) {
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (!strncmp(p, keys[k], strlen(keys[k]))) {
                p += strlen(keys[k]);
                while (*p && *p != ',' && *p != '}') p++;
                break;
            }
        if (!*p) break;
        out[w++] = *p;
    }
    out[w] = '\0';
}

/* The lines of err.txt that are pcinfer's messages. */
static int messages(char *first, size_t cap) {
    char *err = slurp("err.txt", NULL);
    int count = 0;
    for (char *line = err; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        if (!strncmp(line, "pcinfer: ", 9) && count++ == 0 && first)
            snprintf(first, cap, "%s", line);
        line = end ? end + 1 : NULL;
    }
    free(err);
    return count;
}

/* One case: --data `data` and `extra` (MASK standing for the mask file's path) run by one
 * process without mpirun, then by R = 1..4 ranks: the same output file, the same JSON but its
 * times, "ranks": R, and no message. */
static void expect_same_for_ranks(const char *data, const char *extra) {
    char args[4096], full[6000];
    const char *mask = strstr(extra, "MASK");
    if (mask)
        snprintf(args, sizeof args, "%.*s'%s'%s", (int)(mask - extra), extra,
                 pc_cli_path("mask.npy"), mask + 4);
    else
        snprintf(args, sizeof args, "%s", extra);
    snprintf(full, sizeof full, "--threads 1 --json --output '%s' --data '%s' %s '%s'",
             pc_cli_path("out.txt"), pc_cli_path(data), args, pc_cli_path("m.h5"));
    assert_int_equal(run(0, full), 0);
    size_t want_len = 0;
    char *want_out = slurp("out.txt", &want_len);
    char *json = slurp("out.json", NULL);
    static char want[1 << 14], got[1 << 14];
    strip_times(json, want, sizeof want);
    assert_non_null(strstr(json, "\"ranks\": 1"));
    free(json);
    for (int ranks = 1; ranks <= 4; ranks++) {
        remove(pc_cli_path("out.txt"));
        const int rc = run(ranks, full);
        if (rc != 0) {
            char *err = slurp("err.txt", NULL);
            fail_msg("%d ranks, %s %s: exit %d: %s", ranks, data, args, rc, err);
        }
        size_t len = 0;
        char *out = slurp("out.txt", &len);
        if (len != want_len || memcmp(out, want_out, len))
            fail_msg("%d ranks, %s %s: the output differs from one process's", ranks, data,
                     args);
        free(out);
        json = slurp("out.json", NULL);
        char ranks_text[32];
        snprintf(ranks_text, sizeof ranks_text, "\"ranks\": %d", ranks);
        assert_non_null(strstr(json, ranks_text));
        strip_times(json, got, sizeof got);
        free(json);
        if (strcmp(got, want))
            fail_msg("%d ranks, %s %s:\n%s\nwant\n%s", ranks, data, args, got, want);
        assert_int_equal(messages(NULL, 0), 0);
    }
    free(want_out);
}

/* Shards are whole batches (mpi_ranks.h): small batches make every rank score some. */
static void test_plain_idx(void **state) {
    (void)state;
    expect_same_for_ranks("d.idx", "--batch 5");
}

static void test_gzip_random_mask_compare(void **state) {
    (void)state;
    expect_same_for_ranks("d.idx.gz", "--missing random:0.3 --seed 5 --compare ref --batch 3");
}

static void test_npy_mask_file_limit(void **state) {
    (void)state;
    expect_same_for_ranks("d.npy", "--missing MASK --compare ref --limit 29 --batch 4");
}

/* 3 images over up to 4 ranks, a batch of 1: some ranks score none. */
static void test_more_ranks_than_rows(void **state) {
    (void)state;
    expect_same_for_ranks("d.idx", "--missing left --compare ref --limit 3 --batch 1");
}

/* The text summary: the same figures, the throughput of the slowest rank named. */
static void test_text_summary(void **state) {
    (void)state;
    char args[4096];
    snprintf(args, sizeof args, "--threads 1 --data '%s' '%s'", pc_cli_path("d.idx"),
             pc_cli_path("m.h5"));
    assert_int_equal(run(0, args), 0);
    char *one = slurp("out.json", NULL);
    assert_int_equal(run(3, args), 0);
    char *three = slurp("out.json", NULL);
    assert_non_null(strstr(three, "the slowest of 3 ranks"));
    const char *keys[] = {"mean LL", "bits/dim", "data "};
    for (size_t k = 0; k < 3; k++) {
        const char *a = strstr(one, keys[k]), *b = strstr(three, keys[k]);
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(strcspn(a, "\n"), strcspn(b, "\n"));
        assert_memory_equal(a, b, strcspn(a, "\n"));
    }
    free(one);
    free(three);
}

/* exit 1, one message containing frag (and when `same` is set, the message of one process
 * without mpirun), no output file. */
static void expect_one_failure(int ranks, const char *args, const char *frag, int same) {
    char want[2048] = "", got[2048] = "";
    remove(pc_cli_path("out.txt"));
    if (same) {
        assert_int_equal(run(0, args), 1);
        assert_int_equal(messages(want, sizeof want), 1);
    }
    const int rc = run(ranks, args);
    if (rc != 1) fail_msg("%d ranks, %s: exit %d, not 1", ranks, args, rc);
    const int count = messages(got, sizeof got);
    if (count != 1) {
        char *err = slurp("err.txt", NULL);
        fail_msg("%d ranks, %s: %d messages:\n%s", ranks, args, count, err);
    }
    if (!strstr(got, frag)) fail_msg("'%s' does not say '%s'", got, frag);
    if (same) assert_string_equal(got, want);
    pc_cli_expect_absent("out.txt");
}

static void test_failures(void **state) {
    (void)state;
    /* The last 7 of the 37 images the header claims are not there: only the last of 3 ranks
     * (rows 24-36) reads that far. */
    gzFile f = gzopen(pc_cli_path("cut.idx.gz"), "wb");
    const uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0, N, 0, 0, 0, SIDE, 0, 0, 0, SIDE};
    gzwrite(f, head, 16);
    gzwrite(f, g_fx.pixels, 30 * NV);
    gzclose(f);
    char args[4096];
    const char *out = pc_cli_path("out.txt");
    snprintf(args, sizeof args, "--threads 1 --output '%s' --data '%s' '%s'", out,
             pc_cli_path("cut.idx.gz"), pc_cli_path("m.h5"));
    expect_one_failure(3, args, "the file ends in row 30", 1);
    snprintf(args, sizeof args, "--threads 1 --output '%s' --data '%s' '%s'", out,
             pc_cli_path("absent.idx"), pc_cli_path("m.h5"));
    expect_one_failure(3, args, "absent.idx", 1);
    snprintf(args, sizeof args, "--threads 1 --output '%s' --data '%s' '%s'",
             pc_cli_path("no/such/dir/out.txt"), pc_cli_path("d.idx"), pc_cli_path("m.h5"));
    expect_one_failure(2, args, "no/such/dir", 1);
    snprintf(args, sizeof args, "sample --count 4 --output '%s.npy' '%s'", out,
             pc_cli_path("m.h5"));
    expect_one_failure(2, args, "sample runs as one process", 0);
    pc_cli_expect_absent("out.txt.npy");
}

int main(void) {
    pc_hr_seed();
    g_mpiexec = getenv("PC_MPIEXEC");
    pc_cli_start();
    if (!pc_cli_program()[0] || !g_mpiexec || !*g_mpiexec) {
        printf("PC_BINARY_DIR or PC_MPIEXEC is not set (a build without MPI): skipped\n");
        pc_cli_stop();
        return 77;
    }
    pc_cli_fixture_make(&g_fx, SIDE, 4, 3, 0.3, N);
    pc_cli_write_idx(pc_cli_path("d.idx.gz"), g_fx.pixels, N, SIDE, SIDE, 1);
    uint8_t *bits = pc_hr_data(N, NV, 2, 0.0, NULL);
    pc_cli_write_npy(pc_cli_path("mask.npy"), bits, N, NV);
    free(bits);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_idx),
        cmocka_unit_test(test_gzip_random_mask_compare),
        cmocka_unit_test(test_npy_mask_file_limit),
        cmocka_unit_test(test_more_ranks_than_rows),
        cmocka_unit_test(test_text_summary),
        cmocka_unit_test(test_failures),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    pc_cli_fixture_free(&g_fx);
    pc_cli_stop();
    return rc;
}
