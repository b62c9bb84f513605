/* Ancestral sampling from p(x) on the CPU, in FP64 for every backend: the root's state from
 * root_cdf, each group's state given its parent's from prior_cdf, then each variable's value
 * given its latent from x_cdf (query_tables.c builds them from the upward pass with every
 * variable missing, so the samples follow the circuit's distribution exactly). Row i uses the
 * stream of (seed, first + i) and draws in a fixed order (groups from the root down, each
 * group's variables after its state), so rows do not depend on blocks or threads. */
#include "eval/query/query.h"

void pc_query_prior_sample_block(const pc_query_state *s, void *scratch, int64_t b0,
                                 int64_t nb, pc_query_job *job) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C = c->num_cats, V = c->num_vars, G = c->num_groups;
    int32_t *z = (int32_t *)((char *)scratch + s->lay.z);
    for (int64_t bi = 0; bi < nb; bi++) {
        pc_rng rng = pc_query_stream(job->seed, job->first + b0 + bi);
        uint8_t *out = job->out + (b0 + bi) * V;
        for (int64_t g = G - 1; g >= 0; g--) {
            const int32_t p = c->group_parent[g];
            const double *cdf = p < 0 ? s->root_cdf : s->prior_cdf + (g * K + z[p]) * K;
            z[g] = pc_query_draw_cdf(cdf, (int32_t)K, &rng);
            for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
                const int64_t v = c->group_vars[i];
                out[v] = (uint8_t)pc_query_draw_cdf(s->x_cdf + (v * K + z[g]) * C, (int32_t)C,
                                                    &rng);
            }
        }
    }
}
