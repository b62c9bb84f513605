/* HCLT model files: the HDF5 reader of HCLT_FORMAT v1 (docs/format.md).
 *
 * Every size comes from the file, so every size is checked before anything is allocated: the
 * products in int64 (base/size_check.h), the model against max_bytes, and each dataset's claim
 * against the bytes the file really holds for it. Data that lives outside the file (external
 * links, external raw storage, virtual datasets) is refused: it would make libhdf5 open other
 * paths, such as a FIFO or a device.
 *
 * HDF5's own error printing is switched off: every failure becomes one pc_fail message naming
 * the file and the attribute or dataset. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "base/fail.h"
#include "base/size_check.h"
#include "model/hclt_internal.h"

/* A fixed-length `format` attribute longer than this cannot hold the name (12 bytes) and is
 * refused before its buffer is allocated (a type may claim 4 GiB). */
#define PC_FORMAT_ATTR_MAX 256

/* A filtered dataset may decode to at most this many times its stored bytes. Deflate, the
 * filter writers use, cannot exceed 1032 to 1; a claim beyond the bound is data the file does
 * not hold (a 13 KB file declaring a [1, 32768, 32768] table). */
#define PC_HCLT_MAX_EXPANSION 1100

/* Largest chunk accepted: libhdf5 allocates a whole chunk to decode it. Writers use 1 MiB. */
#define PC_HCLT_MAX_CHUNK_BYTES ((int64_t)256 << 20)

typedef struct reader {
    hid_t file;
    const char *path; /* names the file in messages */
    int64_t file_bytes;
    int64_t stored_bytes; /* sum over the datasets checked so far */
} reader;

/* Copies s into buf[len] with every byte outside printable ASCII as '?': the text goes into
 * messages, and a hostile file's bytes must not reach a terminal. */
