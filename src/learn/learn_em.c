/* EM for HCLTs: forward pass, backward flows (expected counts), M-step.
 *
 * Parameters are held in the probability domain. The forward pass works on scaled
 * probabilities: every product node group P_v is a vector of K values scaled by a power of two
 * (exact) so that its largest is in [0.5, 1), with the exponent of the scale kept in off[v]
 * (no exp or log per node; one log per sample). With e_v = P_v 2^-off[v], a child c with
 * transition W = exp(trans_logw[t]) sends s_c(j) = sum_k W[j, k] e_c(k) (a K x K
 * matrix-vector product) to its parent; a child sharing the parent's latent sends e_c itself.
 * log p(x) = off_root ln 2 + log sum_k w_k e_root(k).
 *
 * The backward pass computes the posterior q_v(k) = p(Z_v = k | x) top-down:
 *   q_root(k)   = w_k e_root(k) / sum_j w_j e_root(j)
 *   r(j)        = q_parent(j) / s_c(j)
 *   n_t(j, k)  += r(j) W[j, k] e_c(k)      (expected count of the edge's pair of states)
 *   q_c(k)      = e_c(k) sum_j r(j) W[j, k]
 *   q_c         = q_parent                  (c shares its parent's latent)
 *   n_in(v, k, x_v) += q_v(k),  n_root(k) += q_root(k)
 * The factor W[j, k] of n_t is applied once per chunk of samples, not per sample. The per-sample
 * kernels are in learn_em_kern.h, compiled for several instruction sets.
 *
 * Determinism: samples are processed in fixed chunks of PC_EM_CHUNK rows; a chunk's transition
 * counts are summed in double in sample order, and every count is then added to a per-thread
 * int64 buffer in fixed point (scale 2^(62 - bits(n))), whose sums do not depend on the order
 * the threads run in. The result is the same bit for bit for any number of threads.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "base/fail.h"
#include "learn/cuda/em_gpu.h"
#include "learn/learn_em_internal.h"
#include "learn/learn_internal.h"
#include "pc/lse.h" /* pc_cpu_best_isa */

static void thread_free(pc_em_thread *t) {
    free(t->e);
    free(t->s);
    free(t->off);
    free(t->q);
    free(t->tacc);
    free(t->n_root);
    free(t->n_trans);
    free(t->n_input);
    free(t->touched);
}

void pc_em_free(pc_em *em) {
    if (!em) return;
    pc_em_gpu_free(em->gpu);
    free(em->host_counts);
    free(em->host_touched);
    if (em->thr)
        for (int i = 0; i < em->num_threads; i++) thread_free(&em->thr[i]);
    free(em->thr);
    free(em->parent);
    free(em->trans);
    free(em->order);
    free(em->root_w);
    free(em->trans_w);
    free(em->trans_wt);
    free(em->input_w);
    free(em->ones);
    free(em);
}

static int thread_alloc(pc_em_thread *t, int64_t v, int64_t c, int64_t k, int64_t tr) {
    t->e = malloc((size_t)(v * k) * sizeof(double));
    t->s = malloc((size_t)(v * k) * sizeof(double));
    t->off = malloc((size_t)v * sizeof(int64_t));
    t->q = malloc((size_t)(v * k) * sizeof(double));
    t->tacc = calloc((size_t)(tr * k * k) + 1, sizeof(double));
    t->n_root = calloc((size_t)k, sizeof(int64_t));
    t->n_trans = calloc((size_t)(tr * k * k) + 1, sizeof(int64_t));
    t->n_input = calloc((size_t)(v * c * k), sizeof(int64_t));
    t->touched = calloc((size_t)(v * c), 1);
    return t->e && t->s && t->off && t->q && t->tacc && t->n_root && t->n_trans && t->n_input &&
           t->touched;
}

