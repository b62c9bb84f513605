/* The tables of the CPU queries, each built on the first call of a query that needs it (see
 * pc_query_state in query.h for their shapes). */
#include <math.h>
#include <stdlib.h>

#include "base/fail.h"
#include "eval/cpu/cpu_common.h"
#include "eval/query/query.h"

/* LSE of n values p[0], p[stride], ...; -inf when all are -inf. */
static double lse_strided(const double *p, int64_t n, int64_t stride) {
    double m = -INFINITY, s = 0.0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, p[i * stride]);
    if (m == -INFINITY) return -INFINITY;
    for (int64_t i = 0; i < n; i++) s += exp(p[i * stride] - m);
    return m + log(s);
}

/* Stores v at element i of an array of the flavour's real type. */
static void put_real(void *a, size_t i, double v, size_t real_bytes) {
    if (real_bytes == sizeof(double)) ((double *)a)[i] = v;
    else ((float *)a)[i] = (float)v;
}

static pc_status out_of_memory(const char *what) {
    return pc_fail(PC_ERR_NOMEM, "queries: out of memory for the %s tables", what);
}

pc_status pc_query_need_sum_product(pc_query_state *s) {
    if (s->in_rel) return PC_OK;
    const pc_circuit *c = s->c;
    const size_t V = (size_t)c->num_vars, C1 = (size_t)c->num_cats + 1;
    const size_t K = (size_t)c->num_latents, T = (size_t)c->num_trans, rb = s->real_bytes;
    const size_t KP = (size_t)s->k_pad;
    void *in_rel = malloc(V * C1 * K * rb), *w_up = calloc(T > 0 ? T * K * KP : 1, rb);
    void *w_down = calloc(T > 0 ? T * K * KP : 1, rb), *root_exp = malloc(K * rb);
    double *in_off = malloc(V * C1 * sizeof(double)), *row = malloc(K * sizeof(double));
    if (!in_rel || !w_up || !w_down || !root_exp || !in_off || !row) {
        free(in_rel), free(w_up), free(w_down), free(root_exp), free(in_off), free(row);
        return out_of_memory("sum-product");
    }
    s->in_off = in_off, s->w_up = w_up, s->w_down = w_down, s->root_exp = root_exp;
    for (size_t v = 0; v < V; v++)
        for (size_t cat = 0; cat < C1; cat++) {
            s->in_off[v * C1 + cat] = pc_cpu_input_row(c, (int32_t)v, (int32_t)cat, row);
            for (size_t k = 0; k < K; k++) put_real(in_rel, (v * C1 + cat) * K + k, row[k], rb);
        }
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < K; j++)
            for (size_t k = 0; k < K; k++) {
                const double w = exp(c->trans_logw[(t * K + j) * K + k]);
                put_real(s->w_up, (t * K + k) * KP + j, w, rb);
                put_real(s->w_down, (t * K + j) * KP + k, w, rb);
            }
    for (size_t k = 0; k < K; k++) put_real(s->root_exp, k, exp(c->root_logw[k]), rb);
    free(row);
    s->in_rel = in_rel; /* last: its presence says the tables are complete */
    return PC_OK;
}

pc_status pc_query_need_conditionals(pc_query_state *s) {
    pc_status st = pc_query_need_sum_product(s);
    if (st != PC_OK || s->cond) return st;
    const pc_circuit *c = s->c;
    const size_t V = (size_t)c->num_vars, C = (size_t)c->num_cats, K = (size_t)c->num_latents;
    s->cond = malloc(V * K * C * s->real_bytes);
    if (!s->cond) return out_of_memory("conditionals");
    for (size_t r = 0; r < V * K; r++) {
        const double *p = c->input_logp + r * C;
        const double marg = lse_strided(p, (int64_t)C, 1);
        for (size_t x = 0; x < C; x++)
            put_real(s->cond, r * C + x, exp(p[x] - marg), s->real_bytes);
    }
    return PC_OK;
}

