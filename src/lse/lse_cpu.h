/* Internal interface of the CPU log-sum-exp kernels.
 *
 * The drivers in lse_cpu.c (rows, backward) and lse_cpu_weighted.c own the algorithm: chunking,
 * merging (max, sum) pairs, the IntLSE tree of chunk results, the edge cases, threads. Each
 * instruction set supplies the same few primitives over short contiguous runs (one chunk), so
 * the scalar, AVX2 and AVX-512 paths share every rule and differ only in arithmetic speed; the
 * int primitives are bit-identical across paths.
 */
#ifndef PC_LSE_CPU_H
#define PC_LSE_CPU_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "lse/lse_int.h"
#include "pc/lse.h"

/* fuse works on runs of at most this many floats: 8 KB, so the second read of a run (the exp
 * pass after the max pass) comes from L1 and DRAM is read once. */
#define PC_CPU_FUSE_CHUNK 2048
/* The exp pass also prefetches this many floats ahead into L2 (4 chunks, 32 KB). The L1
 * prefetch one chunk ahead alone is most likely limited by the L1 fill buffers (a prefetch
 * waits for a free one) when the lines come from L3 or DRAM; the L2 prefetch keeps more in
 * flight. Measured on one thread (AVX-512, lsebench, ns per value, median of 5 alternating
 * runs): 512 x 128256 (DRAM) 0.360 -> 0.293, 512 x 8192 (L3) 0.196 -> 0.184, 1 x 2^20
 * 0.188 -> 0.179; AVX2 512 x 128256 0.411 -> 0.376. 2 or 8 chunks ahead, or the L2 hint alone,
 * were no better, and the same for the 4-row path (fuse_rows) gained nothing. */
#define PC_CPU_FUSE_FAR (4 * PC_CPU_FUSE_CHUNK)

#if defined(__SSE__)
/* The prefetches of one step of the exp loops at x (a step reads `lines` cache lines): the same
 * lines one chunk ahead into L1 and PC_CPU_FUSE_FAR ahead into L2. */
static inline __attribute__((always_inline)) void pc_fuse_prefetch(const float *x, int lines) {
    const char *next = (const char *)(x + PC_CPU_FUSE_CHUNK);
    const char *far = (const char *)(x + PC_CPU_FUSE_FAR);
    for (int l = 0; l < lines; l++) _mm_prefetch(next + 64 * l, _MM_HINT_T0);
    for (int l = 0; l < lines; l++) _mm_prefetch(far + 64 * l, _MM_HINT_T1);
}
#endif
/* The exp passes compute x log2(e) - fl(m log2(e)) with one FMA, then correct the sum for the
 * rounding r of fl(m log2(e)) by (1 + r ln 2). |r| is half an ulp of m log2(e): up to 2^-9 below
 * this bound (a correction error under 1e-6 of the sum), but 2^77 at m = 3e30, where every term
 * became inf or 0 (AVX2 and AVX-512 returned inf for rows U(1e20, 3e20)). Chunks whose max is
 * at least this large use (x - m) log2(e), as the scalar path always does. */
#define PC_CPU_SCALED_MAX 32768.0f
/* fuse_chunk_at takes a chunk whose max lies at most this far above the shift (nats). */
#define PC_CPU_AT_SPAN 1.0f
/* int combines this many values per balanced tree, then a tree over the chunk results; a power
 * of two, so every chunk tree has the same shape and the whole is a balanced tree. */
#define PC_CPU_INT_CHUNK 1024
/* Scratch of int_terms_t: a chunk of terms and the chunk results, 16 lanes each. */
#define PC_CPU_LANE_SCRATCH(ins)                                                                   \
    ((size_t)(PC_CPU_INT_CHUNK + ((ins) + PC_CPU_INT_CHUNK - 1) / PC_CPU_INT_CHUNK) * 16)
/* int rows of at most PC_CPU_INT_SHORT values go through int_terms_t this many at a time
 * (measured here: at 128 values 0.86 ns per value against 1.24 row by row; past about 200 the
 * transposition costs more than the short tree levels it saves). */
#define PC_CPU_INT_SHORT 192
#define PC_CPU_INT_LANES 16
/* Short fuse rows (one chunk) go to fuse_rows this many at a time. */
#define PC_CPU_ROW_BLOCK 8

/* log2(e): fuse computes exp(x - m) as exp2((x - m) * log2(e)). */
#define PC_LOG2E_F 1.4426950408889634f

/* Degree-5 minimax polynomial of 2^f on f in [-1/2, 1/2] with 1 + c1 f + ... (fitted for
 * relative error by linear programming on 4001 points): 8.0e-8 relative in exact arithmetic,
 * 1.6e-7 (under 1.5 float ulp) evaluated in float with FMA, mean bias -2.5e-8. c0 = 1, so
 * 2^0 = 1 exactly and a chunk's maximum contributes exactly 1 to its sum. */