/* Breadth-first order of the tree from its root; the model is validated, so the tree is. */
static pc_status make_order(pc_em *em) {
    const int32_t n = em->num_vars;
    int32_t *start = calloc((size_t)n + 2, sizeof *start);
    int32_t *kids = malloc((size_t)n * sizeof *kids);
    pc_status st = PC_OK;
    if (!start || !kids) {
        st = pc_fail(PC_ERR_NOMEM, "EM: tree order for %d variables", n);
        goto fail;
    }
    for (int32_t v = 0; v < n; v++)
        if (em->parent[v] >= 0) start[em->parent[v] + 2]++;
    for (int32_t v = 0; v < n; v++) start[v + 2] += start[v + 1];
    int32_t root = 0;
    for (int32_t v = 0; v < n; v++) {
        if (em->parent[v] >= 0)
            kids[start[em->parent[v] + 1]++] = v;
        else
            root = v;
    }
    int32_t head = 0, tail = 0;
    em->order[tail++] = root;
    while (head < tail) {
        int32_t u = em->order[head++];
        for (int32_t i = start[u]; i < start[u + 1]; i++) em->order[tail++] = kids[i];
    }
fail:
    free(start);
    free(kids);
    return st;
}

/* trans_wt[t, k, j] = trans_w[t, j, k]: the forward pass adds columns of W. */
static void transpose_trans(pc_em *em) {
    const int64_t k = em->num_latents;
    for (int64_t t = 0; t < em->num_trans; t++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t l = 0; l < k; l++)
                em->trans_wt[(t * k + l) * k + j] = em->trans_w[(t * k + j) * k + l];
}

void pc_em_pick_kernels(pc_em *em) {
    const pc_isa isa = pc_cpu_best_isa();
    em->kern = isa == PC_ISA_AVX512 ? pc_em_kernels_avx512
               : isa == PC_ISA_AVX2 ? pc_em_kernels_avx2
                                    : pc_em_kernels_generic;
}

/* A state of one process with the model's sizes and structure (parent, trans), nothing else;
 * NULL when out of memory. */
static pc_em *new_state(const pc_hclt *model) {
    pc_em *em = calloc(1, sizeof *em);
    if (!em) return NULL;
    em->num_vars = model->num_vars;
    em->num_cats = model->num_cats;
    em->num_latents = model->num_latents;
    em->num_trans = model->num_trans;
    em->ranks = 1;
    em->parent = malloc((size_t)model->num_vars * sizeof(int32_t));
    em->trans = malloc((size_t)model->num_vars * sizeof(int32_t));
    if (!em->parent || !em->trans) {
        pc_em_free(em);
        return NULL;
    }
    memcpy(em->parent, model->parent, (size_t)model->num_vars * sizeof(int32_t));
    memcpy(em->trans, model->trans_index, (size_t)model->num_vars * sizeof(int32_t));
    return em;
}

/* A GPU state: the sizes and structure here, everything else in em->gpu. */
static pc_status create_gpu(const pc_hclt *model, const pc_em_opts *opts, pc_em **out) {
    pc_em *em = new_state(model);
    if (!em) return pc_fail(PC_ERR_NOMEM, "EM: state for %d variables", model->num_vars);
    pc_status st = pc_em_gpu_create(model, opts, &em->gpu);
    if (st != PC_OK) {
        pc_em_free(em);
        return st;
    }
    *out = em;
    return PC_OK;
}

pc_status pc_em_create(const pc_hclt *model, pc_em **out) {
    return pc_em_create_opts(model, NULL, out);
}

