/* MPE on the CPU, in FP64 for every backend: max-product needs only additions and
 * comparisons, so FP64 costs about what FP32 would while it keeps near-ties apart.
 *
 * Per group g and sample (pm [G, B, K] holds P_g):
 *   P_g(k)   = sum_{v in vars(g)} (observed: input_logp[v, k, x_v]; missing: max_c of it)
 *              + sum_{c child} max_k' (trans_logw[t_c, k, k'] + P_c(k'))
 *   best     = max_k (root_logw[k] + P_root(k)) = log p(x_completed, z*)
 * then from the root down z_g = the lowest k maximising trans_logw[t_g, z_parent, k] + P_g(k),
 * and a missing x_v = mpe_arg[v, z_g]. The backtracking recomputes the very sums of the upward
 * pass, so its argmax agrees with the maxima bit for bit. */
#include <math.h>

#include "eval/query/query.h"

/* P_g for one sample: the input terms, then each child's best message. */
static void product(const pc_query_state *s, const double *pm, int64_t g, int64_t bi,
                    const uint8_t *xb, const uint8_t *mb, double *P, double *best) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C = c->num_cats, C1 = C + 1, B = s->block;
    for (int64_t k = 0; k < K; k++) P[k] = 0.0;
    for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
        const int64_t v = c->group_vars[i];
        const double *r = s->mpe_in + (v * C1 + (mb && mb[v] ? C : xb[v])) * K;
        for (int64_t k = 0; k < K; k++) P[k] += r[k];
    }
    for (int32_t i = c->child_start[g]; i < c->child_start[g + 1]; i++) {
        const int64_t ch = c->group_children[i];
        const double *pc = pm + (ch * B + bi) * K;
        const double *wt = s->mpe_w_t + (int64_t)c->group_trans[ch] * K * K; /* [k, j] */
        for (int64_t j = 0; j < K; j++) best[j] = -INFINITY;
        /* Elementwise over the parent's states j, so the loop vectorises. */
        for (int64_t k = 0; k < K; k++) {
            const double pk = pc[k], *wk = wt + k * K;
            for (int64_t j = 0; j < K; j++) {
                const double cand = wk[j] + pk;
                best[j] = cand > best[j] ? cand : best[j];
            }
        }
        for (int64_t j = 0; j < K; j++) P[j] += best[j];
    }
}

/* The lowest k maximising logw[k] + P[k] (0 when every value is -inf); its value in *value. */
static int32_t argmax(const double *logw, const double *P, int64_t K, double *value) {
    double best = -INFINITY;
    int32_t arg = 0;
    for (int64_t k = 0; k < K; k++) {
        const double cand = logw[k] + P[k];
        if (cand > best) best = cand, arg = (int32_t)k;
    }
    *value = best;
    return arg;
}

void pc_query_mpe_block(const pc_query_state *s, void *scratch, int64_t b0, int64_t nb,
                        pc_query_job *job) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, V = c->num_vars, G = c->num_groups, B = s->block;
    char *base = scratch;
    double *pm = (double *)(base + s->lay.pm), *best = (double *)(base + s->lay.exact);
    int32_t *z = (int32_t *)(base + s->lay.z);
    const uint8_t *x = job->x + b0 * V, *missing = job->missing ? job->missing + b0 * V : NULL;
    for (int64_t g = 0; g < G; g++)
        for (int64_t bi = 0; bi < nb; bi++)
            product(s, pm, g, bi, x + bi * V, missing ? missing + bi * V : NULL,
                    pm + (g * B + bi) * K, best);
    for (int64_t bi = 0; bi < nb; bi++) {
        const uint8_t *xb = x + bi * V, *mb = missing ? missing + bi * V : NULL;
        uint8_t *out = job->out + (b0 + bi) * V;
        double value;
        z[G - 1] = argmax(c->root_logw, pm + ((G - 1) * B + bi) * K, K, &value);
        if (job->logp) job->logp[b0 + bi] = value;
        for (int64_t g = G - 1; g >= 0; g--) {
            if (g < G - 1) {
                const double *logw = c->trans_logw +
                                     ((int64_t)c->group_trans[g] * K + z[c->group_parent[g]]) * K;
                double unused;
                z[g] = argmax(logw, pm + (g * B + bi) * K, K, &unused);
            }
            for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
                const int64_t v = c->group_vars[i];
                out[v] = mb && mb[v] ? s->mpe_arg[v * K + z[g]] : xb[v];
            }
        }
    }
}
