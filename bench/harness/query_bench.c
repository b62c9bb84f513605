/* Times the queries against a likelihood pass of the same batch on the same CPU backend.
 *
 *   query_bench MODEL.h5 IDX_IMAGES [batch] [reps] [threads]
 *
 * For each CPU backend (ref, cpu-fuse, cpu) and each evidence pattern (the left half of every
 * image missing; each pixel missing with probability 1/2), runs on the first `batch` images:
 * pc_conditionals_f32, pc_conditionals (double output), pc_mpe, pc_sample_conditional and
 * pc_sample, each in rounds alternating with pc_evaluate (the likelihood pass) on the same
 * batch and evaluator; prints the medians and the median ratio query / likelihood, one JSON
 * object per line (and a Markdown table on stderr). Also the time to memset the float
 * conditionals' output, the floor that writing it sets. Uses only the public API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pc/data.h"
#include "pc/query.h"
#include "pc/rng.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "query_bench: %s: %s\n", what, pc_last_error());
    exit(1);
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The buffers of one timed call. */
typedef struct job {
    pc_evaluator *e;
    const uint8_t *x, *missing;
    int64_t n, V, C;
    double *logp, *probs64;
    float *probs32;
    uint8_t *out;
} job;

/* Q_WRITE_F32 is no query: memset of the float conditionals' buffer, the floor that writing
 * n V C floats sets for pc_conditionals_f32 on this machine. */
enum query {
    Q_LIKELIHOOD, Q_WRITE_F32, Q_COND_F32, Q_COND_F64, Q_MPE, Q_SAMPLE_COND, Q_SAMPLE, Q_COUNT
};
static const char *const query_names[Q_COUNT] = {
    "likelihood", "write_f32_floor", "conditionals_f32", "conditionals_f64", "mpe",
    "sample_conditional", "sample"};

static pc_status run(const job *j, enum query q) {
    switch (q) {
    case Q_LIKELIHOOD: return pc_evaluate(j->e, j->x, j->missing, j->n, j->V, j->logp);
    case Q_WRITE_F32:
        memset(j->probs32, 0, (size_t)(j->n * j->V * j->C) * sizeof(float));
        return PC_OK;
    case Q_COND_F32:
        return pc_conditionals_f32(j->e, j->x, j->missing, j->n, j->V, j->C, j->probs32, j->logp);
    case Q_COND_F64:
        return pc_conditionals(j->e, j->x, j->missing, j->n, j->V, j->C, j->probs64, j->logp);
    case Q_MPE: return pc_mpe(j->e, j->x, j->missing, j->n, j->V, j->out, j->logp);
    case Q_SAMPLE_COND:
        return pc_sample_conditional(j->e, j->x, j->missing, j->n, j->V, 1, 0, j->out);
    case Q_SAMPLE: return pc_sample(j->e, j->n, j->V, 1, 0, j->out);
    default: return PC_ERR_ARG;
    }
}

/* Times `reps` rounds of (likelihood pass, query) after one untimed call of each, so that a
 * change of load on a shared machine hits both alike. Writes the median seconds of each and
 * returns the median of the per-round ratios query / likelihood. */