pc_status pc_em_create_opts(const pc_hclt *model, const pc_em_opts *opts, pc_em **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "EM: NULL output");
    *out = NULL;
    if (!model) return pc_fail(PC_ERR_ARG, "EM: NULL model");
    if (opts && opts->device != PC_EM_CPU && opts->device != PC_EM_CUDA)
        return pc_fail(PC_ERR_ARG, "EM: device %d is neither PC_EM_CPU nor PC_EM_CUDA",
                       (int)opts->device);
    if (opts && opts->max_chunk < 0)
        return pc_fail(PC_ERR_ARG, "EM: max_chunk = %lld is negative",
                       (long long)opts->max_chunk);
    pc_status st = pc_hclt_validate(model, "EM model");
    if (st != PC_OK) return st;
    if (opts && opts->device == PC_EM_CUDA) return create_gpu(model, opts, out);
    const int64_t v = model->num_vars, c = model->num_cats, k = model->num_latents,
                  tr = model->num_trans;
    const int threads = omp_get_max_threads();
    char what[160];
    snprintf(what, sizeof what, "EM for V = %lld, C = %lld, K = %lld, T = %lld with %d threads",
             (long long)v, (long long)c, (long long)k, (long long)tr, threads);
    st = pc_learn_check_memory(
        8.0 * ((double)v * c * k * (1 + threads) + (double)tr * k * k * (2 + 2 * threads)), what);
    if (st != PC_OK) return st;
    pc_em *em = new_state(model);
    if (!em) return pc_fail(PC_ERR_NOMEM, "EM: state for %d variables", model->num_vars);
    em->order = malloc((size_t)v * sizeof(int32_t));
    em->root_w = malloc((size_t)k * sizeof(double));
    em->trans_w = malloc(((size_t)(tr * k * k) + 1) * sizeof(double));
    em->trans_wt = malloc(((size_t)(tr * k * k) + 1) * sizeof(double));
    em->input_w = malloc((size_t)(v * c * k) * sizeof(double));
    em->ones = malloc((size_t)k * sizeof(double));
    em->num_threads = threads;
    em->thr = calloc((size_t)em->num_threads, sizeof(pc_em_thread));
    if (!em->order || !em->root_w || !em->trans_w || !em->trans_wt ||
        !em->input_w || !em->ones || !em->thr) {
        pc_em_free(em);
        return pc_fail(PC_ERR_NOMEM, "EM: parameters for V = %lld, C = %lld, K = %lld",
                       (long long)v, (long long)c, (long long)k);
    }
    for (int i = 0; i < em->num_threads; i++)
        if (!thread_alloc(&em->thr[i], v, c, k, tr)) {
            pc_em_free(em);
            return pc_fail(PC_ERR_NOMEM, "EM: count buffers for %d threads", em->num_threads);
        }
    for (int64_t i = 0; i < k; i++) {
        em->root_w[i] = exp(model->root_logw[i]);
        em->ones[i] = 1.0;
    }
    for (int64_t i = 0; i < tr * k * k; i++) em->trans_w[i] = exp(model->trans_logw[i]);
    transpose_trans(em);
    for (int64_t a = 0; a < v; a++)
        for (int64_t b = 0; b < k; b++)
            for (int64_t x = 0; x < c; x++)
                em->input_w[(a * c + x) * k + b] = exp(model->input_logp[(a * k + b) * c + x]);
    st = make_order(em);
    if (st != PC_OK) {
        pc_em_free(em);
        return st;
    }
    pc_em_pick_kernels(em);
    *out = em;
    return PC_OK;
}

pc_status pc_em_export(const pc_em *em, pc_hclt *model) {
    if (!em || !model) return pc_fail(PC_ERR_ARG, "EM export: NULL argument");
    if (model->num_vars != em->num_vars || model->num_cats != em->num_cats ||
        model->num_latents != em->num_latents || model->num_trans != em->num_trans)
        return pc_fail(PC_ERR_ARG,
                       "EM export: model shape (V %d, C %d, K %d, T %d) differs from "
                       "the EM's (V %d, C %d, K %d, T %d)",
                       model->num_vars, model->num_cats, model->num_latents, model->num_trans,
                       em->num_vars, em->num_cats, em->num_latents, em->num_trans);
    for (int32_t i = 0; i < em->num_vars; i++)
        if (model->parent[i] != em->parent[i] || model->trans_index[i] != em->trans[i])
            return pc_fail(PC_ERR_ARG, "EM export: model structure differs at variable %d", i);
    if (em->gpu) return pc_em_gpu_export(em->gpu, model);
    const int64_t v = em->num_vars, c = em->num_cats, k = em->num_latents, tr = em->num_trans;
    for (int64_t i = 0; i < k; i++) model->root_logw[i] = log(em->root_w[i]);
    for (int64_t i = 0; i < tr * k * k; i++) model->trans_logw[i] = log(em->trans_w[i]);
    for (int64_t a = 0; a < v; a++)
        for (int64_t b = 0; b < k; b++)
            for (int64_t x = 0; x < c; x++)
                model->input_logp[(a * k + b) * c + x] = log(em->input_w[(a * c + x) * k + b]);
    return PC_OK;
}

/* Adds a chunk's transition sums, times W, to the thread's fixed-point counts; clears them. */
static void flush_chunk(const pc_em *em, pc_em_thread *t, double scale) {
    const int64_t size = (int64_t)em->num_trans * em->num_latents * em->num_latents;
    for (int64_t i = 0; i < size; i++) {
        if (t->tacc[i] == 0) continue;
        t->n_trans[i] += (int64_t)(em->trans_w[i] * t->tacc[i] * scale + 0.5); /* >= 0 */
        t->tacc[i] = 0;
    }
}

