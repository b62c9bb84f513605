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
 * Modes (each a row per K and batch):
 *   sgemm   FP32 operands, FP32 FFMA (pedantic math: no TF32), as exact as fuse's product;
 *   dgemm   FP64 operands on the FP64 tensor cores (exact products of FP32 inputs);
 *   tf32    FP32 operands rounded to TF32 on the tensor cores (inexact: what the tensor cores
 *           give an engine that gives up FP32 products; 3xTF32 takes three of these).
 * Then one 8192^3 GEMM per mode: the rate cuBLAS reaches on a large square problem.
 *
 *   build: nvcc -O3 -arch=native bench/gpu_product_floor.cu -lcublas -o gpu_product_floor
 *   usage: gpu_product_floor G [OUT.json]
 *          G: the K x K sum groups (553 in the MNIST HCLT). A markdown table on stdout and,
 *          given OUT.json, the same rows as JSON; median of 20 runs after 3 warm-up runs,
 *          CUDA events. */
#include <cublas_v2.h>

#include "gpu_check.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_BLAS(x)                                                                          \
    do {                                                                                       \
        cublasStatus_t s_ = (x);                                                               \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                     \
            fprintf(stderr, "%s: cuBLAS status %d\n", #x, (int)s_);                            \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#define REPS 20
#define WARMUP 3

/* Values in [0, 1) from a hash of the index: operands like exp'd inputs and weights (all-zero
 * operands would run cooler, and so faster, than real ones). */
template <typename T> static __global__ void fill(T *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
        p[i] = (T)((h >> 8) * (1.0 / 16777216.0));
    }
}

template <typename T> static T *alloc_filled(size_t n, unsigned seed) {
    T *p = nullptr;
    CHECK(cudaMalloc(&p, n * sizeof(T)));
    fill<T><<<1024, 256>>>(p, n, seed);
    CHECK(cudaGetLastError());
    return p;
}

enum mode { SGEMM, DGEMM, TF32 };
static const char *mode_name[] = {"sgemm", "dgemm", "tf32"};

/* One strided-batched product of `batches` groups (column-major: A = exp(w) K x K, B = e
 * K x n, C = out K x n). */
static void run_product(cublasHandle_t h, mode m, int K, int n, int batches, const void *A,
                        const void *B, void *C) {
    const long long sa = (long long)K * K, sb = (long long)K * n, sc = sb;
    if (m == DGEMM) {
        const double one = 1.0, zero = 0.0;
        CHECK_BLAS(cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, K, n, K, &one,
                                             (const double *)A, K, sa, (const double *)B, K, sb,
                                             &zero, (double *)C, K, sc, batches));
    } else {
        const float one = 1.0f, zero = 0.0f;
        const cublasComputeType_t ct =
            m == TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_PEDANTIC;
        CHECK_BLAS(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, K, n, K, &one, A,
                                              CUDA_R_32F, K, sa, B, CUDA_R_32F, K, sb, &zero, C,
                                              CUDA_R_32F, K, sc, batches, ct,
                                              CUBLAS_GEMM_DEFAULT));
    }
}

/* Median ms of REPS runs after WARMUP. */
static double time_product(cublasHandle_t h, mode m, int K, int n, int batches, const void *A,
                           const void *B, void *C) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < WARMUP; i++) run_product(h, m, K, n, batches, A, B, C);
    std::vector<float> ms(REPS);
    for (int i = 0; i < REPS; i++) {
        CHECK(cudaEventRecord(a));
        run_product(h, m, K, n, batches, A, B, C);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        CHECK(cudaEventElapsedTime(&ms[i], a, b));
    }
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return ms[REPS / 2];
}

/* Times `m` at (K, n) over G groups; prints one row (and appends it to json, if any). */
static void point(cublasHandle_t h, mode m, int K, int n, int G, FILE *json, bool *first) {
    const size_t na = (size_t)G * K * K, nb = (size_t)G * K * n;
    void *A, *B, *C;
    if (m == DGEMM) {
        A = alloc_filled<double>(na, 1u), B = alloc_filled<double>(nb, 2u);
        CHECK(cudaMalloc(&C, nb * sizeof(double)));
    } else {
        A = alloc_filled<float>(na, 1u), B = alloc_filled<float>(nb, 2u);
        CHECK(cudaMalloc(&C, nb * sizeof(float)));
    }
    const double ms = time_product(h, m, K, n, G, A, B, C);
    const double flop = 2.0 * G * (double)K * K * n;
    printf("| %s | %d | %d | %d | %.4f | %.1f |\n", mode_name[m], K, n, G, ms,
           flop / ms * 1e-9);
    fflush(stdout);
    if (json) {
        fprintf(json, "%s\n  {\"mode\": \"%s\", \"K\": %d, \"batch\": %d, \"groups\": %d, "
                      "\"ms\": %.6g, \"tflops\": %.4g}",
                *first ? "" : ",", mode_name[m], K, n, G, ms, flop / ms * 1e-9);
        *first = false;
    }
    CHECK(cudaFree(A));
    CHECK(cudaFree(B));
    CHECK(cudaFree(C));
}

int main(int argc, char **argv) {
    const int G = argc > 1 ? atoi(argv[1]) : 0;
    if (argc < 2 || argc > 3 || G < 1) {
        fprintf(stderr, "usage: gpu_product_floor G [OUT.json]   (G >= 1 sum groups)\n");
        return 2;
    }
    /* Written to a temporary name and renamed at the end: no half-written file. */
    char tmp[4096] = "";
    FILE *json = nullptr;
    if (argc == 3) {
        snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
        if (!(json = fopen(tmp, "w"))) {
            perror(tmp);
            return 1;
        }
        fprintf(json, "[");
    }
    bool first = true;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int rt = 0, blas = 0;
    CHECK(cudaRuntimeGetVersion(&rt));
    cublasHandle_t h;
    CHECK_BLAS(cublasCreate(&h));
    CHECK_BLAS(cublasGetVersion(h, &blas));
    printf("# %s, %d SMs; CUDA runtime %d, cuBLAS %d\n\n", prop.name,
           prop.multiProcessorCount, rt, blas);
    printf("| mode | K | batch | groups | ms (median of %d) | TFLOP/s |\n", REPS);
    printf("|---|---|---|---|---|---|\n");
    const int Ks[] = {16, 32, 64, 128, 256}, ns[] = {512, 4096};
    for (int n : ns)
        for (int K : Ks)
            for (int m = SGEMM; m <= TF32; m++) point(h, (mode)m, K, n, G, json, &first);
    for (int m = SGEMM; m <= TF32; m++) point(h, (mode)m, 8192, 8192, 1, json, &first);
    CHECK_BLAS(cublasDestroy(h));
    if (json) {
        fprintf(json, "\n]\n");
        if (fclose(json) != 0 || rename(tmp, argv[2]) != 0) {
            perror(argv[2]);
            remove(tmp);
            return 1;
        }
    }
    return 0;
}
