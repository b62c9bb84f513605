/* GPU query benchmark: the queries of the `fuse` backend against its likelihood pass.
 *
 *   gpu_query_bench OUT.jsonl [--model models/mnist.h5] [--reps N] [--draws N]
 *
 * 1. The shipped model on the first 512 (and 4096) MNIST test images, the left half of every
 *    image missing or each pixel with probability 1/2: pc_conditionals_f32, pc_conditionals,
 *    pc_mpe, pc_sample_conditional and pc_sample, each timed through the API in rounds that
 *    alternate with pc_evaluate on the same batch (ratio: the median of the per-round ratios)
 *    and on the device alone (pc_gpu_query_time against pc_testing_time_forward: kernels only,
 *    no copies). The conditionals' floors: cudaMemset of their float output on the device,
 *    copying it to pageable and to pinned host memory, and pc_conditionals_f32 into pinned
 *    memory.
 * 2. Samples per block swept on the device (gpu_query.h): MPE, the conditionals, both
 *    samplers.
 * 3. Sampling `draws` (100,000) images from p(x) for the shipped model and for K = 64, 128
 *    (the Chow-Liu structure of MNIST with pc_learn_init_params, as gpu_circuit_bench makes
 *    them): images/s through pc_sample against pc_evaluate of the same images, and on the
 *    device per image; every query at batch 512 on the device for each K.
 * One JSON object per line in OUT.jsonl (written through a temporary file), a Markdown table
 * on stdout, progress on stderr. Built only with CUDA (bench/CMakeLists.txt). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eval/cuda/query/gpu_query.h"
#include "eval/evaluator.h"
#include "mnist_find.h"
#include "pc/data.h"
#include "pc/learn.h"
#include "pc/query.h"
#include "pc/rng.h"
#include "testing/testing.h"

#define V 784
#define C 256

static FILE *js;

static void die(const char *what) {
    fprintf(stderr, "gpu_query_bench: %s: %s\n", what, pc_last_error());
    exit(1);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

static pc_data *load_mnist(const char *file) {
    char path[4096];
    pc_data *d = NULL;
    if (pc_tool_find_mnist(NULL, file, path, sizeof path) != PC_OK) die(file);
    if (pc_data_load_idx(path, &d) != PC_OK) die(path);
    return d;
}

/* The buffers of the timed calls on one evaluator. */
typedef struct bench {
    pc_evaluator *e;
    const uint8_t *x, *missing;
    int64_t n;
    double *logp, *probs64;
    float *probs32;
    uint8_t *out;
} bench;

enum query { Q_LIK, Q_COND32, Q_COND64, Q_MPE, Q_SAMPLE_COND, Q_SAMPLE, Q_COUNT };
static const char *const names[Q_COUNT] = {"likelihood", "conditionals_f32", "conditionals_f64",
                                           "mpe", "sample_conditional", "sample"};

static void call(const bench *b, enum query q) {
    pc_status st = PC_OK;
    switch (q) {
    case Q_LIK: st = pc_evaluate(b->e, b->x, b->missing, b->n, V, b->logp); break;
    case Q_COND32:
        st = pc_conditionals_f32(b->e, b->x, b->missing, b->n, V, C, b->probs32, b->logp);
        break;
    case Q_COND64:
        st = pc_conditionals(b->e, b->x, b->missing, b->n, V, C, b->probs64, b->logp);
        break;
    case Q_MPE: st = pc_mpe(b->e, b->x, b->missing, b->n, V, b->out, b->logp); break;
    case Q_SAMPLE_COND:
        st = pc_sample_conditional(b->e, b->x, b->missing, b->n, V, 1, 0, b->out);
        break;
    case Q_SAMPLE: st = pc_sample(b->e, b->n, V, 1, 0, b->out); break;
    default: break;
    }
    if (st != PC_OK) die(names[q]);
}

