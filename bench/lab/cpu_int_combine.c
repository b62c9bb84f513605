/* What one IntLSE pairwise step costs on one core, against what one value of fuse's exp-sum
 * costs, with everything in L1: the floor under the row-wise int kernel. A balanced tree over
 * N values takes N - 1 steps, so int's time per value is at least one step's.
 *
 * Variants (each first checked against a scalar reference: the steps bit for bit, fuse to
 * 1e-6 relative against a double sum):
 *   1  AVX-512 int step as the engine runs it (lse_vec.h vi_lse2): max, min, difference, cap,
 *      one gather of the packed table (1536 entries, 64 per log2 unit), interpolation on 10
 *      bits by a 16-bit multiply-add, rounding, two adds
 *   2  the same step with the gather replaced by one VPERMT2D from two registers holding the
 *      packed table's first 32 entries (index mod 32): the step with the cheapest lookup there
 *      is, the floor of any table held in registers. Not a kernel: 32 entries cover d < 1/2
 *   3  AVX-512 fuse: the engine's one-pass chunk loop (pc_lse_cpu_avx512.fuse_chunk_at)
 *   4-6  the same three with AVX2 (variant 5: one VPERMD, 8 entries; variant 6:
 *      pc_lse_cpu_avx2.fuse_chunk_at)
 *   7-8  what int does per value before its tree, AVX-512 and AVX2: the engine's max pass and
 *      conversion to Q16.16 (max_f32, quantize_f32), checked against pc_int_from_shifted
 *
 *   usage: cpu_int_combine VARIANT|all
 * Results: bench/notebook/cpu_int_combine_xeon-2c.md, docs/kernels.md ("int is slower than fuse
 * on this CPU"). */
#include <immintrin.h>

#include "common.h"
#include "lse/lse_cpu.h"

static const char *const variants[] = {
    "AVX-512 int step, gather of the packed table (the engine)",
    "AVX-512 int step, lookup from two registers (VPERMT2D)",
    "AVX-512 fuse, the engine's one-pass chunk loop",
    "AVX2 int step, gather of the packed table (the engine)",
    "AVX2 int step, lookup from one register (VPERMD)",
    "AVX2 fuse, the engine's one-pass chunk loop",
    "AVX-512 int before its tree: max pass and conversion (the engine)",
    "AVX2 int before its tree: max pass and conversion (the engine)"};

#define N_PAIRS 2048 /* a, b, out: 24 KB; fuse reads 2 N_PAIRS floats: 16 KB; all in L1 */
#define REPS 4000    /* passes per timing */

/* pc_int_lse2 with the packed table, its index taken mod `entries` (1536: the engine's). */
static int32_t step_ref(int32_t x, int32_t y, const uint32_t *packed, int entries) {
    int32_t hi = x > y ? x : y, lo = x > y ? y : x, d = hi - lo;
    d = d < PC_INT_D_MAX ? d : PC_INT_D_MAX;
    uint32_t p = packed[(d >> PC_INT_TABLE_SHIFT) % entries];
    int32_t t = d & ((1 << PC_INT_TABLE_SHIFT) - 1);
    int32_t f0 = (int32_t)(p & ((1u << PC_INT_PACK_BITS) - 1));
    int32_t df = (int32_t)(p >> PC_INT_PACK_BITS);
    return hi + f0 - ((df * t + (1 << (PC_INT_TABLE_SHIFT - 1))) >> PC_INT_TABLE_SHIFT);
}

/* out[i] = the step on a[i], b[i] for i < n (a multiple of LANES), with LOOKUP the packed
 * entry of idx; V is the vector width's prefix (_mm256 or _mm512), T its integer type, LD, ST
 * and AND its unaligned load and store and its bitwise and. */
