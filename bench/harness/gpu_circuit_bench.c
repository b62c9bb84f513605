/* GPU circuit benchmark: forward time per batch of the fuse, int and gemm backends on an MNIST
 * HCLT structure (Chow-Liu tree of the MNIST training images, leaves sharing their parent's
 * latent, as PyJuice builds it) for several K, with parameters initialised from the data
 * (timing does not depend on their values); then accuracy against the FP64 `ref` on the MNIST
 * test set for the shipped model and a larger model, and end-to-end scoring throughput.
 *
 * usage: gpu_circuit_bench OUT.json [--ks 16,32,...] [--batches 512,4096] [--reps N]
 *                          [--model models/mnist.h5] [--acc-k K] [--stream-copies R]
 *                          [--em-steps S] [--only LABEL,...] (time these: fuse, fuse-warp, ...)
 * Built by CMake (BUILD/gpu_circuit_bench) over the public headers and the testing hooks
 * (src/testing/testing.h: forced strategies, timed passes); bench/harness/gpu_circuit_bench.sh
 * runs and plots it. The JSON's keys are what bench/harness/gpu_circuit_plot.py reads. Prints
 * progress to stderr; writes OUT.json through a temporary file and a rename. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mnist_find.h"
#include "pc/circuit.h"
#include "pc/cuda.h"
#include "pc/data.h"
#include "pc/eval.h"
#include "pc/hclt.h"
#include "pc/learn.h"
#include "testing/testing.h"

#define MAX_LIST 64

static const pc_backend backends[] = {PC_BACKEND_FUSE, PC_BACKEND_INT, PC_BACKEND_GEMM};

/* What is timed: the three backends, and each of fuse's strategies forced (NULL: fuse's own
 * choice per pass), so one run shows what the choice gains. */
typedef struct variant {
    const char *label;
    pc_backend backend;
    const char *strategy;
} variant;

static const variant variants[] = {
    {"fuse", PC_BACKEND_FUSE, NULL},
    {"fuse-persistent", PC_BACKEND_FUSE, "persistent"},
    {"fuse-tile", PC_BACKEND_FUSE, "tile"},
    {"fuse-warp", PC_BACKEND_FUSE, "warp"},
    {"int", PC_BACKEND_INT, NULL},
    {"gemm", PC_BACKEND_GEMM, NULL},
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A comma-separated list of positive integers into out[MAX_LIST]; -1 (with a message) for
 * anything else or more than MAX_LIST entries, which are never dropped silently. */
static int parse_list(const char *s, int *out) {
    int n = 0;
    for (;;) {
        char *end = NULL;
        const long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 24 || (*end && *end != ',') || n == MAX_LIST) {
            fprintf(stderr, "gpu_circuit_bench: bad list '%s': at most %d positive integers, "
                            "comma-separated\n", s, MAX_LIST);
            return -1;
        }
        out[n++] = (int)v;
        if (!*end) return n;
        s = end + 1;
    }
}

static void die(const char *what) {
    fprintf(stderr, "gpu_circuit_bench: %s: %s\n", what, pc_last_error());
    exit(1);
}

static pc_data *load_mnist(const char *file) {
    char path[4096];
    pc_data *d = NULL;
    if (pc_tool_find_mnist(NULL, file, path, sizeof path) != PC_OK) {
        fprintf(stderr, "gpu_circuit_bench: %s\n", path);
        exit(1);
    }
    if (pc_data_load_idx(path, &d) != PC_OK) die(path);
    return d;
}

static int64_t sum_params(const pc_circuit *c) {
    return (int64_t)c->num_trans * c->num_latents * c->num_latents + c->num_latents;
}

/* Whether `label` is one of the comma-separated names in `list`. */
static int in_list(const char *list, const char *label) {
    const size_t n = strlen(label);
    for (const char *p = list; p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, label, n)) return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* Timing of every backend at every batch size for one K. */
