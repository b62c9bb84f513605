/* HCLT model files: save/load round trips (float32 and float64) and every bad input the loader
 * must reject with a message naming the file and field. Bad files are written here with the
 * HDF5 C API by a raw writer that skips validation. Sizes a file claims (products that wrap
 * int64, tables the file does not hold, data kept in other files) are refused before anything
 * is allocated; the writer refuses special targets and survives a full disk. */
#include <math.h>
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
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>

#include "hclt_random.h"
#include "pc/circuit.h"
#include "pc/hclt.h"

#include "model/hclt_internal.h"

static char *tmpdir;

static int setup(void **state) {
    (void)state;
    tmpdir = pc_hr_tempdir();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pc_hr_rmdir(tmpdir);
    return 0;
}

static const char *path_of(const char *name) { return pc_hr_path(tmpdir, name); }

/* Number of entries in the temp dir other than . and .. (leftover temporary files). */
static int dir_entries(void) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", tmpdir);
    return system(cmd) == 0 ? 0 : 1;
}

static void clear_dir(void) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -f '%s'/*", tmpdir);
    assert_int_equal(system(cmd), 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Raw writer: writes whatever the struct holds; knobs break one thing at a time.             */

typedef struct knobs {
    const char *format;  /* value of the format attribute */
    int version;
    int vlen;            /* format as a variable-length string (as h5py writes it) */
    const char *skip;    /* a dataset or attribute to leave out */
    const char *reshape; /* a dataset written with one more row */
    const char *as_int;  /* a float dataset stored as int32 */
} knobs;

static const knobs plain = {"pcinfer-hclt", 1, 0, NULL, NULL, NULL};

static void put_int_attr(hid_t f, const char *name, int value, const knobs *k) {
    if (k->skip && !strcmp(k->skip, name)) return;
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0 && H5Awrite(a, H5T_NATIVE_INT, &value) >= 0);
    H5Aclose(a), H5Sclose(sp);
}

