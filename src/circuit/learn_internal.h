/* Shared by the learning files (learn_*.c): a small seeded random number generator. */
#ifndef PC_LEARN_INTERNAL_H
#define PC_LEARN_INTERNAL_H

#include <stdint.h>
#include <unistd.h>

#include "pc/status.h"

/* splitmix64: a 64-bit state advanced by a constant and mixed; good enough for sampling rows
 * and initial parameters, and identical on every platform. */
static inline uint64_t pc_learn_rand_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double pc_learn_rand_unit(uint64_t *state) {
    return (double)(pc_learn_rand_u64(state) >> 11) * 0x1.0p-53;
}

/* Uniform in 0..n-1 (n >= 1); the modulo bias is below 2^-40 for the n used here. */
static inline int64_t pc_learn_rand_below(uint64_t *state, int64_t n) {
    return (int64_t)(pc_learn_rand_u64(state) % (uint64_t)n);
}

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
