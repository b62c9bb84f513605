/* What every lab program in bench/lab shares, C and CUDA alike. A lab program is a standalone
 * program in the style of llm.c's dev/cuda: numbered variants chosen on the command line, each
 * checked against a CPU reference that accumulates in double before it is timed, a markdown
 * table on stdout, checks and progress on stderr. Being a program, not the library, it may exit
 * on an error: every check here prints what failed, where, and exits with status 1. */
#ifndef PC_LAB_COMMON_H
#define PC_LAB_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Which variants to run: argv[1] is a variant number 1..n, or "all"; sets *first..*last
 * (1-based). Without argv[1] it lists the variants and ends the program with status 0; for
 * anything else it says what it expects and ends it with status 2. */
static inline void lab_pick(int argc, char **argv, const char *const *names, int n, int *first,
                            int *last) {
    if (argc < 2) {
        printf("variants of %s (run one with `%s N`, every one with `%s all`):\n", argv[0],
               argv[0], argv[0]);
        for (int i = 0; i < n; i++) printf("  %2d  %s\n", i + 1, names[i]);
        exit(0);
    }
    if (!strcmp(argv[1], "all")) {
        *first = 1, *last = n;
        return;
    }
    char *end = NULL;
    const long v = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end || v < 1 || v > n) {
        fprintf(stderr, "%s: '%s' is not a variant: a number from 1 to %d, or all (run without "
                        "arguments for the list)\n", argv[0], argv[1], n);
        exit(2);
    }
    *first = *last = (int)v;
}

static inline double lab_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int lab_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0 .. n-1] (the upper one for even n); sorts v. */
static inline double lab_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof v[0], lab_cmp_double);
    return v[n / 2];
}

/* Fails the program unless every got[i] is within abs_tol + rel_tol |ref[i]| of ref[i] (equal
 * infinities and NaN against NaN count as equal). Prints the worst difference on success. */
static inline void lab_check(const char *what, const double *ref, const double *got, int64_t n,
                             double abs_tol, double rel_tol) {
    int64_t bad = 0, worst_i = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double r = ref[i], g = got[i];
        if ((isnan(r) && isnan(g)) || r == g) continue;
        const double d = fabs(g - r);
        if (!(d <= abs_tol + rel_tol * fabs(r))) {
            if (bad < 5)
                fprintf(stderr, "check %s: value %lld is %.17g, the reference %.17g\n", what,
                        (long long)i, g, r);
            bad++;
        }
        if (!(d <= worst)) worst = d, worst_i = i;
    }
    if (bad) {
        fprintf(stderr, "check %s: FAILED, %lld of %lld values off by more than %g + %g |ref|\n",
                what, (long long)bad, (long long)n, abs_tol, rel_tol);
        exit(1);
    }
    fprintf(stderr, "check %s: %lld values ok, max |diff| %.3g (value %lld)\n", what,
            (long long)n, worst, (long long)worst_i);
}

/* C = A B in double, C(i, j) = sum_k A(i, k) B(k, j) for i < M, j < N, k < K, where X(r, c) is
 * X[r * X_rs + c * X_cs]: one function for row- and column-major operands. */
static inline void lab_gemm_ref(int64_t M, int64_t N, int64_t K, const double *A, int64_t a_rs,
                                int64_t a_cs, const double *B, int64_t b_rs, int64_t b_cs,
                                double *C, int64_t c_rs, int64_t c_cs) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++) s += A[i * a_rs + k * a_cs] * B[k * b_rs + j * b_cs];
            C[i * c_rs + j * c_cs] = s;
        }
}

static inline void *lab_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

#ifdef __CUDACC__
#include <cuda_runtime.h>

/* One check for every status-returning API: the failing call's text, file, line and the error's
 * name (CUDA: cudaGetErrorString; cuBLAS: cublasGetStatusString). */
#define LAB_CHECK_GEN(call, ok, text)                                                         \
    do {                                                                                      \
        const auto lab_e_ = (call);                                                           \
        if (lab_e_ != (ok)) {                                                                 \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,              \
                    text(lab_e_));                                                            \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)
#define LAB_CUDA_CHECK(call) LAB_CHECK_GEN(call, cudaSuccess, cudaGetErrorString)

/* The median time in ms of `reps` calls of launch() after `warmup`, each between two CUDA
 * events on `stream`; launch() queues its work there. */
template <class F>
static double lab_time_ms_on(cudaStream_t stream, F &&launch, int warmup, int reps) {
    cudaEvent_t a, b;
    LAB_CUDA_CHECK(cudaEventCreate(&a));
    LAB_CUDA_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < warmup; i++) launch();
    LAB_CUDA_CHECK(cudaGetLastError());
    double *ms = (double *)lab_malloc(sizeof(double) * reps);
    for (int i = 0; i < reps; i++) {
        float t = 0.0f;
        LAB_CUDA_CHECK(cudaEventRecord(a, stream));
        launch();
        LAB_CUDA_CHECK(cudaEventRecord(b, stream));
        LAB_CUDA_CHECK(cudaEventSynchronize(b));
        LAB_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
        ms[i] = t;
    }
    LAB_CUDA_CHECK(cudaGetLastError());
    LAB_CUDA_CHECK(cudaEventDestroy(a));
    LAB_CUDA_CHECK(cudaEventDestroy(b));
    const double med = lab_median(ms, reps);
    free(ms);
    return med;
}

/* lab_time_ms_on the legacy default stream. */
template <class F> static double lab_time_ms(F &&launch, int warmup, int reps) {
    return lab_time_ms_on(0, launch, warmup, reps);
}

/* Fills n device values with NaN (all bits set), so that a kernel that fails to write one
 * cannot pass a check. */
template <class T> static void lab_poison(T *d, size_t n) {
    LAB_CUDA_CHECK(cudaMemset(d, 0xff, n * sizeof(T)));
}

/* The n device values at d as host doubles (free() them). */
template <class T> static double *lab_to_host(const T *d, size_t n) {
    T *h = (T *)lab_malloc(n * sizeof(T));
    LAB_CUDA_CHECK(cudaMemcpy(h, d, n * sizeof(T), cudaMemcpyDeviceToHost));
    double *v = (double *)lab_malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) v[i] = (double)h[i];
    free(h);
    return v;
}

/* The mean of n device values (per-warp or per-block cycle counts, say). */
template <class T> static double lab_mean(const T *d, size_t n) {
    double *v = lab_to_host(d, n), mean = 0.0;
    for (size_t i = 0; i < n; i++) mean += v[i] / (double)n;
    free(v);
    return mean;
}

/* Device 0's properties, and the table's first line naming it. */
static inline cudaDeviceProp lab_device(void) {
    cudaDeviceProp prop;
    LAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("# %s, %d SMs, L2 %d MiB\n\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20);
    return prop;
}
#endif

#endif
