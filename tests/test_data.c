/* IDX reader (plain and gzip), whole and streamed, labels, and the MNIST finder: good files
 * read back exactly in any batch sizes, every damaged file gives an error naming it, and a
 * header's claims are checked against the file before anything is allocated. */
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
#include <zlib.h>

#include "hclt_random.h"
#include "memory_limit.h"
#include "pc/data.h"
#include "testutil.h"

#include "mnist_find.h"

static char *tmpdir;

static int setup(void **state) {
    (void)state;
    tmpdir = pc_hr_tempdir();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pc_hr_rmdir(tmpdir);
    return 0;
}

static const char *path_of(const char *name) { return pc_hr_path(tmpdir, name); }

static void clear_files(void) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -f '%s'/*", tmpdir);
    assert_int_equal(system(cmd), 0);
}

/* An IDX file in memory: header (type byte, dims) and payload. */
static uint8_t *idx_bytes(uint8_t type, int ndims, const uint32_t *dims, const uint8_t *payload,
                          size_t payload_len, size_t *len) {
    *len = 4 + 4 * (size_t)ndims + payload_len;
    uint8_t *b = malloc(*len);
    assert_non_null(b);
    b[0] = 0, b[1] = 0, b[2] = type, b[3] = (uint8_t)ndims;
    for (int i = 0; i < ndims; i++)
        for (int j = 0; j < 4; j++) b[4 + 4 * i + j] = (uint8_t)(dims[i] >> (24 - 8 * j));
    if (payload_len) memcpy(b + 4 + 4 * ndims, payload, payload_len);
    return b;
}

static void write_file(const char *path, const uint8_t *b, size_t len, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, b, (unsigned)len), (int)len);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, len, f), len);
        fclose(f);
    }
}

static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void expect_error(const char *path, pc_status status, const char *frag) {
    pc_data *d = (pc_data *)&d;
    pc_status st = pc_data_load_idx(path, &d);
    const char *msg = pc_last_error();
    if (st != status || d != NULL || !strstr(msg, path) || (frag && !strstr(msg, frag)))
        fail_msg("%s: status %d (want %d), message '%s' (want '%s')", path, st, status, msg,
                 frag ? frag : "");
}

static void test_read_back(void **state) {
    (void)state;
    for (int rep = 0; rep < 8; rep++) {
        int ndims = 2 + rep % 3;
        uint32_t dims[4] = {(uint32_t)pc_hr_int(0, 300), (uint32_t)pc_hr_int(1, 29),
                            (uint32_t)pc_hr_int(1, 29), 3};
        size_t width = 1;
        for (int i = 1; i < ndims; i++) width *= dims[i];
        size_t n = dims[0] * width;
        uint8_t *payload = malloc(n + 1);
        assert_non_null(payload);
        /* MNIST-like: mostly 0, some full range, so gzip really compresses. */
        for (size_t i = 0; i < n; i++)
            payload[i] = pc_hr_unit() < 0.7 ? 0 : (uint8_t)pc_hr_int(0, 255);
        size_t len;
        uint8_t *b = idx_bytes(0x08, ndims, dims, payload, n, &len);
        for (int gz = 0; gz <= 1; gz++) {
            const char *p = path_of(gz ? "img.gz" : "img.idx");
            write_file(p, b, len, gz);
            pc_data *d = NULL;
            if (pc_data_load_idx(p, &d) != PC_OK) fail_msg("%s", pc_last_error());
            assert_int_equal(d->count, dims[0]);
            assert_int_equal(d->width, (int32_t)width);
            assert_null(d->missing);
            if (n) assert_memory_equal(d->values, payload, n);
            pc_data_free(d);
            remove(p);
        }
        free(b);
        free(payload);
    }
}