/* API: reps rounds of (likelihood, query) after one untimed pair; the medians and the median
 * of the per-round ratios. */
static double api_rounds(const bench *b, enum query q, int reps, double *lik, double *query) {
    double t[3][64];
    call(b, Q_LIK), call(b, q);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        call(b, Q_LIK);
        t[0][r] = now_ms() - t0;
        t0 = now_ms();
        call(b, q);
        t[1][r] = now_ms() - t0;
        t[2][r] = t[1][r] / t[0][r];
    }
    *lik = median(t[0], reps), *query = median(t[1], reps);
    return median(t[2], reps);
}

/* Device time of one query's kernels on b's rows (PC_ERR_ARG past the state's chunk: -1). */
static double device_ms(const bench *b, enum query q, int reps) {
    double ms = -1.0;
    if (pc_gpu_query_time(b->e->query_state, names[q], b->x, b->missing, b->n, reps, &ms))
        return -1.0;
    return ms;
}

static double forward_ms(const bench *b, int reps) {
    double ms = -1.0;
    if (pc_testing_time_forward(b->e, b->n, 2, reps, 5, &ms) != PC_OK) die("forward timing");
    return ms;
}

/* The floors of the float conditionals' output of n images: a device memset, and copies to
 * pageable and pinned host memory (ms, medians of reps). */
static void output_floors(int64_t n, int reps, float *pageable, double out[3]) {
    const size_t bytes = (size_t)n * V * C * sizeof(float);
    void *d = NULL, *pinned = NULL;
    cudaEvent_t t0, t1;
    double t[3][64];
    if (cudaMalloc(&d, bytes) || cudaMallocHost(&pinned, bytes) || cudaEventCreate(&t0) ||
        cudaEventCreate(&t1))
        die("floor buffers");
    for (int r = 0; r <= reps; r++) {
        float ms = 0.0f;
        cudaEventRecord(t0, 0);
        cudaMemsetAsync(d, r, bytes, 0);
        cudaEventRecord(t1, 0);
        cudaEventSynchronize(t1);
        cudaEventElapsedTime(&ms, t0, t1);
        const double h0 = now_ms();
        cudaMemcpy(pageable, d, bytes, cudaMemcpyDeviceToHost);
        const double h1 = now_ms();
        cudaMemcpy(pinned, d, bytes, cudaMemcpyDeviceToHost);
        const double h2 = now_ms();
        if (r == 0) continue; /* warm-up: first touch of the pages */
        t[0][r - 1] = ms, t[1][r - 1] = h1 - h0, t[2][r - 1] = h2 - h1;
    }
    for (int i = 0; i < 3; i++) out[i] = median(t[i], reps);
    cudaFree(d), cudaFreeHost(pinned), cudaEventDestroy(t0), cudaEventDestroy(t1);
}

static void emit_query(const char *model, int K, const char *pattern, int64_t n, enum query q,
                       double api, double lik, double ratio, double dev, double fwd) {
    fprintf(js, "{\"model\": \"%s\", \"K\": %d, \"missing\": \"%s\", \"batch\": %lld, "
                "\"query\": \"%s\", \"api_ms\": %.4f, \"likelihood_api_ms\": %.4f, "
                "\"api_vs_likelihood\": %.3f, \"device_ms\": %.4f, "
                "\"likelihood_device_ms\": %.4f, \"device_vs_likelihood\": %.3f}\n",
            model, K, pattern, (long long)n, names[q], api, lik, ratio, dev, fwd,
            dev > 0 ? dev / fwd : -1.0);
    printf("| %s | %d | %s | %lld | %s | %.3f | %.3f | %.2f | %.4f | %.4f | %.2f |\n", model, K,
           pattern, (long long)n, names[q], api, lik, ratio, dev, fwd, dev > 0 ? dev / fwd : -1.0);
    fflush(stdout);
}

/* The conditionals into pinned host memory through the API (the copy is then DMA, not staged
 * through the driver's pageable buffers): median ms of reps. */
