/* pcinfer sample, mpe, conditional and score --missing against the library calls they make:
 * for every CPU backend, every --missing SPEC, data from IDX and .npy, and batches that split
 * the rows unevenly, the files the program writes hold exactly what pc/query.h returns for the
 * same evidence (bit for bit), and --json reports the library's mean log-probability. Then
 * the same on the shipped model with MNIST test images (random pixels without MNIST). Runs the
 * built program from PC_BINARY_DIR (set by ctest); skipped without it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "mask.h"
#include "mnist_find.h"
#include "pc/circuit.h"
#include "pc/data.h"
#include "pc/eval.h"
#include "pc/hclt.h"
#include "pc/query.h"
#include "pcinfer_cli.h"
#include "run_tool.h"

#define SIDE 4
#define V (SIDE * SIDE)
#define C 4
#define K 3
#define N 23

static pc_cli_fixture fx;
static uint64_t seed;
static const char *const kernels[] = {"ref", "cpu", "cpu-fuse"};
static const pc_backend backends[] = {PC_BACKEND_REF, PC_BACKEND_CPU, PC_BACKEND_CPU_FUSE};

static const char *path_of(const char *name) { return pc_cli_path(name); }

static int setup(void **state) {
    (void)state;
    pc_cli_start();
    seed = pc_hr_seed();
    pc_cli_fixture_make(&fx, SIDE, C, K, 0.4, N);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pc_cli_stop();
    pc_cli_fixture_free(&fx);
    return 0;
}

/* The number after "key": in the run's JSON output. */
static double json_value(const char *key) {
    char *json = pc_slurp(path_of("stdout.txt"));
    assert_non_null(json);
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *at = strstr(json, pattern);
    if (!at) fail_msg("no %s in %s", key, json);
    double v = strtod(at + strlen(pattern), NULL);
    free(json);
    return v;
}

static void expect_mean(const char *key, const double *logp, int64_t n) {
    double mean = 0.0;
    for (int64_t i = 0; i < n; i++) mean += logp[i] / (double)n;
    const double got = json_value(key);
    if (fabs(got - mean) > 1e-12 * fabs(mean)) fail_msg("%s: %.17g, library %.17g", key, got, mean);
}

/* The masks of a SPEC for the N rows, made here: the halves and centre by hand, random:P and
 * files through the tools' mask code (tested on its own in test_pcinfer_common). */
static void mask_of(const char *spec, uint8_t *missing) {
    for (int i = 0; i < N * V; i++) {
        const int r = i % V / SIDE, c = i % SIDE;
        missing[i] = !strcmp(spec, "left")     ? c < 2
                     : !strcmp(spec, "right")  ? c >= 2
                     : !strcmp(spec, "top")    ? r < 2
                     : !strcmp(spec, "bottom") ? r >= 2
                     : !strcmp(spec, "center") ? r >= 1 && r < 3 && c >= 1 && c < 3
                                               : 0xee;
    }
    if (missing[0] != 0xee) return;
    pc_tool_mask_spec s;
    pc_tool_mask *m = NULL;
    assert_int_equal(pc_tool_mask_parse(spec, &s), PC_OK);
    assert_int_equal(pc_tool_mask_open(&s, V, N, seed, &m), PC_OK);
    assert_int_equal(pc_tool_mask_next(m, N, missing), PC_OK);
    pc_tool_mask_close(m);
}

/* sample --count: the rows of pc_sample with the same seed, for every backend, batch and
 * thread count. */