#define PC_EXP2_C1 6.931469440e-01f
#define PC_EXP2_C2 2.402221113e-01f
#define PC_EXP2_C3 5.550730228e-02f
#define PC_EXP2_C4 9.672950022e-03f
#define PC_EXP2_C5 1.326852245e-03f

/* The same on f in [0, 1) for the AVX-512 form f = t - floor(t), 2^t = scalef(p(f), t):
 * 7.0e-8 relative in exact arithmetic, 1.7e-7 evaluated in float with FMA, mean bias 1.5e-9. */
#define PC_EXP2F_C1 6.931510568e-01f
#define PC_EXP2F_C2 2.401641905e-01f
#define PC_EXP2F_C3 5.580507219e-02f
#define PC_EXP2F_C4 9.007737972e-03f
#define PC_EXP2F_C5 1.871832996e-03f

/* The correction table packed for one gather per lookup: bits 0..16 hold f0 = table[i]
 * (at most 65536), bits 17..31 hold table[i] - table[i + 1] (at most 510). Decoding and
 * interpolating gives exactly pc_int_correction(). */
#define PC_INT_PACKED_LEN (PC_INT_TABLE_LEN - 1)
#define PC_INT_PACK_BITS 17

/* The primitives of one instruction set, over runs of any length n (the drivers pass one chunk
 * to fuse_chunk and, per chunk, to int_tree; fuse_chunk prefetches one chunk ahead). */
typedef struct pc_lse_cpu_impl {
    /* m = max of x[0:n] ignoring NaN (-inf if none); s = sum of exp(x_i - m') with m' = m, or
     * 0 when m = -inf. s is NaN when x holds a NaN or when m = +inf (the caller rescans). */
    void (*fuse_chunk)(const float *x, int64_t n, float *m, float *s);
    /* Optional (NULL: the driver calls fuse_chunk): the same chunk against a shift g given by
     * the caller (the max of the row's earlier chunks): m = max of x[0:n] ignoring NaN and
     * s = sum of exp(x_i - g), in one pass. Returns 0 (m, s unset; the caller runs fuse_chunk)
     * when g is not finite or |g| >= PC_CPU_SCALED_MAX, or when m > g + PC_CPU_AT_SPAN or
     * m = +inf; s is NaN when x holds a NaN. Terms then lie under e^PC_CPU_AT_SPAN, so their
     * exp2 arguments stay under 1.5, as accurate as the two passes' (largest term 2^0). */
    int (*fuse_chunk_at)(const float *x, int64_t n, float g, float *m, float *s);
    /* Optional (NULL: the driver calls fuse_chunk row by row): fuse_chunk on each of `rows` rows
     * of n <= PC_CPU_FUSE_CHUNK floats, `stride` apart, several rows interleaved, because a short
     * row alone is bound by the latency of its reductions, not by arithmetic. */
    void (*fuse_rows)(const float *x, int64_t rows, int64_t n, int64_t stride, float *m, float *s);
    /* dst[0:n] = the f16 or bf16 values src[0:n] as floats (exact). */
    void (*widen)(pc_dtype dtype, const uint16_t *src, int64_t n, float *dst);
    /* Max of x[0:n] ignoring NaN (-inf if none); *has_nan set to 1 if x holds a NaN. */
    void (*max_f32)(const float *x, int64_t n, float *m, int *has_nan);
    /* q[i] = Q16.16 of x[i] - m, clamped at PC_INT_FLOOR (pc_int_from_shifted). */
    void (*quantize_f32)(const float *x, int64_t n, float m, int32_t *q);
    /* Balanced tree of pc_int_tree over buf[0:n] (n >= 1, destroys buf), same bits. */
    int32_t (*int_tree)(int32_t *buf, int64_t n, const int32_t *table, const uint32_t *packed);
    /* out[0:n] = exp(x[i] - shift) with IEEE semantics: -inf -> 0, NaN -> NaN, overflow -> inf. */
    void (*exp_shifted)(const float *x, int64_t n, float shift, float *out);
    /* y[j] = sum_k at[k * outs + j] * e[k] for j < outs, in float. at is a weight table stored
     * transposed, [ins, outs], so that consecutive outputs sit in vector lanes. */
    void (*gemv_t)(const float *at, int64_t ins, int64_t outs, const float *e, float *y);
    /* q[j] = IntLSE of the terms wqt[k * outs + j] + xq[k], k < ins (ins >= 1), for j < outs:
     * trees over chunks of PC_CPU_INT_CHUNK terms, then a tree over the chunk results, the same
     * bits as int_tree on each output's terms. Vector paths put outputs in lanes, so every tree
     * level is whole vectors. scratch holds PC_CPU_LANE_SCRATCH(ins) int32s. */
    void (*int_terms_t)(const int32_t *wqt, int64_t ins, int64_t outs, const int32_t *xq,
                        int32_t *scratch, const int32_t *table, const uint32_t *packed, int32_t *q);
} pc_lse_cpu_impl;