/* Moves one distribution p [size] (entries `stride` apart) towards its estimate from the
 * fixed-point counts n (same layout). */
static void update_dist(double *p, const int64_t *n, int64_t size, int64_t stride, double inv_scale,
                        double step, double pseudocount) {
    double total = 0;
    for (int64_t i = 0; i < size; i++) total += (double)n[i * stride] * inv_scale;
    const double denom = total + pseudocount;
    if (!(denom > 0)) return; /* no data and no pseudocount: keep p */
    const double prior = pseudocount / (double)size;
    for (int64_t i = 0; i < size; i++) {
        double est = ((double)n[i * stride] * inv_scale + prior) / denom;
        p[i * stride] = (1 - step) * p[i * stride] + step * est;
    }
}

/* Adds the counts of threads 1.. into thread 0's (clearing theirs). Integer sums, so the
 * order does not matter. Input counts are summed only over the (v, c) rows some thread
 * touched: a mini-batch of 512 images touches a few percent of the V x C rows. */
static void reduce_counts(pc_em *em) {
    const int64_t k = em->num_latents, trans_size = (int64_t)em->num_trans * k * k;
    const int64_t rows = (int64_t)em->num_vars * em->num_cats;
    pc_em_thread *t0 = &em->thr[0];
    for (int th = 1; th < em->num_threads; th++)
        for (int64_t i = 0; i < k; i++) {
            t0->n_root[i] += em->thr[th].n_root[i];
            em->thr[th].n_root[i] = 0;
        }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < trans_size; i++)
        for (int th = 1; th < em->num_threads; th++) {
            t0->n_trans[i] += em->thr[th].n_trans[i];
            em->thr[th].n_trans[i] = 0;
        }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int th = 1; th < em->num_threads; th++) {
            pc_em_thread *t = &em->thr[th];
            if (!t->touched[r]) continue;
            for (int64_t i = r * k; i < (r + 1) * k; i++) {
                t0->n_input[i] += t->n_input[i];
                t->n_input[i] = 0;
            }
            t->touched[r] = 0;
            t0->touched[r] = 1;
        }
}

static void m_step(pc_em *em, double inv_scale, double step, double pseudocount) {
    const int64_t k = em->num_latents, c = em->num_cats, rows = (int64_t)em->num_vars * c;
    pc_em_thread *t0 = &em->thr[0];
    update_dist(em->root_w, t0->n_root, k, 1, inv_scale, step, pseudocount);
    memset(t0->n_root, 0, (size_t)k * sizeof(int64_t));
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < (int64_t)em->num_trans * k; row++)
        update_dist(em->trans_w + row * k, t0->n_trans + row * k, k, 1, inv_scale, step,
                    pseudocount);
    transpose_trans(em);
    memset(t0->n_trans, 0, (size_t)(em->num_trans * k * k) * sizeof(int64_t));
#pragma omp parallel for schedule(static)
    for (int64_t v = 0; v < em->num_vars; v++)
        for (int64_t j = 0; j < k; j++)
            update_dist(em->input_w + v * c * k + j, t0->n_input + v * c * k + j, c, k, inv_scale,
                        step, pseudocount);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        if (t0->touched[r]) {
            memset(t0->n_input + r * k, 0, (size_t)k * sizeof(int64_t));
            t0->touched[r] = 0;
        }
}

/* Checks the rows and their values before anything changes. A value marked missing is never
 * read, so only observed values must be below num_cats (as in pc_evaluate). */
