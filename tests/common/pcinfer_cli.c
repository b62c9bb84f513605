/* Running pcinfer from the CLI tests (pcinfer_cli.h). */
#include "pcinfer_cli.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "hclt_random.h"
#include "run_tool.h"

static char *folder, program[4096];

int pc_cli_start(void) {
    const char *bin = getenv("PC_BINARY_DIR");
    program[0] = '\0';
    if (bin) snprintf(program, sizeof program, "%s/pcinfer", bin);
    if (access(program, X_OK) != 0) program[0] = '\0';
    folder = pc_hr_tempdir();
    return 0;
}

void pc_cli_stop(void) {
    if (folder) pc_hr_rmdir(folder);
    folder = NULL;
}

const char *pc_cli_program(void) { return program; }
const char *pc_cli_path(const char *name) { return pc_hr_path(folder, name); }

int pc_cli_runv(const char *const *args) {
    const char *argv[64];
    int n = 0;
    argv[n++] = program;
    for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    char out[4200], err[4200];
    snprintf(out, sizeof out, "%s/stdout.txt", folder);
    snprintf(err, sizeof err, "%s/stderr.txt", folder);
    int rc = pc_run_tool(argv, out, err, 600, NULL);
    if (rc < 0) fail_msg("pcinfer died of signal %d", -rc);
    return rc;
}

int pc_cli_run(const char *arg0, ...) {
    const char *args[63];
    int n = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a && n < 62; a = va_arg(ap, const char *)) args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return pc_cli_runv(args);
}

void pc_cli_expect_in(const char *name, const char *frag) {
    char *text = pc_slurp(pc_cli_path(name));
    assert_non_null(text);
    if (!strstr(text, frag)) fail_msg("%s lacks '%s':\n%s", name, frag, text);
    free(text);
}

void pc_cli_expect_absent(const char *name) {
    if (access(pc_cli_path(name), F_OK) == 0) fail_msg("%s was written", name);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q '^[.]*%s'", folder, name);
    if (system(cmd) == 0) fail_msg("a temporary file of %s was left", name);
}

void pc_cli_write_idx(const char *path, const uint8_t *values, uint32_t count, uint32_t rows,
                      uint32_t cols, int gz) {
    uint8_t head[16] = {0, 0, 8, 3};
    uint32_t dims[3] = {count, rows, cols};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) head[4 + 4 * i + j] = (uint8_t)(dims[i] >> (24 - 8 * j));
    gzFile f = gzopen(path, gz ? "wb" : "wbT"); /* T: plain, no compression */
    assert_non_null(f);
    gzwrite(f, head, 16);
    gzwrite(f, values, count * rows * cols);
    assert_int_equal(gzclose(f), Z_OK);
}

void pc_cli_write_npy(const char *path, const uint8_t *values, int64_t count, int64_t width) {
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '|u1', 'fortran_order': False, 'shape': "
                     "(%lld, %lld), }\n", (long long)count, (long long)width);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    const uint8_t head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)n, 0};
    fwrite(head, 1, 10, f);
    fwrite(dict, 1, (size_t)n, f);
    fwrite(values, 1, (size_t)(count * width), f);
    assert_int_equal(fclose(f), 0);
}

void *pc_cli_read_npy(const char *path, const char *descr, const int64_t *shape, int ndim,
                      size_t bytes) {
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (int i = 0; i < ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "",
                      (long long)shape[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", ndim == 1 ? "," : "");
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: not written", path);
    uint8_t head[10];
    assert_int_equal(fread(head, 1, 10, f), 10);
    assert_memory_equal(head, "\x93NUMPY\x01\x00", 8);
    const size_t len = (size_t)head[8] | (size_t)head[9] << 8;
    assert_int_equal((10 + len) % 64, 0);
    char *text = malloc(len + 1);
    assert_int_equal(fread(text, 1, len, f), len);
    text[len] = '\0';
    if (len < (size_t)n + 1 || memcmp(text, dict, (size_t)n))
        fail_msg("%s: header '%s', expected '%s'", path, text, dict);
    for (size_t i = (size_t)n; i + 1 < len; i++) assert_int_equal(text[i], ' ');
    assert_int_equal(text[len - 1], '\n');
    free(text);
    uint8_t *data = malloc(bytes + 1);
    assert_int_equal(fread(data, 1, bytes + 1, f), bytes); /* and nothing after */
    fclose(f);
    return data;
}

uint8_t *pc_cli_read_idx(const char *path, const uint32_t *dims, int ndim) {
    gzFile f = gzopen(path, "rb");
    if (!f) fail_msg("%s: not written", path);
    uint8_t head[4 + 4 * 8];
    assert_int_equal(gzread(f, head, 4 + 4 * (unsigned)ndim), 4 + 4 * ndim);
    assert_int_equal(head[0] | head[1], 0);
    assert_int_equal(head[2], 0x08);
    assert_int_equal(head[3], ndim);
    size_t bytes = 1;
    for (int i = 0; i < ndim; i++) {
        const uint8_t *d = head + 4 + 4 * i;
        uint32_t got = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
        if (got != dims[i]) fail_msg("%s: dimension %d is %u, expected %u", path, i, got, dims[i]);
        bytes *= dims[i];
    }
    uint8_t *data = malloc(bytes + 1);
    assert_int_equal(gzread(f, data, (unsigned)bytes + 1), (int)bytes);
    assert_int_equal(gzclose(f), Z_OK);
    return data;
}

pc_evaluator *pc_cli_evaluator(const pc_circuit *c, pc_backend backend, int64_t max_batch) {
    pc_eval_opts opts = {backend, max_batch, 0};
    pc_evaluator *e = NULL;
    assert_int_equal(pc_evaluator_create(c, &opts, &e), PC_OK);
    return e;
}

void pc_cli_fixture_make(pc_cli_fixture *f, int side, int C, int K, double share, int n) {
    const int V = side * side;
    f->model = pc_hr_model(V, C, K, share, 0);
    assert_int_equal(pc_hclt_save(f->model, pc_cli_path("m.h5"), PC_HCLT_F64), PC_OK);
    assert_int_equal(pc_circuit_compile(f->model, &f->circuit), PC_OK);
    f->pixels = pc_hr_data(n, V, C, 0.0, NULL);
    pc_cli_write_idx(pc_cli_path("d.idx"), f->pixels, (uint32_t)n, (uint32_t)side,
                     (uint32_t)side, 0);
    pc_cli_write_npy(pc_cli_path("d.npy"), f->pixels, n, V);
}

void pc_cli_fixture_free(pc_cli_fixture *f) {
    pc_circuit_free(f->circuit);
    pc_hclt_free(f->model);
    free(f->pixels);
}
