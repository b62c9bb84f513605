/* The tools' shared readers and masks (tools/common): .npy headers parsed and refused, the
 * streaming .npy reader's checks (truncated, extra data, dtype, order, shape, a FIFO), the
 * rows reader over both formats, and every --missing SPEC against masks written out here by
 * hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "hclt_random.h"
#include "mask.h"
#include "npy.h"
#include "pc/rng.h"
#include "rows.h"
#include "tool_error.h"

static char *tmpdir;

static const char *path_of(const char *name) { return pc_hr_path(tmpdir, name); }

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

/* A .npy file of the given header dict (version 1.0, unpadded) and payload bytes. */
static void write_npy(const char *path, const char *dict, const void *payload, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    const size_t len = strlen(dict);
    const uint8_t head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)len,
                              (uint8_t)(len >> 8)};
    fwrite(head, 1, 10, f);
    fwrite(dict, 1, len, f);
    if (n) fwrite(payload, 1, n, f);
    fclose(f);
}

static void expect_error(pc_status got, const char *frag) {
    assert_int_not_equal(got, PC_OK);
    if (!strstr(pc_tool_last_error(), frag))
        fail_msg("message '%s' lacks '%s'", pc_tool_last_error(), frag);
}

static void test_parse_accepts(void **state) {
    (void)state;
    static const char *const dicts[] = {
        "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 4), }",
        "{\"shape\":(3,4),\"descr\":\"|u1\",\"fortran_order\":False}",
        "  { 'fortran_order' : False , 'shape' : ( 3 , 4 , ) , 'descr' : '|u1' }  \n",
        "{'descr': '|u1', 'fortran_order': False, 'shape': (3L, 4L), }",
    };
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        pc_tool_npy_header h;
        pc_status st = pc_tool_npy_parse(dicts[i], strlen(dicts[i]), "x.npy", &h);
        if (st != PC_OK) fail_msg("%s: %s", dicts[i], pc_tool_last_error());
        assert_string_equal(h.descr, "|u1");
        assert_int_equal(h.fortran_order, 0);
        assert_int_equal(h.ndim, 2);
        assert_int_equal(h.shape[0], 3);
        assert_int_equal(h.shape[1], 4);
    }
    pc_tool_npy_header h;
    const char *one = "{'descr': '<f4', 'fortran_order': True, 'shape': (7,), }";
    assert_int_equal(pc_tool_npy_parse(one, strlen(one), "x.npy", &h), PC_OK);
    assert_int_equal(h.ndim, 1);
    assert_int_equal(h.fortran_order, 1);
    const char *top = "{'descr': '|u1', 'fortran_order': False, 'shape': (4611686018427387904,)}";
    assert_int_equal(pc_tool_npy_parse(top, strlen(top), "x.npy", &h), PC_OK);
    assert_true(h.shape[0] == (int64_t)1 << 62);
    const char *none = "{'descr': '|u1', 'fortran_order': False, 'shape': (), }";
    assert_int_equal(pc_tool_npy_parse(none, strlen(none), "x.npy", &h), PC_OK);
    assert_int_equal(h.ndim, 0);
}

