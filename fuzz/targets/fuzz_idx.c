/* Fuzz target: the IDX readers (pc/data.h) on any bytes.
 *
 * The first byte picks the reader and the rest is the file (the convention of the harness that
 * found tests/data/badinput/idx-oom-*): bit 0 = 1 reads a label file whole; else bit 4 = 1
 * reads an image file whole, and 0 streams it in batches of up to 1 + (byte >> 5) rows into a
 * 1 MiB buffer (as a caller would: its buffer is its own, not the header's). The file lives in
 * memory (memfd) and is opened by its /proc path like any other. Every call must return, with
 * a message naming the file on error, and never allocate what a header claims. */
#include "fuzz_file.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pc/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_stream(const char *path, int64_t batch) {
    static uint8_t rows[1 << 20];
    pc_data_reader *r = NULL;
    if (pc_data_reader_open(path, &r) != PC_OK) return;
    const int64_t width = pc_data_reader_width(r);
    if (batch * width > (int64_t)sizeof rows) batch = (int64_t)sizeof rows / width;
    int64_t got = 1;
    while (batch > 0 && got > 0 && pc_data_reader_read(r, rows, batch, &got) == PC_OK) {
    }
    pc_data_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char path[64];
    const int fd = fuzz_file(data + 1, size - 1, path, sizeof path);
    if (fd < 0) return 0;
    const uint8_t mode = data[0];
    if (mode & 1) {
        uint8_t *labels = NULL;
        int64_t count = 0;
        pc_status st = pc_data_load_idx_labels(path, &labels, &count);
        if (st != PC_OK && !strstr(pc_last_error(), path)) abort();
        free(labels);
    } else if (mode & 16) {
        pc_data *d = NULL;
        if (pc_data_load_idx(path, &d) != PC_OK && !strstr(pc_last_error(), path)) abort();
        pc_data_free(d);
    } else {
        read_stream(path, 1 + (mode >> 5));
    }
    close(fd);
    return 0;
}
