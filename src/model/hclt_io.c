/* HCLT model files: the HDF5 reader and writer of HCLT_FORMAT v1 (docs/format.md).
 *
 * HDF5's own error stack printing is switched off: every failure becomes one pc_fail message
 * naming the file and the attribute or dataset. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/fail.h"
#include "pc/hclt.h"

#define PC_HCLT_FORMAT_NAME "pcinfer-hclt"
#define PC_HCLT_VERSION 1

static void quiet_hdf5(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* ---------------------------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------------------------ */

/* Reads the string attribute `name` of the root group, fixed- or variable-length. */
static pc_status read_string_attr(hid_t file, const char *path, const char *name, char *buf,
                                  size_t len) {
    if (H5Aexists(file, name) <= 0)
        return pc_fail(PC_ERR_FORMAT, "%s: attribute '%s' is missing (not a pcinfer HCLT file)",
                       path, name);
    pc_status st = PC_OK;
    hid_t attr = H5Aopen(file, name, H5P_DEFAULT);
    hid_t type = attr >= 0 ? H5Aget_type(attr) : -1;
    hid_t space = attr >= 0 ? H5Aget_space(attr) : -1;
    if (type < 0 || space < 0 || H5Tget_class(type) != H5T_STRING ||
        H5Sget_simple_extent_npoints(space) != 1) {
        st = pc_fail(PC_ERR_FORMAT, "%s: attribute '%s' is not a single string", path, name);
        goto done;
    }
    if (H5Tis_variable_str(type) > 0) {
        hid_t mem = H5Tcopy(H5T_C_S1);
        H5Tset_size(mem, H5T_VARIABLE);
        H5Tset_cset(mem, H5Tget_cset(type));
        char *s = NULL;
        if (H5Aread(attr, mem, &s) < 0 || !s) {
            st = pc_fail(PC_ERR_FORMAT, "%s: cannot read attribute '%s'", path, name);
        } else {
            snprintf(buf, len, "%s", s);
        }
        if (s) H5free_memory(s);
        H5Tclose(mem);
    } else {
        size_t size = H5Tget_size(type);
        char *s = calloc(size + 1, 1);
        hid_t mem = H5Tcopy(H5T_C_S1);
        H5Tset_size(mem, size);
        H5Tset_strpad(mem, H5T_STR_NULLPAD);
        if (!s || H5Aread(attr, mem, s) < 0)
            st = pc_fail(PC_ERR_FORMAT, "%s: cannot read attribute '%s'", path, name);
        else
            snprintf(buf, len, "%s", s);
        H5Tclose(mem);
        free(s);
    }
done:
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    return st;
}

/* Reads a scalar integer attribute of the root group into an int32 (range checked). */
static pc_status read_int_attr(hid_t file, const char *path, const char *name, int32_t *out) {
    if (H5Aexists(file, name) <= 0)
        return pc_fail(PC_ERR_FORMAT, "%s: attribute '%s' is missing", path, name);
    pc_status st = PC_OK;
    hid_t attr = H5Aopen(file, name, H5P_DEFAULT);
    hid_t type = attr >= 0 ? H5Aget_type(attr) : -1;
    hid_t space = attr >= 0 ? H5Aget_space(attr) : -1;
    long long value = 0;
    if (type < 0 || space < 0 || H5Tget_class(type) != H5T_INTEGER ||
        H5Sget_simple_extent_npoints(space) != 1)
        st = pc_fail(PC_ERR_FORMAT, "%s: attribute '%s' is not a single integer", path, name);
    else if (H5Aread(attr, H5T_NATIVE_LLONG, &value) < 0)
        st = pc_fail(PC_ERR_FORMAT, "%s: cannot read attribute '%s'", path, name);
    else if (value < INT32_MIN || value > INT32_MAX)
        st = pc_fail(PC_ERR_FORMAT, "%s: attribute '%s' = %lld does not fit in int32", path, name,
                     value);
    else
        *out = (int32_t)value;
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    return st;
}

/* Opens dataset `name`, checks its type class, rank and (where want[i] >= 0) its dims, and
 * stores the dims in dims_out. Returns the open dataset in *ds. */
