/* HCLT model files: the HDF5 writer of HCLT_FORMAT v1 (docs/format.md).
 *
 * The file is built in memory (HDF5's core driver, no backing store) and its image goes out
 * through a pc_file_writer: libhdf5 never writes to disk itself, so a full disk is one write
 * error of ours (a failed H5Fclose on a full disk used to leave libhdf5 a half-closed file that
 * its exit handler then crashed on), and the output is never half-written nor written through a
 * planted link. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>
#include <zlib.h>

#include "base/fail.h"
#include "base/parallel.h"
#include "model/hclt_internal.h"
#include "pc/file.h"

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

/* A group without object times (see build_image). */
static int write_group(hid_t file, const char *name) {
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    hid_t g = gcpl >= 0 && H5Pset_obj_track_times(gcpl, 0) >= 0
                  ? H5Gcreate2(file, name, H5P_DEFAULT, gcpl, H5P_DEFAULT)
                  : -1;
    if (g >= 0) H5Gclose(g);
    if (gcpl >= 0) H5Pclose(gcpl);
    return g >= 0;
}

/* The deflate level of every dataset: level 1 was 1.3x as fast and 2 % larger on a learned
 * K = 256 model (3.0 s against 3.8 s, one thread). */
#define PC_HCLT_DEFLATE 4

/* Chunks compressed at once by write_params_chunks: bounds the compressed bytes held before
 * they go into the file (64 chunks of at most 1 MiB). */
#define PC_HCLT_CHUNK_BATCH 64

/* A float dataset's chunk, as the shuffle and deflate filters leave it: rows [r0, r0 + rows) of
 * `data` (doubles, `row` values each) converted to the file's float of `elem` bytes (host
 * order, little-endian here), padded with zeros to the chunk's `chunk_rows` (HDF5 stores an
 * edge chunk whole), byte-shuffled (byte j of element i at j * count + i) and deflated. Returns
 * the compressed size, 0 when out of memory. */
static size_t pack_chunk(const double *data, hsize_t r0, hsize_t rows, hsize_t chunk_rows,
                         hsize_t row, size_t elem, unsigned char **out) {
    const size_t count = (size_t)(chunk_rows * row), bytes = count * elem;
    unsigned char *raw = calloc(bytes, 1), *shuffled = malloc(bytes);
    uLongf packed = compressBound((uLong)bytes);
    *out = malloc(packed);
    int ok = raw && shuffled && *out;
    if (ok) {
        const double *src = data + r0 * row;
        const size_t n = (size_t)(rows * row);
        if (elem == 4)
            for (size_t i = 0; i < n; i++) ((float *)raw)[i] = (float)src[i];
        else
            memcpy(raw, src, n * elem);
        for (size_t j = 0; j < elem; j++)
            for (size_t i = 0; i < count; i++) shuffled[j * count + i] = raw[i * elem + j];
        ok = compress2(*out, &packed, shuffled, (uLong)bytes, PC_HCLT_DEFLATE) == Z_OK;
    }
    free(raw);
    free(shuffled);
    if (!ok) {
        free(*out);
        *out = NULL;
        return 0;
    }
    return (size_t)packed;
}

/* One batch of chunks to pack: chunk i of the batch is dataset rows from (c0 + i) * chunk_rows. */
typedef struct chunk_batch {
    const double *data;
    hsize_t rows_total, chunk_rows, row, c0;
    size_t elem;
    unsigned char *packed[PC_HCLT_CHUNK_BATCH];
    size_t sizes[PC_HCLT_CHUNK_BATCH];
} chunk_batch;

static void pack_chunks(void *ctx, int64_t lo, int64_t hi) {
    chunk_batch *b = ctx;
    for (int64_t i = lo; i < hi; i++) {
        const hsize_t r0 = (b->c0 + (hsize_t)i) * b->chunk_rows;
        const hsize_t left = b->rows_total - r0;
        const hsize_t rows = left < b->chunk_rows ? left : b->chunk_rows;
        b->sizes[i] = pack_chunk(b->data, r0, rows, b->chunk_rows, b->row, b->elem, &b->packed[i]);
    }
}