static void test_parse_refuses(void **state) {
    (void)state;
    static const struct {
        const char *dict, *frag;
    } cases[] = {
        {"", "expected '{'"},
        {"{'descr': '|u1', 'fortran_order': False}", "lacks 'shape'"},
        {"{'descr': '|u1', 'shape': (1, 2)}", "lacks 'fortran_order'"},
        {"{'descr': '|u1', 'descr': '|u1'}", "a key given twice"},
        {"{'dtype': '|u1'}", "unknown key"},
        {"{'descr': '|u1' 'shape': (1, 2)}", "expected ',' or '}'"},
        {"{'descr': |u1}", "expected a quoted string"},
        /* A key that is not a whole string: refused before it is compared with the names. */
        {"{'descr", "unterminated string"},
        {"{'fortran_order_and_then_some_more_text': False}", "unexpected string"},
        {"{'shape' (1, 2)}", "expected ':'"},
        {"{'descr': '|u1", "unterminated string"},
        {"{'descr': 'a\\'b'}", "unexpected string"},
        {"{'descr': 'a very long dtype name'}", "unexpected string"},
        {"{'fortran_order': Maybe}", "expected True or False"},
        {"{'shape': [1, 2]}", "expected '('"},
        {"{'shape': (1 2)}", "expected ',' or ')'"},
        {"{'shape': (-1, 2)}", "expected a size"},
        {"{'shape': (1, 99999999999999999999)}", "a size above 2^62"},
        {"{'shape': (4611686018427387905,)}", "a size above 2^62"},
        {"{'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)}",
         "more than 32 dimensions"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (1, 2)} x", "text after the dict"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pc_tool_npy_header h;
        expect_error(pc_tool_npy_parse(cases[i].dict, strlen(cases[i].dict), "x.npy", &h),
                     cases[i].frag);
        assert_non_null(strstr(pc_tool_last_error(), "x.npy"));
    }
}

/* The header pc_tool_npy_start writes is the one NumPy writes, and reads back. */
static void test_start_round_trip(void **state) {
    (void)state;
    char buf[256];
    const int64_t shape[3] = {5, 784, 256};
    size_t len = pc_tool_npy_start(buf, sizeof buf, "<f4", shape, 3);
    assert_int_equal(len % 64, 0);
    assert_memory_equal(buf, "\x93NUMPY\x01\x00", 8);
    assert_int_equal((size_t)(uint8_t)buf[8] | (size_t)(uint8_t)buf[9] << 8, len - 10);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 784, 256), }";
    assert_memory_equal(buf + 10, dict, strlen(dict));
    for (size_t i = 10 + strlen(dict); i < len - 1; i++) assert_int_equal(buf[i], ' ');
    assert_int_equal(buf[len - 1], '\n');
    const int64_t one[1] = {9};
    len = pc_tool_npy_start(buf, sizeof buf, "|u1", one, 1);
    assert_non_null(strstr(buf + 10, "'shape': (9,), }"));
    assert_int_equal(pc_tool_npy_start(buf, 40, "|u1", shape, 2), 0); /* does not fit */

    /* Written, then read by the reader. */
    uint8_t rows[5 * 6];
    for (int i = 0; i < 30; i++) rows[i] = (uint8_t)(7 * i);
    const int64_t s2[2] = {5, 6};
    len = pc_tool_npy_start(buf, sizeof buf, "|u1", s2, 2);
    FILE *f = fopen(path_of("rt.npy"), "wb");
    fwrite(buf, 1, len, f);
    fwrite(rows, 1, 30, f);
    fclose(f);
    pc_tool_npy_reader *r = NULL;
    assert_int_equal(pc_tool_npy_open(path_of("rt.npy"), &r), PC_OK);
    assert_int_equal(pc_tool_npy_count(r), 5);
    assert_int_equal(pc_tool_npy_width(r), 6);
    uint8_t got[5 * 6];
    int64_t n = 0;
    memset(got, 0xff, sizeof got);
    assert_int_equal(pc_tool_npy_read(r, got, 2, &n), PC_OK);
    assert_int_equal(n, 2);
    assert_int_equal(pc_tool_npy_read(r, got + 12, 9, &n), PC_OK);
    assert_int_equal(n, 3);
    assert_memory_equal(got, rows, 30);
    assert_int_equal(pc_tool_npy_read(r, got, 9, &n), PC_OK);
    assert_int_equal(n, 0);
    pc_tool_npy_close(r);
}