static pc_status check_rows(const pc_em *em, const pc_data *data, const int64_t *rows, int64_t n,
                            int check_values) {
    if (data->width != em->num_vars)
        return pc_fail(PC_ERR_DATA, "EM: data has %d variables per sample, the model %d",
                       data->width, em->num_vars);
    if (n < 1 || n > data->count)
        return pc_fail(PC_ERR_ARG, "EM: %lld rows requested of %lld", (long long)n,
                       (long long)data->count);
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = rows ? rows[i] : i;
        if (r < 0 || r >= data->count)
            return pc_fail(PC_ERR_ARG, "EM: rows[%lld] = %lld is out of range 0..%lld",
                           (long long)i, (long long)r, (long long)data->count - 1);
        if (!check_values) continue;
        const uint8_t *x = data->values + r * data->width;
        const uint8_t *miss = data->missing ? data->missing + r * data->width : NULL;
        for (int32_t v = 0; v < data->width; v++)
            if (x[v] >= em->num_cats && !(miss && miss[v]))
                return pc_fail(PC_ERR_DATA,
                               "EM: value %d at row %lld, variable %d is not below "
                               "num_cats = %d",
                               x[v], (long long)r, v, em->num_cats);
    }
    return PC_OK;
}

/* Zeroes every thread's counts (after a failed step). */
static void clear_counts(pc_em *em) {
    const int64_t k = em->num_latents, c = em->num_cats;
    for (int th = 0; th < em->num_threads; th++) {
        pc_em_thread *t = &em->thr[th];
        memset(t->tacc, 0, (size_t)(em->num_trans * k * k) * sizeof(double));
        memset(t->n_root, 0, (size_t)k * sizeof(int64_t));
        memset(t->n_trans, 0, (size_t)(em->num_trans * k * k) * sizeof(int64_t));
        memset(t->n_input, 0, (size_t)(em->num_vars * c * k) * sizeof(int64_t));
        memset(t->touched, 0, (size_t)(em->num_vars * c));
    }
}

/* The CPU's counts of row positions [lo, hi) (lo on a chunk boundary), log p(x) of each into
 * ll [hi - lo]; then summed over the threads into thread 0's. */
static void cpu_accumulate(pc_em *em, const pc_data *data, const int64_t *rows, int64_t lo,
                           int64_t hi, double scale, double *ll) {
    const int64_t chunks = (hi - lo + PC_EM_CHUNK - 1) / PC_EM_CHUNK;
    const int64_t width = data->width;
#pragma omp parallel num_threads(em->num_threads)
    {
        pc_em_thread *t = &em->thr[omp_get_thread_num()];
#pragma omp for schedule(dynamic)
        for (int64_t ch = 0; ch < chunks; ch++) {
            const int64_t begin = lo + ch * PC_EM_CHUNK;
            const int64_t end = begin + PC_EM_CHUNK < hi ? begin + PC_EM_CHUNK : hi;
            for (int64_t i = begin; i < end; i++) {
                const int64_t r = rows ? rows[i] : i;
                const uint8_t *x = data->values + r * width;
                const uint8_t *miss = data->missing ? data->missing + r * width : NULL;
                ll[i - lo] = em->kern.forward(em, t, x, miss);
                if (ll[i - lo] > -INFINITY) em->kern.backward(em, t, x, miss, scale);
            }
            flush_chunk(em, t, scale);
        }
    }
    reduce_counts(em);
}

/* This process's counts of row positions [lo, hi) (the rows of chunks from c0 on), log p(x)
 * summed per chunk into sums [chunks]; in a shard, then summed over the processes. */
static pc_status count_rows(pc_em *em, const pc_data *data, const int64_t *rows, int64_t lo,
                            int64_t hi, int64_t c0, double scale, double *sums, int64_t chunks) {
    pc_status st = PC_OK;
    double *ll = malloc((size_t)(hi > lo ? hi - lo : 1) * sizeof *ll);
    if (!ll) st = pc_fail(PC_ERR_NOMEM, "EM step: %lld log-likelihoods", (long long)(hi - lo));
    if (st == PC_OK && hi > lo) {
        if (em->gpu)
            st = pc_em_gpu_accumulate(em->gpu, data, rows, lo, hi, scale, ll);
        else
            cpu_accumulate(em, data, rows, lo, hi, scale, ll);
    }
    if (st == PC_OK)
        for (int64_t i = lo; i < hi; i++) sums[c0 + (i - lo) / PC_EM_CHUNK] += ll[i - lo];
    free(ll);
    if (em->ranks == 1) return st;
    pc_em_counts counts;
    const int64_t k = em->num_latents;
    if (em->gpu) {
        counts.root = em->host_counts;
        counts.trans = counts.root + k;
        counts.input = counts.trans + (int64_t)em->num_trans * k * k;
        counts.touched = em->host_touched;
        if (st == PC_OK)
            st = pc_em_gpu_counts(em->gpu, counts.root, counts.trans, counts.input, 0);
    } else {
        counts.root = em->thr[0].n_root, counts.trans = em->thr[0].n_trans;
        counts.input = em->thr[0].n_input, counts.touched = em->thr[0].touched;
    }
    st = pc_em_shard_sum(em, data, rows, lo, hi, st, &counts, sums, chunks);
    if (st == PC_OK && em->gpu)
        st = pc_em_gpu_counts(em->gpu, counts.root, counts.trans, counts.input, 1);
    return st;
}

