/* One seeded random number generator for the library, its tools and tests: splitmix64 (a 64-bit
 * state advanced by a constant and mixed). Small, fast, any seed (0 included) gives a good
 * stream, and the same seed gives the same stream on every platform. Not for cryptography.
 * A pc_rng is a plain value: copy it to fork a stream; one thread per pc_rng. */
#ifndef PC_RNG_H
#define PC_RNG_H

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pc_rng {
    uint64_t state;
} pc_rng;

static inline void pc_rng_init(pc_rng *rng, uint64_t seed) { rng->state = seed; }

static inline uint64_t pc_rng_u64(pc_rng *rng) {
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double pc_rng_unit(pc_rng *rng) { return (double)(pc_rng_u64(rng) >> 11) * 0x1p-53; }

/* Uniform in (0, 1): the 53-bit grid shifted by half a step, so log() of it is finite. */
static inline double pc_rng_open_unit(pc_rng *rng) {
    return ((double)(pc_rng_u64(rng) >> 11) + 0.5) * 0x1p-53;
}

/* Uniform in [lo, hi). */
static inline double pc_rng_uniform(pc_rng *rng, double lo, double hi) {
    return lo + (hi - lo) * pc_rng_unit(rng);
}

/* Uniform in 0 .. n-1 (n >= 1) by a modulo: its bias is n / 2^64, below 2^-40 for n < 2^24. */
static inline int64_t pc_rng_below(pc_rng *rng, int64_t n) {
    return (int64_t)(pc_rng_u64(rng) % (uint64_t)n);
}

/* Uniform integer in [lo, hi] (inclusive; the whole int64 range when it spans it). */
static inline int64_t pc_rng_int(pc_rng *rng, int64_t lo, int64_t hi) {
    uint64_t span = (uint64_t)(hi - lo) + 1;
    return lo + (int64_t)(span ? pc_rng_u64(rng) % span : pc_rng_u64(rng));
}

/* Normal with the given mean and standard deviation: Box-Muller on two draws, u1 in (0, 1]. */
static inline double pc_rng_normal(pc_rng *rng, double mean, double sd) {
    double u1 = 1.0 - pc_rng_unit(rng), u2 = pc_rng_unit(rng);
    return mean + sd * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#ifdef __cplusplus
}
#endif

#endif
