/* Fuzz target: the tools' .npy reader (tools/common/npy.h, behind --data and --missing FILE)
 * on any bytes.
 *
 * The first byte picks what runs: bit 0 = 1 parses the rest as a header dict alone
 * (pc_tool_npy_parse); else the rest is a file, opened by the streaming reader and read in
 * batches of 1 + ((byte >> 1) & 7) rows into a 1 MiB buffer (a batch that does not fit is
 * skipped past instead), every (1 + (byte >> 4))-th batch skipped rather than read. The file
 * lives in memory (memfd) and is opened by its /proc path like any other. Every call must
 * return, with a message naming the file on error, and never allocate what a header claims. */
#include "fuzz_file.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "tool_error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must_name(pc_status st, const char *path) {
    if (st != PC_OK && !strstr(pc_tool_last_error(), path)) abort();
}

static void read_file(const char *path, int64_t batch, int skip_every) {
    static uint8_t rows[1 << 20];
    pc_tool_npy_reader *r = NULL;
    pc_status st = pc_tool_npy_open(path, &r);
    must_name(st, path);
    if (st != PC_OK) return;
    const int64_t width = pc_tool_npy_width(r), count = pc_tool_npy_count(r);
    if (width < 1 || count < 0) abort(); /* open promises at least 2 dims, sizes checked */
    const int fits = batch * width <= (int64_t)sizeof rows;
    int64_t done = 0, got = 0;
    for (int64_t i = 0; st == PC_OK && done < count; i++) {
        if (!fits || i % skip_every == skip_every - 1) {
            st = pc_tool_npy_skip(r, batch);
            done += batch;
        } else {
            st = pc_tool_npy_read(r, rows, batch, &got);
            /* a regular file's length is checked at open: its rows come until the count */
            if (st == PC_OK && (got < 1 || got > batch)) abort();
            done += got;
        }
        must_name(st, path);
    }
    if (st == PC_OK && fits) { /* past the last row: the end */
        st = pc_tool_npy_read(r, rows, batch, &got);
        must_name(st, path);
        if (st == PC_OK && got != 0) abort();
    }
    pc_tool_npy_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t mode = data[0];
    if (mode & 1) {
        pc_tool_npy_header h;
        must_name(pc_tool_npy_parse((const char *)data + 1, size - 1, "dict.npy", &h),
                  "dict.npy");
        return 0;
    }
    char path[64];
    const int fd = fuzz_file(data + 1, size - 1, path, sizeof path);
    if (fd < 0) return 0;
    read_file(path, 1 + ((mode >> 1) & 7), 1 + (mode >> 4));
    close(fd);
    return 0;
}
