/* EM for HCLTs: forward pass, backward flows (expected counts), M-step.
 *
 * Parameters are held in the probability domain. The forward pass works on scaled
 * probabilities: every product node group P_v is a vector of K values scaled so that its
 * largest is 1, with the log of the scale kept in off[v] (one log per group instead of K^2
 * exps per sum node group). With e_v = P_v / max P_v, a child c with transition W = exp(trans_logw[t])
 * sends s_c(j) = sum_k W[j, k] e_c(k) (a K x K matrix-vector product) to its parent; a child
 * sharing the parent's latent sends e_c itself. log p(x) = off_root + log sum_k w_k e_root(k).
 *
 * The backward pass computes the posterior q_v(k) = p(Z_v = k | x) top-down:
 *   q_root(k)   = w_k e_root(k) / sum_j w_j e_root(j)
 *   r(j)        = q_parent(j) / s_c(j)
 *   n_t(j, k)  += r(j) W[j, k] e_c(k)      (expected count of the edge's pair of states)
 *   q_c(k)      = e_c(k) sum_j r(j) W[j, k]
 *   q_c         = q_parent                  (c shares its parent's latent)
 *   n_in(v, k, x_v) += q_v(k),  n_root(k) += q_root(k)
 * The factor W[j, k] of n_t is applied once per chunk of samples, not per sample.
 *
 * Determinism: samples are processed in fixed chunks of EM_CHUNK rows; a chunk's transition
 * counts are summed in double in sample order, and every count is then added to a per-thread
 * int64 buffer in fixed point (scale 2^(62 - bits(n))), whose sums do not depend on the order
 * the threads run in. The result is the same bit for bit for any number of threads.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "pc/learn.h"

#define EM_CHUNK 32

typedef struct em_thread {
    double *e;      /* [V, K] scaled P_v, then e_v */
    double *s;      /* [V, K] message s_v of a child with a transition row */
    double *off;    /* [V] log scale of P_v */
    double *q;      /* [V, K] posterior of the latent of v */
    double *tacc;   /* [T, K, K] chunk sums of r(j) e_c(k) */
    int64_t *n_root;  /* [K] */
    int64_t *n_trans; /* [T, K, K] */
    int64_t *n_input; /* [V, C, K] */
} em_thread;

struct pc_em {
    int32_t num_vars, num_cats, num_latents, num_trans;
    int32_t *parent, *trans; /* [V] copies of the model's structure */
    int32_t *order;          /* [V] breadth-first from the root: parents before children */
    double *root_w;          /* [K] */
    double *trans_w;         /* [T, K, K] */
    double *input_w;         /* [V, C, K] (transposed so one observed value is K contiguous) */
    double *ones;            /* [K] the input row of a missing value */
    int num_threads;
    em_thread *thr;
};

static void thread_free(em_thread *t) {
    free(t->e);
    free(t->s);
    free(t->off);
    free(t->q);
    free(t->tacc);
    free(t->n_root);
    free(t->n_trans);
    free(t->n_input);
}

void pc_em_free(pc_em *em) {
    if (!em) return;
    if (em->thr)
        for (int i = 0; i < em->num_threads; i++) thread_free(&em->thr[i]);
    free(em->thr);
    free(em->parent);
    free(em->trans);
    free(em->order);
    free(em->root_w);
    free(em->trans_w);
    free(em->input_w);
    free(em->ones);
    free(em);
}

static int thread_alloc(em_thread *t, int64_t v, int64_t c, int64_t k, int64_t tr) {
    t->e = malloc((size_t)(v * k) * sizeof(double));
    t->s = malloc((size_t)(v * k) * sizeof(double));
    t->off = malloc((size_t)v * sizeof(double));
    t->q = malloc((size_t)(v * k) * sizeof(double));
    t->tacc = calloc((size_t)(tr * k * k) + 1, sizeof(double));
    t->n_root = calloc((size_t)k, sizeof(int64_t));
    t->n_trans = calloc((size_t)(tr * k * k) + 1, sizeof(int64_t));
    t->n_input = calloc((size_t)(v * c * k), sizeof(int64_t));
    return t->e && t->s && t->off && t->q && t->tacc && t->n_root && t->n_trans && t->n_input;
}

