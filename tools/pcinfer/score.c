/* pcinfer score (the default command): scores a data set with an HCLT model on one backend
 * and reports the mean log-likelihood (of the observed entries, with --missing), bits per
 * dimension, throughput and (with --compare ref) the error against the FP64 path.
 *
 * Under mpirun -np R, rank r scores its shard of the rows, whole batches of one process's run
 * (mpi_ranks.h), reading only those rows and their masks, with an evaluator of one process's
 * batch; rank 0 gathers every rank's log p(x) and computes the figures and the output file
 * from them in row order, as one process does. Every row is thus scored in the very call it
 * would be without mpirun, so the results are the same to the bit on every kernel, the GPU's
 * (whose strategy depends on the call's size) included. */
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
    /* seconds: in the evaluator's calls (ref_seconds: the reference's); wall: the whole
     * scoring loop, reading included; under mpirun each the slowest rank's */
    double mean_ll, bpd, seconds, mean_delta, max_delta, ref_seconds, wall;
    int compared, threads, ranks;
} results;

/* This rank's rows [lo, hi) of the n, and under mpirun with R > 1 their log p(x) (and ref's)
 * kept for the gather, and on rank 0 every row's (all, all_ref [n]). */
typedef struct shard {
    int64_t lo, hi, unit; /* unit: rows per shard unit (shard_unit) */
    double *logp, *ref, *all, *all_ref;
} shard;

static void shard_free(shard *sh) {
    free(sh->logp);
    free(sh->ref);
    free(sh->all);
    free(sh->all_ref);
}

/* One process's batch for n rows (at least 1): the unit of the shards. */
static int64_t shard_unit(const args *a, pc_backend backend, int64_t n) {
    const int64_t b = batch_for(a, backend) < n ? batch_for(a, backend) : n;
    return b > 0 ? b : 1;
}

/* The rows of this rank and, with R > 1, the arrays of the gather. Returns 0 or 1 (message
 * given). */
static int shard_init(shard *sh, const pc_tool_mpi *mpi, int64_t n, int64_t unit,
                      int compare) {
    memset(sh, 0, sizeof *sh);
    sh->unit = unit;
    pc_tool_mpi_shard(mpi, n, unit, &sh->lo, &sh->hi);
    if (mpi->size == 1) return 0;
    if (n > INT32_MAX) /* MPI counts are int */
        return fail_printf("%lld images are more than a sharded run gathers (2^31 - 1)",
                           (long long)n);
    const size_t mine = (size_t)(sh->hi - sh->lo) + 1, all = mpi->rank == 0 ? (size_t)n : 1;
    sh->logp = malloc(mine * sizeof *sh->logp);
    sh->ref = compare ? malloc(mine * sizeof *sh->ref) : NULL;
    sh->all = malloc(all * sizeof *sh->all);
    sh->all_ref = compare ? malloc(all * sizeof *sh->all_ref) : NULL;
    if (!sh->logp || !sh->all || (compare && (!sh->ref || !sh->all_ref)))
        return fail_printf("out of memory for the log-likelihoods of %lld images", (long long)n);
    return 0;
}

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

/* Folds nb results (logp, and ref's when compared) into the running figures and the output
 * file, in row order. */
static pc_status take_rows(const double *logp, const double *ref, int64_t nb, results *r,
                           pc_file_writer *out) {
    pc_status st = PC_OK;
    for (int64_t i = 0; i < nb; i++) {
        r->mean_ll += logp[i] / (double)r->n;
        if (ref) {
            /* Equal infinities (a zero-probability image in both) differ by 0. */
            double d = logp[i] == ref[i] ? 0.0 : fabs(logp[i] - ref[i]);
            r->mean_delta += d / (double)r->n;
            r->max_delta = d > r->max_delta || isnan(d) ? d : r->max_delta;
        }
        if (out && st == PC_OK) st = pc_file_writer_printf(out, "%.17g\n", logp[i]);
    }
    return st;
}

/* Scores this rank's rows [sh->lo, sh->hi) of the reader in batches (with the mask's rows,
 * when there is one), timing each backend's evaluations; progress on stderr (rank 0) every few
 * seconds of a long run. One process folds each batch into the figures at once; with R > 1
 * ranks the results go into the shard's arrays for the gather. Every rank returns here,
 * agreed: 0, or 1 on all of them when one failed (its message printed). */
