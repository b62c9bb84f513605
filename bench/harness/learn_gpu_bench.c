/* GPU EM benchmark: one mini-batch EM step (forward + flows + M-step, pc_em_step) per K and
 * batch on an MNIST HCLT (Chow-Liu tree of the training images, parameters from the data),
 * for EM's FP64 and FP32 modes, against the engine's own forward pass (fuse) of the same batch;
 * then epoch times over the 60 000 training images (mini-batch epoch of batch 512, full-batch
 * epoch).
 *
 * usage: learn_gpu_bench OUT.json [--ks 16,32,64,128] [--batches 512,4096] [--reps N]
 *                        [--epoch-ks 16,32,64,128|none] [--modes f64,f32]
 * Built by CMake (BUILD/learn_gpu_bench); bench/harness/learn_gpu_bench.sh runs and plots it.
 * Times: `step_ms`, the median wall time of pc_em_step with the data attached (row indices in,
 * LL out, graph launch, M-step); `pass_ms`, the median GPU time of the pass's CUDA graph alone
 * (src/learn/cuda/em_gpu.h), split into `em_forward_ms` (gather and forward), `downward_ms` and
 * `flows_ms` by graphs that stop earlier; `forward_ms`, the fuse backend's forward graph
 * (pc_testing_time_forward). Progress on stderr; OUT.json written through a rename. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "learn/cuda/em_gpu.h"
#include "learn/learn_em_internal.h"
#include "mnist_find.h"
#include "pc/circuit.h"
#include "pc/cuda.h"
#include "pc/eval.h"
#include "pc/learn.h"
#include "pc/rng.h"
#include "testing/testing.h"

#define MAX_LIST 16

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "learn_gpu_bench: %s: %s\n", what, pc_last_error());
    exit(1);
}

static int parse_list(const char *s, int *out) {
    int n = 0;
    for (;;) {
        char *end = NULL;
        const long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 20 || (*end && *end != ',') || n == MAX_LIST) {
            fprintf(stderr, "learn_gpu_bench: bad list '%s'\n", s);
            exit(2);
        }
        out[n++] = (int)v;
        if (!*end) return n;
        s = end + 1;
    }
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* The engine's forward graph time for batch b (fuse backend). */
static double forward_ms(const pc_hclt *m, int b, int reps) {
    pc_circuit *c = NULL;
    pc_evaluator *e = NULL;
    double ms = 0;
    const pc_eval_opts opts = {PC_BACKEND_FUSE, b, 0};
    if (pc_circuit_compile(m, &c) != PC_OK || pc_evaluator_create(c, &opts, &e) != PC_OK ||
        pc_testing_time_forward(e, b, 3, reps, 7, &ms) != PC_OK)
        die("forward");
    pc_evaluator_free(e);
    pc_circuit_free(c);
    return ms;
}

/* Medians of pc_em_step (wall) and of its pass graph (GPU) for batch b. */
static void time_steps(pc_em *em, const pc_data *d, const int64_t *rows, int b, int reps,
                       double *step_ms, double *pass_ms) { /* pass_ms [3] */
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t) die("out of memory");
    for (int i = 0; i < 3; i++)
        if (pc_em_step(em, d, rows + (int64_t)i * b % (d->count - b), b, 0.5, 0.1, NULL) != PC_OK)
            die("EM step");
    for (int i = 0; i < reps; i++) {
        const int64_t off = (int64_t)(i + 3) * b % (d->count - b);
        const double t0 = now_s();
        if (pc_em_step(em, d, rows + off, b, 0.5, 0.1, NULL) != PC_OK) die("EM step");
        t[i] = (now_s() - t0) * 1e3;
    }
    *step_ms = median(t, reps);
    free(t);
    if (pc_em_gpu_time_pass(em->gpu, reps, pass_ms) != PC_OK) die("pass timing");
}

/* One mini-batch epoch (batch 512, step 0.5) and one full-batch epoch, wall seconds. */
static void time_epochs(pc_em *em, const pc_data *d, int64_t *rows, double *mini_s,
                        double *full_s, double *ll) {
    const int64_t n = d->count;
    double t0 = now_s();
    for (int64_t b = 0; b < n; b += 512)
        if (pc_em_step(em, d, rows + b, n - b < 512 ? n - b : 512, 0.5, 0.1, NULL) != PC_OK)
            die("EM epoch");
    *mini_s = now_s() - t0;
    t0 = now_s();
    if (pc_em_step(em, d, NULL, n, 1.0, 0.1, ll) != PC_OK) die("full-batch EM");
    *full_s = now_s() - t0;
}