static void test_labels(void **state) {
    (void)state;
    uint32_t dims[1] = {37};
    uint8_t lab[37];
    for (int i = 0; i < 37; i++) lab[i] = (uint8_t)(i % 10);
    size_t len;
    uint8_t *b = idx_bytes(0x08, 1, dims, lab, 37, &len);
    write_file(path_of("lab.gz"), b, len, 1);
    uint8_t *got = NULL;
    int64_t count = 0;
    assert_int_equal(pc_data_load_idx_labels(path_of("lab.gz"), &got, &count), PC_OK);
    assert_int_equal(count, 37);
    assert_memory_equal(got, lab, 37);
    free(got);
    /* A label file is not an image file (one dimension), and vice versa. */
    expect_error(path_of("lab.gz"), PC_ERR_DATA, "1 dimensions");
    uint32_t idims[3] = {2, 2, 2};
    uint8_t px[8] = {0};
    free(b);
    b = idx_bytes(0x08, 3, idims, px, 8, &len);
    write_file(path_of("img"), b, len, 0);
    assert_int_equal(pc_data_load_idx_labels(path_of("img"), &got, &count), PC_ERR_DATA);
    assert_non_null(strstr(pc_last_error(), path_of("img")));
    free(b);
    remove(path_of("lab.gz"));
    remove(path_of("img"));
}

static void test_damaged_files(void **state) {
    (void)state;
    expect_error(path_of("none.gz"), PC_ERR_IO, "No such file");
    uint32_t dims[3] = {50, 28, 28};
    size_t n = 50 * 28 * 28, len;
    uint8_t *payload = malloc(n);
    assert_non_null(payload);
    for (size_t i = 0; i < n; i++) payload[i] = (uint8_t)(i % 7 == 0 ? i % 251 : 0);
    uint8_t *b = idx_bytes(0x08, 3, dims, payload, n, &len);
    const char *p = path_of("bad");

    write_file(p, b, 3, 0);
    expect_error(p, PC_ERR_DATA, "too short");
    b[0] = 0x1f;
    write_file(p, b, len, 0);
    expect_error(p, PC_ERR_DATA, "not an IDX file");
    b[0] = 0;
    b[2] = 0x0D; /* float elements */
    write_file(p, b, len, 0);
    expect_error(p, PC_ERR_DATA, "not uint8");
    b[2] = 0x08;
    write_file(p, b, 10, 0);
    expect_error(p, PC_ERR_DATA, "truncated IDX header");
    for (int gz = 0; gz <= 1; gz++) {
        write_file(p, b, len - 100, gz);
        expect_error(p, PC_ERR_DATA, "truncated");
        uint8_t *longer = malloc(len + 1);
        assert_non_null(longer);
        memcpy(longer, b, len);
        longer[len] = 0;
        write_file(p, longer, len + 1, gz);
        expect_error(p, PC_ERR_DATA, "more data than");
        free(longer);
    }
    uint32_t zero_dims[3] = {5, 0, 28};
    uint8_t *z = idx_bytes(0x08, 3, zero_dims, NULL, 0, &len);
    write_file(p, z, len, 0);
    expect_error(p, PC_ERR_DATA, "width 0");
    free(z);

    /* A gzip file cut short, and one with flipped bytes inside the compressed stream. */
    len = 4 + 12 + n;
    write_file(p, b, len, 1);
    size_t glen;
    uint8_t *g = read_file(p, &glen);
    write_file(p, g, glen / 2, 0);
    expect_error(p, PC_ERR_DATA, NULL);
    for (int rep = 0; rep < 5; rep++) {
        uint8_t *c = malloc(glen);
        assert_non_null(c);
        memcpy(c, g, glen);
        size_t at = 20 + (size_t)pc_hr_int(0, (int64_t)glen - 30);
        c[at] ^= (uint8_t)pc_hr_int(1, 255);
        write_file(p, c, glen, 0);
        expect_error(p, PC_ERR_DATA, NULL);
        free(c);
    }
    /* The gzip trailer's CRC: flip a bit of it. */
    g[glen - 6] ^= 0x10;
    write_file(p, g, glen, 0);
    expect_error(p, PC_ERR_DATA, NULL);
    free(g);
    free(b);
    free(payload);
    remove(p);
}

/* The streaming reader returns the same rows as the whole-file loader in any batch sizes,
 * then 0 rows at the end. */
