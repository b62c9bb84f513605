/* Brute force for tiny HCLTs and the chi-square test (see enumerate.h). */
#include "enumerate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The latent of every variable: its own when it is the root or has a trans row, else its
 * parent's (followed up the tree). latent_of [V] gets latent numbers 0 .. L - 1; returns L. */
static int32_t number_latents(const pc_hclt *m, int32_t *latent_of, int32_t *owner_latent) {
    const int32_t V = m->num_vars;
    int32_t L = 0;
    for (int32_t v = 0; v < V; v++)
        owner_latent[v] = m->parent[v] < 0 || m->trans_index[v] >= 0 ? L++ : -1;
    for (int32_t v = 0; v < V; v++) {
        int32_t u = v;
        while (owner_latent[u] < 0) u = m->parent[u];
        latent_of[v] = owner_latent[u];
    }
    return L;
}

/* log p(z) for the latent states z [L] (by latent number). */
static double log_prior(const pc_hclt *m, const int32_t *latent_of, const int32_t *z) {
    const int64_t K = m->num_latents;
    double lp = 0.0;
    for (int32_t v = 0; v < m->num_vars; v++) {
        if (m->parent[v] < 0) lp += m->root_logw[z[latent_of[v]]];
        else if (m->trans_index[v] >= 0)
            lp += m->trans_logw[((int64_t)m->trans_index[v] * K + z[latent_of[m->parent[v]]]) * K +
                                z[latent_of[v]]];
    }
    return lp;
}

pc_enum *pc_enum_create(const pc_hclt *m) {
    const int32_t V = m->num_vars, C = m->num_cats, K = m->num_latents;
    int32_t *latent_of = pc_test_alloc((size_t)V * sizeof(int32_t));
    int32_t *owner = pc_test_alloc((size_t)V * sizeof(int32_t));
    const int32_t L = number_latents(m, latent_of, owner);
    int64_t num_x = 1, num_z = 1;
    for (int32_t v = 0; v < V; v++) num_x *= C;
    for (int32_t l = 0; l < L; l++) num_z *= K;
    if (num_x * num_z > (1 << 24)) {
        fprintf(stderr, "pc_enum_create: model too large to enumerate\n");
        abort();
    }
    pc_enum *en = pc_test_alloc(sizeof *en);
    en->num_vars = V, en->num_cats = C, en->num_x = num_x;
    en->px = pc_test_alloc((size_t)num_x * sizeof(double));
    en->max_joint = pc_test_alloc((size_t)num_x * sizeof(double));
    for (int64_t i = 0; i < num_x; i++) en->px[i] = 0.0, en->max_joint[i] = -INFINITY;
    int32_t *z = pc_test_alloc((size_t)L * sizeof(int32_t));
    uint8_t *x = pc_test_alloc((size_t)V);
    for (int64_t zi = 0; zi < num_z; zi++) {
        for (int32_t l = 0, r = (int32_t)zi; l < L; l++, r /= K) z[l] = r % K;
        const double lz = log_prior(m, latent_of, z);
        for (int64_t i = 0; i < num_x; i++) {
            pc_enum_decode(en, i, x);
            double lj = lz;
            for (int32_t v = 0; v < V; v++)
                lj += m->input_logp[((int64_t)v * K + z[latent_of[v]]) * C + x[v]];
            en->px[i] += exp(lj);
            if (lj > en->max_joint[i]) en->max_joint[i] = lj;
        }
    }
    free(z), free(x), free(latent_of), free(owner);
    return en;
}

void pc_enum_free(pc_enum *en) {
    if (!en) return;
    free(en->px), free(en->max_joint), free(en);
}

void pc_enum_decode(const pc_enum *en, int64_t i, uint8_t *x) {
    for (int32_t v = 0; v < en->num_vars; v++, i /= en->num_cats)
        x[v] = (uint8_t)(i % en->num_cats);
}

int64_t pc_enum_index(const pc_enum *en, const uint8_t *x) {
    int64_t i = 0;
    for (int32_t v = en->num_vars - 1; v >= 0; v--) i = i * en->num_cats + x[v];
    return i;
}

int pc_enum_agrees(const pc_enum *en, int64_t i, const uint8_t *x, const uint8_t *missing) {
    for (int32_t v = 0; v < en->num_vars; v++, i /= en->num_cats)
        if (!(missing && missing[v]) && x[v] != i % en->num_cats) return 0;
    return 1;
}

double pc_enum_evidence(const pc_enum *en, const uint8_t *x, const uint8_t *missing) {
    double pe = 0.0;
    for (int64_t i = 0; i < en->num_x; i++)
        if (pc_enum_agrees(en, i, x, missing)) pe += en->px[i];
    return pe;
}

