/* NumPy's .npy files (format versions 1.0 to 3.0) for the tools: a streaming reader of uint8
 * rows and the header of a file to write.
 *
 * Layout: the magic "\x93NUMPY", a version (major, minor bytes), the header's length
 * (little-endian uint16 for 1.0, uint32 for 2.0 and 3.0), the header, a Python dict literal
 * such as {'descr': '|u1', 'fortran_order': False, 'shape': (10000, 784), } padded with
 * spaces and ended by a newline, then the array's bytes. */
#ifndef PC_TOOLS_NPY_H
#define PC_TOOLS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "pc/status.h"

#define PC_TOOL_NPY_MAX_DIMS 32

/* The header's dict, parsed. */
typedef struct pc_tool_npy_header {
    char descr[16];     /* the dtype, e.g. "|u1", "<f4" */
    int fortran_order;  /* 1: column-major */
    int ndim;           /* 0 .. PC_TOOL_NPY_MAX_DIMS */
    int64_t shape[PC_TOOL_NPY_MAX_DIMS];
} pc_tool_npy_header;

/* Parses the dict text[0, len) (any order of the three keys, a trailing comma, spaces and the
 * final newline allowed; anything else is an error naming `path` and the offset). Sizes above
 * 2^62 are refused. Errors: PC_ERR_DATA with pc_tool_last_error(). */
pc_status pc_tool_npy_parse(const char *text, size_t len, const char *path,
                            pc_tool_npy_header *out);

/* Writes the complete start of a version 1.0 file (magic, version, length, dict, padding) for
 * a C-order array of `descr` and shape[0, ndim) into buf, and returns its length, a multiple
 * of 64; 0 when it does not fit in cap bytes (64 + 24 per dimension always suffice). */
size_t pc_tool_npy_start(char *buf, size_t cap, const char *descr, const int64_t *shape,
                         int ndim);

/* A uint8 [count, width] array read a batch of rows at a time: dtype uint8 or bool ('|u1',
 * '|b1', with or without a byte-order mark), C order, at least 2 dimensions (width = the
 * product of all but the first, below 2^31). A regular file must hold exactly the bytes its
 * header claims (checked at open); a stream (a FIFO) is checked as it is read, and after its
 * last row it must end. Errors name the file (pc_tool_last_error()). One thread at a time. */
typedef struct pc_tool_npy_reader pc_tool_npy_reader;

pc_status pc_tool_npy_open(const char *path, pc_tool_npy_reader **out);
int64_t pc_tool_npy_count(const pc_tool_npy_reader *r);
int32_t pc_tool_npy_width(const pc_tool_npy_reader *r);
/* Reads min(max_rows, rows left) rows into values [max_rows, width]; *rows_read = 0 at the
 * end. A file that ends early fails, naming the row. */
pc_status pc_tool_npy_read(pc_tool_npy_reader *r, uint8_t *values, int64_t max_rows,
                           int64_t *rows_read);
/* Moves past the next min(rows, rows left) rows (rows >= 0, as pc_data_reader_skip): a seek in
 * a regular file (its length checked at open), else the rows read and dropped. */
pc_status pc_tool_npy_skip(pc_tool_npy_reader *r, int64_t rows);
/* NULL does nothing. */
void pc_tool_npy_close(pc_tool_npy_reader *r);

#endif
