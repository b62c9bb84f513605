/* Data rows for the tools from either file format they read: a .npy file (npy.h) when the name
 * ends in ".npy", else an IDX file, plain or .gz (pc_data_reader of pc/data.h). Both give
 * uint8 [count, width] a batch of rows at a time, with the same checks (the header's count is
 * a claim checked as rows arrive; a short file fails naming the row). Errors name the file
 * (pc_tool_last_error()). One thread at a time. */
#ifndef PC_TOOLS_ROWS_H
#define PC_TOOLS_ROWS_H

#include <stdint.h>

#include "pc/status.h"

typedef struct pc_tool_rows pc_tool_rows;

/* 1 when path names a .npy file (by its extension). */
int pc_tool_is_npy(const char *path);

pc_status pc_tool_rows_open(const char *path, pc_tool_rows **out);
int64_t pc_tool_rows_count(const pc_tool_rows *r);
int32_t pc_tool_rows_width(const pc_tool_rows *r);
/* Reads min(max_rows, rows left) rows into values [max_rows, width]; *rows_read = 0 at the
 * end. */
pc_status pc_tool_rows_read(pc_tool_rows *r, uint8_t *values, int64_t max_rows,
                            int64_t *rows_read);
/* Moves past the next min(rows, rows left) rows (rows >= 0), so that a process reads only its
 * own rows: a seek in a regular .npy or plain IDX file, else the rows read and dropped (a file
 * that ends early fails as a read would). */
pc_status pc_tool_rows_skip(pc_tool_rows *r, int64_t rows);
/* NULL does nothing. */
void pc_tool_rows_close(pc_tool_rows *r);

#endif