extern const pc_lse_cpu_impl pc_lse_cpu_scalar;
extern const pc_lse_cpu_impl pc_lse_cpu_avx2;
extern const pc_lse_cpu_impl pc_lse_cpu_avx512;

/* FP64 reference of one output: LSE over x[0:n] of `dtype`; and of w[0:n] + x[0:n] (f32). */
double pc_lse_ref_row(pc_dtype dtype, const void *x, int64_t n);
double pc_lse_ref_weighted_one(const float *w, const float *x, int64_t n);

/* Shared by the drivers (lse_cpu.c). */
/* Checks opts (NULL = defaults) and picks the path: PC_ERR_ARG for an unknown isa,
 * PC_ERR_UNSUPPORTED for one this CPU lacks. *threads >= 1. */
pc_status pc_lse_cpu_resolve(const pc_lse_cpu_opts *opts, const pc_lse_cpu_impl **impl,
                             int *threads);
/* The IntLSE table (pc_int_table_fill) and its packed form, built once per process. */
const int32_t *pc_lse_int_table(const uint32_t **packed);
/* Runs fn(ctx, r, scratch) for r < count on `threads` OpenMP threads (static split), each
 * thread with its own scratch_bytes of scratch. PC_ERR_NOMEM if scratch cannot be had. */
typedef void (*pc_lse_cpu_row_fn)(const void *ctx, int64_t r, void *scratch);
pc_status pc_lse_cpu_for(int64_t count, int threads, size_t scratch_bytes, pc_lse_cpu_row_fn fn,
                         const void *ctx);

/* Flush-to-zero for the duration of the kernels' work on one thread (MXCSR is per thread; see
 * pc_lse_cpu_for for why). begin sets FTZ and DAZ and returns the caller's bits; end puts the
 * caller's FTZ and DAZ back and keeps the exception flags the work raised. */
#define PC_MXCSR_FLUSH 0x8040u /* FTZ (bit 15) | DAZ (bit 6) */
static inline unsigned pc_flush_begin(void) {
#if defined(__SSE__)
    unsigned old = _mm_getcsr();
    _mm_setcsr(old | PC_MXCSR_FLUSH);
    return old;
#else
    return 0;
#endif
}

static inline void pc_flush_end(unsigned old) {
#if defined(__SSE__)
    _mm_setcsr((_mm_getcsr() & ~PC_MXCSR_FLUSH) | (old & PC_MXCSR_FLUSH));
#else
    (void)old;
#endif
}

/* ---- scalar helpers shared by the paths --------------------------------------------------- */

static inline float pc_bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t pc_f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* IEEE half to float, exact, including subnormals, infinities and NaN. */
static inline float pc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    if (exp == 0x1f)
        return pc_bits_to_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = (float)man * 0x1p-24f; /* subnormal: man * 2^-24, exact in float */
        return sign ? -v : v;
    }
    return pc_bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline float pc_bf16_to_f32(uint16_t b) { return pc_bits_to_f32((uint32_t)b << 16); }

/* q10.6 to nats. INT16_MIN stands for -inf (log 0). */
#define PC_Q10_6_NEG_INF INT16_MIN
static inline double pc_q10_6_to_f64(int16_t q) {
    return q == PC_Q10_6_NEG_INF ? -INFINITY : (double)q / 64.0 * 0.6931471805599453;
}

/* 2^t for t in [-126, 0] (callers clamp; NaN excluded): round to nearest k, poly on f = t - k,
 * scale by adding k to the exponent bits. The scalar twin of the SIMD exp2. */
static inline float pc_exp2_poly(float t) {
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float k = (t + magic) - magic;
    float f = t - k;
    float p = PC_EXP2_C5;
    p = p * f + PC_EXP2_C4;
    p = p * f + PC_EXP2_C3;
    p = p * f + PC_EXP2_C2;
    p = p * f + PC_EXP2_C1;
    p = p * f + 1.0f;
    return pc_bits_to_f32(pc_f32_to_bits(p) + ((uint32_t)(int32_t)k << 23));
}

/* The packed-table correction: the same integers as pc_int_correction(). */
static inline int32_t pc_int_correction_packed(int32_t d, const uint32_t *packed) {
    d = d < PC_INT_D_MAX ? d : PC_INT_D_MAX;
    uint32_t p = packed[d >> PC_INT_TABLE_SHIFT];
    int32_t f0 = (int32_t)(p & ((1u << PC_INT_PACK_BITS) - 1)),
            df = (int32_t)(p >> PC_INT_PACK_BITS);
    int32_t t = d & ((1 << PC_INT_TABLE_SHIFT) - 1);
    return f0 - ((df * t + (1 << (PC_INT_TABLE_SHIFT - 1))) >> PC_INT_TABLE_SHIFT);
}

#endif