static int score_stream(const pc_circuit *c, pc_backend backend, const args *a,
                        pc_tool_rows *data, pc_tool_mask *mask, pc_file_writer *out,
                        shard *sh, results *r) {
    const pc_tool_mpi *mpi = &a->mpi;
    const int64_t rows = sh->hi - sh->lo;
    const int64_t batch = sh->unit;
    scorer s;
    memset(&s, 0, sizeof s);
    pc_status st = PC_OK;
    if (rows > 0) { /* a rank of more ranks than rows has none */
        st = pc_tool_pass(scorer_init(&s, c, backend, a, batch));
        if (st == PC_ERR_NOMEM)
            fail_printf("out of memory for a batch of %lld images", (long long)batch);
        else if (st != PC_OK)
            fail_with(pc_tool_last_error());
    }
    /* Every rank ready (the agreement is a collective), the clocks start together. */
    if (pcinfer_agree(mpi, st != PC_OK)) {
        scorer_free(&s);
        return 1;
    }
    pc_tool_mpi_barrier(mpi);
    const double t_start = now_seconds();
    double last = t_start;
    int64_t failed_batch = -1; /* the first image of a batch the evaluator refused */
    if (rows > 0 && (st = pc_tool_rows_skip(data, sh->lo)) == PC_OK && mask)
        st = pc_tool_mask_skip(mask, sh->lo);
    for (int64_t i = 0, nb = 0; i < rows && st == PC_OK; i += nb) {
        int64_t want = rows - i < batch ? rows - i : batch;
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
        if (st != PC_OK) {
            failed_batch = sh->lo + i;
        } else if (mpi->size == 1) {
            st = pc_tool_pass(take_rows(s.logp, s.ref, nb, r, out));
        } else {
            memcpy(sh->logp + i, s.logp, (size_t)nb * sizeof *s.logp);
            if (s.ref) memcpy(sh->ref + i, s.ref, (size_t)nb * sizeof *s.ref);
        }
        double t = now_seconds();
        if (st == PC_OK && mpi->rank == 0 && t - last >= 3.0 && i + nb < rows) {
            fprintf(stderr, "pcinfer: %s: %lld / %lld images%s, %.0f images/s\n",
                    pc_backend_name(backend), (long long)(i + nb), (long long)rows,
                    mpi->size > 1 ? " (rank 0's shard)" : "", (double)(i + nb) / (t - t_start));
            last = t;
        }
    }
    r->wall = now_seconds() - t_start;
    if (st != PC_OK) fail_batch(st, failed_batch >= 0 ? r->data : NULL, failed_batch);
    r->compared = a->compare != NULL;
    scorer_free(&s);
    return pcinfer_agree(mpi, st != PC_OK);
}

/* With R > 1 ranks: every rank's counts, times and log p(x) to rank 0 (collectives, made by
 * every rank), where the figures and the output are then made in row order. */
static int combine_ranks(const pc_tool_mpi *mpi, shard *sh, results *r, pc_file_writer *out) {
    int64_t observed = r->observed;
    if (pc_tool_mpi_sum(NULL, &observed, 1) != PC_OK) {
        fail_with("the ranks' sum failed");
        pc_tool_mpi_abort(mpi, 1); /* the others are in the gather: end them too */
    }
    r->observed = observed;
    r->seconds = pc_tool_mpi_max(mpi, r->seconds);
    r->ref_seconds = pc_tool_mpi_max(mpi, r->ref_seconds);
    r->wall = pc_tool_mpi_max(mpi, r->wall);
    pc_tool_mpi_gather(mpi, sh->logp, sh->all, r->n, sh->unit);
    if (sh->ref) pc_tool_mpi_gather(mpi, sh->ref, sh->all_ref, r->n, sh->unit);
    if (mpi->rank != 0) return 0;
    pc_status st = pc_tool_pass(take_rows(sh->all, sh->all_ref, r->n, r, out));
    return st == PC_OK ? 0 : fail_batch(st, NULL, 0);
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
        printf(", \"seconds\": %.6f, \"images_per_second\": %.1f, \"wall_seconds\": %.6f, "
               "\"ranks\": %d", r->seconds, (double)r->n / r->seconds, r->wall, r->ranks);
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
    if (r->ranks > 1)
        printf("throughput      %.1f images/s (%.3f s, the slowest of %d ranks)\n",
               (double)r->n / r->seconds, r->seconds, r->ranks);
    else
        printf("throughput      %.1f images/s (%.3f s)\n", (double)r->n / r->seconds, r->seconds);
    if (r->compared) {
        printf("vs ref (FP64)   mean |delta| %.3e nats, max |delta| %.3e nats (ref: %.1f "
               "images/s)\n",
               r->mean_delta, r->max_delta, (double)r->n / r->ref_seconds);
    }
}

int pcinfer_score(const args *a, pc_backend backend) {
    const pc_tool_mpi *mpi = &a->mpi;
    inputs in;
    results r;
    shard sh;
    memset(&in, 0, sizeof in);
    memset(&r, 0, sizeof r);
    memset(&sh, 0, sizeof sh);
    /* Each rank takes GPU local_rank modulo those of its machine. */
    int rc = 0;
    if (mpi->active && pc_backend_is_gpu(backend) && pc_cuda_set_device(mpi->local_rank) != PC_OK)
        rc = fail_with(pc_last_error());
    if (rc == 0) rc = inputs_open(&in, a);
    if (rc == 0) rc = shard_init(&sh, mpi, in.n, shard_unit(a, backend, in.n), a->compare != NULL);
    if (pcinfer_agree(mpi, rc)) {
        rc = 1;
        goto fail;
    }
    rc = 1;
    r.data = in.data_path;
    r.n = in.n;
    r.kernel = pc_backend_name(backend);
    r.batch = batch_for(a, backend);
    r.threads = a->threads > 0 ? a->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    r.ranks = mpi->size;
    if (!pc_backend_is_gpu(backend) || pc_cuda_describe(r.device, sizeof r.device) != PC_OK)
        snprintf(r.device, sizeof r.device, "CPU, %d threads", r.threads);
    if (score_stream(in.circuit, backend, a, in.data, in.mask, in.out, &sh, &r) != 0) goto fail;
    /* The last agreement: past it only rank 0 can fail (the figures and the output), its
     * messages printed as they come. */
    pcinfer_hold_messages(0);
    if (mpi->size > 1 && combine_ranks(mpi, &sh, &r, in.out) != 0) goto fail;
    if (mpi->rank != 0) {
        rc = 0;
        goto fail;
    }
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
    shard_free(&sh);
    inputs_close(&in);
    return rc;
}