static void test_stream_batches(void **state) {
    (void)state;
    uint32_t dims[3] = {(uint32_t)pc_hr_int(1, 500), 3, 5};
    const size_t width = 15, n = dims[0] * width;
    uint8_t *payload = malloc(n);
    assert_non_null(payload);
    for (size_t i = 0; i < n; i++) payload[i] = (uint8_t)pc_hr_int(0, 255);
    size_t len;
    uint8_t *b = idx_bytes(0x08, 3, dims, payload, n, &len);
    for (int gz = 0; gz <= 1; gz++) {
        const char *p = path_of(gz ? "s.gz" : "s.idx");
        write_file(p, b, len, gz);
        pc_data_reader *r = NULL;
        assert_int_equal(pc_data_reader_open(p, &r), PC_OK);
        assert_int_equal(pc_data_reader_count(r), dims[0]);
        assert_int_equal(pc_data_reader_width(r), (int32_t)width);
        uint8_t *got = malloc(n + 64 * width);
        assert_non_null(got);
        int64_t rows = 0, nb = 0;
        do {
            int64_t want = pc_hr_int(0, 64);
            pc_test_poison_bytes(got + rows * width, (size_t)want * width);
            assert_int_equal(pc_data_reader_read(r, got + rows * width, want, &nb), PC_OK);
            assert_true(nb <= want);
            if (rows + want <= (int64_t)dims[0]) assert_int_equal(nb, want);
            rows += nb;
        } while (rows < (int64_t)dims[0]);
        assert_int_equal(rows, dims[0]);
        assert_memory_equal(got, payload, n);
        assert_int_equal(pc_data_reader_read(r, got, 10, &nb), PC_OK);
        assert_int_equal(nb, 0);
        pc_data_reader_close(r);
        free(got);
        remove(p);
    }
    free(b);
    free(payload);
}

/* A truncated file fails in the read that reaches its end, naming the row; the rows before it
 * are delivered. */
static void test_stream_truncated(void **state) {
    (void)state;
    uint32_t dims[2] = {100, 10};
    uint8_t payload[1000] = {0};
    size_t len;
    uint8_t *b = idx_bytes(0x08, 2, dims, payload, sizeof payload, &len);
    write_file(path_of("cut.gz"), b, len - 255, 1); /* 74.5 rows */
    pc_data_reader *r = NULL;
    assert_int_equal(pc_data_reader_open(path_of("cut.gz"), &r), PC_OK);
    uint8_t rows[50 * 10];
    int64_t nb = 0;
    assert_int_equal(pc_data_reader_read(r, rows, 50, &nb), PC_OK);
    assert_int_equal(nb, 50);
    assert_int_equal(pc_data_reader_read(r, rows, 50, &nb), PC_ERR_DATA);
    assert_int_equal(nb, 0);
    assert_non_null(strstr(pc_last_error(), "the file ends in row 74"));
    pc_data_reader_close(r);
    /* A skip over the end fails the same way. */
    assert_int_equal(pc_data_reader_open(path_of("cut.gz"), &r), PC_OK);
    assert_int_equal(pc_data_reader_skip(r, 60), PC_OK);
    assert_int_equal(pc_data_reader_skip(r, 30), PC_ERR_DATA);
    assert_non_null(strstr(pc_last_error(), "the file ends in row 74"));
    assert_int_equal(pc_data_reader_skip(r, -1), PC_ERR_ARG);
    assert_int_equal(pc_data_reader_skip(NULL, 1), PC_ERR_ARG);
    pc_data_reader_close(r);
    /* A plain file is checked against its length at open. */
    write_file(path_of("cut.idx"), b, len - 255, 0);
    assert_int_equal(pc_data_reader_open(path_of("cut.idx"), &r), PC_ERR_DATA);
    assert_null(r);
    assert_non_null(strstr(pc_last_error(), "the header claims 100 rows of 10 bytes"));
    free(b);
    pc_data_reader_close(NULL);
}

/* Runs fn(path) in a child limited to 256 MiB (memory_limit.h) and returns its exit status
 * (fails the test on a signal), so that a loader that believes a header's claims and
 * allocates them cannot pass by luck of lazy allocation. */
static int in_small_child(void (*fn)(const char *), const char *path) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pc_test_limit_memory((size_t)256 << 20);
        fn(path);
        exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status)) fail_msg("the reading process died of signal %d", WTERMSIG(status));
    return WEXITSTATUS(status);
}

/* Exit 0 when loading fails with a message naming the claim ("claims" or "truncated"). */
static void load_expect_claim(const char *path) {
    pc_data *d = NULL;
    if (pc_data_load_idx(path, &d) == PC_OK) exit(2);
    const char *msg = pc_last_error();
    if (!strstr(msg, path) || (!strstr(msg, "claims") && !strstr(msg, "truncated"))) {
        fprintf(stderr, "message: %s\n", msg);
        exit(3);
    }
}

