/* Shared by the learning files (learn_*.c): a small seeded random number generator. */
#ifndef PC_LEARN_INTERNAL_H
#define PC_LEARN_INTERNAL_H

#include <stdint.h>

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

#endif
