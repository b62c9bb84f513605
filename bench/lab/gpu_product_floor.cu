/* The floor that the sum layers' product puts under a forward pass: cuBLAS alone running the
 * product of every sum group of the MNIST HCLT at once, with no gather, max, exp, log or wait
 * between layers. Per group g (G of them, K x K each): out_g[K x B] = exp(w_g)[K x K] e_g[K x B],
 * as one strided-batched GEMM over all G groups. A forward pass does at least this work, with
 * the tree's 38 layers of dependencies on top: where this alone takes most of a target's time,
 * an engine meets the target only by multiplying at cuBLAS's rate and doing everything else
 * in what is left.
 *
 * Every group has its own operands and output, as a forward pass has. (Every group reading
 * one e and writing one out, to keep the operands in L2, ran 1.0-3.4x slower in cuBLAS
 * on an H200, likely because the groups' stores then all go to the same lines.)
 *
 * Variants (each a row per K = 16 ... 256 and batch 512, 4096, then one 8192^3 GEMM: the rate
 * cuBLAS reaches on a large square problem):
 *   1  sgemm  FP32 operands, FP32 FFMA (pedantic math: no TF32), as exact as fuse's product;
 *   2  dgemm  FP64 operands on the FP64 tensor cores (exact products of FP32 inputs);
 *   3  tf32   FP32 operands rounded to TF32 on the tensor cores (inexact: what the tensor cores
 *             give an engine that gives up FP32 products; 3xTF32 takes three of these).
 * Before each point is timed, its first untimed product is checked against the double product
 * on the host: every row of 64 columns of the first and the last group (of 256 entries of the
 * 8192^3 product), within each mode's rounding (FP32: 4e-7 K relative, FP64: 1e-12, TF32:
 * 5e-3). Median of 20 runs after 3 warm-up runs, CUDA events.
 *
 *   usage: gpu_product_floor VARIANT|all G [OUT.json]
 *          G: the K x K sum groups (553 in the MNIST HCLT). A markdown table on stdout and,
 *          given OUT.json, the same rows as JSON (bench/harness/gpu_circuit_plot.py draws them).
 * Results: bench/results/current/gpu_product_floor_h200.json (the floors of docs/performance.md);
 * bench/notebook/steps/gpu_circuit_h200/*_h200_product_floor.md (every full run since step 116). */
#include <cublas_v2.h>

#include "common.h"

#define LAB_CUBLAS_CHECK(call) LAB_CHECK_GEN(call, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)

#define REPS 20
#define WARMUP 3
#define CHECK_COLS 64

enum mode { SGEMM, DGEMM, TF32, MODES };
static const char *const mode_name[MODES] = {"sgemm", "dgemm", "tf32"};
static const char *const variants[MODES] = {
    "sgemm: FP32 FFMA, pedantic (no TF32)", "dgemm: FP64 tensor cores",
    "tf32: FP32 operands rounded to TF32 (inexact)"};

/* Operand i of the stream `seed`: in [0, 1) from a hash of the index, like exp'd inputs and
 * weights (all-zero operands would run cooler, and so faster, than real ones). 24 bits, so
 * FP32 and FP64 hold it exactly and the host recomputes it for the reference. */
static __host__ __device__ double operand(size_t i, unsigned seed) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    return (h >> 8) * (1.0 / 16777216.0);
}

template <typename T> static __global__ void fill(T *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (T)operand(i, seed);
}

template <typename T> static T *alloc_filled(size_t n, unsigned seed) {
    T *p = nullptr;
    LAB_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
    fill<T><<<1024, 256>>>(p, n, seed);
    LAB_CUDA_CHECK(cudaGetLastError());
    return p;
}

/* One strided-batched product of `batches` groups (column-major: A = exp(w) K x K, B = e
 * K x n, C = out K x n). */
static void run_product(cublasHandle_t h, mode m, int K, int n, int batches, const void *A,
                        const void *B, void *C) {
    const long long sa = (long long)K * K, sb = (long long)K * n, sc = sb;
    if (m == DGEMM) {
        const double one = 1.0, zero = 0.0;
        LAB_CUBLAS_CHECK(cublasDgemmStridedBatched(
            h, CUBLAS_OP_N, CUBLAS_OP_N, K, n, K, &one, (const double *)A, K, sa,
            (const double *)B, K, sb, &zero, (double *)C, K, sc, batches));
    } else {
        const float one = 1.0f, zero = 0.0f;
        const cublasComputeType_t ct =
            m == TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_PEDANTIC;
        LAB_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, K, n, K, &one, A,
                                                    CUDA_R_32F, K, sa, B, CUDA_R_32F, K, sb,
                                                    &zero, C, CUDA_R_32F, K, sc, batches, ct,
                                                    CUBLAS_GEMM_DEFAULT));
    }
}

/* Entry (i, j) of group g's product in double, from the operands' streams (A seed 1, B 2). */
static double product_ref(int K, int n, int g, int i, int j) {
    double s = 0.0;
    for (int k = 0; k < K; k++)
        s += operand((size_t)g * K * K + i + (size_t)k * K, 1u) *
             operand((size_t)g * K * n + k + (size_t)j * K, 2u);
    return s;
}

/* The device's entries of groups 0 and G - 1 against product_ref: every row of CHECK_COLS
 * columns, or of one large group a quarter's rows of them (256 entries). */