static void time_k(FILE *js, int *first, const int32_t *parent, const pc_data *train, int K,
                   const int *batches, int nb, int reps, const char *only) {
    pc_hclt *m = NULL;
    pc_circuit *c = NULL;
    int maxb = 1;
    for (int i = 0; i < nb; i++) maxb = batches[i] > maxb ? batches[i] : maxb;
    if (pc_learn_hclt_create(train->width, parent, 256, K, &m) != PC_OK) die("hclt_create");
    if (pc_learn_init_params(m, train, 1) != PC_OK) die("init_params");
    if (pc_circuit_compile(m, &c) != PC_OK) die("compile");
    fprintf(stderr, "K=%d: %d groups, %d layers, %lld sum params\n", K, c->num_groups,
            c->num_layers, (long long)sum_params(c));
    for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
        const variant *v = &variants[vi];
        const pc_eval_opts opts = {v->backend, maxb, 0};
        pc_evaluator *e = NULL;
        if (only && !in_list(only, v->label)) continue;
        /* Above K = 128 (the tile strategy's largest) fuse is the persistent strategy: no
         * second timing of it. */
        if (v->strategy && !strcmp(v->strategy, "persistent") && K > 128) continue;
        const pc_status cs = pc_testing_evaluator_create(c, &opts, v->strategy, &e);
        if (cs == PC_ERR_UNSUPPORTED && v->strategy) continue; /* tile or warp above their K */
        if (cs != PC_OK) die(v->label);
        if (pc_testing_chunk(e) < maxb) {
            fprintf(stderr, "gpu_circuit_bench: %s runs %lld samples per pass, fewer than the "
                            "batch of %d asked for\n", v->label, (long long)pc_testing_chunk(e),
                    maxb);
            exit(1);
        }
        for (int i = 0; i < nb; i++) {
            double ms = 0.0;
            const int r = v->backend == PC_BACKEND_INT && K >= 128 ? (reps + 3) / 4 : reps;
            if (pc_testing_time_forward(e, batches[i], 3, r, 7, &ms) != PC_OK)
                die("time_forward");
            const char *strategy = pc_testing_strategy(e); /* fuse's, for this batch */
            const double flop = 2.0 * (double)sum_params(c) * batches[i];
            const size_t peak = pc_evaluator_peak_device_bytes(e);
            fprintf(stderr, "  %-15s (%s) K=%-4d b=%-5d %9.4f ms  %7.2f TFLOP/s  peak %.1f MiB\n",
                    v->label, strategy, K, batches[i], ms, flop / ms * 1e-9, peak / 1048576.0);
            fprintf(js,
                    "%s\n    {\"kind\": \"timing\", \"backend\": \"%s\", \"strategy\": \"%s\", "
                    "\"K\": %d, \"batch\": %d, "
                    "\"ms\": %.6f, \"reps\": %d, \"sum_params\": %lld, \"groups\": %d, "
                    "\"layers\": %d, \"flop\": %.6g, \"weight_bytes\": %lld, "
                    "\"peak_device_bytes\": %zu}",
                    *first ? "" : ",", v->label, strategy, K, batches[i], ms, r,
                    (long long)sum_params(c), c->num_groups, c->num_layers, flop,
                    (long long)sum_params(c) * 4, peak);
            *first = 0;
        }
        pc_evaluator_free(e);
    }
    pc_circuit_free(c);
    pc_hclt_free(m);
}

/* Accuracy of every GPU backend against ref on the test set, plus end-to-end throughput of
 * pc_evaluate over `copies` concatenated copies of it (chunks streamed through two buffers). */
