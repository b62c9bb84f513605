/* Data sets of discrete variables: uint8 values [count, width] with an optional missing mask.
 * Readers: IDX files (MNIST layout), plain or gzip-compressed, through zlib, whole or streamed
 * in batches. */
#ifndef PC_DATA_H
#define PC_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "pc/export.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A data set is plain data without locks: several threads may read one at once, but none
 * may read it while another changes or frees it. */
typedef struct pc_data {
    int64_t count;    /* N samples */
    int32_t width;    /* V variables per sample (28 * 28 = 784 for MNIST) */
    uint8_t *values;  /* [count, width], row-major */
    uint8_t *missing; /* [count, width], 1 = unobserved (marginalised); NULL = all observed */
} pc_data;

/* The most bytes of values held in memory at once (16 GiB): pc_data_create refuses more, and
 * the whole-file loaders refuse a header that claims more, before reading. */
#define PC_DATA_MAX_BYTES ((int64_t)1 << 34)

/* Allocates count x width zeroed values (missing = NULL). */
PC_API pc_status pc_data_create(int64_t count, int32_t width, pc_data **out);
PC_API void pc_data_free(pc_data *data);

/* Reads a whole IDX image file (magic 0x00000803, uint8, any number of dimensions >= 1 after
 * the count; width = product of them), plain or .gz. Every header field and the payload length
 * are checked; a truncated or corrupt file gets a message naming the file. Memory follows the
 * data: a plain file's length must match its header before anything is allocated, a gzip
 * file's buffer grows as rows arrive, and a header claiming more than PC_DATA_MAX_BYTES is
 * refused, naming the claim. */
PC_API pc_status pc_data_load_idx(const char *path, pc_data **out);

/* The same for an IDX label file (magic 0x00000801): a malloc'ed uint8 array of *count
 * labels. */
PC_API pc_status pc_data_load_idx_labels(const char *path, uint8_t **labels, int64_t *count);

/* Streaming: an IDX image file read a batch of rows at a time into the caller's buffer, so
 * that memory does not grow with the file (scoring 10^6 images holds one batch).
 *
 *   pc_data_reader *r;
 *   pc_data_reader_open(path, &r);               header checked; a plain file's length too
 *   pc_data_reader_read(r, rows, n, &got);       rows is [n, width]; got < n only at the end
 *   pc_data_reader_close(r);
 *
 * The header's row count is a claim, checked as the rows arrive: a file that ends early fails
 * in the read that reaches its end, naming the row; reading the last row also checks that
 * nothing follows it and, for gzip, the CRC. A reader belongs to one thread at a time. */
typedef struct pc_data_reader pc_data_reader;

PC_API pc_status pc_data_reader_open(const char *path, pc_data_reader **out);

/* Rows the header claims, and bytes per row. */
PC_API int64_t pc_data_reader_count(const pc_data_reader *r);
PC_API int32_t pc_data_reader_width(const pc_data_reader *r);

/* Reads min(max_rows, rows left) rows into values [max_rows, width]; *rows_read = 0 at the
 * end. On error the reader stays at the failing row and the message names the file. */
PC_API pc_status pc_data_reader_read(pc_data_reader *r, uint8_t *values, int64_t max_rows,
                                     int64_t *rows_read);

/* Moves past the next min(rows, rows left) rows without returning them (rows >= 0), so that a
 * process can read its own part of a file: a seek in a plain regular file, decompressed and
 * dropped in a gzip file or a pipe (with a read's checks: a file that ends early fails naming
 * the row). */
PC_API pc_status pc_data_reader_skip(pc_data_reader *r, int64_t rows);

/* Closes the file; NULL does nothing. */
PC_API void pc_data_reader_close(pc_data_reader *r);

#ifdef __cplusplus
}
#endif

#endif