static void test_sample_prior(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    const int64_t n = 37, shape[2] = {n, V};
    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    for (int k = 0; k < 3; k++) {
        uint8_t want[37 * V];
        pc_evaluator *e = pc_cli_evaluator(fx.circuit, backends[k], n);
        assert_int_equal(pc_sample(e, n, V, seed, 0, want), PC_OK);
        pc_evaluator_free(e);
        const char *batch[] = {"5", "37", "64"}, *threads[] = {"1", "2", "2"};
        for (int b = 0; b < 3; b++) {
            assert_int_equal(pc_cli_run("sample", "--count", "37", "--seed", seed_text,
                                        "--kernel", kernels[k], "--batch", batch[b],
                                        "--threads", threads[b], "--json", "--output",
                                        path_of("s.npy"), path_of("m.h5"), NULL),
                             0);
            uint8_t *got = pc_cli_read_npy(path_of("s.npy"), "|u1", shape, 2, sizeof want);
            assert_memory_equal(got, want, sizeof want);
            free(got);
            pc_cli_expect_in("stdout.txt", "\"command\": \"sample\"");
            pc_cli_expect_in("stdout.txt", "\"images\": 37");
            assert_true(json_value("seed") == (double)seed);
        }
    }
    /* Another seed, other samples. */
    assert_int_equal(pc_cli_run("sample", "--count", "37", "--output", path_of("t.npy"),
                                path_of("m.h5"), NULL),
                     0);
    uint8_t *a = pc_cli_read_npy(path_of("s.npy"), "|u1", shape, 2, 37 * V);
    uint8_t *b = pc_cli_read_npy(path_of("t.npy"), "|u1", shape, 2, 37 * V);
    assert_memory_not_equal(a, b, 37 * V);
    free(a);
    free(b);
}

static const char *const specs[] = {"left", "right", "top", "bottom", "center", "random:0.4",
                                    "random:1"};

/* mpe: pc_mpe's completions and the mean of its log p(x*, z*), for every SPEC and backend,
 * data from IDX and from .npy. */
static void test_mpe(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    const int64_t shape[2] = {N, V};
    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    static uint8_t missing[N * V], want[N * V];
    double logp[N];
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (int k = 0; k < 3; k++) {
            mask_of(specs[s], missing);
            pc_evaluator *e = pc_cli_evaluator(fx.circuit, backends[k], N);
            assert_int_equal(pc_mpe(e, fx.pixels, missing, N, V, want, logp), PC_OK);
            pc_evaluator_free(e);
            const char *data = k == 1 ? path_of("d.npy") : path_of("d.idx");
            assert_int_equal(pc_cli_run("mpe", "--data", data, "--missing", specs[s], "--seed",
                                        seed_text, "--kernel", kernels[k], "--batch", "6",
                                        "--json", "--output", path_of("o.npy"), path_of("m.h5"),
                                        NULL),
                             0);
            uint8_t *got = pc_cli_read_npy(path_of("o.npy"), "|u1", shape, 2, sizeof want);
            if (memcmp(got, want, sizeof want))
                fail_msg("mpe --missing %s --kernel %s differs from pc_mpe", specs[s],
                         kernels[k]);
            free(got);
            expect_mean("mean_mpe_logp_nats", logp, N);
        }
    /* --limit: the first rows only. */
    assert_int_equal(pc_cli_run("mpe", "--data", path_of("d.idx"), "--missing", "random:1",
                                "--limit", "4", "--kernel", "cpu-fuse", "--output",
                                path_of("o.npy"), path_of("m.h5"),
                                NULL),
                     0);
    const int64_t four[2] = {4, V};
    uint8_t *got = pc_cli_read_npy(path_of("o.npy"), "|u1", four, 2, 4 * V);
    assert_memory_equal(got, want, 4 * V);
    free(got);
}

/* A mask file (.npy or IDX, a row per image or one row for all) gives the answer for that
 * mask. */
static void test_mask_files(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    const int64_t shape[2] = {N, V};
    static uint8_t missing[N * V], want[N * V];
    for (int i = 0; i < N * V; i++)
        missing[i] = pc_hr_unit() < 0.5 ? (uint8_t)pc_hr_int(1, 255) : 0;
    pc_cli_write_npy(path_of("mask.npy"), missing, N, V);
    pc_cli_write_idx(path_of("mask.idx.gz"), missing, N, SIDE, SIDE, 1);
    pc_cli_write_npy(path_of("one.npy"), missing + 5 * V, 1, V);
    pc_evaluator *e = pc_cli_evaluator(fx.circuit, PC_BACKEND_CPU_FUSE, N);
    const char *files[] = {"mask.npy", "mask.idx.gz", "one.npy"};
    for (int f = 0; f < 3; f++) {
        if (f == 2)
            for (int r = 0; r < N; r++) memcpy(missing + r * V, missing + 5 * V, V);
        assert_int_equal(pc_mpe(e, fx.pixels, missing, N, V, want, NULL), PC_OK);
        assert_int_equal(pc_cli_run("mpe", "--data", path_of("d.idx"), "--missing",
                                    path_of(files[f]), "--kernel", "cpu-fuse", "--batch", "10",
                                    "--output", path_of("o.npy"), path_of("m.h5"), NULL),
                         0);
        uint8_t *got = pc_cli_read_npy(path_of("o.npy"), "|u1", shape, 2, sizeof want);
        if (memcmp(got, want, sizeof want)) fail_msg("mpe --missing %s differs", files[f]);
        free(got);
    }
    pc_evaluator_free(e);
}