static void put_dataset(hid_t f, const char *name, int rank, hsize_t *dims, hid_t ftype,
                        hid_t mtype, const void *data, size_t elem, const knobs *k) {
    if (k->skip && !strcmp(k->skip, name)) return;
    hsize_t d[3];
    memcpy(d, dims, (size_t)rank * sizeof *d);
    void *buf = (void *)data;
    if (k->reshape && !strcmp(k->reshape, name)) {
        size_t n = 1;
        for (int i = 0; i < rank; i++) n *= d[i];
        d[0]++;
        buf = calloc(n + (n / dims[0] > 0 ? n / dims[0] : 1), elem);
        assert_non_null(buf);
        memcpy(buf, data, n * elem);
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t sp = H5Screate_simple(rank, d, NULL);
    if (k->as_int && !strcmp(k->as_int, name)) ftype = H5T_STD_I32LE;
    hid_t ds = H5Dcreate2(f, name, ftype, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(ds >= 0);
    assert_true(H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Dclose(ds), H5Sclose(sp), H5Pclose(lcpl);
    if (buf != data) free(buf);
}

static void raw_write(const char *path, const pc_hclt *m, const knobs *k) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    if (!(k->skip && !strcmp(k->skip, "format"))) {
        hid_t sp = H5Screate(H5S_SCALAR), t = H5Tcopy(H5T_C_S1);
        if (k->vlen) {
            H5Tset_size(t, H5T_VARIABLE);
            H5Tset_cset(t, H5T_CSET_UTF8);
        } else {
            H5Tset_size(t, strlen(k->format));
            H5Tset_strpad(t, H5T_STR_NULLPAD);
        }
        hid_t a = H5Acreate2(f, "format", t, sp, H5P_DEFAULT, H5P_DEFAULT);
        const char *s = k->format;
        assert_true(H5Awrite(a, t, k->vlen ? (const void *)&s : (const void *)s) >= 0);
        H5Aclose(a), H5Tclose(t), H5Sclose(sp);
    }
    put_int_attr(f, "version", k->version, k);
    put_int_attr(f, "num_vars", m->num_vars, k);
    put_int_attr(f, "num_cats", m->num_cats, k);
    put_int_attr(f, "num_latents", m->num_latents, k);
    hsize_t v[1] = {(hsize_t)m->num_vars}, kk[1] = {(hsize_t)m->num_latents};
    hsize_t tl[3] = {(hsize_t)m->num_trans, kk[0], kk[0]}, in[3] = {v[0], kk[0], (hsize_t)m->num_cats};
    put_dataset(f, "/structure/parent", 1, v, H5T_STD_I32LE, H5T_NATIVE_INT32, m->parent, 4, k);
    put_dataset(f, "/structure/trans_index", 1, v, H5T_STD_I32LE, H5T_NATIVE_INT32,
                m->trans_index, 4, k);
    put_dataset(f, "/params/root_logw", 1, kk, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, m->root_logw, 8,
                k);
    put_dataset(f, "/params/trans_logw", 3, tl, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, m->trans_logw,
                8, k);
    put_dataset(f, "/params/input_logp", 3, in, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, m->input_logp,
                8, k);
    H5Fclose(f);
}

/* Loads `path` and expects failure with `status` and every given fragment in the message,
 * which must also name the file. */
static void expect_load_error(const char *path, pc_status status, const char *frag1,
                              const char *frag2) {
    pc_hclt *m = (pc_hclt *)&m; /* must come back NULL */
    pc_status st = pc_hclt_load(path, &m);
    const char *msg = pc_last_error();
    if (st != status || m != NULL || !strstr(msg, path) || (frag1 && !strstr(msg, frag1)) ||
        (frag2 && !strstr(msg, frag2)))
        fail_msg("load %s: status %d (want %d), message '%s' (want '%s', '%s')", path, st, status,
                 msg, frag1 ? frag1 : "", frag2 ? frag2 : "");
}

/* ------------------------------------------------------------------------------------------ */

static void check_same(const pc_hclt *a, const pc_hclt *b, double rel) {
    assert_int_equal(a->num_vars, b->num_vars);
    assert_int_equal(a->num_cats, b->num_cats);
    assert_int_equal(a->num_latents, b->num_latents);
    assert_int_equal(a->num_trans, b->num_trans);
    assert_memory_equal(a->parent, b->parent, (size_t)a->num_vars * 4);
    assert_memory_equal(a->trans_index, b->trans_index, (size_t)a->num_vars * 4);
    const int64_t K = a->num_latents;
    const struct {
        const double *x, *y;
        int64_t n;
    } arrays[] = {{a->root_logw, b->root_logw, K},
                  {a->trans_logw, b->trans_logw, a->num_trans * K * K},
                  {a->input_logp, b->input_logp, (int64_t)a->num_vars * K * a->num_cats}};
    for (int i = 0; i < 3; i++)
        for (int64_t j = 0; j < arrays[i].n; j++) {
            double x = arrays[i].x[j], y = arrays[i].y[j];
            if (x == y) continue;
            if (!(fabs(x - y) <= rel * fabs(x)))
                fail_msg("array %d element %lld: %.17g vs %.17g", i, (long long)j, x, y);
        }
}

/* Saves m in both float types, loads it back and compares: float64 exactly, float32 to its
 * rounding (2^-24 relative), -inf kept; then saves over the file (which replaces it) and
 * removes it. */
static void check_round_trip(const pc_hclt *m) {
    for (pc_hclt_float ft = PC_HCLT_F32; ft <= PC_HCLT_F64; ft++) {
        const char *p = path_of("rt.h5");
        assert_int_equal(pc_hclt_save(m, p, ft), PC_OK);
        pc_hclt *back = NULL;
        if (pc_hclt_load(p, &back) != PC_OK) fail_msg("%s", pc_last_error());
        check_same(m, back, ft == PC_HCLT_F64 ? 0.0 : 6e-8);
        pc_hclt_free(back);
        assert_int_equal(pc_hclt_save(m, p, ft), PC_OK);
        remove(p);
        assert_int_equal(dir_entries(), 0);
    }
}

static void test_round_trip(void **state) {
    (void)state;
    for (int rep = 0; rep < 6; rep++) {
        int32_t V = (int32_t)pc_hr_int(1, 60), C = rep == 5 ? 256 : (int32_t)pc_hr_int(2, 5);
        int32_t K = (int32_t)pc_hr_int(1, 9);
        pc_hclt *m = pc_hr_model(V, C, K, rep == 0 ? 1.0 : 0.3, 1); /* rep 0: T = 0 */
        check_round_trip(m);
        pc_hclt_free(m);
    }
}

/* Datasets of several chunks, the last one partial: the writer packs and deflates their chunks
 * itself (on every thread); the reader's filters must give the values back. Inputs of 300 x 16
 * x 256 (5 chunks of 64 rows in float32, 10 of 32 in float64) and transitions of K = 64. */
static void test_round_trip_many_chunks(void **state) {
    (void)state;
    const int32_t shapes[2][2] = {{16, 256}, {64, 3}}; /* K, C */
    for (int s = 0; s < 2; s++) {
        pc_hclt *m = pc_hr_model(300, shapes[s][1], shapes[s][0], 0.3, 1);
        check_round_trip(m);
        pc_hclt_free(m);
    }
}

/* h5py writes the format attribute as a variable-length UTF-8 string. */
static void test_vlen_format_accepted(void **state) {
    (void)state;
    pc_hclt *m = pc_hr_model(9, 3, 4, 0.3, 0);
    knobs k = plain;
    k.vlen = 1;
    raw_write(path_of("vlen.h5"), m, &k);
    pc_hclt *back = NULL;
    if (pc_hclt_load(path_of("vlen.h5"), &back) != PC_OK) fail_msg("%s", pc_last_error());
    check_same(m, back, 0.0);
    pc_hclt_free(back);
    pc_hclt_free(m);
    clear_dir();
}

static void test_save_refuses_invalid_and_leaves_nothing(void **state) {
    (void)state;
    pc_hclt *m = pc_hr_model(6, 2, 3, 0.0, 0);
    m->input_logp[4] = NAN;
    assert_int_equal(pc_hclt_save(m, path_of("bad.h5"), PC_HCLT_F64), PC_ERR_MODEL);
    assert_non_null(strstr(pc_last_error(), "/params/input_logp[0, 2, 0] is NaN"));
    assert_int_equal(dir_entries(), 0);
    m->input_logp[4] = log(0.5);
    m->input_logp[5] = log(0.5);
    assert_int_equal(pc_hclt_save(m, path_of("no/such/dir/m.h5"), PC_HCLT_F64), PC_ERR_IO);
    assert_non_null(strstr(pc_last_error(), "no/such/dir/m.h5"));
    assert_int_equal(dir_entries(), 0);
    pc_hclt_free(m);
}

static void test_file_errors(void **state) {
    (void)state;
    expect_load_error(path_of("missing.h5"), PC_ERR_IO, "cannot open", "No such file");
    FILE *f = fopen(path_of("text.h5"), "w");
    assert_non_null(f);
    fputs("this is not an HDF5 file\n", f);
    fclose(f);
    expect_load_error(path_of("text.h5"), PC_ERR_FORMAT, "not an HDF5 file", NULL);
    clear_dir();
}

/* Schema errors: attributes, missing datasets, shapes. */
static void test_schema_errors(void **state) {
    (void)state;
    pc_hclt *m = pc_hr_model(8, 3, 4, 0.3, 0);
    const char *p = path_of("bad.h5");
    const struct {
        knobs k;
        const char *frag1, *frag2;
    } cases[] = {
        {{"pcinfer-hmm", 1, 0, NULL, NULL, NULL}, "'format'", "pcinfer-hmm"},
        {{"pcinfer-hclt", 2, 0, NULL, NULL, NULL}, "version 2", NULL},
        {{"pcinfer-hclt", 1, 1, "format", NULL, NULL}, "'format' is missing", NULL},
        {{"pcinfer-hclt", 1, 0, "num_latents", NULL, NULL}, "'num_latents' is missing", NULL},
        {{"pcinfer-hclt", 1, 0, "/params/trans_logw", NULL, NULL}, "/params/trans_logw is missing", NULL},
        {{"pcinfer-hclt", 1, 0, "/structure/parent", NULL, NULL}, "/structure/parent is missing", NULL},
        {{"pcinfer-hclt", 1, 0, NULL, "/params/input_logp", NULL}, "/params/input_logp has shape [9, 4, 3]",
         "expected [8, 4, 3]"},
        {{"pcinfer-hclt", 1, 0, NULL, "/structure/trans_index", NULL}, "/structure/trans_index has shape",
         NULL},
        {{"pcinfer-hclt", 1, 0, NULL, "/params/root_logw", NULL}, "/params/root_logw has shape [5]", NULL},
        {{"pcinfer-hclt", 1, 0, NULL, NULL, "/params/root_logw"},
         "/params/root_logw holds integer values; expected float", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        raw_write(p, m, &cases[i].k);
        expect_load_error(p, PC_ERR_FORMAT, cases[i].frag1, cases[i].frag2);
        remove(p);
    }
    pc_hclt_free(m);
}

/* Model errors: values and tree shape. Each case breaks a fresh copy of one valid model. */
typedef void (*breaker)(pc_hclt *m);
static int32_t root_of(const pc_hclt *m) {
    for (int32_t v = 0; v < m->num_vars; v++)
        if (m->parent[v] < 0) return v;
    return -1;
}
static int32_t non_root_owner(const pc_hclt *m, int skip) {
    for (int32_t v = 0; v < m->num_vars; v++)
        if (m->trans_index[v] >= 0 && skip-- == 0) return v;
    return -1;
}
static void put_nan(pc_hclt *m) { m->trans_logw[m->num_latents + 1] = NAN; }
static void put_inf(pc_hclt *m) { m->input_logp[(2 * m->num_latents + 1) * m->num_cats] = INFINITY; }
static void unnormalise(pc_hclt *m) {
    for (int32_t c = 0; c < m->num_cats; c++)
        m->input_logp[(5 * m->num_latents + 2) * m->num_cats + c] += log(1.7);
}
static void two_roots(pc_hclt *m) {
    int32_t v = non_root_owner(m, 0);
    m->parent[v] = -1;
}
static void cycle(pc_hclt *m) {
    /* Hang the root below one of its descendants: a cycle and no root. Then make another
     * variable the root so the only fault left is the cycle. */
    int32_t r = root_of(m), v = non_root_owner(m, 0);
    int32_t leaf = -1;
    for (int32_t u = 0; u < m->num_vars && leaf < 0; u++) {
        int is_parent = 0;
        for (int32_t w = 0; w < m->num_vars; w++) is_parent |= m->parent[w] == u;
        if (!is_parent && u != v) leaf = u;
    }
    m->parent[r] = v;
    m->trans_index[r] = m->trans_index[leaf];
    m->parent[leaf] = -1;
    m->trans_index[leaf] = -1;
    /* v must be a descendant of r: the r -> v parent link plus v's path up to r forms the
     * cycle unless v's path passes through leaf, which has no children. */
}
static void trans_out_of_range(pc_hclt *m) { m->trans_index[non_root_owner(m, 0)] = m->num_trans; }
static void trans_reused(pc_hclt *m) {
    m->trans_index[non_root_owner(m, 1)] = m->trans_index[non_root_owner(m, 0)];
}
static void root_has_trans(pc_hclt *m) {
    int32_t v = non_root_owner(m, 0);
    m->trans_index[root_of(m)] = m->trans_index[v];
    m->trans_index[v] = -1;
}
static void parent_out_of_range(pc_hclt *m) { m->parent[non_root_owner(m, 0)] = m->num_vars; }

static void test_model_errors(void **state) {
    (void)state;
    const struct {
        breaker fn;
        const char *frag1, *frag2;
    } cases[] = {
        {put_nan, "/params/trans_logw[0, 1, 1] is NaN", NULL},
        {put_inf, "/params/input_logp[2, 1, 0] is +inf", NULL},
        {unnormalise, "/params/input_logp[6, 0, :] sums to 1.7, not 1", NULL},
        {two_roots, "more than one root", NULL},
        {cycle, "cycle", NULL},
        {trans_out_of_range, "/structure/trans_index[", "out of range"},
        {trans_reused, "used twice", NULL},
        {root_has_trans, "the root must have -1", NULL},
        {parent_out_of_range, "/structure/parent[", "out of range"},
    };
    const char *p = path_of("bad.h5");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* Every variable owns a latent (share = 0) so non_root_owner finds enough of them. */
        pc_hclt *m = pc_hr_model(12, 3, 2, 0.0, 0);
        cases[i].fn(m);
        raw_write(p, m, &plain);
        expect_load_error(p, PC_ERR_MODEL, cases[i].frag1, cases[i].frag2);
        /* The same model in memory: validate and compile refuse it too. */
        assert_int_equal(pc_hclt_validate(m, "mem"), PC_ERR_MODEL);
        pc_circuit *c = NULL;
        assert_int_equal(pc_circuit_compile(m, &c), PC_ERR_MODEL);
        assert_null(c);
        remove(p);
        pc_hclt_free(m);
    }
}

/* Validation scans the rows on every CPU in pieces of 4096: with faults in several pieces it
 * still names the first in file order. 600 variables of K = 16: 9,584 transition rows, then
 * 9,600 input rows. */
static void test_first_fault_named(void **state) {
    (void)state;
    pc_hclt *m = pc_hr_model(600, 3, 16, 0.0, 0);
    const int64_t K = 16, C = 3;
    assert_int_equal(m->num_trans, 599);
    assert_int_equal(pc_hclt_validate(m, "mem"), PC_OK);
    m->input_logp[(590 * K + 3) * C + 1] = NAN;                     /* input row 590, 3 */
    m->trans_logw[(562 * K + 8) * K + 4] = NAN;                     /* row 8,994 */
    for (int64_t k = 0; k < K; k++) m->trans_logw[(300 * K + 2) * K + k] += log(1.7); /* 4,802 */
    for (int rep = 0; rep < 20; rep++) {
        assert_int_equal(pc_hclt_validate(m, "mem"), PC_ERR_MODEL);
        if (!strstr(pc_last_error(), "/params/trans_logw[300, 2, :] sums to 1.7, not 1"))
            fail_msg("%s", pc_last_error());
    }
    pc_hclt_free(m);
}

/* ------------------------------------------------------------------------------------------ */
/* Sizes: products that wrap, claims the file does not hold, data outside the file.          */

static void test_size_products(void **state) {
    (void)state;
    /* 2^20 x 2^14 x 2^30 = 2^64 wraps to 0 in int64: it must be refused, not allocated. */
    pc_hclt *m = (pc_hclt *)&m;
    assert_int_equal(pc_hclt_create(1 << 20, 1 << 30, 1 << 14, 0, &m), PC_ERR_ARG);
    assert_null(m);
    assert_non_null(strstr(pc_last_error(), "more than 2^63 bytes"));
    /* T K K wraps as well. */
    assert_int_equal(pc_hclt_create(2, 2, 1 << 30, 1 << 30, &m), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "more than 2^63 bytes"));
    /* Below 2^63 but above the limit: the message says what the sizes need. */
    assert_int_equal(pc_hclt_create(784, 256, 1 << 17, 1, &m), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "num_latents = 131072"));
    assert_non_null(strstr(pc_last_error(), "at most 17179869184 bytes (16 GiB)"));
    /* The shipped model's size, counted independently. */
    const int64_t V = 784, C = 256, K = 16, T = 549;
    assert_int_equal(pc_hclt_model_bytes(V, C, K, T), 8 * (K + T * K * K + V * K * C + V));
    assert_int_equal(pc_hclt_model_bytes(-1, C, K, T), INT64_MAX);
    assert_int_equal(pc_hclt_model_bytes(INT32_MAX, INT32_MAX, INT32_MAX, 0), INT64_MAX);
}