static void test_claims_checked_before_allocating(void **state) {
    (void)state;
    /* 10^9 images of 3 bytes in a few bytes: plain (refused at open) and gzip (read until the
     * data ends, with a buffer that grows only as rows arrive). */
    uint32_t dims[2] = {1000000000u, 3};
    uint8_t payload[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    size_t len;
    uint8_t *b = idx_bytes(0x08, 2, dims, payload, sizeof payload, &len);
    for (int gz = 0; gz <= 1; gz++) {
        const char *p = path_of(gz ? "claim.gz" : "claim.idx");
        write_file(p, b, len, gz);
        assert_int_equal(in_small_child(load_expect_claim, p), 0);
        remove(p);
    }
    free(b);
    /* One row of 2^31 - 1 bytes in a few bytes of gzip: the buffer grows with the data, not
     * by rows (growing to a whole row first would allocate 2 GiB). */
    uint32_t one_row[2] = {1, 0x7fffffffu};
    b = idx_bytes(0x08, 2, one_row, payload, sizeof payload, &len);
    write_file(path_of("row.gz"), b, len, 1);
    assert_int_equal(in_small_child(load_expect_claim, path_of("row.gz")), 0);
    free(b);
    /* 3 10^7 MNIST-sized images (23.5 GB): more than PC_DATA_MAX_BYTES, refused by the claim. */
    uint32_t many[3] = {30000000u, 28, 28};
    b = idx_bytes(0x08, 3, many, payload, sizeof payload, &len);
    write_file(path_of("many.gz"), b, len, 1);
    expect_error(path_of("many.gz"), PC_ERR_DATA, "at most 16 GiB are read into memory");
    free(b);
    /* A row width whose product overflows int64 (three sizes of 2^32 - 1). */
    uint32_t wide[4] = {1, 0xffffffffu, 0xffffffffu, 0xffffffffu};
    b = idx_bytes(0x08, 4, wide, NULL, 0, &len);
    write_file(path_of("wide.idx"), b, len, 0);
    expect_error(path_of("wide.idx"), PC_ERR_DATA, "width more than 2^63 is out of range");
    free(b);
    /* Labels claiming 2^32 - 1 entries in a short file. */
    uint32_t labels[1] = {0xffffffffu};
    b = idx_bytes(0x08, 1, labels, payload, sizeof payload, &len);
    write_file(path_of("lab.gz"), b, len, 1);
    uint8_t *got = NULL;
    int64_t count = -1;
    assert_int_equal(pc_data_load_idx_labels(path_of("lab.gz"), &got, &count), PC_ERR_DATA);
    assert_null(got);
    assert_int_equal(count, 0);
    assert_non_null(strstr(pc_last_error(), "truncated"));
    free(b);
    clear_files();
}

static void test_find_mnist(void **state) {
    (void)state;
    char found[4096];
    write_file(path_of("t10k-images-idx3-ubyte.gz"), (const uint8_t *)"x", 1, 0);
    assert_int_equal(pc_tool_find_mnist(tmpdir, "t10k-images-idx3-ubyte.gz", found, sizeof found),
                     PC_OK);
    assert_string_equal(found, path_of("t10k-images-idx3-ubyte.gz"));
    assert_int_equal(pc_tool_find_mnist(tmpdir, "nope.gz", found, sizeof found), PC_ERR_IO);
    assert_non_null(strstr(found, path_of("nope.gz")));
    /* The default places: all of them are named when none has the file. */
    assert_int_equal(pc_tool_find_mnist(NULL, "no-such-file.gz", found, sizeof found), PC_ERR_IO);
    const char *msg = found;
    assert_non_null(strstr(msg, "datasets/mnist/no-such-file.gz"));
    assert_non_null(strstr(msg, "../shared/datasets/mnist/no-such-file.gz"));
    /* Too small a buffer is not a match. */
    assert_int_equal(pc_tool_find_mnist(tmpdir, "t10k-images-idx3-ubyte.gz", found, 8), PC_ERR_IO);
    remove(path_of("t10k-images-idx3-ubyte.gz"));
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_back),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_damaged_files),
        cmocka_unit_test(test_stream_batches),
        cmocka_unit_test(test_stream_truncated),
        cmocka_unit_test(test_claims_checked_before_allocating),
        cmocka_unit_test(test_find_mnist),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
