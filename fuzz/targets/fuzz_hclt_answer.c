/* Fuzz target: what pc_hclt_load_isolated does with the reader program's answer (hclt_wire.h)
 * on any bytes: the sizes checked before allocating, every record read with a deadline, the
 * model validated. This is the part of the model loader that runs in the caller's process,
 * so it must hold whatever a crashed or subverted reader sends. */
#define _GNU_SOURCE /* memfd_create */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/hclt_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("answer", 0);
    if (fd < 0) return 0;
    if (write(fd, data, size) == (ssize_t)size && lseek(fd, 0, SEEK_SET) == 0) {
        const pc_wire_limits lim = {(int64_t)64 << 20, 1.0};
        pc_hclt *m = NULL;
        pc_wire_end end;
        int sizes_seen = 0;
        pc_status st = pc_wire_receive(fd, &lim, "fuzz.h5", &m, &end, &sizes_seen);
        if ((st == PC_OK) != (m != NULL) || (st == PC_OK && end != PC_WIRE_MODEL)) abort();
        if (m) (void)pc_hclt_validate(m, "fuzz.h5");
        pc_hclt_free(m);
    }
    close(fd);
    return 0;
}
