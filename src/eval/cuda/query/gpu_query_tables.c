/* The host side of the GPU queries' tables (gpu_query_tables.h). */
#include "eval/cuda/query/gpu_query_tables.h"

#include <math.h>
#include <stdlib.h>

#include "base/fail.h"
#include "eval/query/query.h"

static pc_status out_of_memory(const char *what) {
    return pc_fail(PC_ERR_NOMEM, "GPU queries: out of host memory for the %s tables", what);
}

/* A CPU query state that holds only the circuit: enough for its table builders, whose arrays
 * the caller takes over. */
static pc_query_state host_state(const pc_circuit *c) {
    pc_query_state s = {0};
    s.c = c;
    s.flavour = PC_QUERY_F64;
    s.real_bytes = sizeof(double);
    return s;
}

pc_status pc_gpu_query_mpe_tables_make(const pc_circuit *c, pc_gpu_query_mpe_tables *t) {
    pc_query_state s = host_state(c);
    const pc_status st = pc_query_need_mpe(&s);
    t->in = s.mpe_in, t->w_t = s.mpe_w_t, t->arg = s.mpe_arg;
    return st;
}

pc_status pc_gpu_query_sampling_tables_make(const pc_circuit *c, pc_gpu_query_sampling_tables *t) {
    pc_query_state s = host_state(c);
    const pc_status st = pc_query_need_sampling(&s);
    t->x_cdf = s.x_cdf, t->root_cdf = s.root_cdf, t->prior_cdf = s.prior_cdf;
    return st;
}

/* log sum_i exp(p[i]) over n values; -inf when every value is. */
static double lse_row(const double *p, int64_t n) {
    double m = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < n; i++) m = p[i] > m ? p[i] : m;
    if (m == -INFINITY) return m;
    for (int64_t i = 0; i < n; i++) sum += exp(p[i] - m);
    return m + log(sum);
}

pc_status pc_gpu_query_sp_tables_make(const pc_circuit *c, pc_gpu_query_sp_tables *t) {
    const size_t V = (size_t)c->num_vars, C = (size_t)c->num_cats, K = (size_t)c->num_latents;
    const size_t T = (size_t)c->num_trans, TKK = T > 0 ? T * K * K : 1;
    t->in = malloc(V * (C + 1) * K * sizeof(double));
    t->wexp = malloc(TKK * sizeof(double)), t->wexp_t = malloc(TKK * sizeof(double));
    t->root_exp = malloc(K * sizeof(double));
    if (!t->in || !t->wexp || !t->wexp_t || !t->root_exp) return out_of_memory("sum-product");
    for (size_t v = 0; v < V; v++)
        for (size_t k = 0; k < K; k++) {
            const double *row = c->input_logp + (v * K + k) * C;
            for (size_t x = 0; x < C; x++) t->in[(v * (C + 1) + x) * K + k] = row[x];
            t->in[(v * (C + 1) + C) * K + k] = lse_row(row, (int64_t)C);
        }
    for (size_t i = 0; i < T * K * K; i++) {
        const size_t tr = i / (K * K), j = i / K % K, k = i % K;
        t->wexp[i] = exp(c->trans_logw[i]);
        t->wexp_t[(tr * K + k) * K + j] = t->wexp[i];
    }
    for (size_t k = 0; k < K; k++) t->root_exp[k] = exp(c->root_logw[k]);
    return PC_OK;
}

pc_status pc_gpu_query_cond_table_make(const pc_circuit *c, double **cond) {
    const size_t V = (size_t)c->num_vars, C = (size_t)c->num_cats, K = (size_t)c->num_latents;
    double *p = malloc(V * K * C * sizeof(double));
    *cond = p;
    if (!p) return out_of_memory("conditionals");
    for (size_t r = 0; r < V * K; r++) {
        const double *row = c->input_logp + r * C, marg = lse_row(row, (int64_t)C);
        for (size_t x = 0; x < C; x++) p[r * C + x] = exp(row[x] - marg);
    }
    return PC_OK;
}