static void put_int32_attr(hid_t f, const char *name, int32_t value) {
    knobs k = plain;
    put_int_attr(f, name, value, &k);
}

/* A dataset of the shape given, written with `data` (contiguous) or, with data NULL, chunked
 * and never written: the file then holds no bytes for it. */
static void put_shape(hid_t f, const char *name, int rank, const hsize_t *dims, hid_t type,
                      const void *data) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    if (!data) {
        hsize_t chunk[3] = {1, 1, 1};
        H5Pset_chunk(dcpl, rank, chunk);
    }
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t ds = H5Dcreate2(f, name, type, sp, lcpl, dcpl, H5P_DEFAULT);
    assert_true(ds >= 0);
    if (data) assert_true(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(ds), H5Sclose(sp), H5Pclose(dcpl), H5Pclose(lcpl);
}

/* A file with the attributes of (V, C, K) and datasets of the claimed shapes; the structure
 * datasets hold data, the parameters (T rows of trans_logw) none. */
static void write_claims(const char *path, int32_t V, int32_t C, int32_t K, hsize_t T) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t sp = H5Screate(H5S_SCALAR), t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen("pcinfer-hclt"));
    hid_t a = H5Acreate2(f, "format", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(H5Awrite(a, t, "pcinfer-hclt") >= 0);
    H5Aclose(a), H5Tclose(t), H5Sclose(sp);
    put_int32_attr(f, "version", 1);
    put_int32_attr(f, "num_vars", V);
    put_int32_attr(f, "num_cats", C);
    put_int32_attr(f, "num_latents", K);
    int32_t *structure = calloc((size_t)V, sizeof *structure);
    assert_non_null(structure);
    const hsize_t v[1] = {(hsize_t)V}, k[1] = {(hsize_t)K};
    const hsize_t tl[3] = {T, (hsize_t)K, (hsize_t)K}, in[3] = {(hsize_t)V, (hsize_t)K, (hsize_t)C};
    put_shape(f, "/structure/parent", 1, v, H5T_NATIVE_INT32, structure);
    put_shape(f, "/structure/trans_index", 1, v, H5T_NATIVE_INT32, structure);
    put_shape(f, "/params/root_logw", 1, k, H5T_NATIVE_DOUBLE, NULL);
    put_shape(f, "/params/trans_logw", 3, tl, H5T_NATIVE_DOUBLE, NULL);
    put_shape(f, "/params/input_logp", 3, in, H5T_NATIVE_DOUBLE, NULL);
    free(structure);
    H5Fclose(f);
}

