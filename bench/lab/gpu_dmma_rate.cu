/* How fast the FP64 tensor cores run each mma shape, and which register holds which matrix
 * element. sm_90 has mma.m8n8k4.f64 and m16n8k4, m16n8k8, m16n8k16 (SASS DMMA.8x8x4,
 * .16x8x4, .16x8x8, .16x8x16: up to 8 times the multiply-adds per instruction); the warp
 * strategy's product issues m16n8k16 and the persistent kernel's mma items m16n8k8, both
 * through the engine's pc_gpu_dmma16 (layers/cuda_circuit.cuh), which this runs for those two
 * shapes. This measures, per shape, the FP64 FLOP/s of a grid whose warps issue independent
 * mma back to back (8 accumulators per warp, 4 to 32 warps per SM), next to FFMA's FP32 rate
 * and, for scale, the TF32 mma on the FP32 tensor cores (inexact; a 3xTF32 product takes three
 * of them), and first checks on one warp that the fragment layout below gives A B exactly (small
 * integers, so FP64 sums are exact). Last, whether mma and FFMA (or DFMA) warps on the same
 * schedulers add up: if they did, an exact product split between the two would beat either.
 * And the warp strategy's product loop at K = 128 alone (product_loop): the cycles a warp
 * takes per mma with one or two warps per scheduler, NP accumulator chains, and exp(w) read
 * from shared memory as FP32 and converted per use (as the kernel does), as codes that two
 * shifts turn into FP64, or as FP64; and the same product for 8-sample items (product_loop8,
 * transposed: exp(w) the A operand, converted, in FP64, shifted into FP64, or half converted
 * and half shifted) with one to four warps per scheduler, and the rates of the two other
 * streams that loop runs on: FP32 -> FP64 conversions and shared-memory reads.
 *
 * Fragment layout checked (lane = 4 g + t; row.col; k slots j = 0 .. K/4 - 1):
 *   A (M x K):  element 2 j + h (M = 16) or j (M = 8) at row g + 8 h, column t + 4 j
 *   B (K x 8):  element j at row t + 4 j, column g
 *   C (M x 8):  element 2 h + c at row g + 8 h, column 2 t + c
 *
 *   build: nvcc -O3 -arch=native -std=c++17 -Isrc -Iinclude bench/gpu_dmma_rate.cu \
 *              -o gpu_dmma_rate
 *   usage: gpu_dmma_rate   (no arguments; a markdown table on stdout, median of 10 runs) */
#include "gpu_check.h"
#include "eval/cuda/cuda_circuit.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#define CHAINS 8 /* independent accumulators per warp */

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
/* The engine's helper, whose rows g and g + 8 are separate arrays: a0[j] = a[2 j], a1[j] =
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

/* One warp: D = A B with the layout of the header, A [M][K] and B [K][8] row-major, D [M][8]. */
template <int M, int K>
static __global__ void layout_check(const double *A, const double *B, double *D) {
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    double a[M * K / 32], b[K / 4], d[M / 4] = {};
    for (int j = 0; j < K / 4; j++) {
        b[j] = B[(t + 4 * j) * 8 + g];
        for (int h = 0; h < M / 8; h++) a[(M / 8) * j + h] = A[(g + 8 * h) * K + t + 4 * j];
    }
    dmma<M, K>::run(d, a, b);
    for (int h = 0; h < M / 8; h++)
        for (int c = 0; c < 2; c++) D[(g + 8 * h) * 8 + 2 * t + c] = d[2 * h + c];
}