static pc_status open_dataset(hid_t file, const char *path, const char *name, H5T_class_t cls,
                              int rank, const int64_t *want, int64_t *dims_out, hid_t *ds) {
    *ds = -1;
    /* H5Lexists needs every intermediate group to exist: check "/params" before "/params/x". */
    const char *slash = strchr(name + 1, '/');
    char group[64];
    snprintf(group, sizeof group, "%.*s", (int)(slash - name), name);
    if (H5Lexists(file, group, H5P_DEFAULT) <= 0 || H5Lexists(file, name, H5P_DEFAULT) <= 0)
        return pc_fail(PC_ERR_FORMAT, "%s: dataset %s is missing", path, name);
    pc_status st = PC_OK;
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    hid_t type = d >= 0 ? H5Dget_type(d) : -1;
    hid_t space = d >= 0 ? H5Dget_space(d) : -1;
    if (d < 0 || type < 0 || space < 0) {
        st = pc_fail(PC_ERR_FORMAT, "%s: %s is not a readable dataset", path, name);
        goto done;
    }
    if (H5Tget_class(type) != cls) {
        H5T_class_t got = H5Tget_class(type);
        st = pc_fail(PC_ERR_FORMAT, "%s: %s holds %s values; expected %s", path, name,
                     got == H5T_FLOAT ? "float" : got == H5T_INTEGER ? "integer"
                     : got == H5T_STRING ? "string" : "non-numeric",
                     cls == H5T_FLOAT ? "float" : "integer");
        goto done;
    }
    int r = H5Sget_simple_extent_ndims(space);
    hsize_t dims[8];
    if (r != rank || H5Sget_simple_extent_dims(space, dims, NULL) != rank) {
        st = pc_fail(PC_ERR_FORMAT, "%s: %s has %d dimensions; expected %d", path, name, r, rank);
        goto done;
    }
    for (int i = 0; i < rank; i++) {
        dims_out[i] = (int64_t)dims[i];
        if (want[i] >= 0 && dims_out[i] != want[i]) {
            char got[96] = "", exp[96] = "";
            for (int j = 0; j < rank; j++) {
                size_t g = strlen(got), e = strlen(exp);
                snprintf(got + g, sizeof got - g, "%s%lld", j ? ", " : "", (long long)dims[j]);
                if (want[j] >= 0)
                    snprintf(exp + e, sizeof exp - e, "%s%lld", j ? ", " : "", (long long)want[j]);
                else
                    snprintf(exp + e, sizeof exp - e, "%s*", j ? ", " : "");
            }
            st = pc_fail(PC_ERR_FORMAT,
                         "%s: %s has shape [%s]; expected [%s] from num_vars, num_cats, num_latents",
                         path, name, got, exp);
            goto done;
        }
    }
done:
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (st == PC_OK)
        *ds = d;
    else if (d >= 0)
        H5Dclose(d);
    return st;
}

static pc_status read_ints(hid_t ds, const char *path, const char *name, int32_t *out,
                           int64_t n) {
    long long *tmp = malloc((size_t)(n > 0 ? n : 1) * sizeof *tmp);
    if (!tmp) return pc_fail(PC_ERR_NOMEM, "%s: out of memory reading %s", path, name);
    pc_status st = PC_OK;
    if (n > 0 && H5Dread(ds, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, tmp) < 0)
        st = pc_fail(PC_ERR_FORMAT, "%s: cannot read %s (corrupt file or unavailable filter)",
                     path, name);
    for (int64_t i = 0; i < n && st == PC_OK; i++) {
        if (tmp[i] < INT32_MIN || tmp[i] > INT32_MAX)
            st = pc_fail(PC_ERR_MODEL, "%s: %s[%lld] = %lld does not fit in int32", path, name,
                         (long long)i, tmp[i]);
        else
            out[i] = (int32_t)tmp[i];
    }
    free(tmp);
    return st;
}

