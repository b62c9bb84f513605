/* How fast the H200's arithmetic units run what the exact product can be made of: the FP64
 * tensor cores per mma shape, FFMA, the TF32 mma, the two side by side, and the two streams
 * that feed the warp strategy's 8-sample product (FP32 -> FP64 conversions, shared-memory
 * reads). sm_90 has mma.m8n8k4.f64 and m16n8k4, m16n8k8, m16n8k16 (SASS DMMA.8x8x4, .16x8x4,
 * .16x8x8, .16x8x16: up to 8 times the multiply-adds per instruction); the warp strategy's
 * product issues m16n8k16 and the persistent kernel's mma items m16n8k8, both through the
 * engine's pc_gpu_dmma16 (src/eval/cuda/cuda_circuit.cuh), which variants 3 and 4 run.
 *
 * Fragment layout of the FP64 shapes (lane = 4 g + t; row.col; k slots j = 0 .. K/4 - 1), also
 * that of TF32's m16n8k8:
 *   A (M x K):  element 2 j + h (M = 16) or j (M = 8) at row g + 8 h, column t + 4 j
 *   B (K x 8):  element j at row t + 4 j, column g
 *   C (M x 8):  element 2 h + c at row g + 8 h, column 2 t + c
 *
 * Variants (rates from a grid whose warps issue independent work back to back, 8 accumulators
 * per warp; median of 10 launches after one):
 *   1  mma.m8n8k4.f64          4, 8, 16, 32 warps per SM; TFLOP/s
 *   2  mma.m16n8k4.f64         likewise
 *   3  m16n8k8.f64 (engine)    likewise, through pc_gpu_dmma16<2>
 *   4  m16n8k16.f64 (engine)   likewise, through pc_gpu_dmma16<4>
 *   5  FFMA (FP32)             likewise
 *   6  mma.m16n8k8 TF32        likewise (inexact; a 3xTF32 product takes three)
 *   7  DMMA.16x8x16 and FFMA warps side by side on every scheduler, 1 and 2 blocks per SM:
 *      whether the two add up (if they did, an exact product split between them would win)
 *   8  DMMA.16x8x16 and DFMA warps side by side, likewise
 *   9  FP32 -> FP64 conversions (cvt.f64.f32) per cycle and SM, 8, 16, 32 warps per SM
 *   10 shared-memory bytes read as float4 per cycle and SM, likewise
 * Each variant first runs small and is checked against a CPU reference in double: the mma
 * shapes' every fragment entry (small integers: exact) through the layout above, the FMA and
 * conversion chains and the shared-memory sums against the same recurrences.
 *
 *   usage: gpu_dmma_rate VARIANT|all   (a markdown table per variant on stdout)
 * Results: bench/notebook/steps/gpu_circuit_h200/117_h200_dmma_rate.md and 131 (the shapes:
 * 66.5 TFLOP/s at m16n8k8 and m16n8k16, half at m8n8k4), 135 (side by side: 64.3 TFLOP/s
 * together, no more than the mma alone), 180 (TF32: 324 TFLOP/s), 188 (conversions 16.0 per
 * cycle and SM, shared memory 126 bytes). The warp strategy's product loop itself is
 * bench/lab/gpu_product_loop.cu. */
#include "eval/cuda/gpu_device.cuh"

#include "common.h"

#include <type_traits>

#define CHAINS 8 /* independent accumulators per warp */
#define CHECK_THREADS 128

static const char *const variants[] = {
    "mma.m8n8k4.f64 (DMMA.8x8x4)",
    "mma.m16n8k4.f64 (DMMA.16x8x4)",
    "mma.m16n8k8.f64 through pc_gpu_dmma16<2> (DMMA.16x8x8)",
    "mma.m16n8k16.f64 through pc_gpu_dmma16<4> (DMMA.16x8x16)",
    "FFMA (FP32)",
    "mma.m16n8k8 TF32 (FP32 tensor cores, inexact)",
    "DMMA.16x8x16 and FFMA warps side by side",
    "DMMA.16x8x16 and DFMA warps side by side",
    "FP32 -> FP64 conversions per cycle and SM",
    "shared-memory float4 reads per cycle and SM",
};

