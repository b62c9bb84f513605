/* The hostile inputs of tests/data/badinput (and of $PC_BADINPUT_DIR when it is set, for a
 * larger corpus): through the library and through pcinfer, each gives one clear message and
 * exit status 1 (never a signal), within a time and memory bound, whatever it did to libhdf5.
 *
 * Model files go through pc_hclt_load_isolated; IDX files through the whole-file loader, the
 * streaming reader (in a child limited to 256 MiB, so that believing a header's claim cannot
 * pass by lazy allocation) and pcinfer --data. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "memory_limit.h"
#include "pc/data.h"
#include "pc/hclt.h"
#include "run_tool.h"

/* Bounds every input must meet: wall seconds for one load (the structure's CPU allowance is
 * PC_HCLT_HEADER_SECONDS = 2 s for pcinfer, 1 s here; the machine may be busy), and the peak
 * RSS of any process involved. */
#define LOAD_SECONDS 1.0
#define WALL_LIMIT_S 12.0
#define RSS_LIMIT_KB (1024L * 1024L)

static char *tmpdir, program[4096];

static const char *path_of(const char *name) { return pc_hr_path(tmpdir, name); }

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int is_idx(const char *name) {
    size_t n = strlen(name);
    return (n > 7 && !strcmp(name + n - 7, ".idx.gz")) || !strncmp(name, "idx-", 4) ||
           !strncmp(name, "C2_", 3) || !strncmp(name, "C3_", 3);
}

/* What a file's message must say beyond naming it, by the kind of fault its name records. */
static const char *expected_fragment(const char *name) {
    static const struct {
        const char *prefix, *frag;
    } kinds[] = {
        {"own-13KB", "holds only"},       {"B6_", "holds only"},
        {"own-int64-wrap", "holds only"}, {"B4_", "holds only"},
        {"hclt-timeout", "not a valid model file"}, {"cli-hang", "not a valid model file"},
        {"E1_", "is NaN"},                {"F1_", "sums to 0, not 1"},
        {"D1_", "integer values"},        {"A1_", "has shape"},
        {"C3_", "truncated"},             {"idx-oom", "not an IDX file"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strncmp(name, kinds[i].prefix, strlen(kinds[i].prefix))) return kinds[i].frag;
    return NULL;
}

/* One clear message: names the file exactly once (no repeated prefix), holds the expected
 * fragment, one line. Returns NULL, or what is wrong. */
static const char *message_fault(const char *msg, const char *path, const char *name) {
    const char *first = strstr(msg, path);
    const char *frag = expected_fragment(name);
    if (!first) return "it does not name the file";
    if (strstr(first + strlen(path), path)) return "it names the file twice";
    if (frag && !strstr(msg, frag)) return frag;
    if (strchr(msg, '\n')) return "it has a line break";
    return NULL;
}

static void check_message(const char *msg, const char *path, const char *name) {
    const char *fault = message_fault(msg, path, name);
    if (fault) fail_msg("%s: message '%s': %s", name, msg, fault);
}

static void check_model_file(const char *path, const char *name) {
    const pc_hclt_load_opts opts = {0, LOAD_SECONDS};
    pc_hclt *m = (pc_hclt *)&m;
    const double t0 = now_seconds();
    pc_status st = pc_hclt_load_isolated(path, &opts, &m);
    const double t = now_seconds() - t0;
    if (t > WALL_LIMIT_S) fail_msg("%s: loading took %.1f s", name, t);
    if (st == PC_OK) {
        /* A few samples are valid models that fail later (the data's width): fine here. */
        assert_non_null(m);
        pc_hclt_free(m);
        return;
    }
    assert_null(m);
    check_message(pc_last_error(), path, name);
    printf("  %-52s %5.2f s  %s\n", name, t, strstr(pc_last_error(), path) + strlen(path));
}

/* In a child limited to 256 MiB (memory_limit.h): the whole-file loader and the streaming
 * reader must each fail with a clear message (exit 0), or read the file (exit 1: not hostile
 * after all). */
static void idx_child(const char *path, const char *name) {
    pc_test_limit_memory((size_t)256 << 20);
    pc_data *d = NULL;
    if (pc_data_load_idx(path, &d) == PC_OK) {
        pc_data_free(d);
        _exit(1);
    }
    const char *fault = message_fault(pc_last_error(), path, name);
    pc_data_reader *r = NULL;
    if (!fault && pc_data_reader_open(path, &r) == PC_OK) {
        static uint8_t rows[1 << 20];
        int64_t want = (1 << 20) / pc_data_reader_width(r), got = 1;
        pc_status st = PC_OK;
        while (st == PC_OK && got > 0) st = pc_data_reader_read(r, rows, want, &got);
        pc_data_reader_close(r);
        if (st == PC_OK) _exit(1);
    }
    if (!fault) fault = message_fault(pc_last_error(), path, name);
    if (fault) {
        fprintf(stderr, "%s: message '%s': %s\n", name, pc_last_error(), fault);
        _exit(2);
    }
    _exit(0);
}

static void check_idx_file(const char *path, const char *name) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) idx_child(path, name);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status)) fail_msg("%s: the reader died of signal %d", name, WTERMSIG(status));
    /* Exit 1: a file that reads (data_w2*: its width is the fault, which the CLI pass sees). */
    assert_true(WEXITSTATUS(status) <= 1);
}