pc_status pc_query_need_mpe(pc_query_state *s) {
    if (s->mpe_in) return PC_OK;
    const pc_circuit *c = s->c;
    const size_t V = (size_t)c->num_vars, C = (size_t)c->num_cats, K = (size_t)c->num_latents;
    const size_t T = (size_t)c->num_trans;
    double *in = malloc(V * (C + 1) * K * sizeof(double));
    double *w_t = malloc((T > 0 ? T * K * K : 1) * sizeof(double));
    uint8_t *arg = malloc(V * K);
    if (!in || !w_t || !arg) {
        free(in), free(w_t), free(arg);
        return out_of_memory("MPE");
    }
    s->mpe_w_t = w_t, s->mpe_arg = arg;
    for (size_t v = 0; v < V; v++)
        for (size_t k = 0; k < K; k++) {
            const double *p = c->input_logp + (v * K + k) * C;
            double best = -INFINITY;
            size_t arg = 0;
            for (size_t x = 0; x < C; x++) {
                in[(v * (C + 1) + x) * K + k] = p[x];
                if (p[x] > best) best = p[x], arg = x;
            }
            in[(v * (C + 1) + C) * K + k] = best;
            s->mpe_arg[v * K + k] = (uint8_t)arg; /* C <= 256, checked by the caller */
        }
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < K; j++)
            for (size_t k = 0; k < K; k++)
                s->mpe_w_t[(t * K + k) * K + j] = c->trans_logw[(t * K + j) * K + k];
    s->mpe_in = in;
    return PC_OK;
}

/* cdf[i] = sum_{i' <= i} exp(logw[i'] - max) for n log-weights: cumulative sums of a
 * distribution's weights, scaled so the largest is 1. */
static void cumulative(const double *logw, int64_t n, double *cdf) {
    double m = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, logw[i]);
    for (int64_t i = 0; i < n; i++) cdf[i] = sum += m == -INFINITY ? 0.0 : exp(logw[i] - m);
}

/* The prior's latent tables: the upward pass with every variable missing, in FP64. inside
 * is [G, K] scratch; w is [K]. */
static void prior_tables(pc_query_state *s, double *inside, double *w) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C = c->num_cats, G = c->num_groups;
    for (int64_t g = 0; g < G; g++) {
        double *P = inside + g * K;
        for (int64_t k = 0; k < K; k++) P[k] = 0.0;
        for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++)
            for (int64_t k = 0; k < K; k++)
                P[k] += lse_strided(c->input_logp + ((int64_t)c->group_vars[i] * K + k) * C, C, 1);
        for (int32_t i = c->child_start[g]; i < c->child_start[g + 1]; i++) {
            const int64_t ch = c->group_children[i];
            const double *logw = c->trans_logw + (int64_t)c->group_trans[ch] * K * K;
            for (int64_t j = 0; j < K; j++) {
                for (int64_t k = 0; k < K; k++) w[k] = logw[j * K + k] + inside[ch * K + k];
                P[j] += lse_strided(w, K, 1);
            }
        }
    }
    for (int64_t g = 0; g < G; g++) {
        if (c->group_parent[g] < 0) {
            for (int64_t k = 0; k < K; k++) w[k] = c->root_logw[k] + inside[g * K + k];
            cumulative(w, K, s->root_cdf);
            continue;
        }
        const double *logw = c->trans_logw + (int64_t)c->group_trans[g] * K * K;
        for (int64_t j = 0; j < K; j++) {
            for (int64_t k = 0; k < K; k++) w[k] = logw[j * K + k] + inside[g * K + k];
            cumulative(w, K, s->prior_cdf + (g * K + j) * K);
        }
    }
}

pc_status pc_query_need_sampling(pc_query_state *s) {
    if (s->x_cdf) return PC_OK;
    const pc_circuit *c = s->c;
    const size_t V = (size_t)c->num_vars, C = (size_t)c->num_cats, K = (size_t)c->num_latents;
    const size_t G = (size_t)c->num_groups;
    double *x_cdf = malloc(V * K * C * sizeof(double)), *root_cdf = malloc(K * sizeof(double));
    double *prior_cdf = malloc(G * K * K * sizeof(double));
    double *inside = malloc((G + 1) * K * sizeof(double));
    if (!x_cdf || !root_cdf || !prior_cdf || !inside) {
        free(x_cdf), free(root_cdf), free(prior_cdf), free(inside);
        return out_of_memory("sampling");
    }
    s->root_cdf = root_cdf, s->prior_cdf = prior_cdf;
    for (size_t r = 0; r < V * K; r++) cumulative(c->input_logp + r * C, (int64_t)C, x_cdf + r * C);
    prior_tables(s, inside, inside + G * K);
    free(inside);
    s->x_cdf = x_cdf;
    return PC_OK;
}