static long max_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void test_claims_checked_against_the_file(void **state) {
    (void)state;
    const char *p = path_of("claims.h5");
    const long rss0 = max_rss_kb();
    /* K = 32768 and one transition row: an 8 GiB table in a file of a few KB. */
    write_claims(p, 3, 2, 32768, 1);
    expect_load_error(p, PC_ERR_FORMAT, "/params/root_logw has shape [32768]",
                      "the file holds only 0 bytes");
    /* V K C = 2^64 wraps int64 to 0; here the claim overflows before anything else. */
    write_claims(p, 1 << 20, 1 << 30, 1 << 14, 0);
    expect_load_error(p, PC_ERR_FORMAT, "/params/root_logw has shape [16384]", "holds only");
    /* Nothing of the claims was allocated. */
    assert_true(max_rss_kb() - rss0 < 200 * 1024);
    clear_dir();
}

/* Writes a valid model, then replaces one of its datasets by `edit`. */
static const char *model_then(const char *name, void (*edit)(hid_t file, const pc_hclt *m)) {
    const char *p = path_of(name);
    pc_hclt *m = pc_hr_model(7, 3, 2, 0.3, 0);
    assert_int_equal(pc_hclt_save(m, p, PC_HCLT_F64), PC_OK);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    edit(f, m);
    H5Fclose(f);
    pc_hclt_free(m);
    return p;
}