/* The chunks of a float dataset of doubles, compressed on every usable CPU (pc_parallel_for;
 * deflate is most of a save's time: a K = 256 model took 7.1-7.3 s on one thread, 3.9-4.2 s on
 * 2 cores this way) and written in order with H5Dwrite_chunk, so the file does not depend on
 * the thread count: the same chunks that H5Dwrite through the dataset's filters stores. */
static int write_params_chunks(hid_t ds, const hsize_t *dims, hsize_t chunk_rows,
                               hsize_t row, size_t elem, const double *data) {
    const hsize_t chunks = (dims[0] + chunk_rows - 1) / chunk_rows;
    chunk_batch *b = malloc(sizeof *b);
    if (!b) return 0;
    int ok = 1;
    for (hsize_t c0 = 0; c0 < chunks && ok; c0 += PC_HCLT_CHUNK_BATCH) {
        *b = (chunk_batch){.data = data, .rows_total = dims[0], .chunk_rows = chunk_rows,
                           .row = row, .c0 = c0, .elem = elem};
        const int count =
            (int)(chunks - c0 < PC_HCLT_CHUNK_BATCH ? chunks - c0 : PC_HCLT_CHUNK_BATCH);
        pc_parallel_for(count, 1, pack_chunks, b);
        for (int i = 0; i < count; i++) {
            hsize_t offset[8] = {0};
            offset[0] = (c0 + (hsize_t)i) * chunk_rows;
            ok = ok && b->sizes[i] > 0 &&
                 H5Dwrite_chunk(ds, H5P_DEFAULT, 0, offset, b->sizes[i], b->packed[i]) >= 0;
            free(b->packed[i]);
        }
    }
    free(b);
    return ok;
}

/* Writes a dataset of `rank` dims; non-empty ones are chunked by their first axis (one row of
 * the leading index per chunk, at most 1 MiB) with shuffle + deflate. `mem_type` is
 * H5T_NATIVE_INT32 (written through HDF5) or H5T_NATIVE_DOUBLE (float datasets, whose chunks
 * write_params_chunks packs itself). */
static int write_dataset(hid_t file, const char *name, int rank, const hsize_t *dims,
                         hid_t file_type, hid_t mem_type, const void *data) {
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t n = 1, row = 1, chunk[8];
    const size_t elem = H5Tget_size(file_type);
    for (int i = 0; i < rank; i++) n *= dims[i];
    for (int i = 1; i < rank; i++) row *= dims[i];
    if (n > 0) {
        hsize_t rows = (1u << 20) / (elem * row);
        chunk[0] = rows < 1 ? 1 : rows > dims[0] ? dims[0] : rows;
        for (int i = 1; i < rank; i++) chunk[i] = dims[i];
        H5Pset_chunk(dcpl, rank, chunk);
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, PC_HCLT_DEFLATE);
    }
    H5Pset_obj_track_times(dcpl, 0);
    hid_t ds = H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    int ok = ds >= 0;
    if (ok && n > 0) {
        if (H5Tequal(mem_type, H5T_NATIVE_DOUBLE) > 0 && (elem == 4 || elem == 8) &&
            H5Tget_order(file_type) == H5Tget_order(H5T_NATIVE_DOUBLE))
            ok = write_params_chunks(ds, dims, chunk[0], row, elem, (const double *)data);
        else
            ok = H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
    }
    if (ds >= 0) H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    return ok;
}

