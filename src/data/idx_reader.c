/* The streaming IDX reader (pc/data.h), plain or gzip through zlib.
 *
 * IDX layout: 2 zero bytes, a type byte (0x08 = uint8), a byte with the number of dimensions
 * n, then n big-endian uint32 sizes, then the payload: the product of the sizes in bytes. Rows
 * are the first dimension; a row is the product of the others (1 for a label file).
 *
 * Nothing is allocated from the header's claims: rows go into the caller's buffer. A plain
 * regular file's length is checked against the claim at open; a gzip file is checked as it is
 * read (its end, and zlib's CRC and length, when the last row has been read). */
#include "data/idx_internal.h"
#include "base/fail.h"
#include "base/size_check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

struct pc_data_reader {
    gzFile f;
    char *path;
    int64_t count; /* rows the header claims */
    int64_t width; /* bytes per row */
    int64_t total; /* count x width: the payload the header claims */
    int64_t done;  /* payload bytes read so far */
    int ended;     /* the end of the file has been checked */
    int sized;     /* a plain regular file, its length checked at open */
};

/* Reads up to n bytes (any size; gzread takes unsigned counts). Returns the bytes read (fewer
 * only at the end of the data), or -1 on a zlib error. */
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
    /* zlib's text may start with a path already ("path: incorrect data check"). */
    const char *colon = msg ? strstr(msg, ": ") : NULL;
    if (colon && code != Z_MEM_ERROR) msg = colon + 2;
    return pc_fail(PC_ERR_DATA, "%s: %s (%s)", path, what,
                   code != Z_OK && msg && *msg ? msg : "unexpected end of file");
}

/* Checks the header (uint8 elements, min_dims..max_dims dimensions) and fills count, width. */
static pc_status read_header(pc_data_reader *r, int min_dims, int max_dims, int64_t *header) {
    const char *path = r->path;
    uint8_t head[4];
    int64_t got = gz_read_all(r->f, head, 4);
    if (got != 4)
        return got < 0 ? gz_problem(r->f, path, "cannot read the IDX header")
                       : pc_fail(PC_ERR_DATA, "%s: file too short for an IDX header (%lld bytes)",
                                 path, (long long)got);
    if (head[0] != 0 || head[1] != 0)
        return pc_fail(PC_ERR_DATA, "%s: not an IDX file (magic %02x %02x %02x %02x)", path,
                       head[0], head[1], head[2], head[3]);
    if (head[2] != 0x08)
        return pc_fail(PC_ERR_DATA, "%s: IDX element type 0x%02x is not uint8 (0x08)", path,
                       head[2]);
    const int ndims = head[3];
    if (ndims < min_dims || ndims > max_dims) {
        if (min_dims == max_dims)
            return pc_fail(PC_ERR_DATA, "%s: IDX file has %d dimensions; expected %d", path,
                           ndims, min_dims);
        return pc_fail(PC_ERR_DATA, "%s: IDX file has %d dimensions; expected at least %d",
                       path, ndims, min_dims);
    }
    uint8_t raw[4 * 255];
    got = gz_read_all(r->f, raw, 4 * (int64_t)ndims);
    if (got != 4 * (int64_t)ndims)
        return got < 0 ? gz_problem(r->f, path, "cannot read the IDX header")
                       : pc_fail(PC_ERR_DATA, "%s: truncated IDX header", path);
    int64_t dims[255];
    for (int i = 0; i < ndims; i++)
        dims[i] = (int64_t)raw[4 * i] << 24 | (int64_t)raw[4 * i + 1] << 16 |
                  (int64_t)raw[4 * i + 2] << 8 | (int64_t)raw[4 * i + 3];
    /* 254 sizes below 2^32 can overflow int64: the product is checked. */
    if (!pc_size_product(dims + 1, ndims - 1, &r->width) || r->width < 1 ||
        r->width > INT32_MAX) {
        char text[64] = "more than 2^63";
        if (r->width < INT64_MAX) snprintf(text, sizeof text, "%lld", (long long)r->width);
        return pc_fail(PC_ERR_DATA, "%s: IDX row width %s is out of range [1, 2^31)", path,
                       text);
    }
    r->count = dims[0];
    pc_size_mul(r->count, r->width, &r->total); /* below 2^32 x 2^31: fits */
    *header = 4 + 4 * (int64_t)ndims;
    return PC_OK;
}

/* A plain regular file must hold exactly the bytes its header claims. */
static pc_status check_length(pc_data_reader *r, int fd, int64_t header) {
    struct stat sb;
    if (!gzdirect(r->f) || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) return PC_OK;
    r->sized = 1;
    const int64_t held = (int64_t)sb.st_size - header, claimed = r->total;
    if (held < claimed)
        return pc_fail(PC_ERR_DATA, "%s: truncated: the header claims %lld rows of %lld bytes "
                                    "(%lld bytes), the file holds %lld",
                       r->path, (long long)r->count, (long long)r->width, (long long)claimed,
                       (long long)held);
    if (held > claimed)
        return pc_fail(PC_ERR_DATA, "%s: more data than the header's %lld bytes (%lld)",
                       r->path, (long long)claimed, (long long)held);
    return PC_OK;
}

