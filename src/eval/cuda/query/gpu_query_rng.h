/* The GPU samplers' random numbers and inverse-CDF search, for host and device alike (plain C
 * and CUDA; internal), so that the CPU tests check them against the CPU samplers' own.
 *
 * Random numbers: counter-based splitmix64. splitmix64 advances its state by a constant
 * (pc/rng.h), so draw d of a stream is mix(state + (d + 1) * gamma): any draw is computed from
 * (seed, row, d) alone, in any order, by any thread. The state of row r is the CPU's
 * (pc_query_stream in src/eval/query/query.h: seed and index each mixed through splitmix64),
 * and a draw numbered as the CPU numbers it is the CPU's draw bit for bit. */
#ifndef PC_GPU_QUERY_RNG_H
#define PC_GPU_QUERY_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define PC_GQ_HD __host__ __device__ __forceinline__
#else
#define PC_GQ_HD static inline
#endif

#define PC_GQ_GAMMA 0x9e3779b97f4a7c15ull

PC_GQ_HD uint64_t pc_gq_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The state of the stream of sample `index` under `seed` (pc_query_stream's). */
PC_GQ_HD uint64_t pc_gq_stream(uint64_t seed, int64_t index) {
    const uint64_t a = pc_gq_mix(seed + PC_GQ_GAMMA);
    return pc_gq_mix((a ^ (uint64_t)index) + PC_GQ_GAMMA);
}

/* Draw d (0, 1, ...) of the stream with state s, uniform in [0, 1) with 53 bits
 * (pc_rng_unit's). */
PC_GQ_HD double pc_gq_unit(uint64_t s, int64_t d) {
    return (double)(pc_gq_mix(s + (uint64_t)(d + 1) * PC_GQ_GAMMA) >> 11) * 0x1p-53;
}

/* The lowest i < n with cdf[i] > target, or n - 1 when there is none: pc_query_draw_cdf's
 * answer for target = u * cdf[n - 1], as a count of the values <= target (cdf is
 * nondecreasing) in a fixed number of steps, half = pc_gpu_query_half(n) first. */
PC_GQ_HD int32_t pc_gq_search(const double *cdf, int32_t n, int32_t half, double target) {
    int32_t lo = 0;
    for (int32_t step = half; step > 0; step >>= 1)
        if (lo + step - 1 < n && cdf[lo + step - 1] <= target) lo += step;
    return lo < n - 1 ? lo : n - 1;
}

#endif