static void check(mode m, int K, int n, int G, const void *C) {
    const bool large = G == 1 && K > 1024;
    const int cols = n < CHECK_COLS ? n : CHECK_COLS, groups = G > 1 ? 2 : 1;
    const int step = large ? K / 4 : 1;
    const size_t count = (size_t)groups * cols * ((K + step - 1) / step);
    double *got = (double *)lab_malloc(sizeof(double) * count);
    double *ref = (double *)lab_malloc(sizeof(double) * count);
    size_t at = 0;
    for (int gi = 0; gi < groups; gi++) {
        const int g = gi == 0 ? 0 : G - 1;
        for (int c = 0; c < cols; c++) {
            /* Column j of group g: K contiguous entries (column-major). */
            const int j = (int)((long long)c * (n - 1) / (cols > 1 ? cols - 1 : 1));
            const size_t col = (size_t)g * K * n + (size_t)j * K;
            double *column = m == DGEMM ? lab_to_host((const double *)C + col, K)
                                        : lab_to_host((const float *)C + col, K);
            for (int i = 0; i < K; i += step)
                got[at] = column[i], ref[at++] = product_ref(K, n, g, i, j);
            free(column);
        }
    }
    const double rel = m == DGEMM ? 1e-12 : m == TF32 ? 5e-3 : 4e-7 * K;
    char what[96];
    snprintf(what, sizeof what, "%s K = %d, batch %d, %d groups", mode_name[m], K, n, G);
    lab_check(what, ref, got, (int64_t)at, 0.0, rel);
    free(got), free(ref);
}

/* Times `m` at (K, n) over G groups after checking it; prints one row (and appends it to
 * json, if any). */
static void point(cublasHandle_t h, mode m, int K, int n, int G, FILE *json, bool *first) {
    const size_t na = (size_t)G * K * K, nb = (size_t)G * K * n;
    void *A, *B, *C;
    if (m == DGEMM) {
        A = alloc_filled<double>(na, 1u), B = alloc_filled<double>(nb, 2u);
        LAB_CUDA_CHECK(cudaMalloc(&C, nb * sizeof(double)));
        lab_poison((double *)C, nb);
    } else {
        A = alloc_filled<float>(na, 1u), B = alloc_filled<float>(nb, 2u);
        LAB_CUDA_CHECK(cudaMalloc(&C, nb * sizeof(float)));
        lab_poison((float *)C, nb);
    }
    run_product(h, m, K, n, G, A, B, C);
    LAB_CUDA_CHECK(cudaDeviceSynchronize());
    check(m, K, n, G, C);
    const double ms = lab_time_ms([&] { run_product(h, m, K, n, G, A, B, C); }, WARMUP, REPS);
    const double flop = 2.0 * G * (double)K * K * n;
    printf("| %s | %d | %d | %d | %.4f | %.1f |\n", mode_name[m], K, n, G, ms, flop / ms * 1e-9);
    fflush(stdout);
    if (json) {
        fprintf(json, "%s\n  {\"mode\": \"%s\", \"K\": %d, \"batch\": %d, \"groups\": %d, "
                      "\"ms\": %.6g, \"tflops\": %.4g}",
                *first ? "" : ",", mode_name[m], K, n, G, ms, flop / ms * 1e-9);
        *first = false;
    }
    LAB_CUDA_CHECK(cudaFree(A));
    LAB_CUDA_CHECK(cudaFree(B));
    LAB_CUDA_CHECK(cudaFree(C));
}

int main(int argc, char **argv) {
    int first_v, last_v;
    lab_pick(argc, argv, variants, MODES, &first_v, &last_v);
    const int G = argc > 2 ? atoi(argv[2]) : 0;
    if (argc > 4 || G < 1) {
        fprintf(stderr, "usage: %s VARIANT|all G [OUT.json]   (G >= 1 sum groups)\n", argv[0]);
        return 2;
    }
    /* Written to a temporary name and renamed at the end: no half-written file. */
    char tmp[4096] = "";
    FILE *json = nullptr;
    if (argc == 4) {
        snprintf(tmp, sizeof tmp, "%s.tmp", argv[3]);
        if (!(json = fopen(tmp, "w"))) {
            perror(tmp);
            return 1;
        }
        fprintf(json, "[");
    }
    bool first = true;
    lab_device();
    int rt = 0, blas = 0;
    LAB_CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    cublasHandle_t h;
    LAB_CUBLAS_CHECK(cublasCreate(&h));
    LAB_CUBLAS_CHECK(cublasGetVersion(h, &blas));
    printf("CUDA runtime %d, cuBLAS %d\n\n", rt, blas);
    printf("| mode | K | batch | groups | ms (median of %d) | TFLOP/s |\n", REPS);
    printf("|---|---|---|---|---|---|\n");
    const int Ks[] = {16, 32, 64, 128, 256}, ns[] = {512, 4096};
    for (int v = first_v; v <= last_v; v++) {
        for (int n : ns)
            for (int K : Ks) point(h, (mode)(v - 1), K, n, G, json, &first);
        point(h, (mode)(v - 1), 8192, 8192, 1, json, &first);
    }
    LAB_CUBLAS_CHECK(cublasDestroy(h));
    if (json) {
        fprintf(json, "\n]\n");
        if (fclose(json) != 0 || rename(tmp, argv[3]) != 0) {
            perror(argv[3]);
            remove(tmp);
            return 1;
        }
    }
    return 0;
}