static void test_reader_refuses(void **state) {
    (void)state;
    uint8_t payload[96] = {0};
#define OK_DICT "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 2, 3), }"
    static const struct {
        const char *dict;
        size_t bytes;
        const char *frag;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 6), }", 96,
         "dtype '<f4' is not uint8"},
        {"{'descr': '|i1', 'fortran_order': False, 'shape': (4, 6), }", 24, "dtype '|i1'"},
        {"{'descr': '|u1', 'fortran_order': True, 'shape': (4, 6), }", 24, "Fortran order"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (24,), }", 24, "1 dimension;"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (), }", 1, "0 dimensions"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (4, 0, 3), }", 0, "row width 0"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (1, 65536, 65536), }", 0,
         "row width 2^31 or more"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", 0,
         "more than 2^63 bytes"},
        {OK_DICT, 23,
         "truncated: the header claims 4 rows of 6 bytes (24 bytes), the file holds 23"},
        {OK_DICT, 25, "more data than the header's 24 bytes (25)"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (4, 6)", 0, "expected ',' or '}'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_npy(path_of("bad.npy"), cases[i].dict, payload, cases[i].bytes);
        pc_tool_npy_reader *r = (pc_tool_npy_reader *)&r; /* poisoned: open must clear it */
        expect_error(pc_tool_npy_open(path_of("bad.npy"), &r), cases[i].frag);
        assert_null(r);
    }
    /* Magic, version, header length and a header cut short. */
    static const struct {
        const char *bytes;
        size_t len;
        const char *frag;
    } starts[] = {
        {"\x93NUMPZ\x01\x00\x00\x00", 10, "not a .npy file"},
        {"\x93NUMPY\x04\x00\x00\x00", 10, "version 4.0"},
        {"\x93NUMPY\x02\x00\x00\x00\x20\x00", 12, "header of 2097152 bytes"}, /* 2 MiB */
        {"\x93NUMPY\x01\x00\x40\x00{'descr'", 17, "truncated .npy header"},
        {"\x93NU", 3, "truncated .npy header"},
    };
    pc_tool_npy_reader *r = NULL;
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++) {
        FILE *f = fopen(path_of("bad.npy"), "wb");
        fwrite(starts[i].bytes, 1, starts[i].len, f);
        fclose(f);
        expect_error(pc_tool_npy_open(path_of("bad.npy"), &r), starts[i].frag);
    }
    expect_error(pc_tool_npy_open(path_of("none.npy"), &r), "cannot open");
    remove(path_of("bad.npy"));
#undef OK_DICT
}

/* A stream (no length to check at open): a short one fails in the read that reaches its end,
 * naming the row, and one with extra bytes fails after its last row. */
typedef struct feed {
    const char *path;
    size_t bytes;
} feed;

static void *feed_fifo(void *arg) {
    const feed *fd = arg;
    FILE *f = fopen(fd->path, "wb");
    const char *dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (10, 3), }";
    const size_t len = strlen(dict);
    const uint8_t head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)len, 0};
    fwrite(head, 1, 10, f);
    fwrite(dict, 1, len, f);
    for (size_t i = 0; i < fd->bytes; i++) fputc((int)(i % 2), f);
    fclose(f);
    return NULL;
}

static pc_status read_fifo(size_t bytes, int64_t *rows) {
    feed fd = {path_of("rows.npy"), bytes};
    assert_int_equal(mkfifo(fd.path, 0600), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, feed_fifo, &fd), 0);
    pc_tool_rows *r = NULL;
    pc_status st = pc_tool_rows_open(fd.path, &r);
    assert_int_equal(st, PC_OK);
    assert_int_equal(pc_tool_rows_count(r), 10);
    assert_int_equal(pc_tool_rows_width(r), 3);
    uint8_t buf[4 * 3];
    *rows = 0;
    for (int64_t got = 1; st == PC_OK && got > 0; *rows += got)
        st = pc_tool_rows_read(r, buf, 4, &got);
    pc_tool_rows_close(r);
    pthread_join(t, NULL);
    remove(path_of("rows.npy"));
    return st;
}