void pc_enum_conditionals(const pc_enum *en, const uint8_t *x, const uint8_t *missing,
                          double *probs) {
    const int32_t V = en->num_vars, C = en->num_cats;
    const double pe = pc_enum_evidence(en, x, missing);
    uint8_t *y = pc_test_alloc((size_t)V);
    for (int64_t j = 0; j < (int64_t)V * C; j++) probs[j] = pe > 0.0 ? 0.0 : NAN;
    for (int64_t i = 0; pe > 0.0 && i < en->num_x; i++) {
        if (!pc_enum_agrees(en, i, x, missing)) continue;
        pc_enum_decode(en, i, y);
        for (int32_t v = 0; v < V; v++) probs[v * C + y[v]] += en->px[i] / pe;
    }
    free(y);
}

int64_t pc_enum_mpe(const pc_enum *en, const uint8_t *x, const uint8_t *missing, double *best,
                    double *second) {
    int64_t arg = -1;
    *best = *second = -INFINITY;
    for (int64_t i = 0; i < en->num_x; i++) {
        if (!pc_enum_agrees(en, i, x, missing)) continue;
        const double v = en->max_joint[i];
        if (arg < 0 || v > *best) {
            if (arg >= 0) *second = *best;
            *best = v, arg = i;
        } else if (v > *second) {
            *second = v;
        }
    }
    return arg;
}

double pc_gamma_q(double a, double x) {
    if (x <= 0.0) return 1.0;
    const double log_front = a * log(x) - x - lgamma(a); /* log(x^a e^-x / Gamma(a)) */
    if (x < a + 1.0) {
        /* P(a, x) = front * sum_n x^n / (a (a + 1) ... (a + n)); Q = 1 - P. */
        double term = 1.0 / a, sum = term;
        for (int n = 1; n < 100000 && term > sum * 1e-17; n++) {
            term *= x / (a + n);
            sum += term;
        }
        return 1.0 - sum * exp(log_front);
    }
    /* Q(a, x) = front / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (x + 5 - a - ...))),
     * evaluated by the modified Lentz method. */
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
    for (int i = 1; i < 100000; i++) {
        const double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        d = fabs(d) < tiny ? tiny : d;
        c = b + an / c;
        c = fabs(c) < tiny ? tiny : c;
        d = 1.0 / d;
        const double step = d * c;
        h *= step;
        if (fabs(step - 1.0) < 1e-16) break;
    }
    return exp(log_front) * h;
}

double pc_chi2_test(const double *prob, const int64_t *counts, int64_t cells, int64_t draws,
                    double *stat, int64_t *df) {
    double chi2 = 0.0, thin_e = 0.0, min_e = INFINITY;
    int64_t thin_o = 0, full = 0, min_o = 0;
    for (int64_t i = 0; i < cells; i++) {
        const double e = prob[i] * (double)draws;
        if (prob[i] <= 0.0) {
            if (counts[i] > 0) {
                if (stat) *stat = INFINITY;
                if (df) *df = 0;
                return 0.0;
            }
        } else if (e < 5.0) {
            thin_e += e, thin_o += counts[i];
        } else {
            const double dev = (double)counts[i] - e;
            chi2 += dev * dev / e;
            full++;
            if (e < min_e) min_e = e, min_o = counts[i];
        }
    }
    if (thin_e > 0.0) {
        if (thin_e >= 5.0 || full == 0) {
            const double dev = (double)thin_o - thin_e;
            chi2 += dev * dev / thin_e;
            full++;
        } else {
            /* Too thin on its own: merge into the smallest full cell. */
            double dev = (double)min_o - min_e;
            chi2 -= dev * dev / min_e;
            dev = (double)(min_o + thin_o) - (min_e + thin_e);
            chi2 += dev * dev / (min_e + thin_e);
        }
    }
    if (stat) *stat = chi2;
    if (df) *df = full - 1;
    return full > 1 ? pc_gamma_q(0.5 * (double)(full - 1), 0.5 * chi2) : 1.0;
}

pc_circuit *pc_test_compile(const pc_hclt *model) {
    pc_circuit *c = NULL;
    if (pc_circuit_compile(model, &c) != PC_OK) {
        fprintf(stderr, "compile: %s\n", pc_last_error());
        abort();
    }
    return c;
}

pc_evaluator *pc_test_evaluator(const pc_circuit *circuit, pc_backend backend,
                                int64_t max_batch, int threads) {
    pc_eval_opts opts = {backend, max_batch, threads};
    pc_evaluator *e = NULL;
    if (pc_evaluator_create(circuit, &opts, &e) != PC_OK) {
        fprintf(stderr, "%s evaluator: %s\n", pc_backend_name(backend), pc_last_error());
        abort();
    }
    return e;
}

double pc_enum_chi2_rows(const pc_enum *en, const uint8_t *rows, int64_t draws,
                         const double *prob, double *stat, int64_t *df) {
    int64_t *counts = pc_test_alloc((size_t)en->num_x * sizeof *counts);
    memset(counts, 0, (size_t)en->num_x * sizeof *counts);
    for (int64_t r = 0; r < draws; r++) counts[pc_enum_index(en, rows + r * en->num_vars)]++;
    const double p = pc_chi2_test(prob, counts, en->num_x, draws, stat, df);
    free(counts);
    return p;
}