pc_status pc_idx_open(const char *path, int min_dims, int max_dims, pc_data_reader **out) {
    *out = NULL;
    pc_data_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return pc_fail(PC_ERR_NOMEM, "%s: out of memory", path);
    }
    pc_status st = PC_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        st = pc_fail(PC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    } else if (!(r->f = gzdopen(fd, "rb"))) {
        close(fd);
        st = pc_fail(PC_ERR_NOMEM, "%s: out of memory opening it", path);
    } else {
        gzbuffer(r->f, 1 << 17);
        int64_t header = 0;
        st = read_header(r, min_dims, max_dims, &header);
        if (st == PC_OK) st = check_length(r, fd, header);
    }
    if (st != PC_OK) {
        pc_data_reader_close(r);
        return st;
    }
    *out = r;
    return PC_OK;
}

pc_status pc_data_reader_open(const char *path, pc_data_reader **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_data_reader_open: out is NULL");
    *out = NULL;
    if (!path) return pc_fail(PC_ERR_ARG, "pc_data_reader_open: path is NULL");
    return pc_idx_open(path, 2, 255, out);
}

int64_t pc_data_reader_count(const pc_data_reader *r) { return r ? r->count : 0; }
int32_t pc_data_reader_width(const pc_data_reader *r) { return r ? (int32_t)r->width : 0; }

/* After the last byte: the file must end there (reading one more byte also makes zlib check
 * the gzip trailer's CRC and length). */
static pc_status check_end(pc_data_reader *r) {
    r->ended = 1;
    uint8_t extra;
    int64_t got = gz_read_all(r->f, &extra, 1);
    if (got < 0) return gz_problem(r->f, r->path, "corrupt gzip data");
    if (got > 0)
        return pc_fail(PC_ERR_DATA, "%s: more data than the header's %lld bytes", r->path,
                       (long long)r->total);
    return PC_OK;
}

pc_status pc_idx_read_bytes(pc_data_reader *r, uint8_t *buf, int64_t max_bytes, int64_t *got) {
    int64_t want = r->total - r->done < max_bytes ? r->total - r->done : max_bytes;
    *got = gz_read_all(r->f, buf, want);
    if (*got < 0) {
        *got = 0;
        return gz_problem(r->f, r->path, "corrupt gzip data");
    }
    r->done += *got;
    if (*got < want)
        return pc_fail(PC_ERR_DATA, "%s: truncated: the header promises %lld rows of %lld "
                                    "bytes, the file ends in row %lld",
                       r->path, (long long)r->count, (long long)r->width,
                       (long long)(r->done / r->width));
    return r->done == r->total && !r->ended ? check_end(r) : PC_OK;
}

pc_status pc_data_reader_read(pc_data_reader *r, uint8_t *values, int64_t max_rows,
                              int64_t *rows_read) {
    if (!r || !rows_read || max_rows < 0 || (max_rows > 0 && !values))
        return pc_fail(PC_ERR_ARG, "pc_data_reader_read: NULL argument or max_rows < 0");
    *rows_read = 0;
    const int64_t left = r->count - r->done / r->width;
    const int64_t want = left < max_rows ? left : max_rows;
    int64_t got = 0;
    /* want <= count < 2^32, width < 2^31: the product fits. */
    pc_status st = pc_idx_read_bytes(r, values, want * r->width, &got);
    if (st == PC_OK) *rows_read = want;
    return st;
}

pc_status pc_data_reader_skip(pc_data_reader *r, int64_t rows) {
    if (!r || rows < 0) return pc_fail(PC_ERR_ARG, "pc_data_reader_skip: NULL reader or rows < 0");
    const int64_t left = r->count - r->done / r->width;
    const int64_t bytes = (left < rows ? left : rows) * r->width;
    /* A plain regular file holds its claimed bytes (checked at open): a seek. zlib's gzseek
     * is an lseek there; it takes a z_off_t, so a long skip goes in pieces. */
    int64_t moved = 0;
    while (r->sized && moved < bytes) {
        const int64_t step = bytes - moved < (1 << 30) ? bytes - moved : (1 << 30);
        if (gzseek(r->f, (z_off_t)step, SEEK_CUR) < 0) break;
        moved += step;
        r->done += step;
    }
    /* Else (gzip, a pipe) the rows are read and dropped, with a read's checks. */
    uint8_t drop[1 << 16];
    pc_status st = PC_OK;
    while (st == PC_OK && moved < bytes) {
        int64_t got = 0;
        const int64_t step = bytes - moved < (int64_t)sizeof drop ? bytes - moved
                                                                  : (int64_t)sizeof drop;
        st = pc_idx_read_bytes(r, drop, step, &got);
        moved += got;
    }
    return st;
}

void pc_data_reader_close(pc_data_reader *r) {
    if (!r) return;
    if (r->f) gzclose(r->f);
    free(r->path);
    free(r);
}
