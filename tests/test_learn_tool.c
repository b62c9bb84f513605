/* pclearn end to end: usage errors (exit 2), bad files (exit 1, no output left), an output
 * path checked before training, a full disk (exit 1 with a message, not a signal), a small
 * learning run whose model validates and is the same when run again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pc/learn.h"
#include "pc/rng.h"
#include "pc/hclt.h"

static char g_tool[1024];
static char g_dir[256];
static uint64_t g_seed;

/* Runs pclearn with `args`, stdout and stderr to files in g_dir; returns the exit status
 * (fails the test on a signal). */
static int run(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s/out.txt' 2>'%s/err.txt'", g_tool, args, g_dir, g_dir);
    int st = system(cmd);
    assert_true(st != -1 && WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int file_contains(const char *name, const char *text) {
    char path[512], buf[8192];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

static int exists(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* An IDX image file of n samples, 4 x 4 pixels; each pixel copies an earlier one or is random,
 * so there is structure to learn. `cut` > 0 truncates the payload by that many bytes. */
static void write_idx(const char *name, int n, long cut) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    const unsigned char head[16] = {0,
                                    0,
                                    8,
                                    3,
                                    (unsigned char)(n >> 24),
                                    (unsigned char)(n >> 16),
                                    (unsigned char)(n >> 8),
                                    (unsigned char)n,
                                    0,
                                    0,
                                    0,
                                    4,
                                    0,
                                    0,
                                    0,
                                    4};
    assert_int_equal(fwrite(head, 1, 16, f), 16);
    pc_rng rng = {g_seed};
    long total = (long)n * 16 - cut;
    for (long i = 0; i < total; i++) {
        static unsigned char row[16];
        int v = (int)(i % 16);
        row[v] = (v > 0 && pc_rng_unit(&rng) < 0.7)
                     ? row[v / 2]
                     : (unsigned char)pc_rng_below(&rng, 256);
        fputc(row[v], f);
    }
    assert_int_equal(fclose(f), 0);
}

static void test_usage_errors(void **state) {
    (void)state;
    assert_int_equal(run(""), 2);
    assert_true(file_contains("err.txt", "--latents"));
    assert_int_equal(run("--latents 0 -o x.h5"), 2);
    assert_true(file_contains("err.txt", "--latents '0'"));
    assert_int_equal(run("--latents 4"), 2);
    assert_true(file_contains("err.txt", "-o"));
    assert_int_equal(run("--latents 4 --epochs many -o x.h5"), 2);
    assert_true(file_contains("err.txt", "many"));
    assert_int_equal(run("--latents 4 --pseudocount nan -o x.h5"), 2);
    assert_int_equal(run("--latents 4 --step-start 1.5 -o x.h5"), 2);
    assert_int_equal(run("--latents 4 --smooth 1.5 -o x.h5"), 2);
    assert_true(file_contains("err.txt", "--smooth '1.5'"));
    assert_int_equal(run("--latents 4 --smooth-width 0 -o x.h5"), 2);
    assert_int_equal(run("--latents 4 --smooth-width inf -o x.h5"), 2);
    assert_int_equal(run("--latents 4 --frobnicate 3 -o x.h5"), 2);
    assert_true(file_contains("err.txt", "--frobnicate"));
    assert_int_equal(run("--latents 4 --epochs 0 --full-epochs 0 -o x.h5"), 2);
    assert_int_equal(run("--latents"), 2);
    assert_int_equal(run("--help"), 0);
    assert_true(file_contains("out.txt", "usage"));
}

static void test_bad_files(void **state) {
    (void)state;
    char args[2048];
    snprintf(args, sizeof args, "--latents 2 --data '%s/none.idx' -o '%s/m.h5'", g_dir, g_dir);
    assert_int_equal(run(args), 1);
    assert_true(file_contains("err.txt", "none.idx"));
    assert_false(exists("m.h5"));
    write_idx("short.idx", 40, 5);
    snprintf(args, sizeof args, "--latents 2 --data '%s/short.idx' -o '%s/m.h5'", g_dir, g_dir);
    assert_int_equal(run(args), 1);
    assert_false(exists("m.h5"));
    write_idx("ok.idx", 40, 0);
    /* A bad output path fails before any training (it used to fail after it). */
    snprintf(args, sizeof args, "--latents 2 --epochs 1 --data '%s/ok.idx' -o '%s/no/dir/m.h5'",
             g_dir, g_dir);
    assert_int_equal(run(args), 1);
    assert_true(file_contains("err.txt", "no/dir/m.h5: cannot open its folder"));
    assert_false(file_contains("err.txt", "epoch"));
    /* The output may not be an input. */
    snprintf(args, sizeof args, "--latents 2 --epochs 1 --data '%s/ok.idx' -o '%s/ok.idx'", g_dir,
             g_dir);
    assert_int_equal(run(args), 1);
    assert_true(file_contains("err.txt", "is an input of this run"));
    struct stat sb;
    char ok_path[512];
    snprintf(ok_path, sizeof ok_path, "%s/ok.idx", g_dir);
    assert_int_equal(stat(ok_path, &sb), 0);
    assert_int_equal(sb.st_size, 16 + 40 * 16);
    snprintf(args, sizeof args, "--latents 2 --data '%s/ok.idx' --valid '%s/none.idx' -o '%s/m.h5'",
             g_dir, g_dir, g_dir);
    assert_int_equal(run(args), 1); /* the test file is checked before any learning */
    assert_false(exists("m.h5"));
}

/* Files limited to 4 KiB (ulimit -f; SIGXFSZ ignored, so writes fail as on a full disk): the
 * model cannot be written, pclearn says so and exits 1 (it died of SIGSEGV in libhdf5's exit
 * handler), and nothing is left. */
static void test_full_disk(void **state) {
    (void)state;
    write_idx("ok.idx", 40, 0);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "trap '' XFSZ; ulimit -f 8; exec '%s' --latents 2 --epochs 1 --full-epochs 0 "
             "--data '%s/ok.idx' -o '%s/m.h5' >'%s/out.txt' 2>'%s/err.txt'",
             g_tool, g_dir, g_dir, g_dir, g_dir);
    int st = system(cmd);
    assert_true(st != -1);
    if (!WIFEXITED(st)) fail_msg("pclearn died of signal %d", WTERMSIG(st));
    assert_int_equal(WEXITSTATUS(st), 1);
    assert_true(file_contains("err.txt", "File too large"));
    assert_false(exists("m.h5"));
}

static void test_learns_small_model(void **state) {
    (void)state;
    write_idx("train.idx", 400, 0);
    char args[2048];
    const char *fmt = "--latents 3 --epochs 2 --batch 64 --full-epochs 2 --bins 8 --seed %llu "
                      "--threads %d --data '%s/train.idx' --valid '%s/train.idx' -o '%s/%s'";
    snprintf(args, sizeof args, fmt, (unsigned long long)(g_seed & 0x7fffffff), 1, g_dir, g_dir,
             g_dir, "a.h5");
    assert_int_equal(run(args), 0);
    assert_true(file_contains("out.txt", "bits/dim"));
    assert_true(file_contains("out.txt", "test:"));
    assert_true(file_contains("err.txt", "epoch   4/4"));
    snprintf(args, sizeof args, fmt, (unsigned long long)(g_seed & 0x7fffffff), 2, g_dir, g_dir,
             g_dir, "b.h5");
    assert_int_equal(run(args), 0);

    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/a.h5", g_dir);
    snprintf(pb, sizeof pb, "%s/b.h5", g_dir);
    pc_hclt *a = NULL, *b = NULL;
    assert_int_equal(pc_hclt_load(pa, &a), PC_OK); /* the loader validates */
    assert_int_equal(pc_hclt_load(pb, &b), PC_OK);
    assert_int_equal(a->num_vars, 16);
    assert_int_equal(a->num_cats, 256);
    assert_int_equal(a->num_latents, 3);
    /* same seed, 1 thread vs 2 threads: the same model */
    assert_memory_equal(a->parent, b->parent, 16 * sizeof(int32_t));
    assert_memory_equal(a->input_logp, b->input_logp, (size_t)16 * 3 * 256 * sizeof(double));
    assert_memory_equal(a->trans_logw, b->trans_logw, (size_t)a->num_trans * 9 * sizeof(double));
    pc_hclt_free(a);
    pc_hclt_free(b);
    remove(pa);
    remove(pb);
}

static int setup(void **state) {
    (void)state;
    const char *bin = getenv("PC_BINARY_DIR");
    if (!bin) return 0;
    snprintf(g_tool, sizeof g_tool, "%s/pclearn", bin);
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/pclearn-test-XXXXXX", tmp ? tmp : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    const char *names[] = {"out.txt", "err.txt", "short.idx", "ok.idx", "train.idx", "m.h5"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", g_dir, names[i]);
        remove(path);
    }
    rmdir(g_dir);
    return 0;
}

int main(void) {
    const char *env = getenv("PC_TEST_SEED"); /* replays a failing run */
    g_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("test_learn_tool seed %llu (PC_TEST_SEED replays it)\n", (unsigned long long)g_seed);
    if (!getenv("PC_BINARY_DIR")) {
        printf("PC_BINARY_DIR is not set (run through ctest): skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_full_disk),
        cmocka_unit_test(test_learns_small_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