static void test_reader_stream(void **state) {
    (void)state;
    int64_t rows = 0;
    assert_int_equal(read_fifo(30, &rows), PC_OK);
    assert_int_equal(rows, 10);
    expect_error(read_fifo(25, &rows), "the file ends in row 8");
    expect_error(read_fifo(31, &rows), "more data than the header's 10 rows");
}

/* The rows reader: an IDX file (plain and gzip) and a .npy file of the same rows agree. */
static void test_rows_both_formats(void **state) {
    (void)state;
    enum { N = 9, W = 16 };
    uint8_t *rows = pc_hr_data(N, W, 256, 0.0, NULL);
    const uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0, N, 0, 0, 0, 4, 0, 0, 0, 4};
    for (int gz = 0; gz < 2; gz++) {
        gzFile f = gzopen(path_of(gz ? "r.idx.gz" : "r.idx"), gz ? "wb" : "wbT");
        gzwrite(f, head, 16);
        gzwrite(f, rows, N * W);
        gzclose(f);
    }
    char buf[128];
    const int64_t shape[3] = {N, 4, 4};
    size_t len = pc_tool_npy_start(buf, sizeof buf, "|u1", shape, 3);
    FILE *f = fopen(path_of("r.npy"), "wb");
    fwrite(buf, 1, len, f);
    fwrite(rows, 1, N * W, f);
    fclose(f);
    const char *names[] = {"r.idx", "r.idx.gz", "r.npy"};
    for (int i = 0; i < 3; i++) {
        pc_tool_rows *r = NULL;
        assert_int_equal(pc_tool_rows_open(path_of(names[i]), &r), PC_OK);
        assert_int_equal(pc_tool_rows_count(r), N);
        assert_int_equal(pc_tool_rows_width(r), W);
        uint8_t got[N * W];
        int64_t n = 0;
        assert_int_equal(pc_tool_rows_read(r, got, 5, &n), PC_OK);
        assert_int_equal(pc_tool_rows_read(r, got + 5 * W, 5, &n), PC_OK);
        assert_int_equal(n, 4);
        assert_memory_equal(got, rows, N * W);
        pc_tool_rows_close(r);
    }
    pc_tool_rows *r = NULL;
    expect_error(pc_tool_rows_open(path_of("r.npy.gz"), &r), "r.npy.gz");
    assert_int_equal(pc_tool_is_npy("a.npy"), 1);
    assert_int_equal(pc_tool_is_npy("a.npy.gz"), 0);
    assert_int_equal(pc_tool_is_npy(".np"), 0);
    free(rows);
}

/* Skipping rows (a process's own part of a file) lands where reading them would: every skip
 * of an IDX file (plain and gzip) and a .npy file, past the end too; a gzip file that ends
 * within a skip fails naming the row, as a read does. */