/* One mma of shape M x 8 x K in FP64: d += a b. a: M K / 32 doubles, b: K / 4, d: M / 4. */
template <int M, int K> struct dmma;
template <> struct dmma<8, 4> {
    static __device__ __forceinline__ void run(double (&d)[2], const double (&a)[1],
                                               const double (&b)[1]) {
        asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, "
                     "{%0,%1};"
                     : "+d"(d[0]), "+d"(d[1])
                     : "d"(a[0]), "d"(b[0]));
    }
};
template <> struct dmma<16, 4> {
    static __device__ __forceinline__ void run(double (&d)[4], const double (&a)[2],
                                               const double (&b)[1]) {
        asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, "
                     "{%6}, {%0,%1,%2,%3};"
                     : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                     : "d"(a[0]), "d"(a[1]), "d"(b[0]));
    }
};
/* The engine's mma function, whose rows g and g + 8 are separate arrays: a0[j] = a[2 j], a1[j] =
 * a[2 j + 1], d0 = d[0 .. 1], d1 = d[2 .. 3]. */
template <int K> struct dmma16 {
    static __device__ __forceinline__ void run(double (&d)[4], const double (&a)[K / 2],
                                               const double (&b)[K / 4]) {
        double d0[2] = {d[0], d[1]}, d1[2] = {d[2], d[3]}, a0[K / 4], a1[K / 4];
        for (int j = 0; j < K / 4; j++) a0[j] = a[2 * j], a1[j] = a[2 * j + 1];
        pc_gpu_dmma16<K / 4>(d0, d1, a0, a1, b);
        d[0] = d0[0], d[1] = d0[1], d[2] = d1[0], d[3] = d1[1];
    }
};
template <> struct dmma<16, 8> : dmma16<8> {};
template <> struct dmma<16, 16> : dmma16<16> {};

/* Operands of thread `tid`: a[i] = x + tid + i, b[j] = x - tid - j (small integers for x = 1,
 * so every product and sum below is exact). */
static __host__ __device__ double op_a(double x, int tid, int i) { return x + tid + i; }
static __host__ __device__ double op_b(double x, int tid, int j) { return x - tid - j; }

/* Every warp issues `iters` rounds of CHAINS independent mma; each thread writes its M / 4
 * accumulator entries summed over the chains. */
template <int M, int K> static __global__ void dmma_rate(double *out, int iters, double x) {
    double a[M * K / 32], b[K / 4], d[CHAINS][M / 4] = {};
    for (int i = 0; i < M * K / 32; i++) a[i] = op_a(x, threadIdx.x, i);
    for (int j = 0; j < K / 4; j++) b[j] = op_b(x, threadIdx.x, j);
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int c = 0; c < CHAINS; c++) dmma<M, K>::run(d[c], a, b);
    const size_t at = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * (M / 4);
    for (int i = 0; i < M / 4; i++) {
        double s = 0.0;
        for (int c = 0; c < CHAINS; c++) s += d[c][i];
        out[at + i] = s;
    }
}

/* The FP32 tensor cores: mma.m16n8k8 with TF32 operands (FP32 sums), CHAINS independent
 * accumulators per warp; the layout of the FP64 m16n8k8. */
static __global__ void tf32_rate(float *out, int iters, float x) {
    uint32_t a[4], b[2];
    float d[CHAINS][4] = {};
    for (int i = 0; i < 4; i++) a[i] = __float_as_uint((float)op_a(x, threadIdx.x, i));
    for (int j = 0; j < 2; j++) b[j] = __float_as_uint((float)op_b(x, threadIdx.x, j));
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int c = 0; c < CHAINS; c++)
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                         "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    const size_t at = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 4;
    for (int i = 0; i < 4; i++) {
        float s = 0.0f;
        for (int c = 0; c < CHAINS; c++) s += d[c][i];
        out[at + i] = s;
    }
}