template <int M, int K> static bool check_layout() {
    std::vector<double> A(M * K), B(K * 8), D(M * 8, -1.0), R(M * 8, 0.0);
    for (size_t i = 0; i < A.size(); i++) A[i] = (double)(rand() % 17 - 8);
    for (size_t i = 0; i < B.size(); i++) B[i] = (double)(rand() % 17 - 8);
    for (int r = 0; r < M; r++)
        for (int c = 0; c < 8; c++)
            for (int k = 0; k < K; k++) R[r * 8 + c] += A[r * K + k] * B[k * 8 + c];
    double *dA, *dB, *dD;
    CHECK(cudaMalloc(&dA, A.size() * sizeof(double)));
    CHECK(cudaMalloc(&dB, B.size() * sizeof(double)));
    CHECK(cudaMalloc(&dD, D.size() * sizeof(double)));
    CHECK(cudaMemcpy(dA, A.data(), A.size() * sizeof(double), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB, B.data(), B.size() * sizeof(double), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dD, D.data(), D.size() * sizeof(double), cudaMemcpyHostToDevice));
    layout_check<M, K><<<1, 32>>>(dA, dB, dD);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(D.data(), dD, D.size() * sizeof(double), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(dA));
    CHECK(cudaFree(dB));
    CHECK(cudaFree(dD));
    return D == R;
}

/* Every warp issues `iters` rounds of CHAINS independent mma. */
template <int M, int K>
static __global__ void dmma_rate(double *out, int iters, double x) {
    double a[M * K / 32], b[K / 4], d[CHAINS][M / 4] = {};
    for (int i = 0; i < M * K / 32; i++) a[i] = x + threadIdx.x + i;
    for (int j = 0; j < K / 4; j++) b[j] = x - threadIdx.x - j;
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int c = 0; c < CHAINS; c++) dmma<M, K>::run(d[c], a, b);
    double s = 0.0;
    for (int c = 0; c < CHAINS; c++)
        for (int i = 0; i < M / 4; i++) s += d[c][i];
    if (s == 12345.0) out[threadIdx.x] = s; /* keeps the work alive */
}

/* The FP32 tensor cores for scale: mma.m16n8k8 with TF32 operands (FP32 sums), CHAINS
 * independent accumulators per warp. A 3xTF32 product (each FP32 operand split in two TF32
 * halves, three of these per product) runs at a third of this rate. */
static __global__ void tf32_rate(float *out, int iters, float x) {
    uint32_t a[4], b[2];
    float d[CHAINS][4] = {};
    for (int i = 0; i < 4; i++) a[i] = __float_as_uint(x + threadIdx.x + i);
    for (int j = 0; j < 2; j++) b[j] = __float_as_uint(x - threadIdx.x - j);
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int c = 0; c < CHAINS; c++)
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                         "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    float s = 0.0f;
    for (int c = 0; c < CHAINS; c++)
        for (int i = 0; i < 4; i++) s += d[c][i];
    if (s == 12345.0f) out[threadIdx.x] = s;
}

/* FP32 reference: every thread runs CHAINS independent FFMA chains. */
static __global__ void ffma_rate(float *out, int iters, float x) {
    float d[CHAINS];
    for (int c = 0; c < CHAINS; c++) d[c] = x + c;
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int c = 0; c < CHAINS; c++) d[c] = fmaf(d[c], 0.999f, 0.001f);
    float s = 0.0f;
    for (int c = 0; c < CHAINS; c++) s += d[c];
    if (s == 12345.0f) out[threadIdx.x] = s;
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
    if (s == 12345.0) out[threadIdx.x] = s;
}

#define LDS_WORDS 2048 /* 32 KB of float4 */
static __global__ void lds_rate(double *out, long long *cycles, int iters) {
    __shared__ float4 buf[LDS_WORDS];
    for (int i = threadIdx.x; i < LDS_WORDS; i += blockDim.x)
        buf[i] = make_float4(i, i + 1, i + 2, i + 3);
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const float4 v = buf[(threadIdx.x + 32 * it + 256 * u) & (LDS_WORDS - 1)];
            acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
        }
    __syncthreads();
    if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
    if (acc.x + acc.y + acc.z + acc.w == 12345.0f) out[threadIdx.x] = acc.x;
}

/* Two kinds of warp side by side: in a block of 8 warps, warps 0-3 issue m16n8k16 rounds
 * (`dr` of them) and warps 4-7 FP32 FFMA rounds (WORK = 0) or FP64 DFMA rounds (WORK = 1), `fr`
 * of them; a warp's scheduler is its index mod 4, so each scheduler holds one of each kind.
 * With dr or fr = 0 one kind runs alone. */
