/* The pcinfer program end to end: results match the library, and every bad input gives a
 * message on stderr, exit status 2 (usage) or 1 (anything else), never a signal, and no output
 * file. --output never replaces an input or a special file; the data is streamed (--limit
 * reads only what it scores, and memory does not grow with the number of images). Runs the
 * built program from PC_BINARY_DIR (set by ctest); skipped without it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>
#include <zlib.h>

#include "hclt_random.h"
#include "pc/circuit.h"
#include "pc/cuda.h"
#include "pc/data.h"
#include "pc/eval.h"
#include "pc/hclt.h"
#include "pcinfer_cli.h"
#include "run_tool.h"

#include "mnist_find.h"

#define V 12
#define C 4
#define K 3
#define N 40

static pc_hclt *model;
static uint8_t *pixels;

static const char *path_of(const char *name) { return pc_cli_path(name); }

static int setup(void **state) {
    (void)state;
    pc_cli_start();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    model = pc_hr_model(V, C, K, 0.3, 0);
    assert_int_equal(pc_hclt_save(model, path_of("m.h5"), PC_HCLT_F64), PC_OK);
    pixels = pc_hr_data(N, V, C, 0.0, NULL);
    pc_cli_write_idx(path_of("d.gz"), pixels, N, 3, 4, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pc_cli_stop();
    pc_hclt_free(model);
    free(pixels);
    return 0;
}

static char *slurp(const char *path) { return pc_slurp(path); }

/* No output file, and no temporary one next to it. */
static void expect_no_output(void) { pc_cli_expect_absent("out.txt"); }

static void test_scores_match_library(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    pc_circuit *c = NULL;
    assert_int_equal(pc_circuit_compile(model, &c), PC_OK);
    double want[N];
    pc_eval_opts opts = {PC_BACKEND_REF, N, 1};
    pc_evaluator *e = NULL;
    assert_int_equal(pc_evaluator_create(c, &opts, &e), PC_OK);
    assert_int_equal(pc_evaluate(e, pixels, NULL, N, c->num_vars, want), PC_OK);
    pc_evaluator_free(e);
    pc_circuit_free(c);

    assert_int_equal(pc_cli_run("--kernel", "ref", "--data", path_of("d.gz"), "--batch", "7",
                                "--output", path_of("out.txt"), path_of("m.h5"), NULL),
                     0);
    pc_cli_expect_in("stdout.txt", "mean LL");
    FILE *f = fopen(path_of("out.txt"), "r");
    assert_non_null(f);
    double mean = 0.0;
    for (int i = 0; i < N; i++) {
        double got;
        assert_int_equal(fscanf(f, "%lf", &got), 1);
        if (got != want[i]) fail_msg("line %d: %.17g, library %.17g", i + 1, got, want[i]);
        mean += got / N;
    }
    double extra;
    assert_int_equal(fscanf(f, "%lf", &extra), EOF);
    fclose(f);
    remove(path_of("out.txt"));

    /* JSON, --limit and --compare. */
    assert_int_equal(pc_cli_run("--kernel", "cpu-fuse", "--data", path_of("d.gz"), "--limit", "9",
                                "--compare", "ref", "--json", "--threads", "2", path_of("m.h5"),
                                NULL),
                     0);
    char *json = slurp(path_of("stdout.txt"));
    assert_non_null(json);
    assert_int_equal(json[0], '{');
    assert_non_null(strstr(json, "\"images\": 9"));
    assert_non_null(strstr(json, "\"kernel\": \"cpu-fuse\""));
    const char *d = strstr(json, "\"mean_abs_delta_nats\": ");
    assert_non_null(d);
    double delta = strtod(d + strlen("\"mean_abs_delta_nats\": "), NULL);
    assert_true(delta >= 0.0 && delta <= 1e-5);
    free(json);

    /* bits/dim = -mean LL / (V ln 2) over all N images. */
    assert_int_equal(pc_cli_run("--kernel", "ref", "--data", path_of("d.gz"), "--json",
                                path_of("m.h5"), NULL),
                     0);
    json = slurp(path_of("stdout.txt"));
    const char *b = strstr(json, "\"bits_per_dim\": ");
    assert_non_null(b);
    double bpd = strtod(b + strlen("\"bits_per_dim\": "), NULL);
    assert_true(fabs(bpd + mean / (V * log(2.0))) <= 1e-12);
    free(json);
}