static void test_rows_skip(void **state) {
    (void)state;
    enum { N = 9, W = 16 };
    uint8_t *rows = pc_hr_data(N, W, 256, 0.0, NULL);
    const uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0, N, 0, 0, 0, 4, 0, 0, 0, 4};
    for (int gz = 0; gz < 3; gz++) { /* plain, gzip, gzip cut after 5 rows */
        static const char *const files[] = {"s.idx", "s.idx.gz", "cut.idx.gz"};
        gzFile f = gzopen(path_of(files[gz]), gz ? "wb" : "wbT");
        gzwrite(f, head, 16);
        gzwrite(f, rows, gz == 2 ? 5 * W : N * W);
        gzclose(f);
    }
    char buf[128];
    const int64_t shape[2] = {N, W};
    FILE *f = fopen(path_of("s.npy"), "wb");
    fwrite(buf, 1, pc_tool_npy_start(buf, sizeof buf, "|u1", shape, 2), f);
    fwrite(rows, 1, N * W, f);
    fclose(f);
    const char *names[] = {"s.idx", "s.idx.gz", "s.npy"};
    for (int i = 0; i < 3; i++)
        for (int64_t skip = 0; skip <= N + 2; skip++) {
            pc_tool_rows *r = NULL;
            assert_int_equal(pc_tool_rows_open(path_of(names[i]), &r), PC_OK);
            assert_int_equal(pc_tool_rows_skip(r, skip), PC_OK);
            uint8_t got[N * W];
            int64_t n = -1;
            assert_int_equal(pc_tool_rows_read(r, got, N, &n), PC_OK);
            assert_int_equal(n, skip < N ? N - skip : 0);
            if (n) assert_memory_equal(got, rows + skip * W, (size_t)(n * W));
            pc_tool_rows_close(r);
        }
    for (int i = 0; i < 3; i++) { /* a negative count is refused by every reader */
        pc_tool_rows *r = NULL;
        assert_int_equal(pc_tool_rows_open(path_of(names[i]), &r), PC_OK);
        assert_int_equal(pc_tool_rows_skip(r, -1), PC_ERR_ARG);
        pc_tool_rows_close(r);
    }
    pc_tool_rows *r = NULL;
    assert_int_equal(pc_tool_rows_open(path_of("cut.idx.gz"), &r), PC_OK);
    assert_int_equal(pc_tool_rows_skip(r, 3), PC_OK);
    expect_error(pc_tool_rows_skip(r, 4), "the file ends in row 5");
    pc_tool_rows_close(r);
    free(rows);
}

/* The masks of `rows` rows made in batches of `batch`. */
static uint8_t *masks_of(const char *spec_text, int32_t width, int64_t count, int64_t rows,
                         int64_t batch, uint64_t seed) {
    pc_tool_mask_spec spec;
    assert_int_equal(pc_tool_mask_parse(spec_text, &spec), PC_OK);
    pc_tool_mask *m = NULL;
    pc_status st = pc_tool_mask_open(&spec, width, count, seed, &m);
    if (st != PC_OK) fail_msg("%s: %s", spec_text, pc_tool_last_error());
    uint8_t *out = malloc((size_t)(rows * width));
    memset(out, 0xee, (size_t)(rows * width));
    for (int64_t i = 0; i < rows; i += batch)
        assert_int_equal(pc_tool_mask_next(m, rows - i < batch ? rows - i : batch,
                                           out + i * width),
                         PC_OK);
    pc_tool_mask_close(m);
    return out;
}