static void printable_copy(char *buf, size_t len, const char *s) {
    size_t i = 0;
    for (; s[i] && i + 1 < len; i++)
        buf[i] = (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f ? s[i] : '?';
    buf[i] = '\0';
}

/* Reads the string attribute `name` of the root group, fixed- or variable-length. */
static pc_status read_string_attr(const reader *r, const char *name, char *buf, size_t len) {
    const char *path = r->path;
    if (H5Aexists(r->file, name) <= 0)
        return pc_fail(PC_ERR_FORMAT, "%s: attribute '%s' is missing (not a pcinfer HCLT file)",
                       path, name);
    pc_status st = PC_OK;
    hid_t attr = H5Aopen(r->file, name, H5P_DEFAULT);
    hid_t type = attr >= 0 ? H5Aget_type(attr) : -1;
    hid_t space = attr >= 0 ? H5Aget_space(attr) : -1;
    if (type < 0 || space < 0 || H5Tget_class(type) != H5T_STRING ||
        H5Sget_simple_extent_npoints(space) != 1) {
        st = pc_fail(PC_ERR_FORMAT, "%s: attribute '%s' is not a single string", path, name);
        goto fail;
    }
    if (H5Tis_variable_str(type) > 0) {
        hid_t mem = H5Tcopy(H5T_C_S1);
        H5Tset_size(mem, H5T_VARIABLE);
        H5Tset_cset(mem, H5Tget_cset(type));
        char *s = NULL;
        if (H5Aread(attr, mem, &s) < 0 || !s)
            st = pc_fail(PC_ERR_FORMAT, "%s: cannot read attribute '%s'", path, name);
        else
            printable_copy(buf, len, s);
        if (s) H5free_memory(s);
        H5Tclose(mem);
    } else {
        size_t size = H5Tget_size(type);
        if (size == 0 || size > PC_FORMAT_ATTR_MAX) {
            st = pc_fail(PC_ERR_FORMAT, "%s: attribute '%s' is a string of %zu bytes; expected "
                                        "'%s'", path, name, size, PC_HCLT_FORMAT_NAME);
            goto fail;
        }
        char s[PC_FORMAT_ATTR_MAX + 1] = "";
        hid_t mem = H5Tcopy(H5T_C_S1);
        H5Tset_size(mem, size);
        H5Tset_strpad(mem, H5T_STR_NULLPAD);
        if (H5Aread(attr, mem, s) < 0)
            st = pc_fail(PC_ERR_FORMAT, "%s: cannot read attribute '%s'", path, name);
        else
            printable_copy(buf, len, s);
        H5Tclose(mem);
    }
fail:
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    return st;
}

/* Reads a scalar integer attribute of the root group into an int32 (range checked). */
static pc_status read_int_attr(const reader *r, const char *name, int32_t *out) {
    const char *path = r->path;
    if (H5Aexists(r->file, name) <= 0)
        return pc_fail(PC_ERR_FORMAT, "%s: attribute '%s' is missing", path, name);
    pc_status st = PC_OK;
    hid_t attr = H5Aopen(r->file, name, H5P_DEFAULT);
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

/* PC_OK when the link `name` exists and stays inside the file (hard or soft); external and
 * user-defined links would make libhdf5 open another file. */
static pc_status check_link(const reader *r, const char *name, const char *dataset) {
    if (H5Lexists(r->file, name, H5P_DEFAULT) <= 0)
        return pc_fail(PC_ERR_FORMAT, "%s: dataset %s is missing", r->path, dataset);
    H5L_info_t info; /* H5L_info2_t where libhdf5 >= 1.12 maps the name */
    if (H5Lget_info(r->file, name, &info, H5P_DEFAULT) < 0)
        return pc_fail(PC_ERR_FORMAT, "%s: cannot read the link %s", r->path, name);
    if (info.type != H5L_TYPE_HARD && info.type != H5L_TYPE_SOFT)
        return pc_fail(PC_ERR_FORMAT, "%s: %s is a link to another file; not accepted", r->path,
                       name);
    return PC_OK;
}

/* "[1, 32768, 32768]" for messages; dims may be any hsize_t. */
static const char *dims_text(const hsize_t *dims, int rank, char *text, size_t len) {
    size_t used = 0;
    text[0] = '\0';
    for (int j = 0; j < rank && used < len; j++)
        used += (size_t)snprintf(text + used, len - used, "%s%llu", j ? ", " : "[",
                                 (unsigned long long)dims[j]);
    if (used < len) snprintf(text + used, len - used, "]");
    return text;
}

/* Checks that the dataset's data is in this file and that the file holds enough bytes for what
 * its shape claims (elem_bytes per value as stored), before any of it is read. */
static pc_status check_storage(reader *r, hid_t d, const char *name, const hsize_t *dims,
                               int rank, size_t elem_bytes) {
    int64_t sizes[8], claimed;
    for (int i = 0; i < rank; i++) sizes[i] = dims[i] > INT64_MAX ? -1 : (int64_t)dims[i];
    sizes[rank] = (int64_t)elem_bytes;
    char shape[128], need[64], held[64];
    dims_text(dims, rank, shape, sizeof shape);
    if (!pc_size_product(sizes, rank + 1, &claimed))
        return pc_fail(PC_ERR_FORMAT, "%s: %s has shape %s: %s", r->path, name, shape,
                       pc_bytes_text(claimed, need, sizeof need));
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0) return pc_fail(PC_ERR_FORMAT, "%s: %s: cannot read its layout", r->path, name);
    pc_status st = PC_OK;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int filters = H5Pget_nfilters(dcpl);
    hsize_t chunk[8] = {0};
    if (layout == H5D_VIRTUAL || H5Pget_external_count(dcpl) > 0) {
        st = pc_fail(PC_ERR_FORMAT, "%s: %s keeps its data in other files; not accepted", r->path,
                     name);
    } else if (layout < 0 || filters < 0 ||
               (layout == H5D_CHUNKED && H5Pget_chunk(dcpl, rank, chunk) != rank)) {
        st = pc_fail(PC_ERR_FORMAT, "%s: %s: cannot read its layout", r->path, name);
    } else if (layout == H5D_CHUNKED) {
        int64_t c[9], chunk_bytes;
        for (int i = 0; i < rank; i++) c[i] = chunk[i] > INT64_MAX ? -1 : (int64_t)chunk[i];
        c[rank] = (int64_t)elem_bytes;
        if (!pc_size_product(c, rank + 1, &chunk_bytes) || chunk_bytes > PC_HCLT_MAX_CHUNK_BYTES)
            st = pc_fail(PC_ERR_FORMAT, "%s: %s has chunks of %s; at most %lld MiB are accepted",
                         r->path, name, pc_bytes_text(chunk_bytes, need, sizeof need),
                         (long long)(PC_HCLT_MAX_CHUNK_BYTES >> 20));
    }
    H5Pclose(dcpl);
    if (st != PC_OK || claimed == 0) return st;

    hsize_t stored_u = H5Dget_storage_size(d);
    int64_t stored = stored_u > INT64_MAX ? INT64_MAX : (int64_t)stored_u, most;
    if (!pc_size_mul(stored, filters > 0 ? PC_HCLT_MAX_EXPANSION : 1, &most)) most = INT64_MAX;
    if (!pc_size_add(r->stored_bytes, stored, &r->stored_bytes) ||
        r->stored_bytes > r->file_bytes)
        return pc_fail(PC_ERR_FORMAT, "%s: %s claims %s of storage, more than the file's %s",
                       r->path, name, pc_bytes_text(stored, held, sizeof held),
                       pc_bytes_text(r->file_bytes, need, sizeof need));
    if (claimed > most)
        return pc_fail(PC_ERR_FORMAT,
                       "%s: %s has shape %s (%s as stored), but the file holds only %s for it%s",
                       r->path, name, shape, pc_bytes_text(claimed, need, sizeof need),
                       pc_bytes_text(stored, held, sizeof held),
                       filters > 0 ? " (compressed data expands at most 1100-fold)" : "");
    return PC_OK;
}

/* Opens dataset `name`, checks its type class, rank and (where want[i] >= 0) its dims, and
 * stores the dims in dims_out (each < 2^63). Returns the open dataset in *ds. */
static pc_status open_dataset(reader *r, const char *name, H5T_class_t cls, int rank,
                              const int64_t *want, int64_t *dims_out, hid_t *ds) {
    const char *path = r->path;
    *ds = -1;
    /* H5Lexists needs every intermediate group to exist: check "/params" before "/params/x". */
    const char *slash = strchr(name + 1, '/');
    char group[64];
    snprintf(group, sizeof group, "%.*s", (int)(slash - name), name);
    pc_status st = check_link(r, group, name);
    if (st == PC_OK) st = check_link(r, name, name);
    if (st != PC_OK) return st;
    hid_t d = H5Dopen2(r->file, name, H5P_DEFAULT);
    hid_t type = d >= 0 ? H5Dget_type(d) : -1;
    hid_t space = d >= 0 ? H5Dget_space(d) : -1;
    if (d < 0 || type < 0 || space < 0) {
        st = pc_fail(PC_ERR_FORMAT, "%s: %s is not a readable dataset", path, name);
        goto fail;
    }
    H5T_class_t got = H5Tget_class(type);
    size_t elem = H5Tget_size(type);
    if (got != cls) {
        st = pc_fail(PC_ERR_FORMAT, "%s: %s holds %s values; expected %s", path, name,
                     got == H5T_FLOAT ? "float" : got == H5T_INTEGER ? "integer"
                     : got == H5T_STRING ? "string" : "non-numeric",
                     cls == H5T_FLOAT ? "float" : "integer");
        goto fail;
    }
    if (elem == 0 || elem > 16) {
        st = pc_fail(PC_ERR_FORMAT, "%s: %s has %zu-byte values", path, name, elem);
        goto fail;
    }
    int nd = H5Sget_simple_extent_ndims(space);
    hsize_t dims[8];
    if (nd != rank || H5Sget_simple_extent_dims(space, dims, NULL) != rank) {
        st = pc_fail(PC_ERR_FORMAT, "%s: %s has %d dimensions; expected %d", path, name, nd, rank);
        goto fail;
    }
    for (int i = 0; i < rank; i++) {
        if (want[i] < 0 ? dims[i] <= INT64_MAX : dims[i] == (hsize_t)want[i]) continue;
        char shape[128], exp[96] = "";
        for (int j = 0; j < rank; j++) {
            size_t e = strlen(exp);
            if (want[j] >= 0)
                snprintf(exp + e, sizeof exp - e, "%s%lld", j ? ", " : "", (long long)want[j]);
            else
                snprintf(exp + e, sizeof exp - e, "%s*", j ? ", " : "");
        }
        st = pc_fail(PC_ERR_FORMAT,
                     "%s: %s has shape %s; expected [%s] from num_vars, num_cats, num_latents",
                     path, name, dims_text(dims, rank, shape, sizeof shape), exp);
        goto fail;
    }
    for (int i = 0; i < rank; i++) dims_out[i] = (int64_t)dims[i];
    st = check_storage(r, d, name, dims, rank, elem);
fail:
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

static pc_status check_header(const reader *r, int32_t *V, int32_t *C, int32_t *K) {
    char format[64];
    int32_t version = 0;
    pc_status st = read_string_attr(r, "format", format, sizeof format);
    if (st != PC_OK) return st;
    if (strcmp(format, PC_HCLT_FORMAT_NAME) != 0)
        return pc_fail(PC_ERR_FORMAT, "%s: attribute 'format' is '%s', not '%s'", r->path, format,
                       PC_HCLT_FORMAT_NAME);
    if ((st = read_int_attr(r, "version", &version)) != PC_OK) return st;
    if (version != PC_HCLT_VERSION)
        return pc_fail(PC_ERR_FORMAT, "%s: format version %d is not supported (this reader: %d)",
                       r->path, version, PC_HCLT_VERSION);
    if ((st = read_int_attr(r, "num_vars", V)) != PC_OK ||
        (st = read_int_attr(r, "num_cats", C)) != PC_OK ||
        (st = read_int_attr(r, "num_latents", K)) != PC_OK)
        return st;
    if (*V < 1 || *C < 2 || *K < 1)
        return pc_fail(PC_ERR_FORMAT,
                       "%s: num_vars = %d, num_cats = %d, num_latents = %d (need V >= 1, C >= 2, "
                       "K >= 1)",
                       r->path, *V, *C, *K);
    return PC_OK;
}

static pc_status read_open(reader *r, int64_t max_bytes, const pc_hclt_read_hook *hook,
                           pc_hclt **out) {
    int32_t V = 0, C = 0, K = 0;
    pc_status st = check_header(r, &V, &C, &K);
    if (st != PC_OK) return st;
    hid_t ds[5] = {-1, -1, -1, -1, -1};
    int64_t d_parent[1], d_trans[1], d_root[1], d_tl[3], d_in[3];
    const int64_t w_v[1] = {V}, w_k[1] = {K}, w_tl[3] = {-1, K, K}, w_in[3] = {V, K, C};
    const char *path = r->path;
    pc_hclt *m = NULL;
    if ((st = open_dataset(r, "/structure/parent", H5T_INTEGER, 1, w_v, d_parent, &ds[0])) ||
        (st = open_dataset(r, "/structure/trans_index", H5T_INTEGER, 1, w_v, d_trans, &ds[1])) ||
        (st = open_dataset(r, "/params/root_logw", H5T_FLOAT, 1, w_k, d_root, &ds[2])) ||
        (st = open_dataset(r, "/params/trans_logw", H5T_FLOAT, 3, w_tl, d_tl, &ds[3])) ||
        (st = open_dataset(r, "/params/input_logp", H5T_FLOAT, 3, w_in, d_in, &ds[4])))
        goto fail;
    if (d_tl[0] > INT32_MAX) {
        st = pc_fail(PC_ERR_FORMAT, "%s: /params/trans_logw has %lld rows, more than 2^31 - 1",
                     path, (long long)d_tl[0]);
        goto fail;
    }
    if ((st = pc_hclt_check_size(V, C, K, d_tl[0], max_bytes, path, PC_ERR_FORMAT)) != PC_OK)
        goto fail;
    if (hook && (st = hook->sizes(hook->ctx, V, C, K, (int32_t)d_tl[0])) != PC_OK) goto fail;
    if ((st = pc_hclt_create(V, C, K, (int32_t)d_tl[0], &m)) != PC_OK) {
        st = pc_fail(st, "%s: %s", path, pc_last_error());
        goto fail;
    }
    /* Sizes passed pc_hclt_check_size: these products fit. */
    if ((st = read_ints(ds[0], path, "/structure/parent", m->parent, V)) ||
        (st = read_ints(ds[1], path, "/structure/trans_index", m->trans_index, V)) ||
        (st = read_doubles(ds[2], path, "/params/root_logw", m->root_logw, K)) ||
        (st = read_doubles(ds[3], path, "/params/trans_logw", m->trans_logw, d_tl[0] * K * K)) ||
        (st = read_doubles(ds[4], path, "/params/input_logp", m->input_logp,
                           (int64_t)V * K * C)))
        goto fail;
fail:
    for (int i = 0; i < 5; i++)
        if (ds[i] >= 0) H5Dclose(ds[i]);
    if (st == PC_OK)
        *out = m;
    else
        pc_hclt_free(m);
    return st;
}

/* Opens the file at `path`, or the image when image != NULL, read-only. */
static hid_t open_file(const char *path, const void *image, size_t image_len) {
    if (!image) return H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t file = -1;
    if (fapl >= 0 && H5Pset_fapl_core(fapl, 1 << 20, 0) >= 0 &&
        H5Pset_file_image(fapl, (void *)image, image_len) >= 0)
        file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    return file;
}

pc_status pc_hclt_read(const char *path, const void *image, size_t image_len, int64_t max_bytes,
                       const pc_hclt_read_hook *hook, pc_hclt **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_hclt_read: out is NULL");
    *out = NULL;
    if (!path) return pc_fail(PC_ERR_ARG, "pc_hclt_read: path is NULL");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (!image) {
        /* Open with stdio first so a missing or unreadable file gets the system's reason. */
        FILE *probe = fopen(path, "rb");
        if (!probe) return pc_fail(PC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        fclose(probe);
        if (H5Fis_hdf5(path) <= 0) return pc_fail(PC_ERR_FORMAT, "%s: not an HDF5 file", path);
    }
    hid_t file = open_file(path, image, image_len);
    if (file < 0)
        return pc_fail(PC_ERR_FORMAT, image ? "%s: not an HDF5 file"
                                            : "%s: HDF5 cannot open the file", path);
    reader r = {file, path, 0, 0};
    hsize_t size = 0;
    pc_status st = H5Fget_filesize(file, &size) < 0 || size > INT64_MAX
                       ? pc_fail(PC_ERR_FORMAT, "%s: cannot tell the file's size", path)
                       : PC_OK;
    r.file_bytes = (int64_t)size;
    if (st == PC_OK) st = read_open(&r, max_bytes, hook, out);
    H5Fclose(file);
    return st;
}

pc_status pc_hclt_load(const char *path, pc_hclt **out) {
    pc_status st = pc_hclt_read(path, NULL, 0, PC_HCLT_MAX_BYTES, NULL, out);
    if (st == PC_OK && (st = pc_hclt_validate(*out, path)) != PC_OK) {
        pc_hclt_free(*out);
        *out = NULL;
    }
    return st;
}
