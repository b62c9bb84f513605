/* The warp strategy's product loop at K = 128 alone (src/eval/cuda/cuda_fuse_warp.cu): the cycles
 * a warp takes per mma when nothing else runs, for the forms exp(w) could reach the FP64 tensor
 * cores in, with one to four warps per scheduler. Each mma is m16n8k16 through the engine's
 * pc_gpu_dmma16<4> (src/eval/cuda/cuda_circuit.cuh); exp(w) is a [128][128] tile in shared
 * memory that a block's warps share.
 *
 * 16-sample items (variants 1-3): a warp holds its 16 samples' operands ed[2][32] in FP64
 * registers (128 registers) and, per pass of NP 8-wide output tiles, runs NP chains of 8 mma
 * over k, each taking its B fragment (exp(w), 4 per lane) from shared memory; 16 / NP passes
 * per group, one block of 4 warps (one per scheduler) or two per SM.
 *   1  exp(w) as FP32, converted per use (as the kernel does); NP = 2 and 4
 *   2  exp(w) as 32-bit codes that two shifts turn into FP64 (bits 29..60 of the double
 *      exp(w) 2^-640); NP = 2
 *   3  exp(w) as FP64 (twice the shared memory: one block per SM); NP = 2
 * 8-sample items (variants 4-7): transposed, out^T = exp(w) ed^T with exp(w) the A operand (16
 * outputs x 16 k, 8 values per mma and lane) and the 8 samples' ed the B operand (64
 * registers), so that three warps fit a scheduler; 8 passes of NP chains of 8 mma per group;
 * words XOR-swizzled as the kernel's rows of 128 so that a quarter-warp's words fall in 8 bank
 * groups; one block of 4 WPS warps per SM (WPS warps per scheduler, 1-4).
 *   4  FP32 converted per use (as the kernel does); NP = 2, and NP = 4 at three warps
 *   5  FP64 (4 16-byte loads per mma, no conversion)
 *   6  FP32 whose bits two integer shifts make the double exp(w) 2^-896 (ed carries 2^896)
 *   7  half of each 16-byte word converted, half shifted (k slots 2 and 3 shifted, their ed
 *      scaled), so that neither the conversions nor the integer unit take a whole mma's time
 * Before the rows of a variant are timed, one block runs one group and every thread's sum of
 * its outputs is checked against the same product in double on the host (exp(w) values with
 * 11 significant bits and small integer ed: every product and sum is exact, and the scaled
 * forms give the unscaled sums times a power of two).
 *
 *   usage: gpu_product_loop VARIANT|all   (a markdown table per variant on stdout)
 * Results: bench/notebook/steps/gpu_circuit_h200/158_3a2fbe0_dmma_rate_product_loop.md (16
 * samples: 106 cycles per mma of a lone warp, 138 with two per scheduler), 169 (8 samples: 89,
 * and 73-82 per scheduler with two to four), 188 (half converted, half shifted: 70-72 against
 * 82 converted), all made when these loops were part of gpu_dmma_rate. */
#include "eval/cuda/gpu_device.cuh"

#include "common.h"

static const char *const variants[] = {
    "16 samples, exp(w) FP32 converted per use",
    "16 samples, exp(w) as 32-bit codes, two shifts",
    "16 samples, exp(w) FP64",
    "8 samples, exp(w) FP32 converted per use",
    "8 samples, exp(w) FP64",
    "8 samples, exp(w) FP32 shifted into FP64",
    "8 samples, exp(w) half converted, half shifted",
};

#define WLD 132 /* row stride of the 16-sample exp(w) tile, in words: 16-byte aligned rows */
#define GROUPS 64
enum { W_F32, W_CODE, W_F64 };
enum { W8_F32, W8_F64, W8_SHIFT, W8_MIX };

/* exp(w) at word i of a tile: 11 significant bits, so products with small integers are exact
 * in FP64 (whether or not the compiler contracts this into an FMA). */
static __host__ __device__ float w_value(int i) { return 0.5f + (float)(i % 97) * 0x1p-10f; }

/* A lane's operands: ed[h][i] of the 16-sample form, ed[i] of the 8-sample form (before any
 * scaling by 2^896). */
static __host__ __device__ double ed16(double x, int lane, int h, int i) {
    return h == 0 ? x + lane + i : x - lane - i;
}
static __host__ __device__ double ed8(double x, int lane, int i) { return x + lane + i; }

