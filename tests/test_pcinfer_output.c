/* pcinfer's query outputs read back, and its bad inputs. Every format holds the same answer:
 * .npy, .idx and .idx.gz (square images as [n, s, s], others as [n, V]) and .png, decoded
 * here with libpng: a grid of samples, rows of original | evidence | completion with the
 * missing part blue, and a conditional's expected values. Bad input gets one message, exit
 * status 2 (usage) or 1, and leaves no output file, also when it shows only after part of the
 * output was written. Runs the built program from PC_BINARY_DIR (set by ctest); skipped
 * without it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <png.h>
#include <zlib.h>

#include "hclt_random.h"
#include "pc/circuit.h"
#include "pc/cuda.h"
#include "pc/eval.h"
#include "pc/hclt.h"
#include "pc/query.h"
#include "pcinfer_cli.h"
#include "run_tool.h"

#define SIDE 4
#define V (SIDE * SIDE)
#define C 4
#define K 3
#define N 11

/* The pictures' geometry (tools/common/png_grid.c): a value is 84 / SIDE pixels square, at
 * most 8, and panels are framed by 2-pixel lines. */
#define SCALE 8
#define GAP 2
#define PANEL (SIDE * SCALE + GAP)

static pc_cli_fixture fx;
static uint8_t left[N * V];

static const char *path_of(const char *name) { return pc_cli_path(name); }

static int setup(void **state) {
    (void)state;
    pc_cli_start();
    pc_hr_seed();
    pc_cli_fixture_make(&fx, SIDE, C, K, 0.3, N);
    for (int i = 0; i < N * V; i++) left[i] = i % SIDE < SIDE / 2;
    /* A model whose 12 variables make no square image, with data for it. */
    pc_hclt *flat = pc_hr_model(12, C, K, 0.3, 0);
    assert_int_equal(pc_hclt_save(flat, path_of("flat.h5"), PC_HCLT_F64), PC_OK);
    pc_hclt_free(flat);
    pc_cli_write_idx(path_of("flat.idx"), fx.pixels, N, 3, 4, 0);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pc_cli_stop();
    pc_cli_fixture_free(&fx);
    return 0;
}

/* MPE with the left half missing: every format holds pc_mpe's completions. */
static void test_formats_agree(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    uint8_t want[N * V];
    pc_evaluator *e = pc_cli_evaluator(fx.circuit, PC_BACKEND_CPU_FUSE, 64);
    assert_int_equal(pc_mpe(e, fx.pixels, left, N, V, want, NULL), PC_OK);
    pc_evaluator_free(e);
    const char *outs[] = {"o.npy", "o.idx", "o.idx.gz"};
    for (int f = 0; f < 3; f++) {
        assert_int_equal(pc_cli_run("mpe", "--data", path_of("d.idx"), "--missing", "left",
                                    "--kernel", "cpu-fuse", "--batch", "4", "--output",
                                    path_of(outs[f]), path_of("m.h5"), NULL),
                         0);
        const int64_t shape[2] = {N, V};
        const uint32_t dims[3] = {N, SIDE, SIDE};
        uint8_t *got = f == 0 ? pc_cli_read_npy(path_of(outs[f]), "|u1", shape, 2, sizeof want)
                              : pc_cli_read_idx(path_of(outs[f]), dims, 3);
        assert_memory_equal(got, want, sizeof want);
        free(got);
    }
    /* The gzip file is compressed, not stored. */
    FILE *f = fopen(path_of("o.idx.gz"), "rb");
    uint8_t magic[2];
    assert_int_equal(fread(magic, 1, 2, f), 2);
    fclose(f);
    assert_true(magic[0] == 0x1f && magic[1] == 0x8b);

    /* Rows that are no square image: IDX [n, V]. */
    assert_int_equal(pc_cli_run("sample", "--count", "5", "--output", path_of("flat.idx.gz"),
                                path_of("flat.h5"), NULL),
                     0);
    const uint32_t flat[2] = {5, 12};
    free(pc_cli_read_idx(path_of("flat.idx.gz"), flat, 2));
}

/* A decoded PNG: RGB rows. */
typedef struct picture {
    uint32_t width, height;
    uint8_t *rgb;
} picture;

static picture read_png(const char *path) {
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&image, path)) fail_msg("%s: %s", path, image.message);
    image.format = PNG_FORMAT_RGB;
    picture p = {image.width, image.height, malloc(PNG_IMAGE_SIZE(image))};
    assert_true(png_image_finish_read(&image, NULL, p.rgb, 0, NULL));
    return p;
}