static void test_gpu_kernel_falls_back(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    if (pc_cuda_available()) skip();
    assert_int_equal(
        pc_cli_run("--kernel", "gemm", "--data", path_of("d.gz"), path_of("m.h5"), NULL), 0);
    pc_cli_expect_in("stderr.txt", "no GPU");
    pc_cli_expect_in("stdout.txt", "cpu");
}

static void test_usage_errors(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    const char *m = path_of("m.h5"), *o = path_of("out.txt");
    assert_int_equal(pc_cli_run("--frobnicate", m, NULL), 2);
    pc_cli_expect_in("stderr.txt", "--frobnicate");
    assert_int_equal(pc_cli_run("--output", o, NULL), 2);
    pc_cli_expect_in("stderr.txt", "no model");
    assert_int_equal(pc_cli_run("--limit", "abc", "--output", o, m, NULL), 2);
    assert_int_equal(pc_cli_run("--limit", "0", "--output", o, m, NULL), 2);
    assert_int_equal(pc_cli_run("--kernel", "fastest", "--output", o, m, NULL), 2);
    pc_cli_expect_in("stderr.txt", "fastest");
    assert_int_equal(pc_cli_run("--compare", "cpu", "--output", o, m, NULL), 2);
    assert_int_equal(pc_cli_run("--output", o, m, "--batch", NULL), 2);
    expect_no_output();
}

/* Writes a valid model, then overwrites one dataset in place. */
static const char *broken_model(const char *name, const char *dataset, int is_int,
                                void (*edit)(void *data)) {
    const char *p = path_of(name);
    assert_int_equal(pc_hclt_save(model, p, PC_HCLT_F64), PC_OK);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, dataset, H5P_DEFAULT);
    assert_true(f >= 0 && ds >= 0);
    static char buf[V * K * C * 8];
    hid_t type = is_int ? H5T_NATIVE_INT32 : H5T_NATIVE_DOUBLE;
    assert_true(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    edit(buf);
    assert_true(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Dclose(ds);
    H5Fclose(f);
    return p;
}
static void put_nan(void *d) { ((double *)d)[3] = NAN; }
static void put_inf(void *d) { ((double *)d)[0] = INFINITY; }
static void unnormalise(void *d) {
    for (int c = 0; c < C; c++) ((double *)d)[C + c] += 0.5;
}
static void two_roots(void *d) {
    int32_t *parent = d;
    for (int v = 0; v < V; v++)
        if (parent[v] >= 0) {
            parent[v] = -1;
            return;
        }
}

/* The tree edits need the model's shape: the root and a variable with a trans row. */
static int32_t root_var(void) {
    for (int32_t v = 0; v < V; v++)
        if (model->parent[v] < 0) return v;
    return -1;
}
static int32_t owner_var(int skip) {
    for (int32_t v = 0; v < V; v++)
        if (model->trans_index[v] >= 0 && skip-- == 0) return v;
    return -1;
}
static void cycle(void *d) {
    /* The root's parent becomes one of its descendants, and a variable with no children
     * (not that descendant) becomes the root: one root, and a cycle. */
    int32_t *parent = d, r = root_var(), v = owner_var(0), leaf = -1;
    for (int32_t u = 0; u < V && leaf < 0; u++) {
        int has_child = 0;
        for (int32_t w = 0; w < V; w++) has_child |= model->parent[w] == u;
        if (!has_child && u != v) leaf = u;
    }
    parent[r] = v;
    parent[leaf] = -1;
}
static void trans_reused(void *d) {
    int32_t *trans = d;
    trans[owner_var(1)] = trans[owner_var(0)];
}
static void trans_out_of_range(void *d) { ((int32_t *)d)[owner_var(0)] = V; }

/* Writes a valid model, then changes the file's schema with `edit`. */
static const char *broken_file(const char *name, void (*edit)(hid_t file)) {
    const char *p = path_of(name);
    assert_int_equal(pc_hclt_save(model, p, PC_HCLT_F32), PC_OK);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    edit(f);
    H5Fclose(f);
    return p;
}
static void wrong_format(hid_t f) {
    assert_true(H5Adelete(f, "format") >= 0);
    hid_t sp = H5Screate(H5S_SCALAR), t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 8);
    hid_t a = H5Acreate2(f, "format", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(H5Awrite(a, t, "pc-other") >= 0);
    H5Aclose(a), H5Tclose(t), H5Sclose(sp);
}
static void wrong_version(hid_t f) {
    hid_t a = H5Aopen(f, "version", H5P_DEFAULT);
    int v = 7;
    assert_true(H5Awrite(a, H5T_NATIVE_INT, &v) >= 0);
    H5Aclose(a);
}
static void drop_dataset(hid_t f) {
    assert_true(H5Ldelete(f, "/params/trans_logw", H5P_DEFAULT) >= 0);
}
static void wrong_shape(hid_t f) {
    assert_true(H5Ldelete(f, "/params/root_logw", H5P_DEFAULT) >= 0);
    hsize_t dims[1] = {K + 2};
    double w[K + 2] = {0};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t ds = H5Dcreate2(f, "/params/root_logw", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT);
    assert_true(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, w) >= 0);
    H5Dclose(ds), H5Sclose(sp);
}

