/* pclearn's device, JSON and data-report options end to end: --json gives one parseable object
 * with every epoch; --device takes cpu or cuda only (cuda without a GPU fails with a message
 * and leaves no model; with one, it learns a model close to the CPU's); 0/1 data is learned
 * with transition rows and a warning about the categories it uses. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "pc/circuit.h"
#include "pc/data.h"
#include "pc/eval.h"
#include "pc/hclt.h"
#include "pc/rng.h"
#include "testutil.h"

static char g_tool[1024];
static char *g_dir;

static int run(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", g_tool, args, pc_hr_path(g_dir, "out.txt"),
             pc_hr_path(g_dir, "err.txt"));
    const int st = system(cmd);
    assert_true(st != -1 && WIFEXITED(st));
    return WEXITSTATUS(st);
}

static char *read_file(const char *name) {
    static char buf[1 << 16];
    FILE *f = fopen(pc_hr_path(g_dir, name), "r");
    if (!f) return NULL;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int contains(const char *name, const char *text) {
    const char *s = read_file(name);
    return s && strstr(s, text) != NULL;
}

static int exists(const char *name) {
    struct stat sb;
    return stat(pc_hr_path(g_dir, name), &sb) == 0;
}

/* An IDX file of n images of 4 x 4 pixels with values in {0, one}: pixel v copies pixel v / 2
 * with probability 0.8 (a tree to learn), else a fair bit. */
static void write_binary_idx(const char *name, int n, int one) {
    FILE *f = fopen(pc_hr_path(g_dir, name), "wb");
    assert_non_null(f);
    const unsigned char head[16] = {0, 0, 8, 3, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
                                    (unsigned char)(n >> 8), (unsigned char)n, 0, 0, 0, 4, 0, 0,
                                    0, 4};
    assert_int_equal(fwrite(head, 1, 16, f), 16);
    for (int i = 0; i < n; i++) {
        unsigned char row[16];
        for (int v = 0; v < 16; v++) {
            const int bit = v > 0 && pc_hr_unit() < 0.8 ? row[v / 2] != 0 : pc_hr_unit() < 0.5;
            row[v] = (unsigned char)(bit ? one : 0);
        }
        assert_int_equal(fwrite(row, 1, 16, f), 16);
    }
    assert_int_equal(fclose(f), 0);
}

/* The number after `key` in text (a JSON field), or -1e300 when absent. */
static double json_number(const char *text, const char *key) {
    const char *at = strstr(text, key);
    return at ? strtod(at + strlen(key), NULL) : -1e300;
}

