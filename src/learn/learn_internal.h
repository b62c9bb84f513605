/* Shared by the learning files (learn_*.c): the memory check in front of large buffers. */
#ifndef PC_LEARN_INTERNAL_H
#define PC_LEARN_INTERNAL_H

#include <stdint.h>
#include <unistd.h>

#include "base/fail.h"
#include "pc/status.h"

/* Fails with PC_ERR_NOMEM when `bytes` exceed 80% of the machine's physical memory. Buffers
 * are written after allocation; with memory overcommit a too-large malloc would not fail but
 * the process would be killed later, so large requests are checked first. */
static inline pc_status pc_learn_check_memory(double bytes, const char *what) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const double have = (double)pages * (double)page;
    if (pages > 0 && page > 0 && bytes > 0.8 * have)
        return pc_fail(PC_ERR_NOMEM, "%s needs %.1f GB, more than 80%% of this machine's %.1f GB",
                       what, bytes / 1e9, have / 1e9);
    return PC_OK;
}

#endif