static void test_bad_inputs(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    const char *m = path_of("m.h5"), *o = path_of("out.txt");
    const char *data = path_of("d.gz");
    struct {
        const char *model, *data, *frag;
    } cases[] = {
        {path_of("missing.h5"), data, "No such file"},
        {data, data, "not an HDF5 file"},
        {broken_model("nan.h5", "/params/input_logp", 0, put_nan), data, "is NaN"},
        {broken_model("inf.h5", "/params/trans_logw", 0, put_inf), data, "is +inf"},
        {broken_model("norm.h5", "/params/input_logp", 0, unnormalise), data, "not 1"},
        {broken_model("roots.h5", "/structure/parent", 1, two_roots), data, "root"},
        {broken_model("cycle.h5", "/structure/parent", 1, cycle), data, "cycle"},
        {broken_model("reuse.h5", "/structure/trans_index", 1, trans_reused), data, "used twice"},
        {broken_model("range.h5", "/structure/trans_index", 1, trans_out_of_range), data,
         "out of range"},
        {broken_file("format.h5", wrong_format), data, "pc-other"},
        {broken_file("version.h5", wrong_version), data, "version 7"},
        {broken_file("nodata.h5", drop_dataset), data, "/params/trans_logw is missing"},
        {broken_file("shape.h5", wrong_shape), data, "/params/root_logw has shape [5]"},
        {m, path_of("missing.gz"), "No such file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(
            pc_cli_run("--data", cases[i].data, "--output", o, cases[i].model, NULL), 1);
        pc_cli_expect_in("stderr.txt", cases[i].frag);
        expect_no_output();
    }

    /* Damaged data: truncated and corrupt gzip, wrong width, a value >= C. */
    size_t len;
    FILE *f = fopen(data, "rb");
    assert_non_null(f);
    static uint8_t gz[1 << 16];
    len = fread(gz, 1, sizeof gz, f);
    fclose(f);
    f = fopen(path_of("cut.gz"), "wb");
    fwrite(gz, 1, len - 12, f);
    fclose(f);
    assert_int_equal(pc_cli_run("--data", path_of("cut.gz"), "--output", o, m, NULL), 1);
    pc_cli_expect_in("stderr.txt", "cut.gz");
    expect_no_output();
    gz[len / 2] ^= 0x5a;
    gz[len / 2 + 1] ^= 0xa5;
    f = fopen(path_of("bad.gz"), "wb");
    fwrite(gz, 1, len, f);
    fclose(f);
    assert_int_equal(pc_cli_run("--data", path_of("bad.gz"), "--output", o, m, NULL), 1);
    pc_cli_expect_in("stderr.txt", "bad.gz");
    expect_no_output();

    pc_cli_write_idx(path_of("wide.idx"), pixels, N / 2, 4, 6, 0); /* width 24 != V = 12 */
    assert_int_equal(pc_cli_run("--data", path_of("wide.idx"), "--output", o, m, NULL), 1);
    pc_cli_expect_in("stderr.txt", "num_vars = 12");
    expect_no_output();

    uint8_t *big = malloc(N * V);
    assert_non_null(big);
    memcpy(big, pixels, N * V);
    big[5 * V + 7] = C; /* sample 5, variable 7 */
    pc_cli_write_idx(path_of("big.idx"), big, N, 3, 4, 0);
    free(big);
    assert_int_equal(pc_cli_run("--data", path_of("big.idx"), "--output", o, m, NULL), 1);
    pc_cli_expect_in("stderr.txt", "sample 5, variable 7");
    expect_no_output();

    /* An output path that cannot be written. */
    assert_int_equal(pc_cli_run("--data", data, "--output", path_of("no/dir/out.txt"), m, NULL), 1);
    pc_cli_expect_in("stderr.txt", "no/dir/out.txt");
}

