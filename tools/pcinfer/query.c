/* pcinfer sample, mpe and conditional: the queries of pc/query.h over a data set (or, for
 * samples from p(x), over --count rows), a batch at a time into the output's format, with a
 * summary on stdout. Row i of a run is drawn from the stream of (--seed, i), so the samples do
 * not depend on --batch or --threads. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pc/cuda.h"
#include "pc/query.h"

#include "pcinfer.h"
#include "tool_error.h"

/* At most this many bytes of conditionals per call by default: V C floats per image (800 KB
 * for MNIST) would make the scoring batch of 1024 images 0.8 GB. */
#define PCINFER_PROBS_BYTES ((int64_t)64 << 20)

static const char *const query_names[] = {"score", "sample", "mpe", "conditional"};

/* One batch's buffers: x and missing [batch, V] (the evidence), values [batch, V] (samples
 * and completions), probs [batch, V, C] (conditionals, 64-byte aligned for the library's
 * streaming stores), logp [batch]. */
typedef struct query_run {
    pc_evaluator *e;
    pc_backend backend;
    int64_t batch, V, C;
    uint8_t *x, *missing, *values;
    float *probs;
    double *logp;
} query_run;

typedef struct query_results {
    char device[256];
    int threads;
    double seconds, mean_logp; /* mean_logp: of log p(x_observed), or of MPE's joint */
    int64_t missing;           /* entries missing over all rows */
} query_results;

static int64_t query_batch(const args *a, pc_backend backend, int64_t n, int64_t V, int64_t C) {
    int64_t batch = batch_for(a, backend);
    if (!a->batch && a->command == PCINFER_CONDITIONAL) {
        const int64_t fit = PCINFER_PROBS_BYTES / (V * C * (int64_t)sizeof(float));
        batch = fit < 1 ? 1 : fit < batch ? fit : batch;
    }
    return batch < n ? batch : n;
}

/* The query on no rows: whether the backend answers it at all (PC_ERR_UNSUPPORTED if not). */
static pc_status probe(pc_evaluator *e, const args *a, int64_t V, int64_t C) {
    switch (a->command) {
    case PCINFER_SAMPLE:
        return a->data ? pc_sample_conditional(e, NULL, NULL, 0, V, a->seed, 0, NULL)
                       : pc_sample(e, 0, V, a->seed, 0, NULL);
    case PCINFER_MPE: return pc_mpe(e, NULL, NULL, 0, V, NULL, NULL);
    default: return pc_conditionals_f32(e, NULL, NULL, 0, V, C, NULL, NULL);
    }
}

static pc_status make_evaluator(query_run *q, const pc_circuit *c, const args *a, int64_t n) {
    q->batch = query_batch(a, q->backend, n, q->V, q->C);
    pc_eval_opts opts = {q->backend, q->batch, a->threads};
    pc_status st = pc_evaluator_create(c, &opts, &q->e);
    return st == PC_OK ? probe(q->e, a, q->V, q->C) : st;
}

/* The evaluator, on the CPU when a GPU kernel does not answer this query (as scoring falls
 * back where no GPU is); then the buffers. */
static int query_init(query_run *q, const pc_circuit *c, const args *a, int64_t n) {
    q->V = c->num_vars;
    q->C = c->num_cats;
    pc_status st = make_evaluator(q, c, a, n);
    if (st == PC_ERR_UNSUPPORTED && pc_backend_is_gpu(q->backend)) {
        fprintf(stderr, "pcinfer: kernel '%s' does not answer %s queries: running '%s' "
                        "instead\n", pc_backend_name(q->backend), query_names[a->command],
                pc_backend_name(a->cpu_backend));
        pc_evaluator_free(q->e);
        q->e = NULL;
        q->backend = a->cpu_backend;
        st = make_evaluator(q, c, a, n);
    }
    if (st != PC_OK) return fail_with(pc_last_error());
    const size_t rows = (size_t)q->batch, cells = rows * (size_t)q->V;
    const int evidence = a->command != PCINFER_SAMPLE || a->data;
    int ok = 1;
    if (evidence) ok &= (q->x = malloc(cells)) && (q->missing = malloc(cells));
    if (a->command == PCINFER_CONDITIONAL) {
        const size_t bytes = (cells * (size_t)q->C * sizeof(float) + 63) / 64 * 64;
        ok &= (q->probs = aligned_alloc(64, bytes)) != NULL;
    } else {
        ok &= (q->values = malloc(cells)) != NULL;
    }
    ok &= (q->logp = malloc(rows * sizeof *q->logp)) != NULL;
    if (!ok)
        fprintf(stderr, "pcinfer: out of memory for a batch of %lld images\n",
                (long long)q->batch);
    return ok ? 0 : 1;
}