/* Breadth-first order of the tree from its root; the model is validated, so the tree is. */
static pc_status make_order(pc_em *em) {
    const int32_t n = em->num_vars;
    int32_t *start = calloc((size_t)n + 2, sizeof *start);
    int32_t *kids = malloc((size_t)n * sizeof *kids);
    if (!start || !kids) {
        free(start);
        free(kids);
        return pc_fail(PC_ERR_NOMEM, "EM: tree order for %d variables", n);
    }
    for (int32_t v = 0; v < n; v++)
        if (em->parent[v] >= 0) start[em->parent[v] + 2]++;
    for (int32_t v = 0; v < n; v++) start[v + 2] += start[v + 1];
    int32_t root = 0;
    for (int32_t v = 0; v < n; v++) {
        if (em->parent[v] >= 0) kids[start[em->parent[v] + 1]++] = v;
        else root = v;
    }
    int32_t head = 0, tail = 0;
    em->order[tail++] = root;
    while (head < tail) {
        int32_t u = em->order[head++];
        for (int32_t i = start[u]; i < start[u + 1]; i++) em->order[tail++] = kids[i];
    }
    free(start);
    free(kids);
    return PC_OK;
}

pc_status pc_em_create(const pc_hclt *model, pc_em **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "EM: NULL output");
    *out = NULL;
    if (!model) return pc_fail(PC_ERR_ARG, "EM: NULL model");
    pc_status st = pc_hclt_validate(model, "EM model");
    if (st != PC_OK) return st;
    pc_em *em = calloc(1, sizeof *em);
    if (!em) return pc_fail(PC_ERR_NOMEM, "EM: state");
    const int64_t v = model->num_vars, c = model->num_cats, k = model->num_latents,
                  tr = model->num_trans;
    em->num_vars = model->num_vars;
    em->num_cats = model->num_cats;
    em->num_latents = model->num_latents;
    em->num_trans = model->num_trans;
    em->parent = malloc((size_t)v * sizeof(int32_t));
    em->trans = malloc((size_t)v * sizeof(int32_t));
    em->order = malloc((size_t)v * sizeof(int32_t));
    em->root_w = malloc((size_t)k * sizeof(double));
    em->trans_w = malloc(((size_t)(tr * k * k) + 1) * sizeof(double));
    em->input_w = malloc((size_t)(v * c * k) * sizeof(double));
    em->ones = malloc((size_t)k * sizeof(double));
    em->num_threads = omp_get_max_threads();
    em->thr = calloc((size_t)em->num_threads, sizeof(em_thread));
    if (!em->parent || !em->trans || !em->order || !em->root_w || !em->trans_w || !em->input_w ||
        !em->ones || !em->thr) {
        pc_em_free(em);
        return pc_fail(PC_ERR_NOMEM, "EM: parameters for V = %lld, C = %lld, K = %lld",
                       (long long)v, (long long)c, (long long)k);
    }
    for (int i = 0; i < em->num_threads; i++)
        if (!thread_alloc(&em->thr[i], v, c, k, tr)) {
            pc_em_free(em);
            return pc_fail(PC_ERR_NOMEM, "EM: count buffers for %d threads", em->num_threads);
        }
    memcpy(em->parent, model->parent, (size_t)v * sizeof(int32_t));
    memcpy(em->trans, model->trans_index, (size_t)v * sizeof(int32_t));
    for (int64_t i = 0; i < k; i++) {
        em->root_w[i] = exp(model->root_logw[i]);
        em->ones[i] = 1.0;
    }
    for (int64_t i = 0; i < tr * k * k; i++) em->trans_w[i] = exp(model->trans_logw[i]);
    for (int64_t a = 0; a < v; a++)
        for (int64_t b = 0; b < k; b++)
            for (int64_t x = 0; x < c; x++)
                em->input_w[(a * c + x) * k + b] = exp(model->input_logp[(a * k + b) * c + x]);
    st = make_order(em);
    if (st != PC_OK) {
        pc_em_free(em);
        return st;
    }
    *out = em;
    return PC_OK;
}

