/* pcinfer score (the default command): scores a data set with an HCLT model on one backend
 * and reports the mean log-likelihood (of the observed entries, with --missing), bits per
 * dimension, throughput and (with --compare ref) the error against the FP64 path. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pc/circuit.h"
#include "pc/cuda.h"
#include "pc/eval.h"
#include "pc/file.h"

#include "pcinfer.h"
#include "tool_error.h"

/* Images per evaluation call: --batch, or by kernel. A GPU kernel takes large calls: the
 * engine streams them in chunks and fuse picks its fastest strategy for large batches (H200,
 * shipped model: 5.7 M images/s end to end at 16384 per call against 2.7 M at 1024); the CPU
 * kernels' buffers grow with the batch. */
#define PCINFER_GPU_BATCH 16384
#define PCINFER_CPU_BATCH 1024
int64_t batch_for(const args *a, pc_backend backend) {
    if (a->batch) return a->batch;
    return pc_backend_is_gpu(backend) ? PCINFER_GPU_BATCH : PCINFER_CPU_BATCH;
}

typedef struct results {
    const char *kernel, *data;
    char device[256]; /* "NVIDIA H200, ..." for GPU kernels, "CPU, T threads" otherwise */
    int64_t n, batch, observed; /* observed: entries not missing */
    double mean_ll, bpd, seconds, mean_delta, max_delta, ref_seconds;
    int compared, threads;
} results;

/* The evaluators and one batch's buffers: values and missing [batch, V] (missing only with
 * --missing), logp and ref [batch]. */
typedef struct scorer {
    pc_evaluator *e, *ref_e;
    uint8_t *values, *missing;
    double *logp, *ref;
} scorer;

static void scorer_free(scorer *s) {
    pc_evaluator_free(s->e);
    pc_evaluator_free(s->ref_e);
    free(s->values);
    free(s->missing);
    free(s->logp);
    free(s->ref);
}

static pc_status scorer_init(scorer *s, const pc_circuit *c, pc_backend backend, const args *a,
                             int64_t batch) {
    memset(s, 0, sizeof *s);
    pc_eval_opts opts = {backend, batch, a->threads};
    pc_eval_opts ref_opts = {PC_BACKEND_REF, batch, a->threads};
    pc_status st = pc_evaluator_create(c, &opts, &s->e);
    if (st == PC_OK && a->compare) st = pc_evaluator_create(c, &ref_opts, &s->ref_e);
    if (st != PC_OK) return st;
    s->values = malloc((size_t)batch * (size_t)c->num_vars);
    s->missing = a->missing ? malloc((size_t)batch * (size_t)c->num_vars) : NULL;
    s->logp = malloc((size_t)batch * sizeof *s->logp);
    s->ref = a->compare ? malloc((size_t)batch * sizeof *s->ref) : NULL;
    return s->values && (s->missing || !a->missing) && s->logp && (s->ref || !a->compare)
               ? PC_OK
               : PC_ERR_NOMEM;
}

/* Entries of a batch that are observed: all of them without a mask. */
static int64_t observed_entries(const uint8_t *missing, int64_t entries) {
    int64_t observed = entries;
    for (int64_t i = 0; missing && i < entries; i++) observed -= missing[i] != 0;
    return observed;
}

/* Folds one batch of nb results into the running figures and the output file. */
static pc_status take_batch(const scorer *s, int64_t nb, results *r, pc_file_writer *out) {
    pc_status st = PC_OK;
    for (int64_t i = 0; i < nb; i++) {
        r->mean_ll += s->logp[i] / (double)r->n;
        if (s->ref) {
            /* Equal infinities (a zero-probability image in both) differ by 0. */
            double d = s->logp[i] == s->ref[i] ? 0.0 : fabs(s->logp[i] - s->ref[i]);
            r->mean_delta += d / (double)r->n;
            r->max_delta = d > r->max_delta || isnan(d) ? d : r->max_delta;
        }
        if (out && st == PC_OK) st = pc_file_writer_printf(out, "%.17g\n", s->logp[i]);
    }
    return st;
}

/* Scores the first r->n images of the reader in batches (with the mask's rows, when there is
 * one), timing each backend's evaluations only; progress on stderr every few seconds of a long
 * run. */