/* conditional: pc_conditionals_f32's probabilities, bit for bit, and its mean log p(x_obs). */
static void test_conditional(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    const int64_t shape[3] = {N, V, C};
    static uint8_t missing[N * V];
    static float want[N * V * C];
    double logp[N];
    const char *spec[] = {"center", "random:0.7", "left"};
    for (int k = 0; k < 3; k++) {
        mask_of(spec[k], missing);
        pc_evaluator *e = pc_cli_evaluator(fx.circuit, backends[k], N);
        assert_int_equal(pc_conditionals_f32(e, fx.pixels, missing, N, V, C, want, logp), PC_OK);
        pc_evaluator_free(e);
        char seed_text[32];
        snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
        assert_int_equal(pc_cli_run("conditional", "--data", path_of("d.npy"), "--missing",
                                    spec[k], "--seed", seed_text, "--kernel", kernels[k],
                                    "--batch", "4", "--json", "--output", path_of("c.npy"),
                                    path_of("m.h5"), NULL),
                         0);
        float *got = pc_cli_read_npy(path_of("c.npy"), "<f4", shape, 3, sizeof want);
        if (memcmp(got, want, sizeof want))
            fail_msg("conditional --kernel %s differs from pc_conditionals_f32", kernels[k]);
        free(got);
        expect_mean("mean_logp_observed_nats", logp, N);
        pc_cli_expect_in("stdout.txt", "\"command\": \"conditional\"");
    }
}

/* sample --data: pc_sample_conditional's rows with the same seed; --count takes the first
 * images, as --limit does. */
static void test_sample_evidence(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    static uint8_t missing[N * V], want[N * V];
    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    for (int k = 0; k < 3; k++) {
        mask_of(specs[k == 2 ? 5 : k], missing);
        pc_evaluator *e = pc_cli_evaluator(fx.circuit, backends[k], N);
        assert_int_equal(pc_sample_conditional(e, fx.pixels, missing, N, V, seed, 0, want), PC_OK);
        pc_evaluator_free(e);
        assert_int_equal(pc_cli_run("sample", "--data", path_of("d.idx"), "--missing",
                                    specs[k == 2 ? 5 : k], "--seed", seed_text, "--kernel",
                                    kernels[k], "--batch", "7", "--output", path_of("s.npy"),
                                    path_of("m.h5"), NULL),
                         0);
        const int64_t shape[2] = {N, V};
        uint8_t *got = pc_cli_read_npy(path_of("s.npy"), "|u1", shape, 2, sizeof want);
        if (memcmp(got, want, sizeof want))
            fail_msg("sample --data --kernel %s differs from pc_sample_conditional", kernels[k]);
        free(got);
    }
    assert_int_equal(pc_cli_run("sample", "--data", path_of("d.idx"), "--missing", "random:0.4",
                                "--seed", seed_text, "--count", "5", "--kernel", "cpu-fuse",
                                "--output", path_of("s.npy"), path_of("m.h5"), NULL),
                     0);
    const int64_t five[2] = {5, V};
    uint8_t *got = pc_cli_read_npy(path_of("s.npy"), "|u1", five, 2, 5 * V);
    assert_memory_equal(got, want, 5 * V);
    free(got);
}

/* score --missing: pc_evaluate's log p(x_observed) per line, and bits per observed entry. */
static void test_score_missing(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    static uint8_t missing[N * V];
    double want[N];
    mask_of("top", missing);
    pc_evaluator *e = pc_cli_evaluator(fx.circuit, PC_BACKEND_REF, N);
    assert_int_equal(pc_evaluate(e, fx.pixels, missing, N, V, want), PC_OK);
    pc_evaluator_free(e);
    assert_int_equal(pc_cli_run("score", "--kernel", "ref", "--data", path_of("d.idx"),
                                "--missing", "top", "--batch", "5", "--json", "--output",
                                path_of("l.txt"), path_of("m.h5"), NULL),
                     0);
    FILE *f = fopen(path_of("l.txt"), "r");
    assert_non_null(f);
    for (int i = 0; i < N; i++) {
        double got;
        assert_int_equal(fscanf(f, "%lf", &got), 1);
        if (got != want[i]) fail_msg("line %d: %.17g, library %.17g", i + 1, got, want[i]);
    }
    fclose(f);
    expect_mean("mean_ll_nats", want, N);
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += want[i];
    const double bpd = -sum / (N * V / 2 * log(2.0)); /* the top half is missing */
    assert_true(fabs(json_value("bits_per_dim") - bpd) <= 1e-12 * bpd);
    pc_cli_expect_in("stdout.txt", "\"missing\": \"top\"");
}

