/* The single-thread read floor of this CPU at one buffer size: a pass that takes the max of a
 * buffer of floats with four independent chains of vector max, repeated, best of the repeats.
 * A row-wise LSE whose input (with lsebench's rotation) sits at that level of the memory
 * hierarchy cannot beat this many ns per element on one thread. The size picks the level:
 * 2 MB (L2 on the development machine), 16-64 MB (L3), 256 MB (DRAM, the default).
 *
 * Variants (each first checked: a maximum planted at the start, inside, and at the end of the
 * buffer must come back exactly, against the double maximum of the buffer):
 *   1  AVX-512: four zmm chains, 64 floats per step (the floor docs/kernels.md quotes)
 *   2  AVX2: four ymm chains, 32 floats per step (for CPUs without AVX-512)
 *
 *   usage: cpu_read_floor VARIANT|all [MB]   (MB from 1 to 4096; default 256)
 * Results: docs/kernels.md (the CPU LSE's read floors: 2 MB, 16-64 MB and 256 MB on the
 * development machine's Xeon). */
#include <immintrin.h>

#include "common.h"

static const char *const variants[] = {"AVX-512, four chains of vector max",
                                       "AVX2, four chains of vector max"};

__attribute__((target("avx512f"))) static float max_avx512(const float *a, size_t n) {
    __m512 s0 = _mm512_set1_ps(-INFINITY), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < n; i += 64) {
        s0 = _mm512_max_ps(s0, _mm512_load_ps(a + i));
        s1 = _mm512_max_ps(s1, _mm512_load_ps(a + i + 16));
        s2 = _mm512_max_ps(s2, _mm512_load_ps(a + i + 32));
        s3 = _mm512_max_ps(s3, _mm512_load_ps(a + i + 48));
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(s0, s1), _mm512_max_ps(s2, s3)));
}

__attribute__((target("avx2"))) static float max_avx2(const float *a, size_t n) {
    __m256 s0 = _mm256_set1_ps(-INFINITY), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < n; i += 32) {
        s0 = _mm256_max_ps(s0, _mm256_load_ps(a + i));
        s1 = _mm256_max_ps(s1, _mm256_load_ps(a + i + 8));
        s2 = _mm256_max_ps(s2, _mm256_load_ps(a + i + 16));
        s3 = _mm256_max_ps(s3, _mm256_load_ps(a + i + 24));
    }
    float lane[8];
    _mm256_storeu_ps(lane, _mm256_max_ps(_mm256_max_ps(s0, s1), _mm256_max_ps(s2, s3)));
    float m = lane[0];
    for (int i = 1; i < 8; i++) m = lane[i] > m ? lane[i] : m;
    return m;
}

typedef float (*pass_fn)(const float *, size_t);

/* The pass must find a maximum planted anywhere: at the first float, inside the buffer off
 * any vector boundary, and at the last float. The reference is the double maximum. */
static void check(const char *name, pass_fn pass, float *a, size_t n) {
    const size_t at[] = {0, n / 2 + 5, n - 1};
    double ref[3], got[3];
    for (int p = 0; p < 3; p++) {
        const float keep = a[at[p]];
        a[at[p]] = 2000.0f + (float)p;
        double m = -INFINITY;
        for (size_t i = 0; i < n; i++) m = a[i] > m ? a[i] : m;
        ref[p] = m, got[p] = pass(a, n);
        a[at[p]] = keep;
    }
    lab_check(name, ref, got, 3, 0.0, 0.0);
}

int main(int argc, char **argv) {
    int first, last;
    lab_pick(argc, argv, variants, 2, &first, &last);
    const long mb = argc > 2 ? strtol(argv[2], NULL, 10) : 256;
    if (mb < 1 || mb > 4096) {
        fprintf(stderr, "usage: %s VARIANT|all [MB, 1 to 4096; default 256]\n", argv[0]);
        return 2;
    }
    const size_t n = (size_t)mb << 18; /* floats: MB * 2^20 / 4, a multiple of 64 */
    /* Passes: about 2.5 GB read in all, at least 10, so small buffers are timed long enough. */
    const int reps = mb >= 256 ? 10 : (int)(2560 / mb);
    float *a = aligned_alloc(64, n * sizeof(float));
    if (!a) return 1;
    for (size_t i = 0; i < n; i++) a[i] = (float)(i & 1023);
    printf("| variant | MB | GB/s read (best of %d passes) | ns per float |\n|---|---|---|---|\n",
           reps);
    for (int v = first; v <= last; v++) {
        const pass_fn pass = v == 1 ? max_avx512 : max_avx2;
        if (!(v == 1 ? __builtin_cpu_supports("avx512f") : __builtin_cpu_supports("avx2"))) {
            printf("| %d %s | %ld | not supported by this CPU | - |\n", v, variants[v - 1], mb);
            continue;
        }
        check(variants[v - 1], pass, a, n);
        double best = INFINITY;
        volatile float sink = 0.0f;
        for (int r = 0; r < reps; r++) {
            const double t0 = lab_now_s();
            sink = pass(a, n);
            const double t = lab_now_s() - t0;
            best = t < best ? t : best;
        }
        (void)sink;
        printf("| %d %s | %ld | %.2f | %.3f |\n", v, variants[v - 1], mb,
               (double)n * sizeof(float) / best / 1e9, best / (double)n * 1e9);
    }
    free(a);
    return 0;
}