#define STEP_LOOP(V, T, LANES, LD, ST, AND, LOOKUP)                                            \
    const T dmax = V##_set1_epi32(PC_INT_D_MAX);                                              \
    const T tmask = V##_set1_epi32((1 << PC_INT_TABLE_SHIFT) - 1);                            \
    const T fmask = V##_set1_epi32((1 << PC_INT_PACK_BITS) - 1);                              \
    const T half = V##_set1_epi32(1 << (PC_INT_TABLE_SHIFT - 1));                             \
    for (int64_t i = 0; i < n; i += LANES) {                                                  \
        T x = LD(a + i), y = LD(b + i);                                                       \
        T hi = V##_max_epi32(x, y), lo = V##_min_epi32(x, y);                                 \
        T d = V##_min_epi32(V##_sub_epi32(hi, lo), dmax);                                     \
        T idx = V##_srli_epi32(d, PC_INT_TABLE_SHIFT);                                        \
        T p = LOOKUP;                                                                         \
        T t = AND(d, tmask);                                                                  \
        T f0 = AND(p, fmask), df = V##_srli_epi32(p, PC_INT_PACK_BITS);                       \
        T r = V##_add_epi32(V##_madd_epi16(df, t), half);                                     \
        T corr = V##_sub_epi32(f0, V##_srai_epi32(r, PC_INT_TABLE_SHIFT));                    \
        ST(out + i, V##_add_epi32(hi, corr));                                                 \
    }

#define LD512(p) _mm512_loadu_si512(p)
#define ST512(p, v) _mm512_storeu_si512(p, v)
#define LD256(p) _mm256_loadu_si256((const __m256i *)(p))
#define ST256(p, v) _mm256_storeu_si256((__m256i *)(p), v)

typedef void step_fn(const int32_t *a, const int32_t *b, int32_t *out, int64_t n,
                     const uint32_t *packed);

__attribute__((target("avx512f,avx512bw"))) static void step_gather_512(
    const int32_t *a, const int32_t *b, int32_t *out, int64_t n, const uint32_t *packed) {
    STEP_LOOP(_mm512, __m512i, 16, LD512, ST512, _mm512_and_si512,
              _mm512_i32gather_epi32(idx, packed, 4))
}

__attribute__((target("avx512f,avx512bw"))) static void step_register_512(
    const int32_t *a, const int32_t *b, int32_t *out, int64_t n, const uint32_t *packed) {
    const __m512i t0 = _mm512_loadu_si512(packed), t1 = _mm512_loadu_si512(packed + 16);
    STEP_LOOP(_mm512, __m512i, 16, LD512, ST512, _mm512_and_si512,
              _mm512_permutex2var_epi32(t0, idx, t1))
}

__attribute__((target("avx2"))) static void step_gather_256(const int32_t *a, const int32_t *b,
                                                            int32_t *out, int64_t n,
                                                            const uint32_t *packed) {
    STEP_LOOP(_mm256, __m256i, 8, LD256, ST256, _mm256_and_si256,
              _mm256_i32gather_epi32((const int *)packed, idx, 4))
}

__attribute__((target("avx2"))) static void step_register_256(const int32_t *a,
                                                              const int32_t *b, int32_t *out,
                                                              int64_t n,
                                                              const uint32_t *packed) {
    const __m256i t0 = _mm256_loadu_si256((const __m256i *)packed);
    STEP_LOOP(_mm256, __m256i, 8, LD256, ST256, _mm256_and_si256,
              _mm256_permutevar8x32_epi32(t0, idx))
}

/* ---- timing ------------------------------------------------------------------------------ */
static int32_t *a, *b, *out;
static float *x;
static const uint32_t *packed;
static step_fn *timed_step;
static const pc_lse_cpu_impl *timed_impl;
static volatile float sink;

static void pass_step(void) { timed_step(a, b, out, N_PAIRS, packed); }
static int32_t *q;
static void pass_quantize(void) {
    float m;
    int nan;
    timed_impl->max_f32(x, 2 * N_PAIRS, &m, &nan);
    timed_impl->quantize_f32(x, 2 * N_PAIRS, m, q);
}
static void pass_fuse(void) {
    float m, s;
    timed_impl->fuse_chunk_at(x, 2 * N_PAIRS, 0.0f, &m, &s);
    sink += s;
}

/* Median over 9 timings of REPS passes, in ns per one of the pass's `count` items. */
static double time_ns(void (*pass)(void), int64_t count) {
    double t[9];
    for (int k = 0; k < 9; k++) {
        const double start = lab_now_s();
        for (int r = 0; r < REPS; r++) pass();
        t[k] = (lab_now_s() - start) / REPS / (double)count * 1e9;
    }
    return lab_median(t, 9);
}

int main(int argc, char **argv) {
    int first, last;
    lab_pick(argc, argv, variants, 8, &first, &last);
    const int has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512dq");
    const int has256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const int32_t *table = pc_lse_int_table(&packed);
    (void)table;
    /* Inputs: Q16.16 log2 values 0 to 40 units below zero, so the differences cover the whole
     * table and past it; floats U(-10, 0) for fuse (whose shift g = 0 is then above them). */
    a = lab_malloc(N_PAIRS * 4), b = lab_malloc(N_PAIRS * 4), out = lab_malloc(N_PAIRS * 4);
    x = lab_malloc(2 * N_PAIRS * sizeof(float)), q = lab_malloc(2 * N_PAIRS * 4);
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < N_PAIRS; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        a[i] = -(int32_t)((s >> 33) % (40u << 16));
        b[i] = -(int32_t)((s >> 11) % (40u << 16));
    }
    for (int i = 0; i < 2 * N_PAIRS; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        x[i] = -10.0f * (float)((s >> 40) * 0x1p-24);
    }
    double *ref = lab_malloc(N_PAIRS * sizeof(double));
    double *got = lab_malloc(N_PAIRS * sizeof(double));
    printf("| variant | ns per step or value (median of 9 x %d passes, in L1) |\n|---|---|\n",
           REPS);
    for (int v = first; v <= last; v++) {
        const int avx512 = v <= 3 || v == 7, lane_entries = avx512 ? 32 : 8;
        if (!(avx512 ? has512 : has256)) {
            printf("| %d %s | not supported by this CPU |\n", v, variants[v - 1]);
            continue;
        }
        double ns;
        if (v >= 7) {
            timed_impl = avx512 ? &pc_lse_cpu_avx512 : &pc_lse_cpu_avx2;
            float m = -INFINITY;
            for (int i = 0; i < 2 * N_PAIRS; i++) m = x[i] > m ? x[i] : m;
            memset(q, 0x5a, 2 * N_PAIRS * 4);
            pass_quantize();
            double *r2 = lab_malloc(2 * N_PAIRS * sizeof(double));
            double *g2 = lab_malloc(2 * N_PAIRS * sizeof(double));
            for (int i = 0; i < 2 * N_PAIRS; i++)
                r2[i] = pc_int_from_shifted(x[i] - m), g2[i] = q[i];
            lab_check(variants[v - 1], r2, g2, 2 * N_PAIRS, 0.0, 0.0);
            free(r2), free(g2);
            ns = time_ns(pass_quantize, 2 * N_PAIRS);
        } else if (v % 3 != 0) {
            step_fn *const steps[] = {step_gather_512, step_register_512, NULL,
                                      step_gather_256, step_register_256};
            const int entries = v % 3 == 1 ? PC_INT_PACKED_LEN : lane_entries;
            timed_step = steps[v - 1];
            memset(out, 0x5a, N_PAIRS * 4); /* poison: an unwritten value fails the check */
            timed_step(a, b, out, N_PAIRS, packed);
            for (int i = 0; i < N_PAIRS; i++)
                ref[i] = step_ref(a[i], b[i], packed, entries), got[i] = out[i];
            lab_check(variants[v - 1], ref, got, N_PAIRS, 0.0, 0.0);
            ns = time_ns(pass_step, N_PAIRS);
        } else {
            timed_impl = avx512 ? &pc_lse_cpu_avx512 : &pc_lse_cpu_avx2;
            float m = NAN, sum = NAN;
            double want = 0.0;
            for (int i = 0; i < 2 * N_PAIRS; i++) want += exp((double)x[i]);
            if (!timed_impl->fuse_chunk_at(x, 2 * N_PAIRS, 0.0f, &m, &sum)) {
                fprintf(stderr, "%s: the one-pass loop declined g = 0\n", variants[v - 1]);
                return 1;
            }
            ref[0] = want, got[0] = sum;
            lab_check(variants[v - 1], ref, got, 1, 0.0, 1e-6);
            ns = time_ns(pass_fuse, 2 * N_PAIRS);
        }
        printf("| %d %s | %.4f |\n", v, variants[v - 1], ns);
    }
    free(a), free(b), free(out), free(x), free(q), free(ref), free(got);
    return 0;
}