/* The pixel at the centre of value v of the panel at (row, col) of the grid. */
static const uint8_t *value_pixel(const picture *p, int row, int col, int v) {
    const int x = GAP + col * PANEL + (v % SIDE) * SCALE + SCALE / 2;
    const int y = GAP + row * PANEL + (v / SIDE) * SCALE + SCALE / 2;
    return p->rgb + ((size_t)y * p->width + (size_t)x) * 3;
}

static int gray_of(double level) { return (int)(255.0 * level / (C - 1) + 0.5); }

static void expect_gray(const uint8_t *px, double level) {
    const int g = gray_of(level);
    if (px[0] != g || px[1] != g || px[2] != g)
        fail_msg("pixel (%d, %d, %d), expected gray %d", px[0], px[1], px[2], g);
}

/* Filled in: gray tinted blue, brighter with the level (0.75, 0.85, 0.8 of it plus a blue). */
static void expect_filled(const uint8_t *px, double level) {
    const double v = 255.0 * level / (C - 1);
    if (abs(px[0] - (int)(0.75 * v + 0.5)) > 1 || abs(px[2] - (int)(0.80 * v + 51.5)) > 1 ||
        px[2] <= px[0])
        fail_msg("pixel (%d, %d, %d) is not level %.3f tinted", px[0], px[1], px[2], level);
}

static void expect_hidden(const uint8_t *px) {
    if (px[0] != 40 || px[1] != 72 || px[2] != 128)
        fail_msg("pixel (%d, %d, %d) is not the evidence blue", px[0], px[1], px[2]);
}

/* sample --count 10: a grid of 4 x 3 panels holding pc_sample's rows, the last two blank. */
static void test_png_samples(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    enum { S = 10 };
    uint8_t want[S * V];
    pc_evaluator *e = pc_cli_evaluator(fx.circuit, PC_BACKEND_CPU_FUSE, 64);
    assert_int_equal(pc_sample(e, S, V, 5, 0, want), PC_OK);
    pc_evaluator_free(e);
    assert_int_equal(pc_cli_run("sample", "--count", "10", "--seed", "5", "--kernel", "cpu-fuse",
                                "--batch", "3", "--output", path_of("g.png"), path_of("m.h5"),
                                NULL),
                     0);
    picture p = read_png(path_of("g.png"));
    assert_int_equal(p.width, 4 * PANEL + GAP);
    assert_int_equal(p.height, 3 * PANEL + GAP);
    for (int s = 0; s < 12; s++)
        for (int v = 0; v < V; v++) {
            const uint8_t *px = value_pixel(&p, s / 4, s % 4, v);
            if (s < S) expect_gray(px, want[s * V + v]);
            else assert_true(px[0] == 128 && px[1] == 128 && px[2] == 128);
        }
    /* The frame: line gray between panels and around them. */
    for (uint32_t y = 0; y < p.height; y++) {
        const uint8_t *px = p.rgb + (size_t)y * p.width * 3 + (size_t)PANEL * 3;
        assert_true(px[0] == 128 && px[1] == 128 && px[2] == 128);
    }
    free(p.rgb);
}