static void accuracy(FILE *js, int *first, const char *label, const pc_hclt *m,
                     const pc_data *test, int copies) {
    pc_circuit *c = NULL;
    const int64_t n = test->count;
    double *want = malloc(sizeof(double) * n), *got = malloc(sizeof(double) * n * copies);
    uint8_t *big = malloc((size_t)n * test->width * copies);
    if (!want || !got || !big) die("out of memory");
    for (int r = 0; r < copies; r++)
        memcpy(big + (size_t)r * n * test->width, test->values, (size_t)n * test->width);
    if (pc_circuit_compile(m, &c) != PC_OK) die("compile");
    pc_eval_opts ro = {PC_BACKEND_REF, n, 0};
    pc_evaluator *ref = NULL;
    if (pc_evaluator_create(c, &ro, &ref) != PC_OK) die("ref");
    double t0 = now_s();
    if (pc_evaluate(ref, test->values, NULL, n, test->width, want) != PC_OK) die("ref evaluate");
    const double ref_s = now_s() - t0;
    pc_evaluator_free(ref);
    double ll = 0.0;
    for (int64_t i = 0; i < n; i++) ll += want[i];
    ll /= (double)n;
    fprintf(stderr, "%s: K=%d, ref mean LL %.4f nats (%.4f bits/dim), %.2f s on the CPU\n", label,
            m->num_latents, ll, -ll / (test->width * log(2.0)), ref_s);
    for (size_t bi = 0; bi < sizeof backends / sizeof backends[0]; bi++) {
        const pc_backend be = backends[bi];
        pc_eval_opts opts = {be, n * copies, 0};
        pc_evaluator *e = NULL;
        if (pc_evaluator_create(c, &opts, &e) != PC_OK) die(pc_backend_name(be));
        for (int64_t i = 0; i < n; i++) got[i] = NAN;
        if (pc_evaluate(e, test->values, NULL, n, test->width, got) != PC_OK) die("evaluate");
        double sum = 0.0, worst = 0.0, gll = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const double d = fabs(got[i] - want[i]);
            sum += d, worst = d > worst ? d : worst, gll += got[i];
        }
        /* Throughput: the first call above built the graphs; time a second, larger one. */
        t0 = now_s();
        if (pc_evaluate(e, big, NULL, n * copies, test->width, got) != PC_OK) die("evaluate stream");
        const double wall = now_s() - t0;
        const size_t peak = pc_evaluator_peak_device_bytes(e);
        fprintf(stderr, "  %-5s mean|D| %.3e max|D| %.3e  %.0f images/s end to end (%d x %lld)"
                        "  peak %.1f MiB\n",
                pc_backend_name(be), sum / n, worst, (double)(n * copies) / wall, copies,
                (long long)n, peak / 1048576.0);
        fprintf(js,
                "%s\n    {\"kind\": \"accuracy\", \"model\": \"%s\", \"backend\": \"%s\", "
                "\"K\": %d, "
                "\"images\": %lld, \"mean_abs_delta\": %.6e, \"max_abs_delta\": %.6e, "
                "\"ref_mean_ll\": %.8f, \"mean_ll\": %.8f, \"bits_per_dim\": %.6f, "
                "\"stream_images\": %lld, \"stream_images_per_s\": %.1f, "
                "\"peak_device_bytes\": %zu}",
                *first ? "" : ",", label, pc_backend_name(be), m->num_latents, (long long)n,
                sum / n, worst, ll, gll / n, -ll / (test->width * log(2.0)),
                (long long)(n * copies), (double)(n * copies) / wall, peak);
        *first = 0;
        pc_evaluator_free(e);
    }
    pc_circuit_free(c);
    free(want), free(got), free(big);
}

/* A few mini-batch EM steps from the data-based start, so the larger model's parameters look
 * like a learned model's (peaked where the data are) rather than random. */
static void short_em(pc_hclt *m, const pc_data *train, int steps) {
    pc_em *em = NULL;
    int64_t *rows = malloc(sizeof(int64_t) * 4096);
    if (!rows || pc_em_create(m, &em) != PC_OK) die("em_create");
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < 4096; i++) rows[i] = ((int64_t)s * 4096 + i) * 7919 % train->count;
        double llsum = 0.0;
        if (pc_em_step(em, train, rows, 4096, 0.5, 1.0, &llsum) != PC_OK) die("em_step");
        fprintf(stderr, "  EM step %d: mean LL %.3f\n", s, llsum / 4096);
    }
    if (pc_em_export(em, m) != PC_OK) die("em_export");
    pc_em_free(em);
    free(rows);
}