static pc_status read_doubles(hid_t ds, const char *path, const char *name, double *out,
                              int64_t n) {
    if (n > 0 && H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
        return pc_fail(PC_ERR_FORMAT, "%s: cannot read %s (corrupt file or unavailable filter)",
                       path, name);
    return PC_OK;
}

static pc_status load_open(hid_t file, const char *path, pc_hclt **out) {
    char format[64];
    int32_t version = 0, V = 0, C = 0, K = 0;
    pc_status st = read_string_attr(file, path, "format", format, sizeof format);
    if (st != PC_OK) return st;
    if (strcmp(format, PC_HCLT_FORMAT_NAME) != 0)
        return pc_fail(PC_ERR_FORMAT, "%s: attribute 'format' is '%s', not '%s'", path, format,
                       PC_HCLT_FORMAT_NAME);
    if ((st = read_int_attr(file, path, "version", &version)) != PC_OK) return st;
    if (version != PC_HCLT_VERSION)
        return pc_fail(PC_ERR_FORMAT, "%s: format version %d is not supported (this reader: %d)",
                       path, version, PC_HCLT_VERSION);
    if ((st = read_int_attr(file, path, "num_vars", &V)) != PC_OK) return st;
    if ((st = read_int_attr(file, path, "num_cats", &C)) != PC_OK) return st;
    if ((st = read_int_attr(file, path, "num_latents", &K)) != PC_OK) return st;
    if (V < 1 || C < 2 || K < 1)
        return pc_fail(PC_ERR_FORMAT,
                       "%s: num_vars = %d, num_cats = %d, num_latents = %d (need V >= 1, C >= 2, "
                       "K >= 1)",
                       path, V, C, K);

    hid_t ds[5] = {-1, -1, -1, -1, -1};
    int64_t d_parent[1], d_trans[1], d_root[1], d_tl[3], d_in[3];
    const int64_t w_v[1] = {V}, w_k[1] = {K}, w_tl[3] = {-1, K, K}, w_in[3] = {V, K, C};
    pc_hclt *m = NULL;
    if ((st = open_dataset(file, path, "/structure/parent", H5T_INTEGER, 1, w_v, d_parent, &ds[0])) ||
        (st = open_dataset(file, path, "/structure/trans_index", H5T_INTEGER, 1, w_v, d_trans,
                           &ds[1])) ||
        (st = open_dataset(file, path, "/params/root_logw", H5T_FLOAT, 1, w_k, d_root, &ds[2])) ||
        (st = open_dataset(file, path, "/params/trans_logw", H5T_FLOAT, 3, w_tl, d_tl, &ds[3])) ||
        (st = open_dataset(file, path, "/params/input_logp", H5T_FLOAT, 3, w_in, d_in, &ds[4])))
        goto done;
    if (d_tl[0] > INT32_MAX) {
        st = pc_fail(PC_ERR_FORMAT, "%s: /params/trans_logw has %lld rows", path,
                     (long long)d_tl[0]);
        goto done;
    }
    if ((st = pc_hclt_create(V, C, K, (int32_t)d_tl[0], &m)) != PC_OK) {
        st = pc_fail(st, "%s: %s", path, pc_last_error());
        goto done;
    }
    if ((st = read_ints(ds[0], path, "/structure/parent", m->parent, V)) ||
        (st = read_ints(ds[1], path, "/structure/trans_index", m->trans_index, V)) ||
        (st = read_doubles(ds[2], path, "/params/root_logw", m->root_logw, K)) ||
        (st = read_doubles(ds[3], path, "/params/trans_logw", m->trans_logw,
                           d_tl[0] * K * K)) ||
        (st = read_doubles(ds[4], path, "/params/input_logp", m->input_logp,
                           (int64_t)V * K * C)))
        goto done;
    st = pc_hclt_validate(m, path);
done:
    for (int i = 0; i < 5; i++)
        if (ds[i] >= 0) H5Dclose(ds[i]);
    if (st == PC_OK)
        *out = m;
    else
        pc_hclt_free(m);
    return st;
}

pc_status pc_hclt_load(const char *path, pc_hclt **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_hclt_load: out is NULL");
    *out = NULL;
    if (!path) return pc_fail(PC_ERR_ARG, "pc_hclt_load: path is NULL");
    quiet_hdf5();
    /* Open with stdio first so a missing or unreadable file gets the system's reason. */
    FILE *probe = fopen(path, "rb");
    if (!probe) return pc_fail(PC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    fclose(probe);
    if (H5Fis_hdf5(path) <= 0) return pc_fail(PC_ERR_FORMAT, "%s: not an HDF5 file", path);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return pc_fail(PC_ERR_FORMAT, "%s: HDF5 cannot open the file", path);
    pc_status st = load_open(file, path, out);
    H5Fclose(file);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------------------------ */

static int write_int_attr(hid_t file, const char *name, int32_t value) {
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(file, name, H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT);
    int ok = attr >= 0 && H5Awrite(attr, H5T_NATIVE_INT32, &value) >= 0;
    if (attr >= 0) H5Aclose(attr);
    H5Sclose(space);
    return ok;
}

static int write_format_attr(hid_t file) {
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(PC_HCLT_FORMAT_NAME) + 1);
    H5Tset_strpad(type, H5T_STR_NULLTERM);
    hid_t attr = H5Acreate2(file, "format", type, space, H5P_DEFAULT, H5P_DEFAULT);
    int ok = attr >= 0 && H5Awrite(attr, type, PC_HCLT_FORMAT_NAME) >= 0;
    if (attr >= 0) H5Aclose(attr);
    H5Tclose(type);
    H5Sclose(space);
    return ok;
}

/* Writes a dataset of `rank` dims; non-empty ones are chunked by their first axis (one row of
 * the leading index per chunk, at most 1 MiB) with shuffle + deflate. */
static int write_dataset(hid_t file, const char *name, int rank, const hsize_t *dims,
                         hid_t file_type, hid_t mem_type, const void *data) {
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t n = 1, row = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    for (int i = 1; i < rank; i++) row *= dims[i];
    if (n > 0) {
        hsize_t chunk[8];
        size_t elem = H5Tget_size(file_type);
        hsize_t rows = (1u << 20) / (elem * row);
        chunk[0] = rows < 1 ? 1 : rows > dims[0] ? dims[0] : rows;
        for (int i = 1; i < rank; i++) chunk[i] = dims[i];
        H5Pset_chunk(dcpl, rank, chunk);
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, 4);
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t ds = H5Dcreate2(file, name, file_type, space, lcpl, dcpl, H5P_DEFAULT);
    int ok = ds >= 0 && (n == 0 || H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    if (ds >= 0) H5Dclose(ds);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    H5Sclose(space);
    return ok;
}

pc_status pc_hclt_save(const pc_hclt *m, const char *path, pc_hclt_float float_type) {
    if (!path) return pc_fail(PC_ERR_ARG, "pc_hclt_save: path is NULL");
    if (float_type != PC_HCLT_F32 && float_type != PC_HCLT_F64)
        return pc_fail(PC_ERR_ARG, "pc_hclt_save: unknown float type %d", (int)float_type);
    pc_status st = pc_hclt_validate(m, path);
    if (st != PC_OK) return st;
    quiet_hdf5();
    size_t len = strlen(path) + 32;
    char *tmp = malloc(len);
    if (!tmp) return pc_fail(PC_ERR_NOMEM, "%s: out of memory", path);
    snprintf(tmp, len, "%s.tmp-%ld", path, (long)getpid());
    hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) {
        st = pc_fail(PC_ERR_IO, "%s: cannot create the file (%s)", path, strerror(errno));
        free(tmp);
        return st;
    }
    hid_t ftype = float_type == PC_HCLT_F32 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE;
    const hsize_t V = (hsize_t)m->num_vars, C = (hsize_t)m->num_cats, K = (hsize_t)m->num_latents,
                  T = (hsize_t)m->num_trans;
    const hsize_t d_v[1] = {V}, d_k[1] = {K}, d_tl[3] = {T, K, K}, d_in[3] = {V, K, C};
    int ok = write_format_attr(file) && write_int_attr(file, "version", PC_HCLT_VERSION) &&
             write_int_attr(file, "num_vars", m->num_vars) &&
             write_int_attr(file, "num_cats", m->num_cats) &&
             write_int_attr(file, "num_latents", m->num_latents) &&
             write_dataset(file, "/structure/parent", 1, d_v, H5T_STD_I32LE, H5T_NATIVE_INT32,
                           m->parent) &&
             write_dataset(file, "/structure/trans_index", 1, d_v, H5T_STD_I32LE,
                           H5T_NATIVE_INT32, m->trans_index) &&
             write_dataset(file, "/params/root_logw", 1, d_k, ftype, H5T_NATIVE_DOUBLE,
                           m->root_logw) &&
             write_dataset(file, "/params/trans_logw", 3, d_tl, ftype, H5T_NATIVE_DOUBLE,
                           m->trans_logw) &&
             write_dataset(file, "/params/input_logp", 3, d_in, ftype, H5T_NATIVE_DOUBLE,
                           m->input_logp);
    ok = H5Fclose(file) >= 0 && ok;
    if (!ok)
        st = pc_fail(PC_ERR_IO, "%s: writing the model failed (disk full or not writable?)", path);
    else if (rename(tmp, path) != 0)
        st = pc_fail(PC_ERR_IO, "%s: cannot rename the finished file into place: %s", path,
                     strerror(errno));
    if (st != PC_OK) remove(tmp);
    free(tmp);
    return st;
}