int main(int argc, char **argv) {
    int ks[MAX_LIST] = {16, 32, 64, 128}, nk = 4, batches[MAX_LIST] = {512, 4096}, nb = 2;
    int eks[MAX_LIST] = {16, 32, 64, 128}, nek = 4, reps = 30, f64 = 1, f32 = 1;
    if (argc < 2) {
        fprintf(stderr, "usage: learn_gpu_bench OUT.json [--ks L] [--batches L] [--reps N] "
                        "[--epoch-ks L] [--modes f64,f32]\n");
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ks")) nk = parse_list(argv[i + 1], ks);
        else if (!strcmp(argv[i], "--batches")) nb = parse_list(argv[i + 1], batches);
        else if (!strcmp(argv[i], "--epoch-ks"))
            nek = strcmp(argv[i + 1], "none") ? parse_list(argv[i + 1], eks) : 0;
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 1;
        else if (!strcmp(argv[i], "--modes")) {
            f64 = strstr(argv[i + 1], "f64") != NULL;
            f32 = strstr(argv[i + 1], "f32") != NULL;
        } else {
            fprintf(stderr, "learn_gpu_bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    char path[4096], desc[256] = "";
    if (pc_tool_find_mnist(NULL, "train-images-idx3-ubyte.gz", path, sizeof path) != PC_OK)
        die("MNIST");
    pc_data *d = NULL;
    if (pc_data_load_idx(path, &d) != PC_OK) die(path);
    pc_cuda_describe(desc, sizeof desc);
    double t0 = now_s();
    double *mi = malloc(sizeof(double) * (size_t)d->width * d->width);
    int32_t *parent = malloc(sizeof(int32_t) * (size_t)d->width);
    if (!mi || !parent) die("out of memory");
    if (pc_learn_mutual_info(d, 256, 16, 20000, 1, mi) != PC_OK ||
        pc_learn_chow_liu(d->width, mi, parent) != PC_OK)
        die("structure");
    fprintf(stderr, "%s; structure %.2f s\n", desc, now_s() - t0);
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)d->count);
    if (!rows) die("out of memory");
    pc_rng rng = {7};
    for (int64_t i = 0; i < d->count; i++) rows[i] = i;
    for (int64_t i = d->count - 1; i > 0; i--) {
        const int64_t j = pc_rng_below(&rng, i + 1), t = rows[i];
        rows[i] = rows[j], rows[j] = t;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *js = fopen(tmp, "w");
    if (!js) die(tmp);
    fprintf(js, "{\"device\": \"%s\", \"reps\": %d, \"results\": [", desc, reps);
    int first = 1, maxb = 1;
    for (int i = 0; i < nb; i++) maxb = batches[i] > maxb ? batches[i] : maxb;
    for (int ki = 0; ki < nk + nek; ki++) {
        const int epochs = ki >= nk, K = epochs ? eks[ki - nk] : ks[ki];
        pc_hclt *m = NULL;
        if (pc_learn_hclt_create(d->width, parent, 256, K, &m) != PC_OK ||
            pc_learn_init_params(m, d, 1) != PC_OK)
            die("model");
        double fwd[MAX_LIST] = {0};
        for (int bi = 0; !epochs && bi < nb; bi++) fwd[bi] = forward_ms(m, batches[bi], reps);
        for (int mode = 0; mode < 2; mode++) {
            if ((mode == 0 && !f64) || (mode == 1 && !f32)) continue;
            const char *name = mode ? "f32" : "f64";
            const pc_em_opts opts = {.device = PC_EM_CUDA, .f32 = mode,
                                     .max_chunk = epochs ? 0 : maxb};
            pc_em *em = NULL;
            t0 = now_s();
            if (pc_em_create_opts(m, &opts, &em) != PC_OK || pc_em_attach_data(em, d) != PC_OK)
                die("GPU EM");
            const double setup = now_s() - t0;
            if (epochs) {
                double mini = 0, full = 0, ll = 0;
                time_epochs(em, d, rows, &mini, &full, &ll);
                fprintf(stderr, "K=%-4d %s epochs: mini-batch (512) %.2f s, full batch %.2f s, "
                                "LL %.2f\n", K, name, mini, full, ll / (double)d->count);
                fprintf(js, "%s\n  {\"kind\": \"epoch\", \"K\": %d, \"mode\": \"%s\", "
                            "\"batch\": 512, \"minibatch_s\": %.4f, \"full_s\": %.4f, "
                            "\"rows\": %lld, \"setup_s\": %.3f}",
                        first ? "" : ",", K, name, mini, full, (long long)d->count, setup);
                first = 0;
            }
            for (int bi = 0; !epochs && bi < nb; bi++) {
                double step = 0, pass[3] = {0};
                time_steps(em, d, rows, batches[bi], reps, &step, pass);
                fprintf(stderr, "K=%-4d b=%-5d %s: step %8.3f ms (pass %8.3f ms: forward %.3f, "
                                "downward %.3f, flows %.3f), engine forward %7.3f ms, "
                                "step/forward %.2f\n",
                        K, batches[bi], name, step, pass[2], pass[0], pass[1] - pass[0],
                        pass[2] - pass[1], fwd[bi], step / fwd[bi]);
                fprintf(js, "%s\n  {\"kind\": \"step\", \"K\": %d, \"batch\": %d, \"mode\": "
                            "\"%s\", \"step_ms\": %.5f, \"pass_ms\": %.5f, "
                            "\"em_forward_ms\": %.5f, \"downward_ms\": %.5f, \"flows_ms\": %.5f, "
                            "\"forward_ms\": %.5f}",
                        first ? "" : ",", K, batches[bi], name, step, pass[2], pass[0],
                        pass[1] - pass[0], pass[2] - pass[1], fwd[bi]);
                first = 0;
            }
            pc_em_free(em);
        }
        pc_hclt_free(m);
    }
    fprintf(js, "\n]}\n");
    if (fclose(js) != 0 || rename(tmp, argv[1]) != 0) die("writing the JSON");
    free(rows), free(mi), free(parent);
    pc_data_free(d);
    return 0;
}