static void query_free(query_run *q) {
    pc_evaluator_free(q->e);
    free(q->x);
    free(q->missing);
    free(q->values);
    free(q->probs);
    free(q->logp);
}

/* The query on nb rows, the first of which is row `first` of the run. */
static pc_status query_batch_run(query_run *q, const args *a, int64_t nb, int64_t first) {
    switch (a->command) {
    case PCINFER_SAMPLE:
        if (!a->data) return pc_sample(q->e, nb, q->V, a->seed, first, q->values);
        return pc_sample_conditional(q->e, q->x, q->missing, nb, q->V, a->seed, first,
                                     q->values);
    case PCINFER_MPE: return pc_mpe(q->e, q->x, q->missing, nb, q->V, q->values, q->logp);
    default: return pc_conditionals_f32(q->e, q->x, q->missing, nb, q->V, q->C, q->probs, q->logp);
    }
}

/* Runs the query over in->n rows into the sink, timing the query calls only. */
static int query_stream(query_run *q, const args *a, inputs *in, out_sink *sink,
                        query_results *r) {
    const double t_start = now_seconds();
    double last = t_start;
    for (int64_t i = 0, nb = 0; i < in->n; i += nb) {
        nb = in->n - i < q->batch ? in->n - i : q->batch;
        pc_status st = PC_OK;
        if (in->data) {
            int64_t got = 0;
            st = pc_tool_rows_read(in->data, q->x, nb, &got);
            if (st == PC_OK) st = pc_tool_mask_next(in->mask, nb, q->missing);
            if (st != PC_OK) return fail_batch(st, NULL, i);
            for (int64_t k = 0; k < nb * q->V; k++) r->missing += q->missing[k] != 0;
        }
        double t0 = now_seconds();
        st = pc_tool_pass(query_batch_run(q, a, nb, i));
        r->seconds += now_seconds() - t0;
        if (st != PC_OK) return fail_batch(st, in->data_path, i);
        if (a->command != PCINFER_SAMPLE)
            for (int64_t k = 0; k < nb; k++) r->mean_logp += q->logp[k] / (double)in->n;
        if (sink && (st = out_batch(sink, nb, q->x, q->missing, q->values, q->probs)) != PC_OK)
            return fail_batch(st, NULL, i);
        double t = now_seconds();
        if (t - last >= 3.0 && i + nb < in->n) {
            fprintf(stderr, "pcinfer: %s: %lld / %lld images, %.0f images/s\n",
                    query_names[a->command], (long long)(i + nb), (long long)in->n,
                    (double)(i + nb) / (t - t_start));
            last = t;
        }
    }
    return 0;
}

/* What the mean log-probability is of, by query; NULL for sampling. */
static const char *logp_name(const args *a, int json) {
    if (a->command == PCINFER_MPE)
        return json ? "mean_mpe_logp_nats" : "log p(x*, z*) of the completions (the MPE joint)";
    if (a->command == PCINFER_CONDITIONAL)
        return json ? "mean_logp_observed_nats" : "log p(x_observed)";
    return NULL;
}