pc_status pc_em_export(const pc_em *em, pc_hclt *model) {
    if (!em || !model) return pc_fail(PC_ERR_ARG, "EM export: NULL argument");
    if (model->num_vars != em->num_vars || model->num_cats != em->num_cats ||
        model->num_latents != em->num_latents || model->num_trans != em->num_trans)
        return pc_fail(PC_ERR_ARG, "EM export: model shape (V %d, C %d, K %d, T %d) differs from "
                       "the EM's (V %d, C %d, K %d, T %d)", model->num_vars, model->num_cats,
                       model->num_latents, model->num_trans, em->num_vars, em->num_cats,
                       em->num_latents, em->num_trans);
    for (int32_t i = 0; i < em->num_vars; i++)
        if (model->parent[i] != em->parent[i] || model->trans_index[i] != em->trans[i])
            return pc_fail(PC_ERR_ARG, "EM export: model structure differs at variable %d", i);
    const int64_t v = em->num_vars, c = em->num_cats, k = em->num_latents, tr = em->num_trans;
    for (int64_t i = 0; i < k; i++) model->root_logw[i] = log(em->root_w[i]);
    for (int64_t i = 0; i < tr * k * k; i++) model->trans_logw[i] = log(em->trans_w[i]);
    for (int64_t a = 0; a < v; a++)
        for (int64_t b = 0; b < k; b++)
            for (int64_t x = 0; x < c; x++)
                model->input_logp[(a * k + b) * c + x] = log(em->input_w[(a * c + x) * k + b]);
    return PC_OK;
}

/* Forward pass of one sample; fills t->e, t->s, t->off; returns log p(x) (-inf if zero). */
static double forward(const pc_em *em, em_thread *t, const uint8_t *x, const uint8_t *miss) {
    const int32_t nv = em->num_vars, k = em->num_latents, c = em->num_cats;
    double *restrict e = t->e;
    for (int32_t v = 0; v < nv; v++) {
        const double *src = (miss && miss[v]) ? em->ones : em->input_w + ((int64_t)v * c + x[v]) * k;
        memcpy(e + (int64_t)v * k, src, (size_t)k * sizeof(double));
        t->off[v] = 0;
    }
    for (int32_t i = nv - 1; i >= 0; i--) {
        const int32_t v = em->order[i];
        double *restrict ev = e + (int64_t)v * k;
        double m = 0;
        for (int32_t j = 0; j < k; j++) m = ev[j] > m ? ev[j] : m;
        if (!(m > 0) || !isfinite(m)) return -INFINITY;
        const double inv = 1.0 / m;
        for (int32_t j = 0; j < k; j++) ev[j] *= inv;
        t->off[v] += log(m);
        const int32_t p = em->parent[v];
        if (p < 0) {
            double z = 0;
            for (int32_t j = 0; j < k; j++) z += em->root_w[j] * ev[j];
            return z > 0 ? t->off[v] + log(z) : -INFINITY;
        }
        double *restrict ep = e + (int64_t)p * k;
        t->off[p] += t->off[v];
        const int32_t tr = em->trans[v];
        if (tr < 0) {
            for (int32_t j = 0; j < k; j++) ep[j] *= ev[j];
            continue;
        }
        const double *restrict w = em->trans_w + (int64_t)tr * k * k;
        double *restrict s = t->s + (int64_t)v * k;
        for (int32_t j = 0; j < k; j++) {
            double acc = 0;
            for (int32_t l = 0; l < k; l++) acc += w[j * k + l] * ev[l];
            s[j] = acc;
            ep[j] *= acc;
        }
    }
    return -INFINITY; /* not reached: the root is visited last */
}

/* Backward pass of one sample after forward(): posteriors, chunk transition sums, input and
 * root counts in fixed point. */