/* /params/input_logp with valid data, kept in a raw file beside the model. */
static void external_storage(hid_t f, const pc_hclt *m) {
    const hsize_t n = (hsize_t)m->num_vars * m->num_latents * m->num_cats;
    FILE *raw = fopen(path_of("raw.bin"), "wb");
    assert_non_null(raw);
    assert_int_equal(fwrite(m->input_logp, sizeof(double), n, raw), n);
    fclose(raw);
    assert_true(H5Ldelete(f, "/params/input_logp", H5P_DEFAULT) >= 0);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    assert_true(H5Pset_external(dcpl, path_of("raw.bin"), 0, n * sizeof(double)) >= 0);
    const hsize_t dims[3] = {(hsize_t)m->num_vars, (hsize_t)m->num_latents,
                             (hsize_t)m->num_cats};
    hid_t sp = H5Screate_simple(3, dims, NULL);
    hid_t ds = H5Dcreate2(f, "/params/input_logp", H5T_IEEE_F64LE, sp, H5P_DEFAULT, dcpl,
                          H5P_DEFAULT);
    assert_true(ds >= 0);
    H5Dclose(ds), H5Sclose(sp), H5Pclose(dcpl);
}

/* /params/root_logw as a link into another (valid) model file. */
static void external_link(hid_t f, const pc_hclt *m) {
    assert_int_equal(pc_hclt_save(m, path_of("other.h5"), PC_HCLT_F64), PC_OK);
    assert_true(H5Ldelete(f, "/params/root_logw", H5P_DEFAULT) >= 0);
    assert_true(H5Lcreate_external(path_of("other.h5"), "/params/root_logw", f,
                                   "/params/root_logw", H5P_DEFAULT, H5P_DEFAULT) >= 0);
}