/* Halves and the centre of 4 x 4 and 5 x 5 images, drawn row by row ('x' = missing). */
static void test_mask_regions(void **state) {
    (void)state;
    static const struct {
        const char *spec;
        int side;
        const char *picture;
    } cases[] = {
        {"left", 4, "xx.. xx.. xx.. xx.."},
        {"right", 4, "..xx ..xx ..xx ..xx"},
        {"top", 4, "xxxx xxxx .... ...."},
        {"bottom", 4, ".... .... xxxx xxxx"},
        {"center", 4, ".... .xx. .xx. ...."},
        {"left", 5, "xx... xx... xx... xx... xx..."},
        {"right", 5, "...xx ...xx ...xx ...xx ...xx"},
        {"top", 5, "xxxxx xxxxx ..... ..... ....."},
        {"bottom", 5, "..... ..... ..... xxxxx xxxxx"},
        {"center", 5, "..... .xx.. .xx.. ..... ....."},
        {"left", 1, "."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int V = cases[i].side * cases[i].side;
        uint8_t *m = masks_of(cases[i].spec, V, 3, 3, 2, 0);
        for (int row = 0; row < 3; row++) {
            int v = 0;
            for (const char *p = cases[i].picture; *p; p++) {
                if (*p == ' ') continue;
                if (m[row * V + v] != (*p == 'x'))
                    fail_msg("%s on %dx%d: entry %d is %d", cases[i].spec, cases[i].side,
                             cases[i].side, v, m[row * V + v]);
                v++;
            }
            assert_int_equal(v, V);
        }
        free(m);
    }
    pc_tool_mask_spec spec;
    pc_tool_mask *m = NULL;
    assert_int_equal(pc_tool_mask_parse("top", &spec), PC_OK);
    expect_error(pc_tool_mask_open(&spec, 12, 3, 0, &m), "--missing top needs square images, "
                                                         "but rows have 12 values");
    assert_null(m);
    assert_int_equal(pc_tool_square_side(784), 28);
    assert_int_equal(pc_tool_square_side(783), 0);
    assert_int_equal(pc_tool_square_side(0), 0);
    assert_int_equal(pc_tool_square_side((int64_t)46340 * 46340), 46340);
    assert_int_equal(pc_tool_square_side((int64_t)46340 * 46340 + 1), 0);
}

/* random:P: the fraction is P, the same seed gives the same masks whatever the batches, other
 * seeds and rows differ, and the stream is not the samplers' stream of (seed, row). */
static void test_mask_random(void **state) {
    (void)state;
    enum { W = 100, ROWS = 400 };
    const uint64_t seed = pc_hr_seed();
    uint8_t *a = masks_of("random:0.3", W, ROWS, ROWS, 7, seed);
    uint8_t *b = masks_of("random:0.3", W, ROWS, ROWS, ROWS, seed);
    uint8_t *c = masks_of("random:0.3", W, ROWS, ROWS, 64, seed + 1);
    assert_memory_equal(a, b, W * ROWS);
    assert_memory_not_equal(a, c, W * ROWS);
    assert_memory_not_equal(a, a + W, W);
    int64_t missing = 0;
    for (int i = 0; i < W * ROWS; i++) {
        assert_true(a[i] <= 1);
        missing += a[i];
    }
    /* 40,000 draws at 0.3: the standard deviation of the count is 92. */
    assert_true(missing > 12000 - 600 && missing < 12000 + 600);
    /* The samplers' stream of (seed, 0) would give row 0 from its first draws. */
    pc_rng r;
    pc_rng_init(&r, seed);
    pc_rng_init(&r, pc_rng_u64(&r));
    pc_rng_init(&r, pc_rng_u64(&r));
    int same = 1;
    for (int v = 0; v < W; v++) same &= a[v] == (pc_rng_unit(&r) < 0.3);
    assert_false(same);
    free(a);
    free(b);
    free(c);
    uint8_t *none = masks_of("random:0", W, 3, 3, 3, seed);
    uint8_t *all = masks_of("random:1", W, 3, 3, 3, seed);
    for (int i = 0; i < 3 * W; i++) assert_true(none[i] == 0 && all[i] == 1);
    free(none);
    free(all);
    static const char *const bad[] = {"random:", "random:1.5", "random:-0.1", "random:nan",
                                      "random:0.5x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pc_tool_mask_spec spec;
        expect_error(pc_tool_mask_parse(bad[i], &spec), "needs a probability P in [0, 1]");
    }
}

/* The masks of rows [lo, hi) after skipping lo rows: those rows' masks in a run over them all
 * (random:P and a file; a region is the same for every row). */
static void test_mask_skip(void **state) {
    (void)state;
    enum { W = 6, ROWS = 11 };
    uint8_t rows[ROWS * W];
    for (int i = 0; i < ROWS * W; i++) rows[i] = (uint8_t)(pc_hr_unit() < 0.5);
    char head[128];
    const int64_t shape[2] = {ROWS, W};
    FILE *f = fopen(path_of("ms.npy"), "wb");
    fwrite(head, 1, pc_tool_npy_start(head, sizeof head, "|u1", shape, 2), f);
    fwrite(rows, 1, sizeof rows, f);
    fclose(f);
    const char *specs[] = {"random:0.4", path_of("ms.npy")};
    for (int k = 0; k < 2; k++) {
        uint8_t *all = masks_of(specs[k], W, ROWS, ROWS, ROWS, 7);
        for (int64_t lo = 0; lo < ROWS; lo += 3) {
            pc_tool_mask_spec spec;
            assert_int_equal(pc_tool_mask_parse(specs[k], &spec), PC_OK);
            pc_tool_mask *m = NULL;
            assert_int_equal(pc_tool_mask_open(&spec, W, ROWS, 7, &m), PC_OK);
            assert_int_equal(pc_tool_mask_skip(m, lo), PC_OK);
            uint8_t got[ROWS * W];
            assert_int_equal(pc_tool_mask_next(m, ROWS - lo, got), PC_OK);
            assert_memory_equal(got, all + lo * W, (size_t)((ROWS - lo) * W));
            pc_tool_mask_close(m);
        }
        free(all);
    }
}

/* A mask file: a row per data row, or one row for all; other shapes are refused. */
static void test_mask_file(void **state) {
    (void)state;
    enum { W = 6, ROWS = 5 };
    uint8_t rows[ROWS * W];
    for (int i = 0; i < ROWS * W; i++) rows[i] = (uint8_t)(i % 3 == 0 ? 0 : i);
    char head[128];
    const int64_t shape[2] = {ROWS, W}, one[2] = {1, W}, wide[2] = {ROWS, W + 1};
    FILE *f = fopen(path_of("m.npy"), "wb");
    fwrite(head, 1, pc_tool_npy_start(head, sizeof head, "|u1", shape, 2), f);
    fwrite(rows, 1, sizeof rows, f);
    fclose(f);
    uint8_t *m = masks_of(path_of("m.npy"), W, ROWS, ROWS, 2, 0);
    assert_memory_equal(m, rows, sizeof rows);
    free(m);
    m = masks_of(path_of("m.npy"), W, ROWS, 3, 2, 0); /* --limit 3: only what is used */
    assert_memory_equal(m, rows, 3 * W);
    free(m);
    f = fopen(path_of("one.npy"), "wb");
    fwrite(head, 1, pc_tool_npy_start(head, sizeof head, "|u1", one, 2), f);
    fwrite(rows + W, 1, W, f);
    fclose(f);
    m = masks_of(path_of("one.npy"), W, ROWS, ROWS, 3, 0);
    for (int r = 0; r < ROWS; r++) assert_memory_equal(m + r * W, rows + W, W);
    free(m);
    f = fopen(path_of("wide.npy"), "wb");
    fwrite(head, 1, pc_tool_npy_start(head, sizeof head, "|u1", wide, 2), f);
    fwrite(rows, 1, sizeof rows, f);
    fwrite(rows, 1, ROWS, f);
    fclose(f);
    pc_tool_mask_spec spec;
    pc_tool_mask *mask = NULL;
    assert_int_equal(pc_tool_mask_parse(path_of("wide.npy"), &spec), PC_OK);
    assert_int_equal(spec.kind, PC_TOOL_MASK_FILE);
    expect_error(pc_tool_mask_open(&spec, W, ROWS, 0, &mask), "the mask is 5 rows of 7 values; "
                                                              "the data is 5 rows of 6");
    assert_int_equal(pc_tool_mask_parse(path_of("m.npy"), &spec), PC_OK);
    expect_error(pc_tool_mask_open(&spec, W, ROWS + 1, 0, &mask), "the mask is 5 rows of 6");
    assert_int_equal(pc_tool_mask_parse(path_of("nothing"), &spec), PC_OK);
    expect_error(pc_tool_mask_open(&spec, W, ROWS, 0, &mask), "--missing takes left, right");
    assert_null(mask);
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepts),     cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_start_round_trip),  cmocka_unit_test(test_reader_refuses),
        cmocka_unit_test(test_reader_stream),     cmocka_unit_test(test_rows_both_formats),
        cmocka_unit_test(test_mask_regions),      cmocka_unit_test(test_mask_random),
        cmocka_unit_test(test_mask_file),         cmocka_unit_test(test_rows_skip),
        cmocka_unit_test(test_mask_skip),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
