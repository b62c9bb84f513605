/* Data sets: allocation, the IDX reader (plain or gzip through zlib) and the MNIST finder.
 *
 * IDX layout: 2 zero bytes, a type byte (0x08 = uint8), a byte with the number of dimensions
 * n, then n big-endian uint32 sizes, then the payload: the product of the sizes in bytes. */
#include "pc/data.h"
#include "base/fail.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

/* Largest payload accepted (16 GiB): far above MNIST, well below anything a header could
 * claim by accident. */
#define PC_IDX_MAX_BYTES ((int64_t)1 << 34)

pc_status pc_data_create(int64_t count, int32_t width, pc_data **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_data_create: out is NULL");
    *out = NULL;
    if (count < 0 || width < 1)
        return pc_fail(PC_ERR_ARG, "pc_data_create: count = %lld, width = %d (need count >= 0, "
                                   "width >= 1)", (long long)count, width);
    if (count > PC_IDX_MAX_BYTES / width)
        return pc_fail(PC_ERR_ARG, "pc_data_create: %lld x %d values is too large",
                       (long long)count, width);
    pc_data *d = calloc(1, sizeof *d);
    size_t bytes = (size_t)count * (size_t)width;
    if (d) d->values = calloc(bytes > 0 ? bytes : 1, 1);
    if (!d || !d->values) {
        free(d);
        return pc_fail(PC_ERR_NOMEM, "pc_data_create: out of memory for %lld x %d values",
                       (long long)count, width);
    }
    d->count = count;
    d->width = width;
    *out = d;
    return PC_OK;
}

void pc_data_free(pc_data *data) {
    if (!data) return;
    free(data->values);
    free(data->missing);
    free(data);
}

/* Reads exactly n bytes (any size; gzread takes unsigned counts). Returns the bytes read, or
 * -1 on a zlib error. */
static int64_t gz_read_all(gzFile f, uint8_t *buf, int64_t n) {
    int64_t done = 0;
    while (done < n) {
        int64_t want = n - done;
        if (want > (1 << 30)) want = 1 << 30;
        int got = gzread(f, buf + done, (unsigned)want);
        if (got < 0) return -1;
        if (got == 0) break;
        done += got;
    }
    return done;
}

static pc_status gz_problem(gzFile f, const char *path, const char *what) {
    int code = 0;
    const char *msg = gzerror(f, &code);
    /* zlib's text starts with the path already: "path: incorrect data check". */
    size_t n = strlen(path);
    if (msg && strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0) msg += n + 2;
    return pc_fail(PC_ERR_DATA, "%s: %s (%s)", path, what,
                   code != Z_OK && msg && *msg ? msg : "unexpected end of file");
}

/* Opens an IDX file, checks the header (uint8 elements, magic_dims_min..max dimensions) and returns
 * the sizes. */
static pc_status idx_open(const char *path, uint8_t magic_dims_min, uint8_t magic_dims_max,
                          gzFile *out, uint32_t dims[255], int *ndims) {
    *out = NULL;
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return pc_fail(PC_ERR_IO, "%s: cannot open: %s", path,
                       errno ? strerror(errno) : "out of memory");
    uint8_t head[4];
    int64_t got = gz_read_all(f, head, 4);
    pc_status st = PC_OK;
    if (got != 4) {
        st = got < 0 ? gz_problem(f, path, "cannot read the IDX header")
                     : pc_fail(PC_ERR_DATA, "%s: file too short for an IDX header (%lld bytes)",
                               path, (long long)got);
        goto fail;
    }
    if (head[0] != 0 || head[1] != 0) {
        st = pc_fail(PC_ERR_DATA, "%s: not an IDX file (magic %02x %02x %02x %02x)", path, head[0],
                     head[1], head[2], head[3]);
        goto fail;
    }
    if (head[2] != 0x08) {
        st = pc_fail(PC_ERR_DATA, "%s: IDX element type 0x%02x is not uint8 (0x08)", path, head[2]);
        goto fail;
    }
    if (head[3] < magic_dims_min || head[3] > magic_dims_max) {
        if (magic_dims_min == magic_dims_max)
            st = pc_fail(PC_ERR_DATA, "%s: IDX file has %d dimensions; expected %d", path, head[3],
                         magic_dims_min);
        else
            st = pc_fail(PC_ERR_DATA, "%s: IDX file has %d dimensions; expected at least %d", path,
                         head[3], magic_dims_min);
        goto fail;
    }
    *ndims = head[3];
    uint8_t raw[4 * 255];
    got = gz_read_all(f, raw, 4 * (int64_t)*ndims);
    if (got != 4 * (int64_t)*ndims) {
        st = got < 0 ? gz_problem(f, path, "cannot read the IDX header")
                     : pc_fail(PC_ERR_DATA, "%s: truncated IDX header", path);
        goto fail;
    }
    for (int i = 0; i < *ndims; i++)
        dims[i] = (uint32_t)raw[4 * i] << 24 | (uint32_t)raw[4 * i + 1] << 16 |
                  (uint32_t)raw[4 * i + 2] << 8 | (uint32_t)raw[4 * i + 3];
    *out = f;
    return PC_OK;
fail:
    gzclose(f);
    return st;
}