/* The format attribute as a fixed string of 60000 bytes (a type may claim up to 4 GiB; an
 * attribute in the object header holds at most 64 KiB). */
static void huge_format(hid_t f, const pc_hclt *m) {
    (void)m;
    assert_true(H5Adelete(f, "format") >= 0);
    hid_t sp = H5Screate(H5S_SCALAR), t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 60000);
    char *text = calloc(1, 60000);
    assert_non_null(text);
    memcpy(text, "pcinfer-hclt", 12);
    hid_t a = H5Acreate2(f, "format", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0 && H5Awrite(a, t, text) >= 0);
    H5Aclose(a), H5Tclose(t), H5Sclose(sp);
    free(text);
}

/* The format attribute with terminal control bytes. */
static void control_format(hid_t f, const pc_hclt *m) {
    (void)m;
    assert_true(H5Adelete(f, "format") >= 0);
    hid_t sp = H5Screate(H5S_SCALAR), t = H5Tcopy(H5T_C_S1);
    const char text[] = "pc\x1b[2J\x07x";
    H5Tset_size(t, sizeof text - 1);
    hid_t a = H5Acreate2(f, "format", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0 && H5Awrite(a, t, text) >= 0);
    H5Aclose(a), H5Tclose(t), H5Sclose(sp);
}

