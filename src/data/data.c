/* Data sets in memory: allocation, and whole IDX files read through the streaming reader. */
#include "pc/data.h"
#include "base/fail.h"
#include "base/size_check.h"
#include "data/idx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A gzip file's rows go into a buffer that starts at this size and doubles, so memory follows
 * the data the file really holds, not its header's claim. */
#define PC_DATA_FIRST_BYTES ((int64_t)16 << 20)

pc_status pc_data_create(int64_t count, int32_t width, pc_data **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_data_create: out is NULL");
    *out = NULL;
    if (count < 0 || width < 1)
        return pc_fail(PC_ERR_ARG, "pc_data_create: count = %lld, width = %d (need count >= 0, "
                                   "width >= 1)", (long long)count, width);
    int64_t bytes;
    if (!pc_size_mul(count, width, &bytes) || bytes > PC_DATA_MAX_BYTES)
        return pc_fail(PC_ERR_ARG, "pc_data_create: %lld x %d values is more than %lld GiB",
                       (long long)count, width, (long long)(PC_DATA_MAX_BYTES >> 30));
    pc_data *d = calloc(1, sizeof *d);
    if (d) d->values = calloc(bytes > 0 ? (size_t)bytes : 1, 1);
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

/* Reads every row of r into a malloc'ed buffer: the claim is held to PC_DATA_MAX_BYTES first,
 * and the buffer grows only as the data arrives. */
static pc_status read_all(pc_data_reader *r, const char *path, uint8_t **values) {
    const int64_t count = pc_data_reader_count(r), width = pc_data_reader_width(r);
    int64_t total;
    char claimed[64];
    int fits = pc_size_mul(count, width, &total);
    pc_bytes_text(total, claimed, sizeof claimed);
    if (!fits || total > PC_DATA_MAX_BYTES)
        return pc_fail(PC_ERR_DATA, "%s: the IDX header claims %lld rows of %lld bytes (%s); at "
                                    "most %lld GiB are read into memory",
                       path, (long long)count, (long long)width, claimed,
                       (long long)(PC_DATA_MAX_BYTES >> 30));
    int64_t cap = total < PC_DATA_FIRST_BYTES ? total : PC_DATA_FIRST_BYTES, used = 0, got = 0;
    uint8_t *buf = malloc(cap > 0 ? (size_t)cap : 1);
    pc_status st = buf ? PC_OK : PC_ERR_NOMEM;
    /* Bytes, not rows: a row may be larger than all the data the file holds. */
    while (st == PC_OK && used < total) {
        if (used == cap) {
            cap = cap * 2 < total ? cap * 2 : total;
            uint8_t *grown = realloc(buf, (size_t)cap);
            if (!grown) {
                st = PC_ERR_NOMEM;
                break;
            }
            buf = grown;
        }
        st = pc_idx_read_bytes(r, buf + used, cap - used, &got);
        used += got;
    }
    if (st == PC_OK && total == 0) st = pc_idx_read_bytes(r, NULL, 0, &got); /* end check */
    if (st == PC_ERR_NOMEM)
        st = pc_fail(PC_ERR_NOMEM, "%s: out of memory for %s of data", path, claimed);
    if (st != PC_OK) {
        free(buf);
        return st;
    }
    *values = buf;
    return PC_OK;
}

pc_status pc_data_load_idx(const char *path, pc_data **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_data_load_idx: out is NULL");
    *out = NULL;
    if (!path) return pc_fail(PC_ERR_ARG, "pc_data_load_idx: path is NULL");
    pc_data_reader *r = NULL;
    pc_status st = pc_idx_open(path, 2, 255, &r);
    if (st != PC_OK) return st;
    pc_data *d = calloc(1, sizeof *d);
    if (!d) st = pc_fail(PC_ERR_NOMEM, "%s: out of memory", path);
    if (st == PC_OK) st = read_all(r, path, &d->values);
    if (st == PC_OK) {
        d->count = pc_data_reader_count(r);
        d->width = pc_data_reader_width(r);
        *out = d;
    } else {
        free(d);
    }
    pc_data_reader_close(r);
    return st;
}

pc_status pc_data_load_idx_labels(const char *path, uint8_t **labels, int64_t *count) {
    if (!labels || !count || !path)
        return pc_fail(PC_ERR_ARG, "pc_data_load_idx_labels: NULL argument");
    *labels = NULL;
    *count = 0;
    pc_data_reader *r = NULL;
    pc_status st = pc_idx_open(path, 1, 1, &r);
    if (st == PC_OK && (st = read_all(r, path, labels)) == PC_OK) *count = pc_data_reader_count(r);
    pc_data_reader_close(r);
    return st;
}
