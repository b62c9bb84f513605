/* Random initial parameters for EM.
 *
 * Root and transition rows: half uniform, half a Dirichlet(1) draw (normalised Exp(1) values),
 * so every state starts reachable but the K latent states differ. Input rows: the variable's
 * marginal over the data (add-one smoothed) times a random factor in [0.5, 1.5) per entry; the
 * factor differs between latent states, which breaks their symmetry, while the rows stay close
 * to the data so the first EM steps are not spent learning the marginals.
 */
#include <math.h>
#include <stdlib.h>

#include "base/fail.h"
#include "learn/learn_internal.h"
#include "pc/rng.h"
#include "pc/learn.h"

static void random_row(double *logw, int64_t k, pc_rng *state) {
    double g[4096], sum = 0;
    for (int64_t i = 0; i < k; i++) {
        g[i] = -log1p(-pc_rng_unit(state)); /* Exp(1) */
        sum += g[i];
    }
    for (int64_t i = 0; i < k; i++) logw[i] = log(0.5 / (double)k + 0.5 * g[i] / sum);
}

pc_status pc_learn_init_params(pc_hclt *model, const pc_data *data, uint64_t seed) {
    if (!model) return pc_fail(PC_ERR_ARG, "init: NULL model");
    const int64_t v_count = model->num_vars, c = model->num_cats, k = model->num_latents;
    if (k > 4096)
        return pc_fail(PC_ERR_ARG, "init: num_latents = %lld is above 4096", (long long)k);
    if (data && data->width != model->num_vars)
        return pc_fail(PC_ERR_DATA, "init: data has %d variables per sample, the model %d",
                       data->width, model->num_vars);
    double *marg = malloc((size_t)(v_count * c) * sizeof *marg);
    if (!marg) return pc_fail(PC_ERR_NOMEM, "init: %lld marginals", (long long)(v_count * c));
    for (int64_t i = 0; i < v_count * c; i++) marg[i] = 1.0;
    if (data) {
        for (int64_t r = 0; r < data->count; r++) {
            const uint8_t *x = data->values + r * v_count;
            const uint8_t *miss = data->missing ? data->missing + r * v_count : NULL;
            for (int64_t v = 0; v < v_count; v++) {
                if (miss && miss[v]) continue;
                if (x[v] >= c) {
                    free(marg);
                    return pc_fail(PC_ERR_DATA,
                                   "init: value %d at row %lld, variable %lld is not "
                                   "below num_cats = %lld",
                                   x[v], (long long)r, (long long)v, (long long)c);
                }
                marg[v * c + x[v]] += 1.0;
            }
        }
    }
    pc_rng state = {seed};
    random_row(model->root_logw, k, &state);
    for (int64_t row = 0; row < (int64_t)model->num_trans * k; row++)
        random_row(model->trans_logw + row * k, k, &state);
    for (int64_t v = 0; v < v_count; v++)
        for (int64_t j = 0; j < k; j++) {
            double *out = model->input_logp + (v * k + j) * c, sum = 0;
            for (int64_t x = 0; x < c; x++) {
                out[x] = marg[v * c + x] * (0.5 + pc_rng_unit(&state));
                sum += out[x];
            }
            for (int64_t x = 0; x < c; x++) out[x] = log(out[x] / sum);
        }
    free(marg);
    return PC_OK;
}