/* --output never replaces an input or a special file, and leaves them as they were. */
static void test_output_refused(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    const char *m = path_of("m.h5"), *d = path_of("d.gz");
    const struct {
        const char *out, *frag;
    } cases[] = {
        {m, "is an input of this run"},
        {d, "is an input of this run"},
        {path_of("fifo.txt"), "is a FIFO, not a regular file"},
        {path_of("link.txt"), "is a symbolic link, not a regular file"},
    };
    assert_int_equal(mkfifo(path_of("fifo.txt"), 0600), 0);
    FILE *f = fopen(path_of("victim.txt"), "w");
    assert_non_null(f);
    fputs("keep\n", f);
    fclose(f);
    assert_int_equal(symlink(path_of("victim.txt"), path_of("link.txt")), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(
            pc_cli_run("--kernel", "ref", "--data", d, "--output", cases[i].out, m, NULL), 1);
        pc_cli_expect_in("stderr.txt", cases[i].frag);
    }
    /* The model and the data still work; the link's target is untouched. */
    assert_int_equal(pc_cli_run("--kernel", "ref", "--data", d, m, NULL), 0);
    char *text = slurp(path_of("victim.txt"));
    assert_string_equal(text, "keep\n");
    free(text);
    remove(path_of("fifo.txt"));
    remove(path_of("link.txt"));
    remove(path_of("victim.txt"));
}

/* A gzip file whose header claims 1000 images and holds 20: --limit 10 reads only what it
 * scores (and succeeds); without it the shortfall is an error. */
static void test_limit_reads_only_what_it_scores(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    uint8_t head[16] = {0, 0, 8, 3, 0, 0, 1000 >> 8, 1000 & 255, 0, 0, 0, 3, 0, 0, 0, 4};
    gzFile f = gzopen(path_of("short.gz"), "wb");
    assert_non_null(f);
    gzwrite(f, head, 16);
    gzwrite(f, pixels, 20 * V);
    assert_int_equal(gzclose(f), Z_OK);
    assert_int_equal(pc_cli_run("--kernel", "ref", "--data", path_of("short.gz"), "--limit", "10",
                                "--json", path_of("m.h5"), NULL),
                     0);
    pc_cli_expect_in("stdout.txt", "\"images\": 10");
    assert_int_equal(
        pc_cli_run("--kernel", "ref", "--data", path_of("short.gz"), path_of("m.h5"), NULL), 1);
    pc_cli_expect_in("stderr.txt", "the file ends in row 20");
    remove(path_of("short.gz"));
}

/* Feeds an IDX stream of n MNIST-sized images into a FIFO: tiles of the MNIST test set when it
 * is found, else random pixels. */
typedef struct feed {
    const char *fifo;
    uint32_t n;
    const uint8_t *tile; /* [tile_rows, 784] */
    uint32_t tile_rows;
} feed;

