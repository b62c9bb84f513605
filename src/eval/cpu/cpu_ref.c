/* The `ref` backend: FP64 ground truth on the CPU.
 *
 * Node values are absolute FP64 log-values, msg[g][b][k] for a block of B samples. Sum layers
 * use the exp-once form: m = max_k P(k), e_k = exp(P(k) - m), msg(j) = m + log sum_k W[j,k] e_k
 * with W = exp(trans_logw) (K exps and K^2 multiply-adds instead of K^2 exps). When a sum
 * falls below 2^-960 (its weight sits on states about 665 nats or more below the maximum) that
 * output is recomputed with a full max-shifted LSE, so the reference stays exact there too. */
#include <math.h>
#include <stdlib.h>

#include "base/fail.h"
#include "eval/backend.h"
#include "eval/cpu/cpu_common.h"

typedef struct ref_state {
    const pc_circuit *c;
    int threads;
    int64_t block;
    double *w_exp;    /* [T, K, K] exp(trans_logw), row j over k */
    double *root_exp; /* [K] exp(root_logw) */
    double *marg;     /* [V, K] LSE_c input_logp[v, k, c]: the input term of a missing value */
    double **scratch; /* per thread: msg [G, B, K] then P [K] and e [K] */
} ref_state;

static void ref_destroy(void *p) {
    ref_state *s = p;
    if (!s) return;
    if (s->scratch)
        for (int t = 0; t < s->threads; t++) free(s->scratch[t]);
    free(s->scratch);
    free(s->w_exp);
    free(s->root_exp);
    free(s->marg);
    free(s);
}

static pc_status ref_create(const pc_circuit *c, const pc_eval_opts *opts, void **out) {
    const int64_t K = c->num_latents, C = c->num_cats, V = c->num_vars, T = c->num_trans;
    ref_state *s = calloc(1, sizeof *s);
    if (!s) return pc_fail(PC_ERR_NOMEM, "ref backend: out of memory");
    s->c = c;
    s->threads = pc_cpu_threads(opts->threads);
    s->block = pc_cpu_block_size(c, sizeof(double));
    s->w_exp = malloc((size_t)(T > 0 ? T * K * K : 1) * sizeof(double));
    s->root_exp = malloc((size_t)K * sizeof(double));
    s->marg = malloc((size_t)(V * K) * sizeof(double));
    s->scratch = calloc((size_t)s->threads, sizeof *s->scratch);
    int ok = s->w_exp && s->root_exp && s->marg && s->scratch;
    for (int t = 0; ok && t < s->threads; t++) {
        s->scratch[t] = malloc(((size_t)c->num_groups * s->block + 2) * K * sizeof(double));
        ok = s->scratch[t] != NULL;
    }
    if (!ok) {
        ref_destroy(s);
        return pc_fail(PC_ERR_NOMEM, "ref backend: out of memory for buffers");
    }
    for (int64_t i = 0; i < T * K * K; i++) s->w_exp[i] = exp(c->trans_logw[i]);
    for (int64_t k = 0; k < K; k++) s->root_exp[k] = exp(c->root_logw[k]);
    for (int64_t v = 0; v < V; v++) {
        double off = pc_cpu_input_row(c, (int32_t)v, (int32_t)C, s->marg + v * K);
        for (int64_t k = 0; k < K; k++) s->marg[v * K + k] += off;
    }
    *out = s;
    return PC_OK;
}

/* out[j] = LSE_k (logw[j, k] + P[k]) for j < outs, via exp-once with W = exp(logw); e is [K]
 * scratch. */
static void sum_node(const double *P, const double *W, const double *logw, int64_t outs,
                     int64_t K, double *e, double *out) {
    double m = -INFINITY;
    for (int64_t k = 0; k < K; k++) m = fmax(m, P[k]);
    if (m == -INFINITY) {
        for (int64_t j = 0; j < outs; j++) out[j] = -INFINITY;
        return;
    }
    for (int64_t k = 0; k < K; k++) e[k] = exp(P[k] - m);
    for (int64_t j = 0; j < outs; j++) {
        const double *wj = W + j * K;
        double sum = 0.0;
        for (int64_t k = 0; k < K; k++) sum += wj[k] * e[k];
        /* Terms below 2^-1074 were lost to underflow; against a sum of at least 2^-960 they
         * weigh under K 2^-114, and the sum is a normal number with all its bits. */
        if (sum >= 0x1p-960) {
            out[j] = m + log(sum);
            continue;
        }
        /* Underflow: the exact max-shifted LSE of this output. */
        const double *lj = logw + j * K;
        double mm = -INFINITY, ss = 0.0;
        for (int64_t k = 0; k < K; k++) mm = fmax(mm, lj[k] + P[k]);
        if (mm > -INFINITY)
            for (int64_t k = 0; k < K; k++) ss += exp(lj[k] + P[k] - mm);
        out[j] = mm > -INFINITY ? mm + log(ss) : -INFINITY;
    }
}

static void ref_block(void *p, int thread, const uint8_t *x, const uint8_t *missing, int64_t nb,
                      double *logp) {
    const ref_state *s = p;
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C = c->num_cats, V = c->num_vars, G = c->num_groups;
    const int64_t B = s->block;
    double *msg = s->scratch[thread]; /* [G, B, K] */
    double *P = msg + G * B * K, *e = P + K;
    for (int64_t g = 0; g < G; g++) {
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *xb = x + b * V, *mb = missing ? missing + b * V : NULL;
            for (int64_t k = 0; k < K; k++) P[k] = 0.0;
            for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
                const int64_t v = c->group_vars[i];
                if (mb && mb[v]) {
                    for (int64_t k = 0; k < K; k++) P[k] += s->marg[v * K + k];
                } else {
                    const double *row = c->input_logp + v * K * C + xb[v]; /* stride C */
                    for (int64_t k = 0; k < K; k++) P[k] += row[k * C];
                }
            }
            for (int32_t i = c->child_start[g]; i < c->child_start[g + 1]; i++) {
                const double *m = msg + ((int64_t)c->group_children[i] * B + b) * K;
                for (int64_t k = 0; k < K; k++) P[k] += m[k];
            }
            if (c->group_parent[g] < 0)
                sum_node(P, s->root_exp, c->root_logw, 1, K, e, &logp[b]);
            else {
                const int64_t t = c->group_trans[g];
                sum_node(P, s->w_exp + t * K * K, c->trans_logw + t * K * K, K, K, e,
                         msg + (g * B + b) * K);
            }
        }
    }
}

static pc_status ref_evaluate(void *p, const uint8_t *x, const uint8_t *missing, int64_t n,
                              double *logp) {
    ref_state *s = p;
    pc_cpu_run_blocks(s, ref_block, s->threads, s->block, s->c->num_vars, x, missing, n, logp);
    return PC_OK;
}

const pc_backend_ops pc_backend_ref_ops = {ref_create, ref_evaluate, pc_cpu_peak_device_bytes,
                                           ref_destroy};