/* The 16-sample loop: `groups` groups of 16 / NP passes; lane 0 of each warp writes the warp's
 * cycles, every thread its sum of the outputs it holds (s). */
template <int NP, int MODE>
static __global__ void __launch_bounds__(128, 2)
    product_loop(double *out, long long *cycles, int groups, double x) {
    extern __shared__ __align__(16) float ws[];
    double *wd = reinterpret_cast<double *>(ws);
    for (int i = threadIdx.x; i < 128 * WLD; i += blockDim.x) {
        const float w = w_value(i);
        if (MODE == W_F64) wd[i] = w;
        else if (MODE == W_CODE) /* the code: bits 29..60 of the double w 2^-640 */
            ws[i] = __uint_as_float((unsigned)(__double_as_longlong((double)w * 0x1p-640) >> 29));
        else ws[i] = w;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, g8 = lane >> 2, k0 = (lane & 3) * 32;
    double ed[2][32], s = 0.0;
    for (int i = 0; i < 32; i++) ed[0][i] = ed16(x, lane, 0, i), ed[1][i] = ed16(x, lane, 1, i);
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
    out[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = s;
}

/* Word index of (row, k .. k + 3) in the 8-sample tile: 16-byte units XOR-swizzled by k's
 * quarter and the row's parity (in doubles for the FP64 tile: two 16-byte units per 4 k). */
static __host__ __device__ int at8(bool f64, int row, int k) {
    const int sw = (((k >> 5) << 1) | (row & 1)) & 7;
    return f64 ? row * 128 + (k ^ (sw << 1)) : row * 128 + (k ^ (sw << 2));
}

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
    for (int i = threadIdx.x; i < 128 * 128; i += blockDim.x) {
        if (F64) wd[i] = w_value(i);
        else ws[i] = w_value(i);
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, g8 = lane >> 2, k0 = (lane & 3) * 32;
    double ed[32], s = 0.0;
    for (int i = 0; i < 32; i++) {
        const bool scaled = MODE == W8_SHIFT || (MODE == W8_MIX && i % 4 >= 2);
        ed[i] = ed8(x, lane, i) * (scaled ? 0x1p896 : 1.0);
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
                            const double2 a =
                                *reinterpret_cast<const double2 *>(wd + at8(true, row, k));
                            const double2 b =
                                *reinterpret_cast<const double2 *>(wd + at8(true, row, k + 2));
                            wa[np][h][0] = a.x, wa[np][h][1] = a.y;
                            wa[np][h][2] = b.x, wa[np][h][3] = b.y;
                        } else {
                            const float4 w =
                                *reinterpret_cast<const float4 *>(ws + at8(false, row, k));
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
    out[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = s;
}

/* ---- CPU references: lane 4 g + t's sum s for one group, through pc_gpu_dmma16's layout
 * (A[g][t + 4 j] = a0[j], A[g + 8][t + 4 j] = a1[j], B[t + 4 j][g] = b[j]; the lane holds
 * D[g][2 t + c] and D[g + 8][2 t + c]) --------------------------------------------------- */

/* 16 samples: D_n = ed (16 x 128) exp(w)_n (128 x 8) for the 16 output tiles n; the lane's s
 * adds D_n[g][2 t] and D_n[g + 8][2 t + 1]. A[r][t' + 4 j] of k slot s4 comes from lane
 * 4 (r % 8) + t', B[t' + 4 j][c] from the tile's row 8 n + c at word 32 t' + 4 s4 + j. */
static double loop16_ref(int lane, double x) {
    const int g = lane >> 2, t = lane & 3;
    double s = 0.0;
    for (int n = 0; n < 16; n++)
        for (int e = 0; e < 2; e++) {
            const int r = g + 8 * e, c = 2 * t + e;
            for (int s4 = 0; s4 < 8; s4++)
                for (int tp = 0; tp < 4; tp++)
                    for (int j = 0; j < 4; j++)
                        s += ed16(x, 4 * (r % 8) + tp, r / 8, 4 * s4 + j) *
                             w_value((8 * n + c) * WLD + 32 * tp + 4 * s4 + j);
        }
    return s;
}

/* exp(w) of the 8-sample tile at (row, k + j), as the kernel's form reads it. */
static double w8(int mode, int row, int k, int j) {
    if (mode != W8_F64) return w_value(at8(false, row, k) + j);
    return w_value(j < 2 ? at8(true, row, k) + j : at8(true, row, k + 2) + j - 2);
}

/* 8 samples: D_m = exp(w)_m (16 x 128) ed^T (128 x 8) for the 8 m-tiles; A[r][t' + 4 j] of k
 * slot s4 is the tile's (16 m + r, 32 t' + 4 s4 + j), B[t' + 4 j][c] lane 4 c + t''s ed. */
static double loop8_ref(int mode, int lane, double x) {
    const int g = lane >> 2, t = lane & 3;
    double s = 0.0;
    for (int m = 0; m < 8; m++)
        for (int e = 0; e < 2; e++) {
            const int r = g + 8 * e, c = 2 * t + e;
            for (int s4 = 0; s4 < 8; s4++)
                for (int tp = 0; tp < 4; tp++)
                    for (int j = 0; j < 4; j++)
                        s += w8(mode, 16 * m + r, 32 * tp + 4 * s4, j) *
                             ed8(x, 4 * c + tp, 4 * s4 + j);
        }
    return s;
}

/* One block, one group: every thread's s against its lane's reference. */
template <class K>
static void check(K kernel, int threads, size_t smem, int variant, double *out,
                  long long *cyc) {
    LAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem));
    lab_poison(out, threads);
    kernel<<<1, threads, smem>>>(out, cyc, 1, 1.0);
    LAB_CUDA_CHECK(cudaGetLastError());
    double *got = lab_to_host(out, threads), *ref = (double *)lab_malloc(sizeof(double) * threads);
    for (int i = 0; i < threads; i++)
        ref[i] = variant == 2   ? 0x1p-640 * loop16_ref(i & 31, 1.0)
                 : variant <= 3 ? loop16_ref(i & 31, 1.0)
                                : loop8_ref(variant - 4, i & 31, 1.0);
    lab_check(variants[variant - 1], ref, got, threads, 0.0, 0.0);
    free(got), free(ref);
}

static const char *const w_form[] = {"FP32, converted (F2F)", "32-bit codes, two shifts", "FP64"};
static const char *const w8_form[] = {"FP32, converted (F2F)", "FP64", "FP32, two shifts each",
                                      "FP32, half converted, half shifted"};

/* One row of the 16-sample loop per blocks per SM (1, 2; the FP64 tile takes 135 KB: 1). */
template <class K>
static void loop_rows(K kernel, int np, int mode, int sms, double *out, long long *cyc) {
    const size_t smem = (mode == W_F64 ? sizeof(double) : sizeof(float)) * 128 * WLD;
    check(kernel, 128, smem, mode + 1, out, cyc);
    for (int per_sm : {1, 2}) {
        if (mode == W_F64 && per_sm == 2) continue;
        const int blocks = sms * per_sm;
        const double ms =
            lab_time_ms([&] { kernel<<<blocks, 128, smem>>>(out, cyc, GROUPS, 1.0); }, 1, 10);
        const double mean = lab_mean(cyc, (size_t)blocks * 4);
        const double mma = 128.0 * GROUPS; /* per warp */
        const double flop = 2.0 * 16 * 8 * 16 * mma * blocks * 4;
        printf("| %s | %d | %d | %.0f | %.0f | %.1f |\n", w_form[mode], np, per_sm, mean / mma,
               mean / mma / per_sm, flop / ms * 1e-9);
    }
}

/* One row of the 8-sample loop: one block of 4 WPS warps per SM. */
template <class K>
static void loop8_row(K kernel, int np, int mode, int wps, int sms, double *out, long long *cyc) {
    const size_t smem = (mode == W8_F64 ? sizeof(double) : sizeof(float)) * 128 * 128;
    check(kernel, 128 * wps, smem, mode + 4, out, cyc);
    cudaFuncAttributes fa;
    LAB_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
    const double ms =
        lab_time_ms([&] { kernel<<<sms, 128 * wps, smem>>>(out, cyc, GROUPS, 1.0); }, 1, 10);
    const double mean = lab_mean(cyc, (size_t)sms * 4 * wps);
    const double mma = 64.0 * GROUPS; /* per warp */
    const double flop = 2.0 * 16 * 8 * 16 * mma * sms * 4 * wps;
    printf("| %s | %d | %d | %d (%zu B local) | %.0f | %.0f | %.1f |\n", w8_form[mode], np, wps,
           fa.numRegs, fa.localSizeBytes, mean / mma, mean / mma / wps, flop / ms * 1e-9);
}

static void run_variant(int v, int sms, double *out, long long *cyc) {
    if (v <= 3)
        printf("| exp(w) in shared memory | chains (NP) | warps per scheduler | cycles per mma "
               "of a warp | per mma and scheduler | TFLOP/s |\n|---|---|---|---|---|---|\n");
    else
        printf("| exp(w) in shared memory | chains (NP) | warps per scheduler | registers | "
               "cycles per mma of a warp | per mma and scheduler | TFLOP/s |\n"
               "|---|---|---|---|---|---|---|\n");
    switch (v) {
    case 1:
        loop_rows(product_loop<2, W_F32>, 2, W_F32, sms, out, cyc);
        loop_rows(product_loop<4, W_F32>, 4, W_F32, sms, out, cyc);
        break;
    case 2: loop_rows(product_loop<2, W_CODE>, 2, W_CODE, sms, out, cyc); break;
    case 3: loop_rows(product_loop<2, W_F64>, 2, W_F64, sms, out, cyc); break;
    case 4:
        loop8_row(product_loop8<2, W8_F32, 1>, 2, W8_F32, 1, sms, out, cyc);
        loop8_row(product_loop8<2, W8_F32, 2>, 2, W8_F32, 2, sms, out, cyc);
        loop8_row(product_loop8<2, W8_F32, 3>, 2, W8_F32, 3, sms, out, cyc);
        loop8_row(product_loop8<2, W8_F32, 4>, 2, W8_F32, 4, sms, out, cyc);
        loop8_row(product_loop8<4, W8_F32, 3>, 4, W8_F32, 3, sms, out, cyc);
        break;
    case 5:
        loop8_row(product_loop8<2, W8_F64, 1>, 2, W8_F64, 1, sms, out, cyc);
        loop8_row(product_loop8<2, W8_F64, 2>, 2, W8_F64, 2, sms, out, cyc);
        loop8_row(product_loop8<2, W8_F64, 3>, 2, W8_F64, 3, sms, out, cyc);
        loop8_row(product_loop8<2, W8_F64, 4>, 2, W8_F64, 4, sms, out, cyc);
        break;
    case 6:
        loop8_row(product_loop8<2, W8_SHIFT, 1>, 2, W8_SHIFT, 1, sms, out, cyc);
        loop8_row(product_loop8<2, W8_SHIFT, 2>, 2, W8_SHIFT, 2, sms, out, cyc);
        loop8_row(product_loop8<2, W8_SHIFT, 3>, 2, W8_SHIFT, 3, sms, out, cyc);
        break;
    default:
        loop8_row(product_loop8<2, W8_MIX, 1>, 2, W8_MIX, 1, sms, out, cyc);
        loop8_row(product_loop8<2, W8_MIX, 2>, 2, W8_MIX, 2, sms, out, cyc);
        loop8_row(product_loop8<2, W8_MIX, 3>, 2, W8_MIX, 3, sms, out, cyc);
        loop8_row(product_loop8<4, W8_MIX, 3>, 4, W8_MIX, 3, sms, out, cyc);
        break;
    }
}

int main(int argc, char **argv) {
    int first, last;
    const int n = (int)(sizeof variants / sizeof variants[0]);
    lab_pick(argc, argv, variants, n, &first, &last);
    const int sms = lab_device().multiProcessorCount;
    double *out;     /* every thread's sum: up to 512 threads per SM */
    long long *cyc;  /* per warp: up to 16 per SM */
    LAB_CUDA_CHECK(cudaMalloc(&out, sizeof(double) * sms * 512));
    LAB_CUDA_CHECK(cudaMalloc(&cyc, sizeof(long long) * sms * 16));
    for (int v = first; v <= last; v++) {
        printf("\n%d %s (K = 128, %d groups)\n\n", v, variants[v - 1], GROUPS);
        run_variant(v, sms, out, cyc);
    }
    LAB_CUDA_CHECK(cudaFree(out));
    LAB_CUDA_CHECK(cudaFree(cyc));
    return 0;
}