static int usage(const char *prog) {
    fprintf(stderr, "usage: %s OUT.json [--ks ..] [--batches ..] [--reps N] [--model F] "
                    "[--acc-k K] [--stream-copies R] [--em-steps S]\n"
                    "       [--only fuse,fuse-persistent,fuse-tile,fuse-warp,int,gemm]\n", prog);
    return 2;
}

int main(int argc, char **argv) {
    int ks[MAX_LIST] = {16, 32, 64, 128, 256}, nk = 5;
    int batches[MAX_LIST] = {512, 4096}, nb = 2;
    int reps = 30, acc_k = 64, copies = 10, em_steps = 4;
    const char *model_path = "models/mnist.h5", *out = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ks") && i + 1 < argc) {
            if ((nk = parse_list(argv[++i], ks)) < 0) return 2;
        } else if (!strcmp(argv[i], "--batches") && i + 1 < argc) {
            if ((nb = parse_list(argv[++i], batches)) < 0) return 2;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model_path = argv[++i];
        else if (!strcmp(argv[i], "--acc-k") && i + 1 < argc) acc_k = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stream-copies") && i + 1 < argc) copies = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--em-steps") && i + 1 < argc) em_steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (argv[i][0] != '-' && !out) out = argv[i];
        else return usage(argv[0]);
    }
    if (!out || reps < 1 || copies < 1 || em_steps < 0) return usage(argv[0]);
    char gpu[256] = "";
    if (pc_cuda_describe(gpu, sizeof gpu) != PC_OK) die("no GPU");
    pc_data *train = load_mnist("train-images-idx3-ubyte.gz");
    pc_data *test = load_mnist("t10k-images-idx3-ubyte.gz");
    const int32_t V = train->width;
    double *mi = malloc(sizeof(double) * V * V);
    int32_t *parent = malloc(sizeof(int32_t) * V);
    if (!mi || !parent) die("out of memory");
    double t0 = now_s();
    if (pc_learn_mutual_info(train, 256, 4, 20000, 1, mi) != PC_OK) die("mutual_info");
    if (pc_learn_chow_liu(V, mi, parent) != PC_OK) die("chow_liu");
    fprintf(stderr, "Chow-Liu tree of MNIST (4 bins, 20000 rows): %.1f s\n", now_s() - t0);

    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    FILE *js = fopen(tmp, "w");
    if (!js) return 1;
    fprintf(js, "{\n  \"gpu\": \"%s\",\n  \"structure\": \"Chow-Liu tree of MNIST train "
                "(4 bins, 20000 rows), leaves share their parent's latent\",\n"
                "  \"timing\": \"CUDA graph replay of one forward pass, CUDA events, median; "
                "inputs on the device\",\n  \"results\": [",
            gpu);
    int first = 1;
    for (int i = 0; i < nk; i++) time_k(js, &first, parent, train, ks[i], batches, nb, reps, only);

    pc_hclt *shipped = NULL;
    if (pc_hclt_load(model_path, &shipped) == PC_OK) {
        accuracy(js, &first, model_path, shipped, test, copies);
        pc_hclt_free(shipped);
    } else {
        fprintf(stderr, "no shipped model: %s\n", pc_last_error());
    }
    if (acc_k > 0) {
        pc_hclt *m = NULL;
        if (pc_learn_hclt_create(V, parent, 256, acc_k, &m) != PC_OK) die("hclt_create");
        if (pc_learn_init_params(m, train, 3) != PC_OK) die("init_params");
        short_em(m, train, em_steps);
        char label[64];
        snprintf(label, sizeof label, "chow-liu K=%d, %d EM steps", acc_k, em_steps);
        accuracy(js, &first, label, m, test, copies);
        pc_hclt_free(m);
    }
    fprintf(js, "\n  ]\n}\n");
    fclose(js);
    if (rename(tmp, out) != 0) return 1;
    pc_data_free(train), pc_data_free(test);
    free(mi), free(parent);
    return 0;
}