static void test_data_outside_the_file(void **state) {
    (void)state;
    expect_load_error(model_then("ext.h5", external_storage), PC_ERR_FORMAT,
                      "/params/input_logp keeps its data in other files", NULL);
    expect_load_error(model_then("link.h5", external_link), PC_ERR_FORMAT,
                      "/params/root_logw is a link to another file", NULL);
    expect_load_error(model_then("long.h5", huge_format), PC_ERR_FORMAT,
                      "attribute 'format' is a string of 60000 bytes", NULL);
    expect_load_error(model_then("ctl.h5", control_format), PC_ERR_FORMAT, "'pc?[2J?x'", NULL);
    clear_dir();
}

/* ------------------------------------------------------------------------------------------ */
/* Writing: special targets and a full disk.                                                 */

static void test_save_refuses_special_targets(void **state) {
    (void)state;
    pc_hclt *m = pc_hr_model(5, 2, 2, 0.3, 0);
    /* A FIFO (a rename would replace it; opening it would block). */
    assert_int_equal(mkfifo(path_of("fifo"), 0600), 0);
    assert_int_equal(pc_hclt_save(m, path_of("fifo"), PC_HCLT_F32), PC_ERR_IO);
    assert_non_null(strstr(pc_last_error(), "is a FIFO, not a regular file"));
    /* A link planted at the target is not followed, nor replaced. */
    FILE *f = fopen(path_of("victim"), "w");
    assert_non_null(f);
    fputs("keep me\n", f);
    fclose(f);
    assert_int_equal(symlink(path_of("victim"), path_of("link.h5")), 0);
    assert_int_equal(pc_hclt_save(m, path_of("link.h5"), PC_HCLT_F32), PC_ERR_IO);
    assert_non_null(strstr(pc_last_error(), "is a symbolic link"));
    struct stat sb;
    assert_int_equal(lstat(path_of("link.h5"), &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    assert_int_equal(stat(path_of("victim"), &sb), 0);
    assert_int_equal(sb.st_size, 8);
    pc_hclt_free(m);
    clear_dir();
}

/* Saves in a child whose files may not exceed 4 KiB (SIGXFSZ ignored, so writes fail with
 * EFBIG as on a full disk): the save must fail with a message, the child must exit normally
 * (libhdf5's exit handler crashed after a failed save), and nothing may be left. */
static void test_save_on_a_full_disk(void **state) {
    (void)state;
    pc_hclt *m = pc_hr_model(40, 16, 4, 0.3, 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &lim);
        pc_status st = pc_hclt_save(m, path_of("full.h5"), PC_HCLT_F64);
        int ok = st == PC_ERR_IO && strstr(pc_last_error(), "File too large");
        exit(ok ? 0 : 3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status)) fail_msg("the saving process died of signal %d", WTERMSIG(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(dir_entries(), 0);
    pc_hclt_free(m);
}

/* The compiled layers: children before parents, root last, every variable in one group with
 * its owner first, and the CSR arrays consistent. */
static void test_compile_layout(void **state) {
    (void)state;
    for (int rep = 0; rep < 20; rep++) {
        int32_t V = (int32_t)pc_hr_int(1, 200);
        pc_hclt *m = pc_hr_model(V, 2, 2, pc_hr_unit(), 0);
        pc_circuit *c = NULL;
        assert_int_equal(pc_circuit_compile(m, &c), PC_OK);
        const int32_t G = c->num_groups;
        assert_int_equal(G, 1 + m->num_trans);
        assert_int_equal(c->layer_start[0], 0);
        assert_int_equal(c->layer_start[c->num_layers], G);
        assert_int_equal(c->group_parent[G - 1], -1);
        assert_int_equal(c->group_trans[G - 1], -1);
        assert_int_equal(c->layer_start[c->num_layers - 1], G - 1); /* root alone */
        int32_t *seen = calloc((size_t)V, sizeof *seen);
        assert_non_null(seen);
        for (int32_t l = 0; l < c->num_layers; l++)
            for (int32_t g = c->layer_start[l]; g < c->layer_start[l + 1]; g++) {
                if (g < G - 1) {
                    int32_t pg = c->group_parent[g];
                    assert_true(pg > g && pg >= c->layer_start[l + 1]); /* parent in a later layer */
                    assert_true(c->group_trans[g] >= 0);
                }
                for (int32_t i = c->child_start[g]; i < c->child_start[g + 1]; i++)
                    assert_int_equal(c->group_parent[c->group_children[i]], g);
                int32_t owner = c->group_vars[c->var_start[g]];
                assert_int_equal(m->trans_index[owner], c->group_trans[g]);
                for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
                    int32_t v = c->group_vars[i];
                    seen[v]++;
                    if (i > c->var_start[g]) assert_int_equal(m->trans_index[v], -1);
                }
            }
        for (int32_t v = 0; v < V; v++) assert_int_equal(seen[v], 1);
        assert_int_equal(c->child_start[G], G - 1);
        free(seen);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_round_trip_many_chunks),
        cmocka_unit_test(test_first_fault_named),
        cmocka_unit_test(test_vlen_format_accepted),
        cmocka_unit_test(test_save_refuses_invalid_and_leaves_nothing),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_schema_errors),
        cmocka_unit_test(test_model_errors),
        cmocka_unit_test(test_size_products),
        cmocka_unit_test(test_claims_checked_against_the_file),
        cmocka_unit_test(test_data_outside_the_file),
        cmocka_unit_test(test_save_refuses_special_targets),
        cmocka_unit_test(test_save_on_a_full_disk),
        cmocka_unit_test(test_compile_layout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