template <int WORK>
static __global__ void mixed_rate(double *out, int dr, int fr, double x) {
    if ((threadIdx.x >> 7) == 0) {
        double a[8], b[4], d[CHAINS][4] = {};
        for (int i = 0; i < 8; i++) a[i] = x + threadIdx.x + i;
        for (int j = 0; j < 4; j++) b[j] = x - threadIdx.x - j;
        for (int it = 0; it < dr; it++)
#pragma unroll
            for (int c = 0; c < CHAINS; c++) dmma<16, 16>::run(d[c], a, b);
        double s = 0.0;
        for (int c = 0; c < CHAINS; c++)
            for (int i = 0; i < 4; i++) s += d[c][i];
        if (s == 12345.0) out[threadIdx.x] = s;
    } else {
        using T = std::conditional_t<WORK == 0, float, double>;
        T d[CHAINS];
        for (int c = 0; c < CHAINS; c++) d[c] = (T)x + c;
        for (int it = 0; it < fr; it++)
#pragma unroll
            for (int c = 0; c < CHAINS; c++) d[c] = d[c] * (T)0.999 + (T)0.001;
        T s = 0;
        for (int c = 0; c < CHAINS; c++) s += d[c];
        if (s == (T)12345) out[threadIdx.x] = s;
    }
}

/* The warp strategy's product at K = 128 (cuda_fuse_warp.cu, warp_chain): a warp holds its 16
 * samples' operands ed[2][32] in FP64 registers and, per pass of NP 8-wide output tiles, runs
 * NP chains of 8 mma.m16n8k16 over k, each taking its B fragment (exp(w), 4 per lane) from
 * shared memory: as FP32 converted per use (W_F32, as the kernel does), as 32-bit codes that
 * two shifts turn into FP64 (W_CODE: bits 29..60 of the double exp(w) 2^-640), or as FP64
 * (W_F64: twice the shared memory, one block per SM). 16 / NP passes per group, `groups`
 * groups; lane 0 of each warp writes the warp's cycles. The block's 4 warps (one per
 * scheduler) share one exp(w) tile [128][WLD]. */
