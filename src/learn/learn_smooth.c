/* pc_learn_smooth_inputs: the input rows of a learned model smoothed along their categories
 * (a Gaussian kernel over the inner categories, the ends kept; pc/learn.h). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "base/fail.h"
#include "pc/learn.h"

pc_status pc_learn_smooth_inputs(pc_hclt *model, double weight, double width) {
    if (!model) return pc_fail(PC_ERR_ARG, "smooth inputs: NULL model");
    if (!(weight >= 0 && weight <= 1))
        return pc_fail(PC_ERR_ARG, "smooth inputs: weight %g is not in [0, 1]", weight);
    if (!(width > 0) || !isfinite(width))
        return pc_fail(PC_ERR_ARG, "smooth inputs: width %g is not a finite value > 0", width);
    const int64_t C = model->num_cats, n = C - 2; /* n inner categories, 1..C-2 */
    if (weight == 0 || n < 2) return PC_OK;
    const int64_t r = (int64_t)fmin(ceil(4 * width), (double)(n - 1));
    /* g [2r + 1] the kernel, g[r + d] = g(d); inv_z [n] 1 / Z_s of inner category 1 + s */
    double *g = malloc((size_t)(2 * r + 1) * sizeof *g);
    double *inv_z = malloc((size_t)n * sizeof *inv_z);
    if (!g || !inv_z) {
        free(g), free(inv_z);
        return pc_fail(PC_ERR_NOMEM, "smooth inputs: kernel of %lld taps",
                       (long long)(2 * r + 1));
    }
    for (int64_t d = -r; d <= r; d++) g[r + d] = exp(-0.5 * (double)(d * d) / (width * width));
    for (int64_t s = 0; s < n; s++) {
        double z = 0;
        for (int64_t c = s - r < 0 ? 0 : s - r; c <= s + r && c < n; c++) z += g[r + c - s];
        inv_z[s] = 1 / z;
    }
    const int64_t rows = (int64_t)model->num_vars * model->num_latents;
    const int threads = omp_get_max_threads();
    /* per thread: p [C] the row, u [C] p_s / Z_s, q [C] the result */
    double *buf = malloc((size_t)threads * 3 * (size_t)C * sizeof *buf);
    if (!buf) {
        free(g), free(inv_z);
        return pc_fail(PC_ERR_NOMEM, "smooth inputs: %d row buffers", threads);
    }
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        double *p = buf + (size_t)omp_get_thread_num() * 3 * C, *u = p + C, *q = u + C;
        double *lp = model->input_logp + row * C;
        for (int64_t c = 0; c < C; c++) p[c] = exp(lp[c]);
        for (int64_t s = 1; s <= n; s++) u[s] = p[s] * inv_z[s - 1];
        q[0] = p[0], q[C - 1] = p[C - 1];
        double total = q[0] + q[C - 1];
        for (int64_t c = 1; c <= n; c++) {
            double acc = 0; /* sum_s g(c - s) p_s / Z_s */
            for (int64_t s = c - r < 1 ? 1 : c - r; s <= c + r && s <= n; s++)
                acc += g[r + c - s] * u[s];
            q[c] = (1 - weight) * p[c] + weight * acc;
            total += q[c];
        }
        for (int64_t c = 0; c < C; c++) lp[c] = log(q[c] / total);
    }
    free(buf), free(g), free(inv_z);
    return PC_OK;
}