/* mpe, sample --data and conditional: a row per image of original | evidence | answer. */
static void test_png_rows(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    uint8_t mpe[N * V], drawn[N * V];
    static float probs[N * V * C];
    pc_evaluator *e = pc_cli_evaluator(fx.circuit, PC_BACKEND_CPU_FUSE, 64);
    assert_int_equal(pc_mpe(e, fx.pixels, left, N, V, mpe, NULL), PC_OK);
    assert_int_equal(pc_sample_conditional(e, fx.pixels, left, N, V, 9, 0, drawn), PC_OK);
    assert_int_equal(pc_conditionals_f32(e, fx.pixels, left, N, V, C, probs, NULL), PC_OK);
    pc_evaluator_free(e);
    const char *const runs[3][14] = {
        {"mpe", "--data", path_of("d.idx"), "--missing", "left", "--kernel", "cpu-fuse",
         "--output", path_of("mpe.png"), path_of("m.h5"), NULL},
        {"sample", "--data", path_of("d.npy"), "--missing", "left", "--seed", "9", "--kernel",
         "cpu-fuse", "--output", path_of("sample.png"), path_of("m.h5"), NULL},
        {"conditional", "--data", path_of("d.idx"), "--missing", "left", "--kernel", "cpu-fuse",
         "--batch", "2", "--output", path_of("cond.png"), path_of("m.h5"), NULL},
    };
    const char *files[3] = {"mpe.png", "sample.png", "cond.png"};
    for (int r = 0; r < 3; r++) {
        assert_int_equal(pc_cli_runv(runs[r]), 0);
        picture p = read_png(path_of(files[r]));
        assert_int_equal(p.width, 3 * PANEL + GAP);
        assert_int_equal(p.height, N * PANEL + GAP);
        for (int i = 0; i < N; i++)
            for (int v = 0; v < V; v++) {
                const int at = i * V + v;
                double answer = r == 0 ? mpe[at] : drawn[at];
                if (r == 2) {
                    double m = 0.0;
                    for (int c = 0; c < C; c++) m += (double)c * probs[(size_t)at * C + c];
                    answer = (float)m;
                }
                expect_gray(value_pixel(&p, i, 0, v), fx.pixels[at]);
                if (left[at]) {
                    expect_hidden(value_pixel(&p, i, 1, v));
                    expect_filled(value_pixel(&p, i, 2, v), answer);
                } else {
                    expect_gray(value_pixel(&p, i, 1, v), fx.pixels[at]);
                    if (r == 2) assert_true(fabs(answer - fx.pixels[at]) < 1e-6); /* one-hot */
                    expect_gray(value_pixel(&p, i, 2, v), answer);
                }
            }
        free(p.rgb);
    }
}

/* Exit status `rc`, stderr holding frag, and no output file. */
static void expect_refused(int rc, const char *const *args, const char *frag, const char *out) {
    int got = pc_cli_runv(args);
    char *err = pc_slurp(path_of("stderr.txt"));
    if (got != rc || !strstr(err, frag))
        fail_msg("%s %s ...: exit %d (expected %d), stderr: %s", args[0], args[1], got, rc, err);
    /* One message: its first line starts with "pcinfer: ". */
    assert_int_equal(strncmp(err, "pcinfer: ", 9), 0);
    free(err);
    pc_cli_expect_absent(out);
}

static void test_usage_errors(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    const char *m = path_of("m.h5"), *d = path_of("d.idx"), *o = path_of("out.npy");
    const struct {
        const char *args[16], *frag;
    } cases[] = {
        {{"sample", "--count", "0", "--output", o, m, NULL}, "--count needs an integer >= 1"},
        {{"sample", "--count", "-3", "--output", o, m, NULL}, "--count needs an integer >= 1"},
        {{"sample", "--output", o, m, NULL}, "sample needs --count N or --data"},
        {{"sample", "--count", "3", "--missing", "left", "--output", o, m, NULL},
         "--missing and --limit go with --data"},
        {{"sample", "--data", d, "--output", o, m, NULL}, "sample --data needs --missing"},
        {{"sample", "--data", d, "--missing", "left", "--count", "2", "--limit", "2", m, NULL},
         "give --count or --limit, not both"},
        {{"sample", "--count", "3", "--seed", "-1", m, NULL}, "--seed needs an integer"},
        {{"mpe", "--data", d, "--output", o, m, NULL}, "mpe needs --missing SPEC"},
        {{"conditional", "--data", d, m, NULL}, "conditional needs --missing SPEC"},
        {{"mpe", "--data", d, "--missing", "left", "--compare", "ref", m, NULL},
         "--compare is for score"},
        {{"mpe", "--data", d, "--missing", "left", "--count", "3", m, NULL},
         "--count is for sample"},
        {{"mpe", "--data", d, "--missing", "random:2", m, NULL}, "probability P in [0, 1]"},
        {{"mpe", "--data", d, "--missing", "left", "--output", path_of("out.txt"), m, NULL},
         "the extension says no format"},
        {{"conditional", "--data", d, "--missing", "left", "--output", path_of("out.idx"), m,
          NULL},
         "conditionals are float32 probabilities"},
        {{"smaple", "--count", "3", m, NULL}, "unknown command 'smaple'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_refused(2, cases[i].args, cases[i].frag, "out.");
}

static void write_npy_dict(const char *path, const char *dict, size_t payload) {
    FILE *f = fopen(path, "wb");
    const size_t len = strlen(dict);
    const uint8_t head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)len, 0};
    fwrite(head, 1, 10, f);
    fwrite(dict, 1, len, f);
    for (size_t i = 0; i < payload; i++) fputc(1, f);
    fclose(f);
}