/* Reads the payload of n bytes and checks that the file ends right after it (reading one more
 * byte also makes zlib check the gzip trailer's CRC and length). */
static pc_status idx_payload(gzFile f, const char *path, uint8_t *buf, int64_t n) {
    int64_t got = gz_read_all(f, buf, n);
    if (got < 0) return gz_problem(f, path, "corrupt gzip data");
    if (got < n)
        return pc_fail(PC_ERR_DATA, "%s: truncated: the header promises %lld bytes of data, the "
                                    "file holds %lld",
                       path, (long long)n, (long long)got);
    uint8_t extra;
    got = gz_read_all(f, &extra, 1);
    if (got < 0) return gz_problem(f, path, "corrupt gzip data");
    if (got > 0)
        return pc_fail(PC_ERR_DATA, "%s: more data than the header's %lld bytes", path,
                       (long long)n);
    return PC_OK;
}

pc_status pc_data_load_idx(const char *path, pc_data **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_data_load_idx: out is NULL");
    *out = NULL;
    if (!path) return pc_fail(PC_ERR_ARG, "pc_data_load_idx: path is NULL");
    gzFile f;
    uint32_t dims[255];
    int ndims = 0;
    pc_status st = idx_open(path, 2, 255, &f, dims, &ndims);
    if (st != PC_OK) return st;
    int64_t width = 1;
    for (int i = 1; i < ndims && width <= INT32_MAX; i++) width *= dims[i];
    pc_data *d = NULL;
    if (width < 1 || width > INT32_MAX) {
        st = pc_fail(PC_ERR_DATA, "%s: IDX image width %lld is out of range [1, 2^31)", path,
                     (long long)width);
    } else if ((int64_t)dims[0] > PC_IDX_MAX_BYTES / width) {
        st = pc_fail(PC_ERR_DATA, "%s: IDX header claims %u x %lld bytes, more than this reader "
                                  "accepts", path, dims[0], (long long)width);
    } else if ((st = pc_data_create(dims[0], (int32_t)width, &d)) == PC_OK) {
        st = idx_payload(f, path, d->values, (int64_t)dims[0] * width);
    }
    gzclose(f);
    if (st != PC_OK) {
        pc_data_free(d);
        return st;
    }
    *out = d;
    return PC_OK;
}

pc_status pc_data_load_idx_labels(const char *path, uint8_t **labels, int64_t *count) {
    if (!labels || !count || !path)
        return pc_fail(PC_ERR_ARG, "pc_data_load_idx_labels: NULL argument");
    *labels = NULL;
    *count = 0;
    gzFile f;
    uint32_t dims[255];
    int ndims = 0;
    pc_status st = idx_open(path, 1, 1, &f, dims, &ndims);
    if (st != PC_OK) return st;
    uint8_t *buf = malloc(dims[0] > 0 ? dims[0] : 1);
    if (!buf)
        st = pc_fail(PC_ERR_NOMEM, "%s: out of memory for %u labels", path, dims[0]);
    else
        st = idx_payload(f, path, buf, dims[0]);
    gzclose(f);
    if (st != PC_OK) {
        free(buf);
        return st;
    }
    *labels = buf;
    *count = dims[0];
    return PC_OK;
}