/* pcinfer on the file: exit 1, one line on stderr naming it, within the bounds. */
static void check_cli(const char *path, const char *name) {
    const int idx = is_idx(name);
    const char *argv[] = {program, "--kernel", "cpu", "--limit", "10", "--data",
                          idx ? path : path_of("d.idx"), idx ? path_of("m.h5") : path, NULL};
    struct rusage ru;
    const double t0 = now_seconds();
    int rc = pc_run_tool(argv, path_of("out.txt"), path_of("err.txt"), 2 * WALL_LIMIT_S, &ru);
    const double t = now_seconds() - t0;
    char *err = pc_slurp(path_of("err.txt"));
    assert_non_null(err);
    if (rc != 1) fail_msg("%s: pcinfer exit %d (negative: signal) after %.1f s: %s", name, rc, t,
                          err);
    size_t len = strlen(err);
    if (strncmp(err, "pcinfer: ", 9) || len < 2 || err[len - 1] != '\n' ||
        strchr(err, '\n') != err + len - 1)
        fail_msg("%s: not one line on stderr: '%s'", name, err);
    /* A valid model (D8_*) fails on the data, and the message names that file instead. */
    if (!strstr(err, path) && !strstr(err, argv[6]))
        fail_msg("%s: stderr names no file: '%s'", name, err);
    if (t > WALL_LIMIT_S) fail_msg("%s: pcinfer took %.1f s", name, t);
    if (ru.ru_maxrss > RSS_LIMIT_KB) fail_msg("%s: pcinfer peaked at %ld MB", name,
                                              ru.ru_maxrss / 1024);
    free(err);
}

typedef void (*check_fn)(const char *path, const char *name);

/* Runs `fn` on every file of `dir` of the kind wanted (idx or not); returns how many. */
static int for_each_file(const char *dir, int want_idx, check_fn fn) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "README.md")) continue;
        size_t len = strlen(e->d_name);
        if (len > 3 && !strcmp(e->d_name + len - 3, ".sh")) continue;
        if ((want_idx >= 0 && is_idx(e->d_name) != want_idx)) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        fn(path, e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* The corpus folders: the committed samples, and $PC_BADINPUT_DIR. */
static int for_each_corpus(int want_idx, check_fn fn) {
    char dir[4096];
    const char *src = getenv("PC_SOURCE_DIR");
    snprintf(dir, sizeof dir, "%s/tests/data/badinput", src ? src : ".");
    int n = for_each_file(dir, want_idx, fn);
    const char *extra = getenv("PC_BADINPUT_DIR");
    if (extra && *extra) n += for_each_file(extra, want_idx, fn);
    return n;
}

static void test_model_files(void **state) {
    (void)state;
    struct rusage ru;
    assert_true(for_each_corpus(0, check_model_file) >= 10);
    getrusage(RUSAGE_CHILDREN, &ru); /* the reader processes, reaped by the library */
    if (ru.ru_maxrss > RSS_LIMIT_KB) fail_msg("a reader peaked at %ld MB", ru.ru_maxrss / 1024);
}

static void test_idx_files(void **state) {
    (void)state;
    assert_true(for_each_corpus(1, check_idx_file) >= 4);
}

/* The fuzzer that found idx-oom-* took the first byte as its mode and the rest as the file:
 * the rest claims 5 x 1.7e9 and 83886097 x 136 bytes in a few bytes. */
static void test_idx_found_by_fuzzing(void **state) {
    (void)state;
    const char *src = getenv("PC_SOURCE_DIR");
    const char *names[] = {"idx-oom-42d831d4c6d1698a6cbe7bb50d3374f322256e3b",
                           "idx-oom-9ce4678d406a517cb739220aaf81e0ebf4dcdc51"};
    for (size_t i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/data/badinput/%s", src ? src : ".", names[i]);
        char *bytes = pc_slurp(path);
        assert_non_null(bytes);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        FILE *f = fopen(path_of("rest.idx"), "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(bytes + 1, 1, (size_t)sb.st_size - 1, f), (size_t)sb.st_size - 1);
        fclose(f);
        free(bytes);
        check_idx_file(path_of("rest.idx"), "rest.idx");
    }
}

static void test_cli(void **state) {
    (void)state;
    if (!program[0]) skip();
    assert_true(for_each_corpus(-1, check_cli) >= 14);
}

static int setup(void **state) {
    (void)state;
    tmpdir = pc_hr_tempdir();
    const char *bin = getenv("PC_BINARY_DIR");
    if (bin) snprintf(program, sizeof program, "%s/pcinfer", bin);
    if (!bin || access(program, X_OK) != 0) program[0] = '\0';
    /* A small valid model of width 3 (the width of C2_*) and data for the model files. */
    pc_hclt *m = pc_hr_model(3, 256, 2, 0.3, 0);
    if (pc_hclt_save(m, path_of("m.h5"), PC_HCLT_F32) != PC_OK) return -1;
    pc_hclt_free(m);
    const uint8_t idx[4 + 8 + 6] = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6};
    FILE *f = fopen(path_of("d.idx"), "wb");
    if (!f || fwrite(idx, 1, sizeof idx, f) != sizeof idx) return -1;
    fclose(f);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pc_hr_rmdir(tmpdir);
    return 0;
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_files),
        cmocka_unit_test(test_idx_files),
        cmocka_unit_test(test_idx_found_by_fuzzing),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