pc_status pc_em_step(pc_em *em, const pc_data *data, const int64_t *rows, int64_t n, double step,
                     double pseudocount, double *loglik_sum) {
    if (!em || !data || !data->values) return pc_fail(PC_ERR_ARG, "EM step: NULL argument");
    if (!(step > 0 && step <= 1))
        return pc_fail(PC_ERR_ARG, "EM step: step size %g is not in (0, 1]", step);
    if (!(pseudocount >= 0) || !isfinite(pseudocount))
        return pc_fail(PC_ERR_ARG, "EM step: pseudocount %g is not a finite value >= 0",
                       pseudocount);
    /* the values of attached data were checked when it was attached */
    const int values_checked = em->gpu && pc_em_gpu_is_attached(em->gpu, data);
    pc_status st = check_rows(em, data, rows, n, !values_checked);
    if (st != PC_OK) return st;

    int bits = 0;
    while (bits < 62 && ((int64_t)1 << bits) <= n) bits++;
    const double scale = ldexp(1.0, 62 - bits); /* n * scale < 2^62: no int64 overflow */
    const int64_t chunks = (n + PC_EM_CHUNK - 1) / PC_EM_CHUNK;
    const int64_t c0 = chunks * em->rank / em->ranks, c1 = chunks * (em->rank + 1) / em->ranks;
    const int64_t lo = c0 * PC_EM_CHUNK < n ? c0 * PC_EM_CHUNK : n;
    const int64_t hi = c1 * PC_EM_CHUNK < n ? c1 * PC_EM_CHUNK : n;
    double *sums = calloc((size_t)chunks, sizeof *sums);
    if (!sums) return pc_fail(PC_ERR_NOMEM, "EM step: %lld chunk sums", (long long)chunks);
    st = count_rows(em, data, rows, lo, hi, c0, scale, sums, chunks);
    if (st != PC_OK) {
        free(sums);
        if (em->gpu)
            pc_em_gpu_clear_counts(em->gpu);
        else
            clear_counts(em);
        return st;
    }
    double sum = 0;
    for (int64_t c = 0; c < chunks; c++) sum += sums[c];
    free(sums);
    if (em->gpu)
        st = pc_em_gpu_update(em->gpu, 1.0 / scale, step, pseudocount);
    else
        m_step(em, 1.0 / scale, step, pseudocount);
    if (st == PC_OK && loglik_sum) *loglik_sum = sum;
    return st;
}

pc_status pc_em_attach_data(pc_em *em, const pc_data *data) {
    if (!em) return pc_fail(PC_ERR_ARG, "EM attach: NULL state");
    if (data && !data->values && data->count > 0)
        return pc_fail(PC_ERR_ARG, "EM attach: data without values");
    return em->gpu ? pc_em_gpu_attach(em->gpu, data) : PC_OK;
}

pc_status pc_learn_loglik(const pc_hclt *model, const pc_data *data, double *logp) {
    if (!model || !data || !data->values || !logp)
        return pc_fail(PC_ERR_ARG, "loglik: NULL argument");
    pc_em *em = NULL;
    pc_status st = pc_em_create(model, &em);
    if (st != PC_OK) return st;
    if (data->count > 0) st = check_rows(em, data, NULL, data->count, 1);
    if (st == PC_OK) {
        const int64_t width = data->width;
#pragma omp parallel num_threads(em->num_threads)
        {
            pc_em_thread *t = &em->thr[omp_get_thread_num()];
#pragma omp for schedule(dynamic, PC_EM_CHUNK)
            for (int64_t i = 0; i < data->count; i++)
                logp[i] = em->kern.forward(em, t, data->values + i * width,
                                           data->missing ? data->missing + i * width : NULL);
        }
    }
    pc_em_free(em);
    return st;
}