#define WLD 132 /* row stride of the exp(w) tile, in words: 16-byte aligned rows */
enum { W_F32, W_CODE, W_F64 };
template <int NP, int MODE>
static __global__ void __launch_bounds__(128, 2)
    product_loop(double *out, long long *cycles, int groups, double x) {
    extern __shared__ __align__(16) float ws[];
    double *wd = reinterpret_cast<double *>(ws);
    for (int i = threadIdx.x; i < 128 * WLD; i += blockDim.x) {
        const float w = 0.5f + 1e-3f * (i % 97);
        if (MODE == W_F64) wd[i] = w;
        else if (MODE == W_CODE) /* the code: bits 29..60 of the double w 2^-640 */
            ws[i] = __uint_as_float((unsigned)(__double_as_longlong((double)w * 0x1p-640) >> 29));
        else ws[i] = w;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, g8 = lane >> 2, k0 = (lane & 3) * 32;
    double ed[2][32], s = 0.0;
    for (int i = 0; i < 32; i++) ed[0][i] = x + lane + i, ed[1][i] = x - lane - i;
    const long long t0 = clock64();
    for (int grp = 0; grp < groups; grp++) {
#pragma unroll 1
        for (int n0 = 0; n0 < 16; n0 += NP) {
            double acc[NP][2][2] = {};
#pragma unroll
            for (int s4 = 0; s4 < 8; s4++) {
                double wv[NP][4];
#pragma unroll
                for (int np = 0; np < NP; np++) {
                    const int at = (8 * (n0 + np) + g8) * WLD + k0 + 4 * s4;
                    if constexpr (MODE == W_F64) {
                        const double2 a = *reinterpret_cast<const double2 *>(wd + at);
                        const double2 b = *reinterpret_cast<const double2 *>(wd + at + 2);
                        wv[np][0] = a.x, wv[np][1] = a.y, wv[np][2] = b.x, wv[np][3] = b.y;
                    } else {
                        const uint4 w = *reinterpret_cast<const uint4 *>(ws + at);
                        const unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
                        for (int i = 0; i < 4; i++)
                            wv[np][i] = MODE == W_CODE
                                            ? __hiloint2double((int)(u[i] >> 3), (int)(u[i] << 29))
                                            : pc_gpu_f2d(__uint_as_float(u[i]));
                    }
                }
#pragma unroll
                for (int np = 0; np < NP; np++)
                    pc_gpu_dmma16<4>(acc[np][0], acc[np][1], &ed[0][4 * s4], &ed[1][4 * s4],
                                     wv[np]);
            }
#pragma unroll
            for (int np = 0; np < NP; np++) s += acc[np][0][0] + acc[np][1][1];
        }
    }
    const long long t1 = clock64();
    if (lane == 0) cycles[blockIdx.x * 4 + (threadIdx.x >> 5)] = t1 - t0;
    if (s == 12345.0) out[threadIdx.x] = s;
}

/* The same product in the 8-sample form: out^T = exp(w) ed^T, exp(w) the mma's A operand (16
 * outputs x 16 k: rows 16 m + g and + 8, 4 k slots each per lane) and the 8 samples' ed its B
 * (ed[32] in FP64 registers, sample g: 64 registers where the 16-sample form holds 128), so
 * that three warps fit a scheduler. 8 passes of NP chains of 8 mma per group. exp(w) from
 * shared memory (8 values per mma and lane) as FP32 converted per use (W8_F32, as the kernel
 * does), as FP64 (4 16-byte loads per mma, no conversion), as FP32 whose bits two integer
 * shifts make the double exp(w) 2^-896 (W8_SHIFT; ed carries 2^896), or half of each
 * 16-byte word converted and half shifted (W8_MIX: k slots 2 and 3 shifted, their ed scaled),
 * so that neither the conversions nor the integer unit take a whole mma's time. Words
 * swizzled as the kernel's rows of 128 so that a quarter-warp's words fall in 8 bank groups.
 * One block of 4 WPS warps per SM: WPS warps per scheduler. */
enum { W8_F32, W8_F64, W8_SHIFT, W8_MIX };
static __device__ __forceinline__ double shifted_w(float x) {
    const unsigned u = __float_as_uint(x);
    return __hiloint2double((int)(u >> 3), (int)(u << 29));
}
template <int NP, int MODE, int WPS>
static __global__ void __launch_bounds__(128 * WPS, 1)
    product_loop8(double *out, long long *cycles, int groups, double x) {
    constexpr bool F64 = MODE == W8_F64;
    extern __shared__ __align__(16) float ws[];
    double *wd = reinterpret_cast<double *>(ws);
    /* (row, k) in words: 16-byte units XOR-swizzled by k's quarter and the row's parity. */
    const auto at = [](int row, int k) {
        const int sw = (((k >> 5) << 1) | (row & 1)) & 7;
        return F64 ? row * 128 + (k ^ (sw << 1)) : row * 128 + (k ^ (sw << 2));
    };
    for (int i = threadIdx.x; i < 128 * 128; i += blockDim.x) {
        const float w = 0.5f + 1e-3f * (i % 97);
        if (F64) wd[i] = w;
        else ws[i] = w;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, g8 = lane >> 2, k0 = (lane & 3) * 32;
    double ed[32], s = 0.0;
    for (int i = 0; i < 32; i++) {
        const bool scaled = MODE == W8_SHIFT || (MODE == W8_MIX && i % 4 >= 2);
        ed[i] = (x + lane + i) * (scaled ? 0x1p896 : 1.0);
    }
    const long long t0 = clock64();
    for (int grp = 0; grp < groups; grp++) {
#pragma unroll 1
        for (int m0 = 0; m0 < 8; m0 += NP) {
            double acc[NP][2][2] = {};
#pragma unroll
            for (int s4 = 0; s4 < 8; s4++) {
                double wa[NP][2][4];
#pragma unroll
                for (int np = 0; np < NP; np++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int row = 16 * (m0 + np) + g8 + 8 * h, k = k0 + 4 * s4;
                        if constexpr (F64) {
                            const double2 a = *reinterpret_cast<const double2 *>(wd + at(row, k));
                            const double2 b =
                                *reinterpret_cast<const double2 *>(wd + at(row, k + 2));
                            wa[np][h][0] = a.x, wa[np][h][1] = a.y;
                            wa[np][h][2] = b.x, wa[np][h][3] = b.y;
                        } else {
                            const float4 w = *reinterpret_cast<const float4 *>(ws + at(row, k));
                            const bool sh = MODE == W8_SHIFT;
                            wa[np][h][0] = sh ? shifted_w(w.x) : pc_gpu_f2d(w.x);
                            wa[np][h][1] = sh ? shifted_w(w.y) : pc_gpu_f2d(w.y);
                            wa[np][h][2] = MODE == W8_F32 ? pc_gpu_f2d(w.z) : shifted_w(w.z);
                            wa[np][h][3] = MODE == W8_F32 ? pc_gpu_f2d(w.w) : shifted_w(w.w);
                        }
                    }
#pragma unroll
                for (int np = 0; np < NP; np++)
                    pc_gpu_dmma16<4>(acc[np][0], acc[np][1], wa[np][0], wa[np][1], &ed[4 * s4]);
            }
#pragma unroll
            for (int np = 0; np < NP; np++) s += acc[np][0][0] + acc[np][1][1];
        }
    }
    const long long t1 = clock64();
    if (lane == 0) cycles[blockIdx.x * 4 * WPS + (threadIdx.x >> 5)] = t1 - t0;
    if (s == 12345.0) out[threadIdx.x] = s;
}

template <class F> static double median_ms(F launch) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    launch();
    std::vector<float> ms(10);
    for (float &m : ms) {
        CHECK(cudaEventRecord(a));
        launch();
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        CHECK(cudaEventElapsedTime(&m, a, b));
    }
    CHECK(cudaGetLastError());
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

/* The mean of the n per-warp cycle counts the product loops wrote to cyc (device). */
static double mean_cycles(const long long *cyc, size_t n) {
    std::vector<long long> c(n);
    CHECK(cudaMemcpy(c.data(), cyc, n * sizeof(long long), cudaMemcpyDeviceToHost));
    double mean = 0.0;
    for (long long v : c) mean += (double)v / (double)n;
    return mean;
}

template <int M, int K> static void shape_rows(int sms, double *out, const char *sass) {
    const bool ok = check_layout<M, K>();
    const int iters = 4096 * 128 / (M * K); /* the same FLOP per warp for every shape */
    for (int warps : {4, 8, 16, 32}) {
        const int blocks = sms * warps / 4;
        const double ms = median_ms([&] { dmma_rate<M, K><<<blocks, 128>>>(out, iters, 1.0); });
        const double flop = 2.0 * M * 8 * K * CHAINS * (double)iters * blocks * 4;
        printf("| m%dn8k%d (%s) | %s | %d | %.4f | %.1f |\n", M, K, sass, ok ? "yes" : "NO",
               warps, ms, flop / ms * 1e-9);
    }
}

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    printf("# %s, %d SMs\n\n", prop.name, sms);
    printf("| instruction | layout as in the header | warps per SM | ms (median of 10) | "
           "TFLOP/s |\n|---|---|---|---|---|\n");
    double *out;
    CHECK(cudaMalloc(&out, 1024 * sizeof(double)));
    shape_rows<8, 4>(sms, out, "DMMA.8x8x4");
    shape_rows<16, 4>(sms, out, "DMMA.16x8x4");
    shape_rows<16, 8>(sms, out, "DMMA.16x8x8");
    shape_rows<16, 16>(sms, out, "DMMA.16x8x16");
    for (int warps : {4, 8, 16, 32}) {
        const int blocks = sms * warps / 4, iters = 1 << 16;
        const double ms = median_ms(
            [&] { ffma_rate<<<blocks, 128>>>((float *)out, iters, 1.0f); });
        const double flop = 2.0 * CHAINS * (double)iters * blocks * 128;
        printf("| FFMA (FP32) | - | %d | %.4f | %.1f |\n", warps, ms, flop / ms * 1e-9);
    }
    for (int warps : {4, 8, 16, 32}) {
        const int blocks = sms * warps / 4, iters = 4096;
        const double ms = median_ms(
            [&] { tf32_rate<<<blocks, 128>>>((float *)out, iters, 1.0f); });
        const double flop = 2.0 * 16 * 8 * 8 * CHAINS * (double)iters * blocks * 4;
        printf("| m16n8k8 TF32 (FP32 tensor cores, inexact; 3xTF32 at a third) | - | %d | %.4f | "
               "%.1f |\n", warps, ms, flop / ms * 1e-9);
    }
    /* Both kinds at once: the rounds of each are set so that each alone takes about the same
     * time; if the SM runs them side by side, both together take that time too. */
    printf("\n| side by side (8 warps per block, 4 of each kind) | blocks per SM | mma alone ms | "
           "other alone ms | both ms | mma TFLOP/s (FP64) | other TFLOP/s | sum TFLOP/s |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (int work = 0; work < 2; work++)
        for (int per_sm : {1, 2}) {
            const int blocks = sms * per_sm, dr = 2048;
            const auto launch = [&](int d, int f) {
                if (work == 0) mixed_rate<0><<<blocks, 256>>>(out, d, f, 1.0);
                else mixed_rate<1><<<blocks, 256>>>(out, d, f, 1.0);
            };
            const double td = median_ms([&] { launch(dr, 0); });
            const int f0 = 1 << 14;
            const double tf0 = median_ms([&] { launch(0, f0); });
            const int fr = (int)(f0 * td / tf0);
            const double tf = median_ms([&] { launch(0, fr); });
            const double tb = median_ms([&] { launch(dr, fr); });
            const double dflop = 2.0 * 16 * 8 * 16 * CHAINS * (double)dr * blocks * 4;
            const double fflop = 2.0 * CHAINS * (double)fr * blocks * 128;
            printf("| DMMA.16x8x16 + %s | %d | %.4f | %.4f | %.4f | %.1f | %.1f | %.1f |\n",
                   work == 0 ? "FFMA (FP32)" : "DFMA (FP64)", per_sm, td, tf, tb,
                   dflop / tb * 1e-9, fflop / tb * 1e-9, (dflop + fflop) / tb * 1e-9);
        }
    /* The 8-sample product's other streams, per cycle and SM (one block per SM). */
    printf("\n| what feeds the product | warps per SM | per cycle and SM |\n|---|---|---|\n");
    long long *bcyc;
    CHECK(cudaMalloc(&bcyc, sizeof(long long) * sms));
    for (int warps : {8, 16, 32}) {
        const int iters = 4096;
        median_ms([&] { f2d_rate<<<sms, 32 * warps>>>(out, bcyc, iters, 1.0f); });
        const double conv = (double)CHAINS * iters * 32 * warps;
        printf("| FP32 -> FP64 conversions (cvt.f64.f32) | %d | %.1f |\n", warps,
               conv / mean_cycles(bcyc, sms));
    }
    for (int warps : {8, 16, 32}) {
        const int iters = 4096;
        median_ms([&] { lds_rate<<<sms, 32 * warps>>>(out, bcyc, iters); });
        const double bytes = 8.0 * 16 * iters * 32 * warps;
        printf("| shared-memory bytes read as float4 | %d | %.1f |\n", warps,
               bytes / mean_cycles(bcyc, sms));
    }
    CHECK(cudaFree(bcyc));
    /* The product loop alone: cycles per mma of a warp (mean over the warps), one or two
     * blocks of four warps per SM as the warp kernel runs at K = 128. */
    printf("\n| the warp strategy's product at K = 128 alone | exp(w) in shared memory | "
           "chains (NP) | warps per scheduler | cycles per mma of a warp | per mma and "
           "scheduler | TFLOP/s |\n"
           "|---|---|---|---|---|---|---|\n");
    long long *cyc; /* per warp: up to 16 per SM */
    CHECK(cudaMalloc(&cyc, sizeof(long long) * sms * 16));
    const auto loop_row = [&](auto kernel, int np, int mode) {
        const size_t smem = (mode == W_F64 ? sizeof(double) : sizeof(float)) * 128 * WLD;
        CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)smem));
        for (int per_sm : {1, 2}) {
            if (mode == W_F64 && per_sm == 2) continue; /* its tile takes 135 KB */
            const int blocks = sms * per_sm, groups = 64;
            const double ms =
                median_ms([&] { kernel<<<blocks, 128, smem>>>(out, cyc, groups, 1.0); });
            const double mean = mean_cycles(cyc, (size_t)blocks * 4);
            const double mma = 128.0 * groups; /* per warp */
            const double flop = 2.0 * 16 * 8 * 16 * mma * blocks * 4;
            printf("| | %s | %d | %d | %.0f | %.0f | %.1f |\n",
                   mode == W_F32    ? "FP32, converted (F2F)"
                   : mode == W_CODE ? "32-bit codes, two shifts"
                                    : "FP64",
                   np, per_sm, mean / mma, mean / mma / per_sm, flop / ms * 1e-9);
        }
    };
    loop_row(product_loop<2, W_F32>, 2, W_F32);
    loop_row(product_loop<4, W_F32>, 4, W_F32);
    loop_row(product_loop<2, W_CODE>, 2, W_CODE);
    loop_row(product_loop<2, W_F64>, 2, W_F64);
    /* The 8-sample form: one block of 4 WPS warps per SM. */
    printf("\n| the 8-sample form at K = 128 alone (exp(w) the A operand) | exp(w) in shared "
           "memory | chains (NP) | warps per scheduler | registers | cycles per mma of a warp | "
           "per mma and scheduler | TFLOP/s |\n|---|---|---|---|---|---|---|---|\n");
    const auto loop8_row = [&](auto kernel, int np, int mode, int wps) {
        const size_t smem = (mode == W8_F64 ? sizeof(double) : sizeof(float)) * 128 * 128;
        cudaFuncAttributes fa;
        CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)smem));
        CHECK(cudaFuncGetAttributes(&fa, kernel));
        const int blocks = sms, groups = 64;
        const double ms =
            median_ms([&] { kernel<<<blocks, 128 * wps, smem>>>(out, cyc, groups, 1.0); });
        const double mean = mean_cycles(cyc, (size_t)blocks * 4 * wps);
        const double mma = 64.0 * groups; /* per warp */
        const double flop = 2.0 * 16 * 8 * 16 * mma * blocks * 4 * wps;
        static const char *const how[] = {"FP32, converted (F2F)", "FP64",
                                          "FP32, two shifts each", "FP32, half converted, "
                                                                   "half shifted"};
        printf("| | %s | %d | %d | %d (%zu B local) | %.0f | %.0f | %.1f |\n", how[mode], np,
               wps, fa.numRegs, fa.localSizeBytes, mean / mma, mean / mma / wps,
               flop / ms * 1e-9);
    };
    loop8_row(product_loop8<2, W8_F32, 1>, 2, W8_F32, 1);
    loop8_row(product_loop8<2, W8_F32, 2>, 2, W8_F32, 2);
    loop8_row(product_loop8<2, W8_F32, 3>, 2, W8_F32, 3);
    loop8_row(product_loop8<2, W8_F32, 4>, 2, W8_F32, 4);
    loop8_row(product_loop8<4, W8_F32, 3>, 4, W8_F32, 3);
    loop8_row(product_loop8<2, W8_F64, 1>, 2, W8_F64, 1);
    loop8_row(product_loop8<2, W8_F64, 2>, 2, W8_F64, 2);
    loop8_row(product_loop8<2, W8_F64, 3>, 2, W8_F64, 3);
    loop8_row(product_loop8<2, W8_F64, 4>, 2, W8_F64, 4);
    loop8_row(product_loop8<2, W8_SHIFT, 1>, 2, W8_SHIFT, 1);
    loop8_row(product_loop8<2, W8_SHIFT, 2>, 2, W8_SHIFT, 2);
    loop8_row(product_loop8<2, W8_SHIFT, 3>, 2, W8_SHIFT, 3);
    loop8_row(product_loop8<2, W8_MIX, 1>, 2, W8_MIX, 1);
    loop8_row(product_loop8<2, W8_MIX, 2>, 2, W8_MIX, 2);
    loop8_row(product_loop8<2, W8_MIX, 3>, 2, W8_MIX, 3);
    loop8_row(product_loop8<4, W8_MIX, 3>, 4, W8_MIX, 3);
    CHECK(cudaFree(cyc));
    CHECK(cudaFree(out));
    return 0;
}
