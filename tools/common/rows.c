/* Data rows from a .npy or an IDX file (rows.h). */
#include "rows.h"
#include "npy.h"
#include "tool_error.h"

#include <stdlib.h>
#include <string.h>

#include "pc/data.h"

struct pc_tool_rows {
    pc_tool_npy_reader *npy; /* one of the two */
    pc_data_reader *idx;
};

int pc_tool_is_npy(const char *path) {
    const size_t n = strlen(path);
    return n >= 4 && !strcmp(path + n - 4, ".npy");
}

pc_status pc_tool_rows_open(const char *path, pc_tool_rows **out) {
    *out = NULL;
    pc_tool_rows *r = calloc(1, sizeof *r);
    if (!r) return pc_tool_fail(PC_ERR_NOMEM, "%s: out of memory", path);
    pc_status st = pc_tool_is_npy(path) ? pc_tool_npy_open(path, &r->npy)
                                        : pc_tool_pass(pc_data_reader_open(path, &r->idx));
    if (st != PC_OK) {
        free(r);
        return st;
    }
    *out = r;
    return PC_OK;
}

int64_t pc_tool_rows_count(const pc_tool_rows *r) {
    return r->npy ? pc_tool_npy_count(r->npy) : pc_data_reader_count(r->idx);
}

int32_t pc_tool_rows_width(const pc_tool_rows *r) {
    return r->npy ? pc_tool_npy_width(r->npy) : pc_data_reader_width(r->idx);
}

pc_status pc_tool_rows_read(pc_tool_rows *r, uint8_t *values, int64_t max_rows,
                            int64_t *rows_read) {
    if (r->npy) return pc_tool_npy_read(r->npy, values, max_rows, rows_read);
    return pc_tool_pass(pc_data_reader_read(r->idx, values, max_rows, rows_read));
}

pc_status pc_tool_rows_skip(pc_tool_rows *r, int64_t rows) {
    if (r->npy) return pc_tool_npy_skip(r->npy, rows);
    return pc_tool_pass(pc_data_reader_skip(r->idx, rows));
}

void pc_tool_rows_close(pc_tool_rows *r) {
    if (!r) return;
    pc_tool_npy_close(r->npy);
    pc_data_reader_close(r->idx);
    free(r);
}
