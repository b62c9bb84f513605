/* The fuzz targets' input as a file: the bytes in memory (memfd), opened by their /proc path
 * like any other file, so the readers run exactly as on a file given on the command line. */
#ifndef PC_FUZZ_FILE_H
#define PC_FUZZ_FILE_H

#define _GNU_SOURCE /* memfd_create */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* A file holding data[0, size); its path ("/proc/self/fd/N") into path[cap]. Returns the
 * descriptor to close() after use, or -1 (the input is then skipped). */
static inline int fuzz_file(const uint8_t *data, size_t size, char *path, size_t cap) {
    int fd = memfd_create("fuzz", 0);
    if (fd < 0) return -1;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return -1;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
