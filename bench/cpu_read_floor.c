/* The single-thread read floor of this CPU: one AVX-512 pass (max, four independent chains) over
 * 256 MB of floats, best of 10. A row-wise LSE that streams its input from memory cannot beat
 * this many ns per element on one thread.
 *   cc -O2 -mavx512f bench/cpu_read_floor.c -o cpu_read_floor && ./cpu_read_floor */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    const size_t n = (size_t)64 << 20; /* 64 Mi floats = 256 MB, far past every cache */
    float *a = aligned_alloc(64, n * sizeof(float));
    if (!a) return 1;
    for (size_t i = 0; i < n; i++) a[i] = (float)(i & 1023);
    double best = 1e9;
    float sink = 0.0f;
    for (int r = 0; r < 10; r++) {
        double t0 = now();
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (size_t i = 0; i < n; i += 64) {
            s0 = _mm512_max_ps(s0, _mm512_load_ps(a + i));
            s1 = _mm512_max_ps(s1, _mm512_load_ps(a + i + 16));
            s2 = _mm512_max_ps(s2, _mm512_load_ps(a + i + 32));
            s3 = _mm512_max_ps(s3, _mm512_load_ps(a + i + 48));
        }
        double t = now() - t0;
        if (t < best) best = t;
        sink += _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(s0, s1), _mm512_max_ps(s2, s3)));
    }
    printf("{\"read_gb_per_s\": %.2f, \"ns_per_float\": %.3f, \"check\": %g}\n",
           n * sizeof(float) / best / 1e9, best / n * 1e9, sink);
    free(a);
    return 0;
}