/* The shipped model with MNIST test images: sample, mpe and conditional agree with the
 * library on cpu-fuse (random pixels stand in where MNIST is absent). */
static void test_shipped_model(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    char path[4096], mnist[4096];
    const char *src = getenv("PC_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/models/mnist.h5", src ? src : ".");
    pc_hclt *m = NULL;
    if (pc_hclt_load(path, &m) != PC_OK) skip();
    enum { MV = 784, MC = 256, ROWS = 3 };
    pc_circuit *c = NULL;
    assert_int_equal(pc_circuit_compile(m, &c), PC_OK);
    pc_data *test = NULL;
    uint8_t *x = NULL;
    if (pc_tool_find_mnist(NULL, "t10k-images-idx3-ubyte.gz", mnist, sizeof mnist) == PC_OK &&
        pc_data_load_idx(mnist, &test) == PC_OK && test->width == MV) {
        x = test->values;
    } else {
        print_message("  MNIST not found: random pixels\n");
        x = pc_hr_data(ROWS, MV, MC, 0.0, NULL);
    }
    pc_cli_write_npy(path_of("mnist.npy"), x, ROWS, MV);
    static uint8_t missing[ROWS * MV], want[ROWS * MV];
    static float probs[ROWS * MV * MC];
    for (int i = 0; i < ROWS * MV; i++) missing[i] = i % 28 < 14;
    pc_evaluator *e = pc_cli_evaluator(c, PC_BACKEND_CPU_FUSE, 16);
    const int64_t grid[2] = {16, MV}, rows[2] = {ROWS, MV}, cells[3] = {ROWS, MV, MC};

    uint8_t drawn[16 * MV];
    assert_int_equal(pc_sample(e, 16, MV, 3, 0, drawn), PC_OK);
    assert_int_equal(pc_cli_run("sample", "--count", "16", "--seed", "3", "--kernel", "cpu-fuse",
                                "--output", path_of("s.npy"), path, NULL),
                     0);
    uint8_t *got = pc_cli_read_npy(path_of("s.npy"), "|u1", grid, 2, sizeof drawn);
    assert_memory_equal(got, drawn, sizeof drawn);
    free(got);

    assert_int_equal(pc_mpe(e, x, missing, ROWS, MV, want, NULL), PC_OK);
    assert_int_equal(pc_cli_run("mpe", "--data", path_of("mnist.npy"), "--missing", "left",
                                "--kernel", "cpu-fuse", "--output", path_of("o.npy"), path, NULL),
                     0);
    got = pc_cli_read_npy(path_of("o.npy"), "|u1", rows, 2, sizeof want);
    assert_memory_equal(got, want, sizeof want);
    free(got);

    assert_int_equal(pc_conditionals_f32(e, x, missing, ROWS, MV, MC, probs, NULL), PC_OK);
    assert_int_equal(pc_cli_run("conditional", "--data", path_of("mnist.npy"), "--missing",
                                "left", "--kernel", "cpu-fuse", "--batch", "2", "--output",
                                path_of("c.npy"), path, NULL),
                     0);
    float *p = pc_cli_read_npy(path_of("c.npy"), "<f4", cells, 3, sizeof probs);
    assert_memory_equal(p, probs, sizeof probs);
    free(p);
    remove(path_of("c.npy"));
    pc_evaluator_free(e);
    if (test) pc_data_free(test);
    else free(x);
    pc_circuit_free(c);
    pc_hclt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_prior),  cmocka_unit_test(test_mpe),
        cmocka_unit_test(test_mask_files),    cmocka_unit_test(test_conditional),
        cmocka_unit_test(test_sample_evidence), cmocka_unit_test(test_score_missing),
        cmocka_unit_test(test_shipped_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