static double api_pinned_conditionals(const bench *b, int reps) {
    float *pinned = NULL;
    double t[64];
    if (cudaMallocHost((void **)&pinned, (size_t)b->n * V * C * sizeof(float))) die("pinned");
    for (int r = 0; r <= reps; r++) {
        const double t0 = now_ms();
        if (pc_conditionals_f32(b->e, b->x, b->missing, b->n, V, C, pinned, b->logp))
            die("pinned conditionals");
        if (r > 0) t[r - 1] = now_ms() - t0;
    }
    cudaFreeHost(pinned);
    return median(t, reps);
}

/* Part 1 for one evidence pattern and batch. */
static void time_batch(pc_evaluator *e, const uint8_t *x, const uint8_t *missing, int64_t n,
                       const char *pattern, int reps, float *probs32, double *probs64) {
    uint8_t *out = malloc((size_t)n * V);
    double *logp = malloc((size_t)n * sizeof(double));
    if (!out || !logp) die("out of memory");
    const bench b = {e, x, missing, n, logp, probs64, probs32, out};
    const int small = n <= 512; /* the conditionals: 0.8-1.6 MB per image */
    call(&b, Q_MPE); /* makes the query state */
    const double fwd = forward_ms(&b, 20);
    for (int q = Q_COND32; q < Q_COUNT; q++) {
        if ((q == Q_COND32 || q == Q_COND64) && !small) continue;
        double lik, api;
        const double ratio = api_rounds(&b, (enum query)q, reps, &lik, &api);
        emit_query("mnist.h5", 16, pattern, n, (enum query)q, api, lik, ratio,
                   device_ms(&b, (enum query)q, 20), fwd);
    }
    if (small) {
        double floors[3];
        output_floors(n, reps, probs32, floors);
        const double pinned = api_pinned_conditionals(&b, reps);
        fprintf(js, "{\"model\": \"mnist.h5\", \"batch\": %lld, \"query\": \"output_floor_f32\", "
                    "\"device_memset_ms\": %.4f, \"d2h_pageable_ms\": %.3f, "
                    "\"d2h_pinned_ms\": %.3f, \"api_conditionals_f32_pinned_ms\": %.3f}\n",
                (long long)n, floors[0], floors[1], floors[2], pinned);
        printf("| floor | float output of %lld images (%.0f MB) | memset on the device %.3f ms | "
               "to pageable host memory %.2f ms | to pinned %.2f ms | pc_conditionals_f32 into "
               "pinned memory %.2f ms |\n",
               (long long)n, n * V * C * 4 / 1e6, floors[0], floors[1], floors[2], pinned);
    }
    for (int rows = 1; rows <= 16; rows *= 2) {
        pc_gpu_query_force_rows(e->query_state, rows);
        const double mpe = device_ms(&b, Q_MPE, 10);
        const double cond = small ? device_ms(&b, Q_COND32, 10) : -1.0;
        const double sc = device_ms(&b, Q_SAMPLE_COND, 10), sp = device_ms(&b, Q_SAMPLE, 10);
        fprintf(js, "{\"model\": \"mnist.h5\", \"missing\": \"%s\", \"batch\": %lld, "
                    "\"rows_per_block\": %d, \"mpe_device_ms\": %.4f, "
                    "\"conditionals_f32_device_ms\": %.4f, "
                    "\"sample_conditional_device_ms\": %.4f, \"sample_device_ms\": %.4f}\n",
                pattern, (long long)n, rows, mpe, cond, sc, sp);
        printf("| rows sweep | %s | %lld | rows %d | MPE %.4f ms | conditionals f32 %.4f ms | "
               "sample_conditional %.4f ms | sample %.4f ms |\n",
               pattern, (long long)n, rows, mpe, cond, sc, sp);
    }
    pc_gpu_query_force_rows(e->query_state, 0);
    free(out), free(logp);
}