static void backward(const pc_em *em, em_thread *t, const uint8_t *x, const uint8_t *miss,
                     double scale) {
    const int32_t nv = em->num_vars, k = em->num_latents, c = em->num_cats;
    const double *restrict e = t->e;
    double *restrict q = t->q;
    const int32_t root = em->order[0];
    double z = 0;
    for (int32_t j = 0; j < k; j++) z += em->root_w[j] * e[(int64_t)root * k + j];
    for (int32_t j = 0; j < k; j++) {
        q[(int64_t)root * k + j] = em->root_w[j] * e[(int64_t)root * k + j] / z;
        t->n_root[j] += llrint(q[(int64_t)root * k + j] * scale);
    }
    for (int32_t i = 0; i < nv; i++) {
        const int32_t v = em->order[i];
        double *restrict qv = q + (int64_t)v * k;
        if (i > 0) {
            const double *restrict qp = q + (int64_t)em->parent[v] * k;
            const int32_t tr = em->trans[v];
            if (tr < 0) {
                memcpy(qv, qp, (size_t)k * sizeof(double));
            } else {
                const double *restrict w = em->trans_w + (int64_t)tr * k * k;
                const double *restrict s = t->s + (int64_t)v * k;
                const double *restrict ev = e + (int64_t)v * k;
                double *restrict acc = t->tacc + (int64_t)tr * k * k;
                for (int32_t l = 0; l < k; l++) qv[l] = 0;
                for (int32_t j = 0; j < k; j++) {
                    const double r = s[j] > 0 ? qp[j] / s[j] : 0;
                    if (r == 0) continue;
                    for (int32_t l = 0; l < k; l++) {
                        qv[l] += r * w[j * k + l];
                        acc[j * k + l] += r * ev[l];
                    }
                }
                for (int32_t l = 0; l < k; l++) qv[l] *= ev[l];
            }
        }
        if (miss && miss[v]) continue;
        int64_t *restrict n = t->n_input + ((int64_t)v * c + x[v]) * k;
        for (int32_t l = 0; l < k; l++) n[l] += llrint(qv[l] * scale);
    }
}

/* Adds a chunk's transition sums, times W, to the thread's fixed-point counts; clears them. */
static void flush_chunk(const pc_em *em, em_thread *t, double scale) {
    const int64_t size = (int64_t)em->num_trans * em->num_latents * em->num_latents;
    for (int64_t i = 0; i < size; i++) {
        if (t->tacc[i] == 0) continue;
        t->n_trans[i] += llrint(em->trans_w[i] * t->tacc[i] * scale);
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

/* Sums the threads' counts into thread 0's buffers (clearing the others); integer sums, so
 * the order does not matter. */
static void reduce_counts(pc_em *em) {
    const int64_t k = em->num_latents, sizes[3] = {k, (int64_t)em->num_trans * k * k,
                                                   (int64_t)em->num_vars * em->num_cats * k};
    for (int b = 0; b < 3; b++) {
        const int64_t size = sizes[b];
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < size; i++) {
            int64_t sum = 0;
            for (int th = 0; th < em->num_threads; th++) {
                int64_t *buf = b == 0 ? em->thr[th].n_root : b == 1 ? em->thr[th].n_trans
                                                                    : em->thr[th].n_input;
                sum += buf[i];
                buf[i] = 0;
            }
            (b == 0 ? em->thr[0].n_root : b == 1 ? em->thr[0].n_trans : em->thr[0].n_input)[i] = sum;
        }
    }
}

static void m_step(pc_em *em, double inv_scale, double step, double pseudocount) {
    const int64_t k = em->num_latents, c = em->num_cats;
    em_thread *t0 = &em->thr[0];
    update_dist(em->root_w, t0->n_root, k, 1, inv_scale, step, pseudocount);
    memset(t0->n_root, 0, (size_t)k * sizeof(int64_t));
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < (int64_t)em->num_trans * k; row++)
        update_dist(em->trans_w + row * k, t0->n_trans + row * k, k, 1, inv_scale, step, pseudocount);
#pragma omp parallel for schedule(static)
    for (int64_t v = 0; v < em->num_vars; v++)
        for (int64_t j = 0; j < k; j++)
            update_dist(em->input_w + v * c * k + j, t0->n_input + v * c * k + j, c, k, inv_scale,
                        step, pseudocount);
    memset(t0->n_trans, 0, (size_t)(em->num_trans * k * k) * sizeof(int64_t));
    memset(t0->n_input, 0, (size_t)(em->num_vars * c * k) * sizeof(int64_t));
}