static double time_query(const job *j, enum query q, int reps, double *lik_s, double *query_s) {
    double *t = malloc(3 * (size_t)reps * sizeof *t), *tl = t + reps, *ratio = t + 2 * reps;
    if (!t || run(j, Q_LIKELIHOOD) != PC_OK || run(j, q) != PC_OK) die(query_names[q]);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (run(j, Q_LIKELIHOOD) != PC_OK) die("likelihood");
        tl[r] = now_s() - t0;
        t0 = now_s();
        if (run(j, q) != PC_OK) die(query_names[q]);
        t[r] = now_s() - t0;
        ratio[r] = t[r] / tl[r];
    }
    qsort(t, (size_t)reps, sizeof *t, by_value);
    qsort(tl, (size_t)reps, sizeof *tl, by_value);
    qsort(ratio, (size_t)reps, sizeof *ratio, by_value);
    *lik_s = tl[reps / 2], *query_s = t[reps / 2];
    const double median = ratio[reps / 2];
    free(t);
    return median;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: query_bench MODEL.h5 IDX_IMAGES [batch] [reps] [threads]\n");
        return 2;
    }
    const int64_t batch = argc > 3 ? atoll(argv[3]) : 512;
    const int reps = argc > 4 ? atoi(argv[4]) : 5;
    const int threads = argc > 5 ? atoi(argv[5]) : 0;
    pc_hclt *model = NULL;
    pc_circuit *c = NULL;
    pc_data *data = NULL;
    if (pc_hclt_load(argv[1], &model) != PC_OK) die(argv[1]);
    if (pc_circuit_compile(model, &c) != PC_OK) die("compile");
    if (pc_data_load_idx(argv[2], &data) != PC_OK) die(argv[2]);
    const int64_t V = c->num_vars, C = c->num_cats, n = batch < data->count ? batch : data->count;
    if (data->width != V || batch < 1 || reps < 1) die("the data's width, batch or reps");
    uint8_t *missing = malloc((size_t)(n * V)), *out = malloc((size_t)(n * V));
    double *logp = malloc((size_t)n * sizeof(double));
    /* 64-byte aligned outputs, so that whole lines of the rows are streamed (pc/query.h). */
    const size_t cells = (size_t)(n * V * C);
    double *probs64 = aligned_alloc(64, (cells * sizeof(double) + 63) / 64 * 64);
    float *probs32 = aligned_alloc(64, (cells * sizeof(float) + 63) / 64 * 64);
    if (!missing || !out || !logp || !probs64 || !probs32) die("out of memory");
    const char *patterns[2] = {"left_half", "random_half"};
    const pc_backend backends[3] = {PC_BACKEND_REF, PC_BACKEND_CPU_FUSE, PC_BACKEND_CPU};
    fprintf(stderr, "| backend | missing | query | ms per batch of %lld | likelihood pass, ms | "
                    "ratio (median of rounds) |\n|---|---|---|---|---|---|\n",
            (long long)n);
    for (int p = 0; p < 2; p++) {
        pc_rng rng;
        pc_rng_init(&rng, 7);
        for (int64_t i = 0; i < n * V; i++)
            missing[i] = p == 0 ? (i % V) % 28 < 14 : pc_rng_unit(&rng) < 0.5;
        for (int b = 0; b < 3; b++) {
            pc_eval_opts opts = {backends[b], n, threads};
            pc_evaluator *e = NULL;
            if (pc_evaluator_create(c, &opts, &e) != PC_OK) die("evaluator");
            const job j = {e, data->values, missing, n, V, C, logp, probs64, probs32, out};
            for (int q = Q_WRITE_F32; q < Q_COUNT; q++) {
                double lik, s;
                const double ratio = time_query(&j, (enum query)q, reps, &lik, &s);
                printf("{\"backend\": \"%s\", \"missing\": \"%s\", \"query\": \"%s\", \"batch\": "
                       "%lld, \"threads\": %d, \"median_ms\": %.3f, \"likelihood_ms\": %.3f, "
                       "\"vs_likelihood\": %.3f}\n",
                       pc_backend_name(backends[b]), patterns[p], query_names[q], (long long)n,
                       threads, 1e3 * s, 1e3 * lik, ratio);
                fprintf(stderr, "| %s | %s | %s | %.1f | %.1f | %.2f |\n",
                        pc_backend_name(backends[b]), patterns[p], query_names[q], 1e3 * s,
                        1e3 * lik, ratio);
            }
            pc_evaluator_free(e);
        }
    }
    free(missing), free(out), free(logp), free(probs64), free(probs32);
    pc_data_free(data);
    pc_circuit_free(c);
    pc_hclt_free(model);
    return 0;
}