static void print_json(const args *a, const inputs *in, const query_run *q,
                       const query_results *r) {
    const pc_circuit *c = in->circuit;
    printf("{\"command\": \"%s\", \"model\": ", query_names[a->command]);
    json_string(a->model);
    printf(", \"data\": ");
    if (in->data_path) json_string(in->data_path);
    else printf("null");
    printf(", \"missing\": ");
    if (a->missing) json_string(a->missing);
    else printf("null");
    printf(", \"missing_fraction\": ");
    json_number(in->data ? (double)r->missing / ((double)in->n * (double)q->V) : 0.0);
    printf(", \"seed\": %llu, \"kernel\": \"%s\", \"images\": %lld, \"num_vars\": %d, "
           "\"num_latents\": %d, \"num_cats\": %d, \"threads\": %d, \"batch\": %lld, "
           "\"device\": ",
           (unsigned long long)a->seed, pc_backend_name(q->backend), (long long)in->n,
           c->num_vars, c->num_latents, c->num_cats, r->threads, (long long)q->batch);
    json_string(r->device);
    if (logp_name(a, 1)) {
        printf(", \"%s\": ", logp_name(a, 1));
        json_number(r->mean_logp);
    }
    printf(", \"seconds\": %.6f, \"images_per_second\": %.1f, \"output\": ", r->seconds,
           (double)in->n / r->seconds);
    if (a->output) json_string(a->output);
    else printf("null");
    printf("}\n");
}

static void print_summary(const args *a, const inputs *in, const query_run *q,
                          const query_results *r) {
    if (a->json) {
        print_json(a, in, q, r);
        return;
    }
    const pc_circuit *c = in->circuit;
    printf("model           %s (V = %d, K = %d, C = %d, %d groups, %d layers)\n", a->model,
           c->num_vars, c->num_latents, c->num_cats, c->num_groups, c->num_layers);
    if (in->data)
        printf("data            %s (%lld images, missing: %s, %.1f%% of the entries)\n",
               in->data_path, (long long)in->n, a->missing,
               100.0 * (double)r->missing / ((double)in->n * (double)q->V));
    else
        printf("data            %lld samples from p(x), seed %llu\n", (long long)in->n,
               (unsigned long long)a->seed);
    printf("kernel          %s (%s)\n", pc_backend_name(q->backend), r->device);
    if (logp_name(a, 0)) printf("mean log p      %.6f nats, %s\n", r->mean_logp, logp_name(a, 0));
    printf("throughput      %.1f images/s (%.3f s)\n", (double)in->n / r->seconds, r->seconds);
    if (a->output) printf("output          %s\n", a->output);
}

int pcinfer_query(const args *a, pc_backend backend) {
    inputs in;
    query_run q;
    query_results r;
    out_sink *sink = NULL;
    memset(&q, 0, sizeof q);
    memset(&r, 0, sizeof r);
    q.backend = backend;
    int rc = 1;
    if (inputs_open(&in, a) != 0 || query_init(&q, in.circuit, a, in.n) != 0) goto fail;
    const int evidence = in.data != NULL;
    if (in.out && out_open(a->format, in.out, a->command, evidence, in.n, q.V, (int32_t)q.C,
                           &sink) != PC_OK) {
        fail_with(pc_tool_last_error());
        goto fail;
    }
    r.threads = a->threads > 0 ? a->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (!pc_backend_is_gpu(q.backend) || pc_cuda_describe(r.device, sizeof r.device) != PC_OK)
        snprintf(r.device, sizeof r.device, "CPU, %d threads", r.threads);
    if (query_stream(&q, a, &in, sink, &r) != 0) goto fail;
    if (sink) {
        pc_status st = out_finish(sink);
        if (st != PC_OK) {
            fail_with(pc_tool_last_error());
            goto fail;
        }
        st = pc_file_writer_commit(in.out);
        in.out = NULL;
        if (st != PC_OK) {
            fail_with(pc_last_error());
            goto fail;
        }
    }
    print_summary(a, &in, &q, &r);
    rc = fflush(stdout) == 0 ? 0 : 1;
fail:
    out_free(sink);
    query_free(&q);
    inputs_close(&in);
    return rc;
}