/* Checks the rows and their values before anything changes. */
static pc_status check_rows(const pc_em *em, const pc_data *data, const int64_t *rows, int64_t n) {
    if (data->width != em->num_vars)
        return pc_fail(PC_ERR_DATA, "EM: data has %d variables per sample, the model %d",
                       data->width, em->num_vars);
    if (n < 1 || n > data->count)
        return pc_fail(PC_ERR_ARG, "EM: %lld rows requested of %lld", (long long)n,
                       (long long)data->count);
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = rows ? rows[i] : i;
        if (r < 0 || r >= data->count)
            return pc_fail(PC_ERR_ARG, "EM: rows[%lld] = %lld is out of range 0..%lld", (long long)i,
                           (long long)r, (long long)data->count - 1);
        const uint8_t *x = data->values + r * data->width;
        for (int32_t v = 0; v < data->width; v++)
            if (x[v] >= em->num_cats)
                return pc_fail(PC_ERR_DATA, "EM: value %d at row %lld, variable %d is not below "
                               "num_cats = %d", x[v], (long long)r, v, em->num_cats);
    }
    return PC_OK;
}

pc_status pc_em_step(pc_em *em, const pc_data *data, const int64_t *rows, int64_t n, double step,
                     double pseudocount, double *loglik_sum) {
    if (!em || !data || !data->values) return pc_fail(PC_ERR_ARG, "EM step: NULL argument");
    if (!(step > 0 && step <= 1))
        return pc_fail(PC_ERR_ARG, "EM step: step size %g is not in (0, 1]", step);
    if (!(pseudocount >= 0) || !isfinite(pseudocount))
        return pc_fail(PC_ERR_ARG, "EM step: pseudocount %g is not a finite value >= 0", pseudocount);
    pc_status st = check_rows(em, data, rows, n);
    if (st != PC_OK) return st;
    double *ll = malloc((size_t)n * sizeof *ll);
    if (!ll) return pc_fail(PC_ERR_NOMEM, "EM step: %lld log-likelihoods", (long long)n);

    int bits = 0;
    while (bits < 62 && ((int64_t)1 << bits) <= n) bits++;
    const double scale = ldexp(1.0, 62 - bits); /* n * scale < 2^62: no int64 overflow */
    const int64_t chunks = (n + EM_CHUNK - 1) / EM_CHUNK;
    const int64_t width = data->width;
#pragma omp parallel num_threads(em->num_threads)
    {
        em_thread *t = &em->thr[omp_get_thread_num()];
#pragma omp for schedule(dynamic)
        for (int64_t ch = 0; ch < chunks; ch++) {
            const int64_t end = (ch + 1) * EM_CHUNK < n ? (ch + 1) * EM_CHUNK : n;
            for (int64_t i = ch * EM_CHUNK; i < end; i++) {
                const int64_t r = rows ? rows[i] : i;
                const uint8_t *x = data->values + r * width;
                const uint8_t *miss = data->missing ? data->missing + r * width : NULL;
                ll[i] = forward(em, t, x, miss);
                if (ll[i] > -INFINITY) backward(em, t, x, miss, scale);
            }
            flush_chunk(em, t, scale);
        }
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += ll[i];
    free(ll);
    reduce_counts(em);
    m_step(em, 1.0 / scale, step, pseudocount);
    if (loglik_sum) *loglik_sum = sum;
    return PC_OK;
}

pc_status pc_learn_loglik(const pc_hclt *model, const pc_data *data, double *logp) {
    if (!model || !data || !data->values || !logp) return pc_fail(PC_ERR_ARG, "loglik: NULL argument");
    pc_em *em = NULL;
    pc_status st = pc_em_create(model, &em);
    if (st != PC_OK) return st;
    if (data->count > 0) st = check_rows(em, data, NULL, data->count);
    if (st == PC_OK) {
        const int64_t width = data->width;
#pragma omp parallel num_threads(em->num_threads)
        {
            em_thread *t = &em->thr[omp_get_thread_num()];
#pragma omp for schedule(dynamic, EM_CHUNK)
            for (int64_t i = 0; i < data->count; i++)
                logp[i] = forward(em, t, data->values + i * width,
                                  data->missing ? data->missing + i * width : NULL);
        }
    }
    pc_em_free(em);
    return st;
}