/* Part 3 for one model: draws images from p(x), then they are scored. */
static void time_sampling(const pc_circuit *c, const char *model, int64_t draws, int reps,
                          const uint8_t *x, const uint8_t *missing) {
    const pc_eval_opts opts = {PC_BACKEND_FUSE, draws, 0};
    pc_evaluator *e = NULL;
    uint8_t *rows = malloc((size_t)draws * V);
    double *logp = malloc((size_t)draws * sizeof(double)), api[64], lik[64];
    if (!rows || !logp) die("out of memory");
    if (pc_evaluator_create(c, &opts, &e) != PC_OK) die("evaluator");
    for (int r = 0; r <= reps; r++) {
        double t0 = now_ms();
        if (pc_sample(e, draws, V, (uint64_t)r, 0, rows) != PC_OK) die("pc_sample");
        const double t1 = now_ms();
        if (pc_evaluate(e, rows, NULL, draws, V, logp) != PC_OK) die("pc_evaluate");
        if (r > 0) api[r - 1] = t1 - t0, lik[r - 1] = now_ms() - t1;
    }
    const double s = median(api, reps), l = median(lik, reps);
    const int64_t n = draws < 16384 ? draws : 16384;
    const bench all = {e, rows, NULL, n, logp, NULL, NULL, rows};
    double dev = device_ms(&all, Q_SAMPLE, 10);
    int64_t dn = n;
    while (dev < 0 && dn > 1) { /* past the query state's chunk: fewer */
        dn /= 2;
        const bench fewer = {e, rows, NULL, dn, logp, NULL, NULL, rows};
        dev = device_ms(&fewer, Q_SAMPLE, 10);
    }
    const double fwd = forward_ms(&all, 10);
    fprintf(js, "{\"model\": \"%s\", \"K\": %d, \"query\": \"sample_p_x\", \"images\": %lld, "
                "\"api_ms\": %.2f, \"images_per_s\": %.0f, \"likelihood_api_ms\": %.2f, "
                "\"api_vs_likelihood\": %.3f, \"device_us_per_image\": %.4f, "
                "\"likelihood_device_us_per_image\": %.4f}\n",
            model, c->num_latents, (long long)draws, s, draws / s * 1e3, l, s / l,
            1e3 * dev / (double)dn, 1e3 * fwd / (double)n);
    printf("| sampling p(x) | %s K=%d | %lld images: %.1f ms (%.0f images/s) | pc_evaluate of "
           "them %.1f ms (%.2fx) | device %.3f us/image vs forward %.3f us/image (%.2fx) |\n",
           model, c->num_latents, (long long)draws, s, draws / s * 1e3, l, s / l,
           1e3 * dev / (double)dn, 1e3 * fwd / (double)n, (dev / (double)dn) / (fwd / (double)n));
    /* Every query at batch 512 on the device. */
    const bench b = {e, x, missing, 512, logp, NULL, NULL, rows};
    call(&b, Q_MPE);
    const double f512 = forward_ms(&b, 10);
    for (int q = Q_COND32; q <= Q_SAMPLE; q++)
        emit_query(model, c->num_latents, "left_half", 512, (enum query)q, -1, -1, -1,
                   device_ms(&b, (enum query)q, 10), f512);
    pc_evaluator_free(e);
    free(rows), free(logp);
}

static pc_circuit *learned(const pc_data *train, const int32_t *parent, int K) {
    pc_hclt *m = NULL;
    pc_circuit *c = NULL;
    if (pc_learn_hclt_create(V, parent, C, K, &m) != PC_OK) die("hclt_create");
    if (pc_learn_init_params(m, train, 1) != PC_OK) die("init_params");
    if (pc_circuit_compile(m, &c) != PC_OK) die("compile");
    pc_hclt_free(m);
    return c;
}