/* Writes the model into a fresh in-memory HDF5 file and returns its image (malloc'ed). */
static pc_status build_image(const pc_hclt *m, pc_hclt_float float_type, const char *name,
                             void **image, size_t *len) {
    /* The core driver still registers the file under its name: one name per image, so images
     * built at the same time never meet. */
    static atomic_ulong serial;
    char id[64];
    snprintf(id, sizeof id, "pcinfer-image-%ld-%lu", (long)getpid(),
             (unsigned long)atomic_fetch_add(&serial, 1));
    /* No object times (HDF5 stamps every object header with the second it was made): the same
     * model gives the same bytes whenever it is saved. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = H5Pcreate(H5P_FILE_CREATE);
    hid_t file = -1;
    if (fapl >= 0 && fcpl >= 0 && H5Pset_fapl_core(fapl, 1 << 20, 0) >= 0 &&
        H5Pset_obj_track_times(fcpl, 0) >= 0)
        file = H5Fcreate(id, H5F_ACC_EXCL, fcpl, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    if (file < 0) return pc_fail(PC_ERR_INTERNAL, "%s: HDF5 cannot create a file in memory", name);
    hid_t ftype = float_type == PC_HCLT_F32 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE;
    const hsize_t V = (hsize_t)m->num_vars, C = (hsize_t)m->num_cats, K = (hsize_t)m->num_latents,
                  T = (hsize_t)m->num_trans;
    const hsize_t d_v[1] = {V}, d_k[1] = {K}, d_tl[3] = {T, K, K}, d_in[3] = {V, K, C};
    int ok = write_format_attr(file) && write_int_attr(file, "version", PC_HCLT_VERSION) &&
             write_int_attr(file, "num_vars", m->num_vars) &&
             write_int_attr(file, "num_cats", m->num_cats) &&
             write_int_attr(file, "num_latents", m->num_latents) &&
             write_group(file, "/structure") && write_group(file, "/params") &&
             write_dataset(file, "/structure/parent", 1, d_v, H5T_STD_I32LE, H5T_NATIVE_INT32,
                           m->parent) &&
             write_dataset(file, "/structure/trans_index", 1, d_v, H5T_STD_I32LE,
                           H5T_NATIVE_INT32, m->trans_index) &&
             write_dataset(file, "/params/root_logw", 1, d_k, ftype, H5T_NATIVE_DOUBLE,
                           m->root_logw) &&
             write_dataset(file, "/params/trans_logw", 3, d_tl, ftype, H5T_NATIVE_DOUBLE,
                           m->trans_logw) &&
             write_dataset(file, "/params/input_logp", 3, d_in, ftype, H5T_NATIVE_DOUBLE,
                           m->input_logp) &&
             H5Fflush(file, H5F_SCOPE_GLOBAL) >= 0;
    ssize_t size = ok ? H5Fget_file_image(file, NULL, 0) : -1;
    void *bytes = size > 0 ? malloc((size_t)size) : NULL;
    ok = bytes && H5Fget_file_image(file, bytes, (size_t)size) == size;
    H5Fclose(file);
    if (!ok) {
        free(bytes);
        return pc_fail(PC_ERR_NOMEM, "%s: building the model file in memory failed", name);
    }
    *image = bytes;
    *len = (size_t)size;
    return PC_OK;
}

pc_status pc_hclt_write(const pc_hclt *m, pc_hclt_float float_type, pc_file_writer *w,
                        const char *name) {
    if (!w) return pc_fail(PC_ERR_ARG, "pc_hclt_write: writer is NULL");
    if (!name) name = "model";
    if (float_type != PC_HCLT_F32 && float_type != PC_HCLT_F64)
        return pc_fail(PC_ERR_ARG, "pc_hclt_write: unknown float type %d", (int)float_type);
    pc_status st = pc_hclt_validate(m, name);
    if (st != PC_OK) return st;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    void *image = NULL;
    size_t len = 0;
    if ((st = build_image(m, float_type, name, &image, &len)) != PC_OK) return st;
    st = pc_file_writer_write(w, image, len);
    free(image);
    return st;
}

pc_status pc_hclt_save(const pc_hclt *m, const char *path, pc_hclt_float float_type) {
    if (!path) return pc_fail(PC_ERR_ARG, "pc_hclt_save: path is NULL");
    pc_file_writer *w = NULL;
    pc_status st = pc_file_writer_open(path, NULL, 0, &w);
    if (st != PC_OK) return st;
    if ((st = pc_hclt_write(m, float_type, w, path)) != PC_OK) {
        pc_file_writer_abort(w);
        return st;
    }
    return pc_file_writer_commit(w);
}