static int score_stream(const pc_circuit *c, pc_backend backend, const args *a,
                        pc_tool_rows *data, pc_tool_mask *mask, pc_file_writer *out,
                        results *r) {
    const int64_t batch = batch_for(a, backend) < r->n ? batch_for(a, backend) : r->n;
    scorer s;
    pc_status st = pc_tool_pass(scorer_init(&s, c, backend, a, batch));
    if (st == PC_ERR_NOMEM) {
        fprintf(stderr, "pcinfer: out of memory for a batch of %lld images\n", (long long)batch);
        scorer_free(&s);
        return 1;
    }
    const double t_start = now_seconds();
    double last = t_start;
    int64_t failed_batch = -1; /* the first image of a batch the evaluator refused */
    for (int64_t i = 0, nb = 0; i < r->n && st == PC_OK; i += nb) {
        int64_t want = r->n - i < batch ? r->n - i : batch;
        if ((st = pc_tool_rows_read(data, s.values, want, &nb)) != PC_OK) break;
        if (mask && (st = pc_tool_mask_next(mask, nb, s.missing)) != PC_OK) break;
        r->observed += observed_entries(s.missing, nb * c->num_vars);
        double t0 = now_seconds();
        st = pc_tool_pass(pc_evaluate(s.e, s.values, s.missing, nb, c->num_vars, s.logp));
        r->seconds += now_seconds() - t0;
        if (st == PC_OK && s.ref_e) {
            t0 = now_seconds();
            st = pc_tool_pass(pc_evaluate(s.ref_e, s.values, s.missing, nb, c->num_vars, s.ref));
            r->ref_seconds += now_seconds() - t0;
        }
        if (st != PC_OK) failed_batch = i;
        if (st == PC_OK) st = pc_tool_pass(take_batch(&s, nb, r, out));
        double t = now_seconds();
        if (st == PC_OK && t - last >= 3.0 && i + nb < r->n) {
            fprintf(stderr, "pcinfer: %s: %lld / %lld images, %.0f images/s\n",
                    pc_backend_name(backend), (long long)(i + nb), (long long)r->n,
                    (double)(i + nb) / (t - t_start));
            last = t;
        }
    }
    if (st != PC_OK) fail_batch(st, failed_batch >= 0 ? r->data : NULL, failed_batch);
    r->compared = a->compare != NULL;
    scorer_free(&s);
    return st == PC_OK ? 0 : 1;
}

static void print_results(const args *a, const pc_circuit *c, const results *r) {
    if (a->json) {
        printf("{\"model\": ");
        json_string(a->model);
        printf(", \"data\": ");
        json_string(r->data);
        if (a->missing) {
            printf(", \"missing\": ");
            json_string(a->missing);
        }
        printf(", \"kernel\": \"%s\", \"images\": %lld, \"num_vars\": %d, \"num_latents\": %d, "
               "\"threads\": %d, \"batch\": %lld, \"device\": ",
               r->kernel, (long long)r->n, c->num_vars, c->num_latents, r->threads,
               (long long)r->batch);
        json_string(r->device);
        printf(", \"mean_ll_nats\": ");
        json_number(r->mean_ll);
        printf(", \"bits_per_dim\": ");
        json_number(r->bpd);
        printf(", \"seconds\": %.6f, \"images_per_second\": %.1f", r->seconds,
               (double)r->n / r->seconds);
        if (r->compared) {
            printf(", \"compare\": {\"kernel\": \"ref\", \"mean_abs_delta_nats\": ");
            json_number(r->mean_delta);
            printf(", \"max_abs_delta_nats\": ");
            json_number(r->max_delta);
            printf(", \"ref_images_per_second\": %.1f}", (double)r->n / r->ref_seconds);
        }
        printf("}\n");
        return;
    }
    printf("model           %s (V = %d, K = %d, C = %d, %d groups, %d layers)\n", a->model,
           c->num_vars, c->num_latents, c->num_cats, c->num_groups, c->num_layers);
    printf("data            %s (%lld images%s%s)\n", r->data, (long long)r->n,
           a->missing ? ", missing: " : "", a->missing ? a->missing : "");
    printf("kernel          %s (%s)\n", r->kernel, r->device);
    printf("mean LL         %.6f nats\n", r->mean_ll);
    printf("bits/dim        %.6f\n", r->bpd);
    printf("throughput      %.1f images/s (%.3f s)\n", (double)r->n / r->seconds, r->seconds);
    if (r->compared) {
        printf("vs ref (FP64)   mean |delta| %.3e nats, max |delta| %.3e nats (ref: %.1f "
               "images/s)\n",
               r->mean_delta, r->max_delta, (double)r->n / r->ref_seconds);
    }
}

int pcinfer_score(const args *a, pc_backend backend) {
    inputs in;
    results r;
    memset(&r, 0, sizeof r);
    int rc = 1;
    if (inputs_open(&in, a) != 0) goto fail;
    r.data = in.data_path;
    r.n = in.n;
    r.kernel = pc_backend_name(backend);
    r.batch = batch_for(a, backend);
    r.threads = a->threads > 0 ? a->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (!pc_backend_is_gpu(backend) || pc_cuda_describe(r.device, sizeof r.device) != PC_OK)
        snprintf(r.device, sizeof r.device, "CPU, %d threads", r.threads);
    if (score_stream(in.circuit, backend, a, in.data, in.mask, in.out, &r) != 0) goto fail;
    /* Bits per observed entry: per dimension when none is missing. */
    if (a->missing) r.bpd = -r.mean_ll * (double)r.n / ((double)r.observed * log(2.0));
    else r.bpd = -r.mean_ll / ((double)in.model->num_vars * log(2.0));
    if (in.out) {
        pc_status st = pc_file_writer_commit(in.out);
        in.out = NULL;
        if (st != PC_OK) {
            fail_with(pc_last_error());
            goto fail;
        }
    }
    print_results(a, in.circuit, &r);
    rc = fflush(stdout) == 0 ? 0 : 1;
fail:
    inputs_close(&in);
    return rc;
}