static void test_json_and_binary_data(void **state) {
    (void)state;
    write_binary_idx("bin.idx", 600, 1);
    char args[2048];
    snprintf(args, sizeof args,
             "--latents 3 --epochs 2 --batch 100 --full-epochs 1 --json --data '%s' -o '%s'",
             pc_hr_path(g_dir, "bin.idx"), pc_hr_path(g_dir, "m.h5"));
    assert_int_equal(run(args), 0);
    const char *out = read_file("out.txt");
    assert_non_null(out);
    assert_true(out[0] == '{' && strstr(out, "}\n") != NULL);
    assert_non_null(strstr(out, "\"epoch\": 3, \"full_batch\": true"));
    assert_true(json_number(out, "\"categories_used\": ") == 2);
    assert_true(json_number(out, "\"smooth\": ") == 0.1); /* the defaults */
    assert_true(json_number(out, "\"smooth_width\": ") == 8);
    assert_true(json_number(out, "\"transition_rows\": ") > 0); /* not collapsed to a star */
    assert_true(json_number(out, "\"ll\": ") < 0 && json_number(out, "\"ll\": ") > -11.1);
    assert_true(contains("err.txt", "warning: the data uses 2 of the model's 256 categories"));
    assert_true(contains("err.txt", "epoch   3/3 full"));
    out = read_file("out.txt"); /* contains() reused the buffer */
    assert_true(json_number(out, "\"write_s\": ") >= 0 && json_number(out, "\"score_s\": ") >= 0);
    /* the reported train LL is the stored model's, scored by ref (FP64) here */
    const double reported = json_number(out, "\"ll\": ");
    pc_hclt *m = NULL;
    pc_data *d = NULL;
    pc_circuit *c = NULL;
    pc_evaluator *e = NULL;
    assert_int_equal(pc_hclt_load(pc_hr_path(g_dir, "m.h5"), &m), PC_OK);
    assert_int_equal(pc_data_load_idx(pc_hr_path(g_dir, "bin.idx"), &d), PC_OK);
    const pc_eval_opts opts = {PC_BACKEND_REF, d->count, 1};
    assert_int_equal(pc_circuit_compile(m, &c), PC_OK);
    assert_int_equal(pc_evaluator_create(c, &opts, &e), PC_OK);
    double *lp = malloc(sizeof(double) * (size_t)d->count), sum = 0;
    assert_non_null(lp);
    assert_int_equal(pc_evaluate(e, d->values, NULL, d->count, d->width, lp), PC_OK);
    for (int64_t i = 0; i < d->count; i++) sum += lp[i];
    printf("train LL: reported %.6f, ref %.6f\n", reported, sum / (double)d->count);
    assert_true(fabs(reported - sum / (double)d->count) < 1e-5);
    free(lp);
    pc_evaluator_free(e);
    pc_circuit_free(c);
    pc_data_free(d);
    pc_hclt_free(m);
    remove(pc_hr_path(g_dir, "m.h5"));
}

static void test_device_option(void **state) {
    (void)state;
    write_binary_idx("dev.idx", 300, 255);
    char args[2048];
    snprintf(args, sizeof args, "--latents 2 --device gpu -o '%s'", pc_hr_path(g_dir, "m.h5"));
    assert_int_equal(run(args), 2);
    assert_true(contains("err.txt", "--device 'gpu'"));
    const char *fmt = "--latents 4 --epochs 2 --batch 64 --full-epochs 1 --device %s --json "
                      "--data '%s' -o '%s'";
    snprintf(args, sizeof args, fmt, "cuda", pc_hr_path(g_dir, "dev.idx"),
             pc_hr_path(g_dir, "g.h5"));
    if (!pc_test_gpu_present()) {
        assert_int_equal(run(args), 1);
        assert_false(exists("g.h5"));
        printf("no GPU: %s", read_file("err.txt"));
        return;
    }
    assert_int_equal(run(args), 0);
    const double gpu_ll = json_number(read_file("out.txt"), "\"ll\": ");
    snprintf(args, sizeof args, fmt, "cpu", pc_hr_path(g_dir, "dev.idx"),
             pc_hr_path(g_dir, "c.h5"));
    assert_int_equal(run(args), 0);
    const double cpu_ll = json_number(read_file("out.txt"), "\"ll\": ");
    printf("train LL: cpu %.6f, cuda %.6f\n", cpu_ll, gpu_ll);
    /* the same EM to ~1e-12; scored by the CPU's FP64 pass and the GPU's FP32 fuse backend */
    assert_true(cpu_ll - gpu_ll < 1e-4 && gpu_ll - cpu_ll < 1e-4);
    remove(pc_hr_path(g_dir, "g.h5"));
    remove(pc_hr_path(g_dir, "c.h5"));
}

int main(void) {
    pc_hr_seed();
    const char *bin = getenv("PC_BINARY_DIR");
    if (!bin) {
        printf("PC_BINARY_DIR is not set (run through ctest): skipped\n");
        return 77;
    }
    snprintf(g_tool, sizeof g_tool, "%s/pclearn", bin);
    g_dir = pc_hr_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_and_binary_data),
        cmocka_unit_test(test_device_option),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    pc_hr_rmdir(g_dir);
    return rc;
}