/* d <- d * 0.999 + 0.001, CHAINS independent chains per thread, started at x + c, in T with
 * the constants rounded to C (the reference runs a float kernel's chains in double). */
template <typename T, typename C = T> static __host__ __device__ T fma_chains(T x, int iters) {
    T d[CHAINS];
    const T mul = (T)(C)0.999, add = (T)(C)0.001;
    for (int c = 0; c < CHAINS; c++) d[c] = x + (T)c;
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int c = 0; c < CHAINS; c++) d[c] = d[c] * mul + add;
    T s = 0;
    for (int c = 0; c < CHAINS; c++) s += d[c];
    return s;
}

static __global__ void ffma_rate(float *out, int iters, float x) {
    out[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = fma_chains<float>(x, iters);
}

/* What feeds the 8-sample product besides the mma: FP32 -> FP64 conversions of exp(w) (8 per
 * mma and lane) and 16-byte shared-memory reads of it (1 KB per mma and warp as FP32, 2 KB as
 * FP64). One block per SM; thread 0 writes the block's cycles. f2d_rate: every thread
 * converts CHAINS independent values per round (an FADD moves each value on, a DADD keeps
 * the result). lds_rate: every thread reads 8 float4 per round, a warp's 32 on consecutive
 * 16-byte words (no bank conflict), and adds them up (4 FADD per read). */
static __global__ void f2d_rate(double *out, long long *cycles, int iters, float x) {
    float f[CHAINS];
    double d[CHAINS] = {};
    for (int c = 0; c < CHAINS; c++) f[c] = x + threadIdx.x + c;
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int c = 0; c < CHAINS; c++) d[c] += pc_gpu_f2d(f[c]), f[c] += 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
    double s = 0.0;
    for (int c = 0; c < CHAINS; c++) s += d[c];
    out[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = s;
}

#define LDS_WORDS 2048 /* 32 KB of float4 */
static __host__ __device__ float4 lds_word(int i) { return make_float4(i, i + 1, i + 2, i + 3); }
static __host__ __device__ int lds_index(int tid, int it, int u) {
    return (tid + 32 * it + 256 * u) & (LDS_WORDS - 1);
}
static __global__ void lds_rate(double *out, long long *cycles, int iters) {
    __shared__ float4 buf[LDS_WORDS];
    for (int i = threadIdx.x; i < LDS_WORDS; i += blockDim.x) buf[i] = lds_word(i);
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const float4 v = buf[lds_index(threadIdx.x, it, u)];
            acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
        }
    __syncthreads();
    if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
    out[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = acc.x + acc.y + acc.z + acc.w;
}

/* Two kinds of warp side by side: in a block of 8 warps, warps 0-3 issue m16n8k16 rounds
 * (`dr` of them) and warps 4-7 FP32 FFMA rounds (WORK = 0) or FP64 DFMA rounds (WORK = 1), `fr`
 * of them; a warp's scheduler is its index mod 4, so each scheduler holds one of each kind.
 * With dr or fr = 0 one kind runs alone. Each thread writes its sum. */
template <int WORK> static __global__ void mixed_rate(double *out, int dr, int fr, double x) {
    const size_t at = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if ((threadIdx.x >> 7) == 0) {
        double a[8], b[4], d[CHAINS][4] = {};
        for (int i = 0; i < 8; i++) a[i] = op_a(x, threadIdx.x, i);
        for (int j = 0; j < 4; j++) b[j] = op_b(x, threadIdx.x, j);
        for (int it = 0; it < dr; it++)
#pragma unroll
            for (int c = 0; c < CHAINS; c++) dmma<16, 16>::run(d[c], a, b);
        double s = 0.0;
        for (int c = 0; c < CHAINS; c++)
            for (int i = 0; i < 4; i++) s += d[c][i];
        out[at] = s;
    } else {
        using T = std::conditional_t<WORK == 0, float, double>;
        out[at] = fma_chains<T>((T)x, fr);
    }
}

/* ---- CPU references --------------------------------------------------------------------- */

/* The M / 4 accumulator entries of every thread of a block of CHECK_THREADS after `rounds`
 * mma of each of CHAINS chains, through the fragment layout of the header. */
template <int M, int K> static double *mma_reference(double x, int rounds) {
    double *ref = (double *)lab_malloc(sizeof(double) * CHECK_THREADS * (M / 4));
    for (int w = 0; w < CHECK_THREADS / 32; w++) {
        double A[M][K], B[K][8];
        for (int lane = 0; lane < 32; lane++) {
            const int g = lane >> 2, t = lane & 3, tid = 32 * w + lane;
            for (int j = 0; j < K / 4; j++) {
                B[t + 4 * j][g] = op_b(x, tid, j);
                for (int h = 0; h < M / 8; h++)
                    A[g + 8 * h][t + 4 * j] = op_a(x, tid, (M / 8) * j + h);
            }
        }
        for (int lane = 0; lane < 32; lane++) {
            const int g = lane >> 2, t = lane & 3;
            for (int h = 0; h < M / 8; h++)
                for (int c = 0; c < 2; c++) {
                    double s = 0.0;
                    for (int k = 0; k < K; k++) s += A[g + 8 * h][k] * B[k][2 * t + c];
                    ref[(32 * w + lane) * (M / 4) + 2 * h + c] = (double)CHAINS * rounds * s;
                }
        }
    }
    return ref;
}

template <int M, int K> static void check_dmma(double *out) {
    const int rounds = 2;
    lab_poison(out, CHECK_THREADS * (M / 4));
    dmma_rate<M, K><<<1, CHECK_THREADS>>>(out, rounds, 1.0);
    LAB_CUDA_CHECK(cudaGetLastError());
    double *got = lab_to_host(out, CHECK_THREADS * (M / 4));
    double *ref = mma_reference<M, K>(1.0, rounds);
    char what[64];
    snprintf(what, sizeof what, "mma m%dn8k%d f64, every fragment entry", M, K);
    lab_check(what, ref, got, CHECK_THREADS * (M / 4), 0.0, 0.0);
    free(got), free(ref);
}

static void check_tf32(float *out) {
    const int rounds = 2;
    lab_poison(out, CHECK_THREADS * 4);
    tf32_rate<<<1, CHECK_THREADS>>>(out, rounds, 1.0f);
    LAB_CUDA_CHECK(cudaGetLastError());
    double *got = lab_to_host(out, CHECK_THREADS * 4);
    double *ref = mma_reference<16, 8>(1.0, rounds);
    lab_check("mma m16n8k8 tf32, every fragment entry", ref, got, CHECK_THREADS * 4, 0.0, 0.0);
    free(got), free(ref);
}

static void check_ffma(float *out) {
    const int rounds = 64;
    lab_poison(out, CHECK_THREADS);
    ffma_rate<<<1, CHECK_THREADS>>>(out, rounds, 1.0f);
    LAB_CUDA_CHECK(cudaGetLastError());
    double *got = lab_to_host(out, CHECK_THREADS), ref[CHECK_THREADS];
    for (int t = 0; t < CHECK_THREADS; t++) ref[t] = fma_chains<double, float>(1.0, rounds);
    lab_check("FFMA chains", ref, got, CHECK_THREADS, 0.0, 1e-5);
    free(got);
}

/* Both halves of a block of the side-by-side kernel: the mma warps' sums of their fragment
 * entries and the FMA chains. */
template <int WORK> static void check_mixed(double *out) {
    const int dr = 2, fr = 64;
    lab_poison(out, 256);
    mixed_rate<WORK><<<1, 256>>>(out, dr, fr, 1.0);
    LAB_CUDA_CHECK(cudaGetLastError());
    double *got = lab_to_host(out, 256), ref[256];
    double *entries = mma_reference<16, 16>(1.0, dr);
    for (int t = 0; t < 128; t++)
        ref[t] = entries[4 * t] + entries[4 * t + 1] + entries[4 * t + 2] + entries[4 * t + 3];
    for (int t = 128; t < 256; t++)
        ref[t] = WORK == 0 ? fma_chains<double, float>(1.0, fr) : fma_chains<double>(1.0, fr);
    lab_check(WORK == 0 ? "mma and FFMA side by side" : "mma and DFMA side by side", ref, got,
              256, 0.0, WORK == 0 ? 1e-5 : 1e-12);
    free(got), free(entries);
}

static void check_feeds(int variant, double *out, long long *cycles) {
    const int rounds = 4, threads = 256;
    lab_poison(out, threads);
    if (variant == 9) f2d_rate<<<1, threads>>>(out, cycles, rounds, 1.0f);
    else lds_rate<<<1, threads>>>(out, cycles, rounds);
    LAB_CUDA_CHECK(cudaGetLastError());
    double *got = lab_to_host(out, threads), ref[256];
    for (int t = 0; t < threads; t++) {
        /* f2d: chain c converts 1 + t + c, then one more per round; lds: the 8 words a round
         * reads, summed. */
        double s = 0.0;
        for (int it = 0; it < rounds; it++)
            for (int c = 0; c < 8; c++) {
                const float4 v = lds_word(lds_index(t, it, c));
                s += variant == 9 ? 1.0 + t + c + it : (double)v.x + v.y + v.z + v.w;
            }
        ref[t] = s;
    }
    lab_check(variants[variant - 1], ref, got, threads, 0.0, 0.0);
    free(got);
}

/* ---- timed rows ------------------------------------------------------------------------- */

static const char *const shape_sass[] = {"DMMA.8x8x4", "DMMA.16x8x4", "DMMA.16x8x8",
                                         "DMMA.16x8x16"};

template <int M, int K> static void shape_rows(int variant, int sms, double *out) {
    check_dmma<M, K>(out);
    const int iters = 4096 * 128 / (M * K); /* the same FLOP per warp for every shape */
    printf("| instruction | warps per SM | ms (median of 10) | TFLOP/s |\n|---|---|---|---|\n");
    for (int warps : {4, 8, 16, 32}) {
        const int blocks = sms * warps / 4;
        const double ms =
            lab_time_ms([&] { dmma_rate<M, K><<<blocks, 128>>>(out, iters, 1.0); }, 1, 10);
        const double flop = 2.0 * M * 8 * K * CHAINS * (double)iters * blocks * 4;
        printf("| m%dn8k%d (%s) | %d | %.4f | %.1f |\n", M, K, shape_sass[variant - 1], warps, ms,
               flop / ms * 1e-9);
    }
}

static void fp32_rows(int variant, int sms, double *out) {
    float *f = (float *)out;
    if (variant == 5) check_ffma(f);
    else check_tf32(f);
    printf("| instruction | warps per SM | ms (median of 10) | TFLOP/s |\n|---|---|---|---|\n");
    for (int warps : {4, 8, 16, 32}) {
        const int blocks = sms * warps / 4, iters = variant == 5 ? 1 << 16 : 4096;
        const double ms = lab_time_ms(
            [&] {
                if (variant == 5) ffma_rate<<<blocks, 128>>>(f, iters, 1.0f);
                else tf32_rate<<<blocks, 128>>>(f, iters, 1.0f);
            },
            1, 10);
        const double flop = variant == 5 ? 2.0 * CHAINS * (double)iters * blocks * 128
                                         : 2.0 * 16 * 8 * 8 * CHAINS * (double)iters * blocks * 4;
        printf("| %s | %d | %.4f | %.1f |\n", variants[variant - 1], warps, ms, flop / ms * 1e-9);
    }
}

/* Both kinds at once: the rounds of each are set so that each alone takes about the same
 * time; if the SM runs them side by side, both together take that time too. */
static void mixed_rows(int variant, int sms, double *out) {
    const int work = variant - 7;
    if (work == 0) check_mixed<0>(out);
    else check_mixed<1>(out);
    printf("| side by side (8 warps per block, 4 of each kind) | blocks per SM | mma alone ms | "
           "other alone ms | both ms | mma TFLOP/s (FP64) | other TFLOP/s | sum TFLOP/s |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (int per_sm : {1, 2}) {
        const int blocks = sms * per_sm, dr = 2048;
        const auto launch = [&](int d, int f) {
            if (work == 0) mixed_rate<0><<<blocks, 256>>>(out, d, f, 1.0);
            else mixed_rate<1><<<blocks, 256>>>(out, d, f, 1.0);
        };
        const double td = lab_time_ms([&] { launch(dr, 0); }, 1, 10);
        const int f0 = 1 << 14;
        const double tf0 = lab_time_ms([&] { launch(0, f0); }, 1, 10);
        const int fr = (int)(f0 * td / tf0);
        const double tf = lab_time_ms([&] { launch(0, fr); }, 1, 10);
        const double tb = lab_time_ms([&] { launch(dr, fr); }, 1, 10);
        const double dflop = 2.0 * 16 * 8 * 16 * CHAINS * (double)dr * blocks * 4;
        const double fflop = 2.0 * CHAINS * (double)fr * blocks * 128;
        printf("| DMMA.16x8x16 + %s | %d | %.4f | %.4f | %.4f | %.1f | %.1f | %.1f |\n",
               work == 0 ? "FFMA (FP32)" : "DFMA (FP64)", per_sm, td, tf, tb, dflop / tb * 1e-9,
               fflop / tb * 1e-9, (dflop + fflop) / tb * 1e-9);
    }
}

/* The 8-sample product's other streams, per cycle and SM (one block per SM). */
static void feed_rows(int variant, int sms, double *out) {
    long long *cyc;
    LAB_CUDA_CHECK(cudaMalloc(&cyc, sizeof(long long) * sms));
    check_feeds(variant, out, cyc);
    printf("| what feeds the product | warps per SM | per cycle and SM |\n|---|---|---|\n");
    for (int warps : {8, 16, 32}) {
        const int iters = 4096;
        lab_time_ms(
            [&] {
                if (variant == 9) f2d_rate<<<sms, 32 * warps>>>(out, cyc, iters, 1.0f);
                else lds_rate<<<sms, 32 * warps>>>(out, cyc, iters);
            },
            1, 10);
        const double per = variant == 9 ? (double)CHAINS * iters * 32 * warps
                                        : 8.0 * 16 * iters * 32 * warps;
        printf("| %s | %d | %.1f |\n",
               variant == 9 ? "FP32 -> FP64 conversions (cvt.f64.f32)"
                            : "shared-memory bytes read as float4",
               warps, per / lab_mean(cyc, sms));
    }
    LAB_CUDA_CHECK(cudaFree(cyc));
}

int main(int argc, char **argv) {
    int first, last;
    const int n = (int)(sizeof variants / sizeof variants[0]);
    lab_pick(argc, argv, variants, n, &first, &last);
    const int sms = lab_device().multiProcessorCount;
    double *out; /* every thread's result: up to 4 doubles for 32 warps per SM */
    LAB_CUDA_CHECK(cudaMalloc(&out, sizeof(double) * sms * 1024 * 4));
    for (int v = first; v <= last; v++) {
        printf("\n%d %s\n\n", v, variants[v - 1]);
        switch (v) {
        case 1: shape_rows<8, 4>(v, sms, out); break;
        case 2: shape_rows<16, 4>(v, sms, out); break;
        case 3: shape_rows<16, 8>(v, sms, out); break;
        case 4: shape_rows<16, 16>(v, sms, out); break;
        case 5:
        case 6: fp32_rows(v, sms, out); break;
        case 7:
        case 8: mixed_rows(v, sms, out); break;
        default: feed_rows(v, sms, out); break;
        }
    }
    LAB_CUDA_CHECK(cudaFree(out));
    return 0;
}