int main(int argc, char **argv) {
    const char *model_path = "models/mnist.h5";
    int reps = 7;
    int64_t draws = 100000;
    if (argc < 2) {
        fprintf(stderr, "usage: gpu_query_bench OUT.jsonl [--model M] [--reps N] [--draws N]\n");
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model_path = argv[i + 1];
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--draws")) draws = atoll(argv[i + 1]);
        else return fprintf(stderr, "gpu_query_bench: unknown option %s\n", argv[i]), 2;
    }
    if (reps < 1 || reps > 64 || draws < 512) return fprintf(stderr, "bad --reps/--draws\n"), 2;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    if (!(js = fopen(tmp, "w"))) return fprintf(stderr, "cannot write %s\n", tmp), 1;
    setvbuf(js, NULL, _IOLBF, 0), setvbuf(stdout, NULL, _IOLBF, 0); /* a timeout keeps lines */
    pc_hclt *model = NULL;
    pc_circuit *c = NULL;
    if (pc_hclt_load(model_path, &model) != PC_OK || pc_circuit_compile(model, &c) != PC_OK)
        die(model_path);
    pc_data *test = load_mnist("t10k-images-idx3-ubyte.gz");
    const int64_t big = 4096;
    uint8_t *missing = malloc((size_t)big * V);
    float *probs32 = malloc((size_t)512 * V * C * sizeof(float));
    double *probs64 = malloc((size_t)512 * V * C * sizeof(double));
    if (!missing || !probs32 || !probs64 || test->count < big) die("out of memory or data");
    printf("| model | K | missing | batch | query | API ms | likelihood API ms | ratio | "
           "device ms | likelihood device ms | ratio |\n|---|---|---|---|---|---|---|---|---|"
           "---|---|\n");
    const pc_eval_opts opts = {PC_BACKEND_FUSE, big, 0};
    pc_evaluator *e = NULL;
    if (pc_evaluator_create(c, &opts, &e) != PC_OK) die("evaluator");
    for (int p = 0; p < 2; p++) {
        pc_rng rng;
        pc_rng_init(&rng, 7);
        for (int64_t i = 0; i < big * V; i++)
            missing[i] = p == 0 ? (i % V) % 28 < 14 : pc_rng_unit(&rng) < 0.5;
        const char *pattern = p == 0 ? "left_half" : "random_half";
        fprintf(stderr, "gpu_query_bench: %s\n", pattern);
        time_batch(e, test->values, missing, 512, pattern, reps, probs32, probs64);
        time_batch(e, test->values, missing, big, pattern, reps, probs32, probs64);
    }
    pc_evaluator_free(e);
    for (int64_t i = 0; i < big * V; i++) missing[i] = (i % V) % 28 < 14;
    fprintf(stderr, "gpu_query_bench: sampling\n");
    time_sampling(c, "mnist.h5", draws, 3, test->values, missing);
    pc_data *train = load_mnist("train-images-idx3-ubyte.gz");
    double *mi = malloc(sizeof(double) * V * V);
    int32_t *parent = malloc(sizeof(int32_t) * V);
    if (!mi || !parent) die("out of memory");
    if (pc_learn_mutual_info(train, C, 4, 20000, 1, mi) != PC_OK) die("mutual_info");
    if (pc_learn_chow_liu(V, mi, parent) != PC_OK) die("chow_liu");
    for (int K = 64; K <= 128; K *= 2) {
        pc_circuit *ck = learned(train, parent, K);
        fprintf(stderr, "gpu_query_bench: sampling, K = %d\n", K);
        time_sampling(ck, "chow-liu", draws, 3, test->values, missing);
        pc_circuit_free(ck);
    }
    fclose(js);
    if (rename(tmp, argv[1]) != 0) return fprintf(stderr, "cannot rename %s\n", tmp), 1;
    pc_data_free(train), pc_data_free(test);
    free(mi), free(parent), free(missing), free(probs32), free(probs64);
    pc_circuit_free(c);
    pc_hclt_free(model);
    return 0;
}