static void *feed_fifo(void *arg) {
    const feed *fd = arg;
    FILE *f = fopen(fd->fifo, "wb");
    if (!f) return NULL;
    const uint8_t head[16] = {0, 0, 8, 3, (uint8_t)(fd->n >> 24), (uint8_t)(fd->n >> 16),
                              (uint8_t)(fd->n >> 8), (uint8_t)fd->n, 0, 0, 0, 28, 0, 0, 0, 28};
    int ok = fwrite(head, 1, 16, f) == 16;
    for (uint32_t i = 0; i < fd->n && ok; i += fd->tile_rows) {
        uint32_t rows = fd->n - i < fd->tile_rows ? fd->n - i : fd->tile_rows;
        ok = fwrite(fd->tile, 784, rows, f) == rows; /* stops when pcinfer closes its end */
    }
    fclose(f);
    return NULL;
}

/* Peak RSS (KB) of pcinfer scoring n streamed images with the 784-variable model. */
static long streamed_rss(const feed *proto, uint32_t n, const char *limit) {
    feed fd = *proto;
    fd.n = n;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, feed_fifo, &fd), 0);
    const char *argv[] = {pc_cli_program(), "--kernel", "cpu", "--data", fd.fifo, "--json",
                          limit ? "--limit" : path_of("m784.h5"), limit, path_of("m784.h5"),
                          NULL};
    if (!limit) argv[7] = NULL;
    struct rusage ru;
    char out[4200], err[4200];
    snprintf(out, sizeof out, "%s", path_of("stdout.txt"));
    snprintf(err, sizeof err, "%s", path_of("stderr.txt"));
    int rc = pc_run_tool(argv, out, err, 600, &ru);
    pthread_join(t, NULL);
    if (rc != 0) {
        char *err = slurp(path_of("stderr.txt"));
        fail_msg("pcinfer exit %d: %s", rc, err);
    }
    char want[64];
    snprintf(want, sizeof want, "\"images\": %s", limit ? limit : "");
    if (!limit) snprintf(want, sizeof want, "\"images\": %u", n);
    pc_cli_expect_in("stdout.txt", want);
    return ru.ru_maxrss;
}

/* 10^6 images cost no more memory than 10^3: the data is streamed, not loaded. */
static void test_streaming_memory(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    pc_hclt *m784 = pc_hr_model(784, 256, 1, 0.3, 0);
    assert_int_equal(pc_hclt_save(m784, path_of("m784.h5"), PC_HCLT_F32), PC_OK);
    pc_hclt_free(m784);
    feed fd = {path_of("images.fifo"), 0, NULL, 0};
    assert_int_equal(mkfifo(fd.fifo, 0600), 0);
    char mnist[4096];
    pc_data *tile = NULL;
    if (pc_tool_find_mnist(NULL, "t10k-images-idx3-ubyte.gz", mnist, sizeof mnist) == PC_OK &&
        pc_data_load_idx(mnist, &tile) == PC_OK && tile->width == 784) {
        fd.tile = tile->values, fd.tile_rows = (uint32_t)tile->count;
    } else {
        printf("MNIST not found: random pixels\n");
        fd.tile = pc_hr_data(1000, 784, 256, 0.0, NULL), fd.tile_rows = 1000;
    }
    signal(SIGPIPE, SIG_IGN); /* --limit closes the FIFO early */
    const long small = streamed_rss(&fd, 1000, NULL);
    const long large = streamed_rss(&fd, 1000000, NULL);
    const long limited = streamed_rss(&fd, 1000000, "10");
    printf("peak RSS: %ld MB for 10^3 images, %ld MB for 10^6, %ld MB for --limit 10\n",
           small / 1024, large / 1024, limited / 1024);
    assert_true(large - small < 100 * 1024);
    assert_true(large - limited < 100 * 1024);
    if (tile)
        pc_data_free(tile);
    else
        free((void *)fd.tile);
    remove(fd.fifo);
    remove(path_of("m784.h5"));
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scores_match_library),
        cmocka_unit_test(test_gpu_kernel_falls_back),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_output_refused),
        cmocka_unit_test(test_limit_reads_only_what_it_scores),
        cmocka_unit_test(test_streaming_memory),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
