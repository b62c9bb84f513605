/* The single-thread read floor of this CPU at one buffer size: one AVX-512 pass (max, four
 * independent chains) over a buffer of floats, repeated, best of the repeats. A row-wise LSE
 * whose input (with lsebench's rotation) sits at that level of the memory hierarchy cannot
 * beat this many ns per element on one thread. The size picks the level: 2 MB (L2 here),
 * 16-64 MB (L3), 256 MB (DRAM, the default).
 *   cc -O2 -mavx512f bench/cpu_read_floor.c -o cpu_read_floor && ./cpu_read_floor [MB] */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long mb = argc > 1 ? strtol(argv[1], NULL, 10) : 256;
    if (mb < 1 || mb > 4096) {
        fprintf(stderr, "usage: cpu_read_floor [MB, 1 to 4096; default 256]\n");
        return 2;
    }
    const size_t n = (size_t)mb << 18; /* floats: MB * 2^20 / 4 */
    /* Passes: about 2.5 GB read in all, at least 10, so small buffers are timed long enough. */
    const int reps = mb >= 256 ? 10 : (int)(2560 / mb);
    float *a = aligned_alloc(64, n * sizeof(float));
    if (!a)
        return 1;
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(i & 1023);
    double best = 1e9;
    float sink = 0.0f;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (size_t i = 0; i < n; i += 64) {
            s0 = _mm512_max_ps(s0, _mm512_load_ps(a + i));
            s1 = _mm512_max_ps(s1, _mm512_load_ps(a + i + 16));
            s2 = _mm512_max_ps(s2, _mm512_load_ps(a + i + 32));
            s3 = _mm512_max_ps(s3, _mm512_load_ps(a + i + 48));
        }
        double t = now() - t0;
        if (t < best)
            best = t;
        sink += _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(s0, s1), _mm512_max_ps(s2, s3)));
    }
    printf("{\"mb\": %ld, \"read_gb_per_s\": %.2f, \"ns_per_float\": %.3f, \"check\": %g}\n", mb,
           n * sizeof(float) / best / 1e9, best / n * 1e9, sink);
    free(a);
    return 0;
}