static void test_bad_inputs(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    const char *m = path_of("m.h5"), *d = path_of("d.idx"), *o = path_of("out.npy");
    uint8_t mask[N * 13] = {0};
    pc_cli_write_npy(path_of("wide_mask.npy"), mask, N, 13);
    pc_cli_write_npy(path_of("few_mask.npy"), mask, 5, V);
    write_npy_dict(path_of("f4.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': "
                   "(11, 16), }", N * V * 4);
    write_npy_dict(path_of("fortran.npy"), "{'descr': '|u1', 'fortran_order': True, 'shape': "
                   "(11, 16), }", N * V);
    write_npy_dict(path_of("flat.npy"), "{'descr': '|u1', 'fortran_order': False, 'shape': "
                   "(176,), }", N * V);
    /* A gzip IDX file that claims 11 images and holds 9: the loss shows in the third batch of
     * 4, after two were written. */
    uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0, N, 0, 0, 0, SIDE, 0, 0, 0, SIDE};
    gzFile gz = gzopen(path_of("short.idx.gz"), "wb");
    gzwrite(gz, head, 16);
    gzwrite(gz, fx.pixels, 9 * V);
    gzclose(gz);
    /* An observed value out of range in image 9 (the second of the third batch). */
    uint8_t bad[N * V];
    memcpy(bad, fx.pixels, sizeof bad);
    bad[9 * V + 11] = C;
    pc_cli_write_idx(path_of("bad.idx"), bad, N, SIDE, SIDE, 0);
    pc_hclt *wide = pc_hr_model(4, 300, 2, 0.0, 0); /* C = 300: no uint8 samples */
    assert_int_equal(pc_hclt_save(wide, path_of("c300.h5"), PC_HCLT_F64), PC_OK);
    pc_hclt_free(wide);
    const char *flat_m = path_of("flat.h5"), *flat_d = path_of("flat.idx");
    const struct {
        const char *args[16], *frag;
    } cases[] = {
        {{"mpe", "--data", d, "--missing", path_of("wide_mask.npy"), "--output", o, m, NULL},
         "the mask is 11 rows of 13 values; the data is 11 rows of 16"},
        {{"mpe", "--data", d, "--missing", path_of("few_mask.npy"), "--output", o, m, NULL},
         "the mask is 5 rows of 16 values"},
        {{"mpe", "--data", d, "--missing", "centre", "--output", o, m, NULL},
         "--missing takes left, right, top, bottom, center"},
        {{"mpe", "--data", flat_d, "--missing", "left", "--output", o, flat_m, NULL},
         "--missing left needs square images, but rows have 12 values"},
        {{"mpe", "--data", flat_d, "--missing", "random:0.5", "--output", path_of("out.png"),
          flat_m, NULL},
         "a .png shows square images"},
        {{"sample", "--count", "3", "--output", path_of("out.png"), flat_m, NULL},
         "a .png shows square images"},
        {{"mpe", "--data", d, "--missing", "left", "--output", path_of("no/out.npy"), m, NULL},
         "no/out.npy"},
        {{"mpe", "--data", d, "--missing", "left", "--output", d, m, NULL},
         "is an input of this run"},
        {{"mpe", "--data", path_of("f4.npy"), "--missing", "left", "--output", o, m, NULL},
         "dtype '<f4' is not uint8"},
        {{"mpe", "--data", path_of("fortran.npy"), "--missing", "left", "--output", o, m, NULL},
         "Fortran order"},
        {{"mpe", "--data", path_of("flat.npy"), "--missing", "left", "--output", o, m, NULL},
         "the array has 1 dimension"},
        {{"mpe", "--data", path_of("d.npy"), "--missing", "left", "--output", o, flat_m, NULL},
         "images have 16 values but the model"},
        {{"conditional", "--data", path_of("short.idx.gz"), "--missing", "left", "--batch", "4",
          "--output", o, m, NULL},
         "the file ends in row 9"},
        {{"sample", "--data", path_of("short.idx.gz"), "--missing", "top", "--batch", "4",
          "--output", path_of("out.png"), m, NULL},
         "the file ends in row 9"},
        {{"mpe", "--data", path_of("bad.idx"), "--missing", "top", "--batch", "4", "--output",
          path_of("out.idx.gz"), m, NULL},
         "sample 1, variable 11: value 4 is out of range"},
        {{"score", "--data", path_of("bad.idx"), "--missing", "top", "--batch", "4", "--output",
          path_of("out.txt"), m, NULL},
         "(sample numbers count from image 8 of the data)"},
        {{"sample", "--count", "2", "--output", o, path_of("c300.h5"), NULL},
         "uint8 outputs hold at most 256"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_refused(1, cases[i].args, cases[i].frag, "out.");
    /* The data file is as it was. */
    const uint32_t dims[3] = {N, SIDE, SIDE};
    uint8_t *kept = pc_cli_read_idx(d, dims, 3);
    assert_memory_equal(kept, fx.pixels, N * V);
    free(kept);
}

/* Without a GPU, a GPU kernel runs the query on the CPU with a notice. */
static void test_gpu_kernel_falls_back(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    if (pc_cuda_available()) skip();
    assert_int_equal(pc_cli_run("mpe", "--data", path_of("d.idx"), "--missing", "left",
                                "--kernel", "fuse", "--json", path_of("m.h5"), NULL),
                     0);
    pc_cli_expect_in("stderr.txt", "no GPU available: running kernel 'cpu-fuse'");
    pc_cli_expect_in("stdout.txt", "\"kernel\": \"cpu-fuse\"");
}

/* With a GPU: a GPU kernel answers the query, or (while the GPU backends answer none) the CPU
 * does with a notice; either way the completions are the CPU's (MPE is the same on every
 * backend but for near-ties, which these random models do not have). */
static void test_gpu_kernel_answers(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    if (!pc_cuda_available()) skip();
    uint8_t want[N * V];
    pc_evaluator *e = pc_cli_evaluator(fx.circuit, PC_BACKEND_REF, 64);
    assert_int_equal(pc_mpe(e, fx.pixels, left, N, V, want, NULL), PC_OK);
    pc_evaluator_free(e);
    assert_int_equal(pc_cli_run("mpe", "--data", path_of("d.idx"), "--missing", "left",
                                "--kernel", "fuse", "--json", "--output", path_of("gpu.npy"),
                                path_of("m.h5"), NULL),
                     0);
    char *err = pc_slurp(path_of("stderr.txt"));
    if (strstr(err, "does not answer mpe queries")) {
        pc_cli_expect_in("stderr.txt", "running 'cpu-fuse' instead");
        pc_cli_expect_in("stdout.txt", "\"kernel\": \"cpu-fuse\"");
    } else {
        pc_cli_expect_in("stdout.txt", "\"kernel\": \"fuse\"");
    }
    free(err);
    const int64_t shape[2] = {N, V};
    uint8_t *got = pc_cli_read_npy(path_of("gpu.npy"), "|u1", shape, 2, sizeof want);
    assert_memory_equal(got, want, sizeof want);
    free(got);
}

/* Peak RSS (KB) of pcinfer sampling `count` images into `out`. */
static long sample_rss(const char *count, const char *out) {
    const char *argv[] = {pc_cli_program(), "sample", "--count", count, "--kernel", "cpu-fuse",
                          "--output", path_of(out), path_of("m.h5"), NULL};
    char o[4200], e[4200];
    snprintf(o, sizeof o, "%s", path_of("stdout.txt"));
    snprintf(e, sizeof e, "%s", path_of("stderr.txt"));
    struct rusage ru;
    assert_int_equal(pc_run_tool(argv, o, e, 600, &ru), 0);
    remove(path_of(out));
    return ru.ru_maxrss;
}

/* Outputs go out a batch at a time: 3 * 10^6 samples (48 MB of .npy) and a PNG of 10^4 (a
 * 3402 x 3402 picture, 35 MB of pixels) take no more memory than 10^3. */
static void test_streamed_output(void **state) {
    (void)state;
    PC_CLI_REQUIRE();
    const long small = sample_rss("1000", "big.npy");
    const long npy = sample_rss("3000000", "big.npy");
    const long png = sample_rss("10000", "big.png");
    printf("peak RSS: %ld MB for 10^3 samples, %ld MB for 3 x 10^6 into .npy, %ld MB for 10^4 "
           "into .png\n", small / 1024, npy / 1024, png / 1024);
    assert_true(npy - small < 16 * 1024);
    assert_true(png - small < 16 * 1024);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats_agree), cmocka_unit_test(test_png_samples),
        cmocka_unit_test(test_png_rows),      cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_bad_inputs),    cmocka_unit_test(test_gpu_kernel_falls_back),
        cmocka_unit_test(test_gpu_kernel_answers), cmocka_unit_test(test_streamed_output),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
