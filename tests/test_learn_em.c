/* EM and the learner's forward pass: exact values, one EM step against its definition by
 * enumeration, monotone full-batch EM, determinism across thread counts, argument checks. */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "learn/learn_internal.h"
#include "learn/learn_em_internal.h"
#include "pc/rng.h"
#include "pc/learn.h"
#include "pc/lse.h"
#include "testutil.h"

static uint64_t g_seed;

/* The worked example of HCLT_FORMAT.md (V = 3, K = 2, C = 2). */
static pc_hclt *worked_example(void) {
    pc_hclt *m = NULL;
    assert_int_equal(pc_hclt_create(3, 2, 2, 1, &m), PC_OK);
    const int32_t parent[3] = {-1, 0, 0}, trans[3] = {-1, 0, -1};
    memcpy(m->parent, parent, sizeof parent);
    memcpy(m->trans_index, trans, sizeof trans);
    const double root[2] = {0.6, 0.4}, tw[4] = {0.9, 0.1, 0.2, 0.8},
                 in[12] = {0.7, 0.3, 0.1, 0.9, 0.5, 0.5, 0.8, 0.2, 0.3, 0.7, 0.6, 0.4};
    for (int i = 0; i < 2; i++) m->root_logw[i] = log(root[i]);
    for (int i = 0; i < 4; i++) m->trans_logw[i] = log(tw[i]);
    for (int i = 0; i < 12; i++) m->input_logp[i] = log(in[i]);
    return m;
}

static void test_loglik_worked_example(void **state) {
    (void)state;
    const double want[8] = {-2.470530483843493,  -1.7858171597724257, -2.726316009909102,
                            -1.9495367171110118, -1.6688694962035266, -1.7525002952759379,
                            -2.5066615815910294, -2.3365556125651987};
    pc_hclt *m = worked_example();
    uint8_t values[24];
    for (int i = 0; i < 8; i++)
        for (int v = 0; v < 3; v++) values[i * 3 + v] = (uint8_t)((i >> (2 - v)) & 1);
    pc_data d = {.count = 8, .width = 3, .values = values};
    double lp[8];
    for (int i = 0; i < 8; i++) lp[i] = NAN; /* poison */
    assert_int_equal(pc_learn_loglik(m, &d, lp), PC_OK);
    for (int i = 0; i < 8; i++) assert_true(fabs(lp[i] - want[i]) < 1e-13);

    /* x_1 missing: the marginal over x_1, i.e. log(p(x0, 0, x2) + p(x0, 1, x2)) */
    uint8_t missing[24] = {0};
    for (int i = 0; i < 8; i++) missing[i * 3 + 1] = 1;
    d.missing = missing;
    assert_int_equal(pc_learn_loglik(m, &d, lp), PC_OK);
    for (int i = 0; i < 8; i++) {
        int x0 = (i >> 2) & 1, x2 = i & 1;
        double marg = log(exp(want[x0 * 4 + x2]) + exp(want[x0 * 4 + 2 + x2]));
        assert_true(fabs(lp[i] - marg) < 1e-13);
    }
    pc_hclt_free(m);
}

/* Tree-shaped data over n variables with C = 4 values (children copy the parent with
 * probability 0.7); returns the data and fills parent [n] with the tree. */
static pc_data *tree_data(int32_t n, int64_t rows, uint64_t seed, int32_t *parent) {
    pc_rng rng = {seed};
    pc_data *d = NULL;
    assert_int_equal(pc_data_create(rows, n, &d), PC_OK);
    parent[0] = -1;
    for (int32_t v = 1; v < n; v++) parent[v] = (int32_t)pc_rng_below(&rng, v);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *x = d->values + r * n;
        for (int32_t v = 0; v < n; v++)
            x[v] = (parent[v] < 0 || pc_rng_unit(&rng) >= 0.7)
                       ? (uint8_t)pc_rng_below(&rng, 4)
                       : x[parent[v]];
    }
    return d;
}

/* Learns a small HCLT with `full` full-batch steps; returns the model (exported). */
static pc_hclt *learn_small(const pc_data *d, const int32_t *tree, int32_t k, uint64_t seed,
                            int steps, double *ll_trace) {
    pc_hclt *m = NULL;
    assert_int_equal(pc_learn_hclt_create(d->width, tree, 4, k, &m), PC_OK);
    assert_int_equal(pc_learn_init_params(m, d, seed), PC_OK);
    pc_em *em = NULL;
    assert_int_equal(pc_em_create(m, &em), PC_OK);
    for (int s = 0; s < steps; s++) {
        double ll = NAN;
        assert_int_equal(pc_em_step(em, d, NULL, d->count, 1.0, 0.0, &ll), PC_OK);
        if (ll_trace) ll_trace[s] = ll;
    }
    assert_int_equal(pc_em_export(em, m), PC_OK);
    pc_em_free(em);
    return m;
}

/* log(sum exp(a[i])) for the reference below. */
static double lse(const double *a, int n) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < n; i++) m = a[i] > m ? a[i] : m;
    if (m == -INFINITY) return m;
    for (int i = 0; i < n; i++) s += exp(a[i] - m);
    return m + log(s);
}

/* P_v(k) of HCLT_FORMAT's semantics, in the log domain, straight from the definition. */
static void ref_p(const pc_hclt *m, const uint8_t *x, const uint8_t *miss, int v, double *out) {
    const int k = m->num_latents, c = m->num_cats;
    for (int j = 0; j < k; j++)
        out[j] = (miss && miss[v]) ? lse(m->input_logp + ((int64_t)v * k + j) * c, c)
                                   : m->input_logp[((int64_t)v * k + j) * c + x[v]];
    double pc[64], term[64];
    for (int ch = 0; ch < m->num_vars; ch++) {
        if (m->parent[ch] != v) continue;
        ref_p(m, x, miss, ch, pc);
        const int t = m->trans_index[ch];
        for (int j = 0; j < k; j++) {
            if (t < 0) {
                out[j] += pc[j];
                continue;
            }
            for (int l = 0; l < k; l++)
                term[l] = m->trans_logw[((int64_t)t * k + j) * k + l] + pc[l];
            out[j] += lse(term, k);
        }
    }
}

static double ref_loglik(const pc_hclt *m, const uint8_t *x, const uint8_t *miss) {
    int root = 0;
    while (m->parent[root] >= 0) root++;
    double p[64];
    ref_p(m, x, miss, root, p);
    for (int j = 0; j < m->num_latents; j++) p[j] += m->root_logw[j];
    return lse(p, m->num_latents);
}

/* A random valid model: random tree and root, some variables (leaves or not) sharing their
 * parent's latent, trans rows in random order, random parameters with a few zero
 * probabilities (-inf). */
static pc_hclt *random_model(int32_t v, int32_t c, int32_t k, pc_rng *rng) {
    int32_t perm[32], parent[32], trans[32], rows = 0;
    for (int32_t i = 0; i < v; i++) perm[i] = i;
    for (int32_t i = v - 1; i > 0; i--) {
        int32_t j = (int32_t)pc_rng_below(rng, i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    parent[perm[0]] = -1;
    trans[perm[0]] = -1;
    for (int32_t i = 1; i < v; i++) {
        parent[perm[i]] = perm[pc_rng_below(rng, i)];
        trans[perm[i]] = pc_rng_unit(rng) < 0.3 ? -1 : rows++;
    }
    int32_t *order = malloc((size_t)(rows + 1) * sizeof *order); /* renumber rows randomly */
    assert_non_null(order);
    for (int32_t i = 0; i < rows; i++) order[i] = i;
    for (int32_t i = rows - 1; i > 0; i--) {
        int32_t j = (int32_t)pc_rng_below(rng, i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    pc_hclt *m = NULL;
    assert_int_equal(pc_hclt_create(v, c, k, rows, &m), PC_OK);
    for (int32_t i = 0; i < v; i++) {
        m->parent[i] = parent[i];
        m->trans_index[i] = trans[i] < 0 ? -1 : order[trans[i]];
    }
    free(order);
    double *all[3] = {m->root_logw, m->trans_logw, m->input_logp};
    const int64_t len[3] = {k, (int64_t)rows * k * k, (int64_t)v * k * c}, width[3] = {k, k, c};
    for (int a = 0; a < 3; a++)
        for (int64_t r = 0; r < len[a]; r += width[a]) {
            double *row = all[a] + r, sum = 0;
            for (int64_t i = 0; i < width[a]; i++) {
                row[i] = (i > 0 && pc_rng_unit(rng) < 0.05)
                             ? 0
                             : exp(4 * pc_rng_unit(rng));
                sum += row[i];
            }
            for (int64_t i = 0; i < width[a]; i++) row[i] = log(row[i] / sum);
        }
    assert_int_equal(pc_hclt_validate(m, NULL), PC_OK);
    return m;
}

/* The learner's scaled forward pass against the log-domain definition, for K with and without
 * the vector kernels (16, 32), with missing values and zero probabilities (-inf results). */
static void test_loglik_matches_definition(void **state) {
    (void)state;
    pc_rng rng = {g_seed ^ 0x77};
    const int32_t ks[6] = {1, 2, 5, 16, 32, 33};
    for (int trial = 0; trial < 12; trial++) {
        const int32_t v = 1 + (int32_t)pc_rng_below(&rng, 12),
                      c = 2 + (int32_t)pc_rng_below(&rng, 7);
        const int32_t k = ks[trial % 6];
        pc_hclt *m = random_model(v, c, k, &rng);
        pc_data *d = NULL;
        assert_int_equal(pc_data_create(50, v, &d), PC_OK);
        d->missing = calloc((size_t)(50 * v), 1);
        assert_non_null(d->missing);
        for (int64_t i = 0; i < 50 * v; i++) {
            d->values[i] = (uint8_t)pc_rng_below(&rng, c);
            d->missing[i] = pc_rng_unit(&rng) < 0.2;
        }
        double lp[50];
        for (int i = 0; i < 50; i++) lp[i] = NAN; /* poison */
        assert_int_equal(pc_learn_loglik(m, d, lp), PC_OK);
        for (int i = 0; i < 50; i++) {
            double want = ref_loglik(m, d->values + i * v, d->missing + i * v);
            if (want == -INFINITY) {
                assert_true(lp[i] == -INFINITY);
            } else {
                assert_true(fabs(lp[i] - want) < 1e-11 * (1 + fabs(want)));
            }
        }
        pc_data_free(d);
        pc_hclt_free(m);
    }
}

/* The variable whose latent v's is: v itself, or for a variable sharing its parent's latent,
 * that of its parent. */
static int32_t latent_owner(const pc_hclt *m, int32_t v) {
    while (m->parent[v] >= 0 && m->trans_index[v] < 0) v = m->parent[v];
    return v;
}

/* One EM step against its definition on tiny random models: the expected counts by enumerating
 * every assignment of the latents (K^latents terms per row), the estimate (N + a / size) /
 * (sum N + a), then p <- (1 - step) p + step est. Missing values, shared latents, zero
 * probabilities, C = 2 to 5, pseudocounts 0 to 1, full and mini-batch steps. */
static void test_em_step_matches_enumeration(void **state) {
    (void)state;
    pc_rng rng = {g_seed ^ 0x5eed};
    for (int trial = 0; trial < 24; trial++) {
        const int32_t V = 1 + (int32_t)pc_rng_below(&rng, 5);
        const int32_t C = 2 + (int32_t)pc_rng_below(&rng, 4);
        const int32_t K = 1 + (int32_t)pc_rng_below(&rng, 3);
        const double alpha = 0.5 * (trial % 3), step = trial % 4 ? 0.6 : 1.0;
        pc_hclt *m = random_model(V, C, K, &rng);
        enum { N = 30 };
        uint8_t x[N * 5], miss[N * 5];
        for (int r = 0; r < N; r++)
            do { /* rows of zero probability say nothing to EM: draw again */
                for (int v = 0; v < V; v++) {
                    x[r * V + v] = (uint8_t)pc_rng_below(&rng, (uint64_t)C);
                    miss[r * V + v] = pc_rng_unit(&rng) < 0.2;
                }
            } while (!isfinite(ref_loglik(m, x + r * V, miss + r * V)));
        /* counts by enumeration: z[v] is the state of the latent v owns (others unused) */
        double n_root[3] = {0}, n_trans[5 * 9] = {0}, n_input[5 * 3 * 5] = {0};
        int32_t owner[5], z[5];
        for (int32_t v = 0; v < V; v++) owner[v] = latent_owner(m, v);
        int64_t configs = 1;
        for (int32_t v = 0; v < V; v++) configs *= owner[v] == v ? K : 1;
        for (int r = 0; r < N; r++) {
            const uint8_t *xr = x + r * V, *mr = miss + r * V;
            const double px = exp(ref_loglik(m, xr, mr));
            for (int64_t cfg = 0; cfg < configs; cfg++) {
                int64_t rest = cfg;
                for (int32_t v = 0; v < V; v++)
                    if (owner[v] == v) z[v] = (int32_t)(rest % K), rest /= K;
                double lw = 0;
                for (int32_t v = 0; v < V; v++) {
                    const int32_t t = m->trans_index[v], p = m->parent[v];
                    if (p < 0) lw += m->root_logw[z[v]];
                    if (t >= 0) lw += m->trans_logw[((int64_t)t * K + z[owner[p]]) * K + z[v]];
                    if (!mr[v]) lw += m->input_logp[((int64_t)v * K + z[owner[v]]) * C + xr[v]];
                }
                const double post = exp(lw) / px;
                for (int32_t v = 0; v < V; v++) {
                    const int32_t t = m->trans_index[v], p = m->parent[v];
                    if (p < 0) n_root[z[v]] += post;
                    if (t >= 0) n_trans[(t * K + z[owner[p]]) * K + z[v]] += post;
                    if (!mr[v]) n_input[(v * K + z[owner[v]]) * C + xr[v]] += post;
                }
            }
        }
        pc_em *em = NULL;
        pc_hclt *got = NULL;
        assert_int_equal(pc_hclt_create(V, C, K, m->num_trans, &got), PC_OK);
        memcpy(got->parent, m->parent, (size_t)V * sizeof(int32_t));
        memcpy(got->trans_index, m->trans_index, (size_t)V * sizeof(int32_t));
        assert_int_equal(pc_em_create(m, &em), PC_OK);
        pc_data d = {.count = N, .width = V, .values = x, .missing = miss};
        assert_int_equal(pc_em_step(em, &d, NULL, N, step, alpha, NULL), PC_OK);
        assert_int_equal(pc_em_export(em, got), PC_OK);
        const double *old[3] = {m->root_logw, m->trans_logw, m->input_logp};
        const double *new_[3] = {got->root_logw, got->trans_logw, got->input_logp};
        const double *cnt[3] = {n_root, n_trans, n_input};
        const int64_t len[3] = {K, (int64_t)m->num_trans * K * K, (int64_t)V * K * C};
        const int64_t size[3] = {K, K, C};
        for (int a = 0; a < 3; a++)
            for (int64_t r0 = 0; r0 < len[a]; r0 += size[a]) {
                double total = 0;
                for (int64_t i = 0; i < size[a]; i++) total += cnt[a][r0 + i];
                for (int64_t i = 0; i < size[a]; i++) {
                    const double p_old = exp(old[a][r0 + i]), p_new = exp(new_[a][r0 + i]);
                    const double est = (cnt[a][r0 + i] + alpha / size[a]) / (total + alpha);
                    const double want = total + alpha > 0 ? (1 - step) * p_old + step * est
                                                          : p_old;
                    if (!(fabs(p_new - want) < 1e-9))
                        printf("trial %d V %d C %d K %d: array %d entry %lld: %.12g vs %.12g\n",
                               trial, V, C, K, a, (long long)(r0 + i), p_new, want);
                    assert_true(fabs(p_new - want) < 1e-9);
                }
            }
        pc_em_free(em);
        pc_hclt_free(got);
        pc_hclt_free(m);
    }
}

/* Runs 6 full-batch EM steps with the given kernels; checks monotony; returns the model. */
static pc_hclt *em_with_kernels(const pc_hclt *start, const pc_data *d, const pc_em_kernels *kern,
                                double *ll_out) {
    pc_hclt *out = NULL;
    assert_int_equal(pc_learn_hclt_create(start->num_vars, start->parent, start->num_cats,
                                          start->num_latents, &out),
                     PC_OK);
    pc_em *em = NULL;
    assert_int_equal(pc_em_create(start, &em), PC_OK);
    em->kern = *kern;
    double prev = -INFINITY;
    for (int s = 0; s < 6; s++) {
        assert_int_equal(pc_em_step(em, d, NULL, d->count, 1.0, 0.0, &ll_out[s]), PC_OK);
        assert_true(ll_out[s] >= prev - 1e-9 * fabs(ll_out[s]));
        prev = ll_out[s];
    }
    assert_int_equal(pc_em_export(em, out), PC_OK);
    pc_em_free(em);
    return out;
}

/* Every instruction-set copy of the kernels this CPU can run gives the baseline copy's EM
 * result bit for bit: for the vector paths (K = 16, 32) and the any-K path (K = 5). */
static void test_em_kernels_agree(void **state) {
    (void)state;
    const pc_em_kernels *sets[3] = {&pc_em_kernels_generic, NULL, NULL};
    const pc_isa best = pc_cpu_best_isa();
    if (best >= PC_ISA_AVX2)
        sets[1] = &pc_em_kernels_avx2;
    if (best >= PC_ISA_AVX512)
        sets[2] = &pc_em_kernels_avx512;
    printf("kernels compared with the baseline copy:%s%s\n", sets[1] ? " avx2" : "",
           sets[2] ? " avx512" : "");
    const int32_t ks[3] = {5, 16, 32};
    for (int ki = 0; ki < 3; ki++) {
        const int32_t k = ks[ki];
        int32_t tree[10];
        pc_data *d = tree_data(10, 300, g_seed ^ (uint64_t)k, tree);
        pc_hclt *m = NULL;
        assert_int_equal(pc_learn_hclt_create(10, tree, 4, k, &m), PC_OK);
        assert_int_equal(pc_learn_init_params(m, d, g_seed), PC_OK);
        double ll_base[6], ll[6];
        pc_hclt *base = em_with_kernels(m, d, sets[0], ll_base);
        for (int i = 1; i < 3; i++) {
            if (!sets[i]) continue;
            pc_hclt *other = em_with_kernels(m, d, sets[i], ll);
            assert_memory_equal(ll, ll_base, sizeof ll);
            assert_memory_equal(other->input_logp, base->input_logp,
                                (size_t)10 * k * 4 * sizeof(double));
            assert_memory_equal(other->trans_logw, base->trans_logw,
                                (size_t)base->num_trans * k * k * sizeof(double));
            assert_memory_equal(other->root_logw, base->root_logw, (size_t)k * sizeof(double));
            pc_hclt_free(other);
        }
        pc_hclt_free(base);
        pc_hclt_free(m);
        pc_data_free(d);
    }
}

static void test_full_batch_em_monotone(void **state) {
    (void)state;
    int32_t tree[9];
    pc_data *d = tree_data(9, 600, g_seed, tree);
    d->missing = calloc((size_t)(600 * 9), 1);
    assert_non_null(d->missing);
    for (int64_t i = 0; i < 600 * 9; i += 17) d->missing[i] = 1; /* some hidden values */
    double trace[25];
    pc_hclt *m = learn_small(d, tree, 3, g_seed, 25, trace);
    assert_int_equal(pc_hclt_validate(m, NULL), PC_OK);
    for (int s = 1; s < 25; s++) {
        /* EM never lowers the likelihood; 1e-9 relative allows for rounding */
        assert_true(trace[s] >= trace[s - 1] - 1e-9 * fabs(trace[s - 1]));
    }
    assert_true(trace[24] > trace[0] + 1.0); /* and it learned something */
    /* the step's reported log-likelihood is that of the parameters before it: one more
     * scoring pass of the exported model must be at least the last value */
    double *lp = malloc((size_t)d->count * sizeof *lp), sum = 0;
    assert_non_null(lp);
    assert_int_equal(pc_learn_loglik(m, d, lp), PC_OK);
    for (int64_t i = 0; i < d->count; i++) sum += lp[i];
    assert_true(sum >= trace[24] - 1e-9 * fabs(sum));
    free(lp);
    pc_hclt_free(m);
    pc_data_free(d);
}

/* Same seed -> the same model bit for bit, with 1 thread and with 3 threads; another seed ->
 * another model. */
static void test_em_deterministic(void **state) {
    (void)state;
    int32_t tree[12];
    pc_data *d = tree_data(12, 1000, g_seed ^ 7, tree);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    pc_hclt *a = learn_small(d, tree, 4, g_seed, 4, NULL);
    omp_set_num_threads(3);
    pc_hclt *b = learn_small(d, tree, 4, g_seed, 4, NULL);
    omp_set_num_threads(saved);
    pc_hclt *c = learn_small(d, tree, 4, g_seed + 1, 4, NULL);
    const size_t in_bytes = (size_t)12 * 4 * 4 * sizeof(double);
    const size_t tr_bytes = (size_t)a->num_trans * 16 * sizeof(double);
    assert_memory_equal(a->input_logp, b->input_logp, in_bytes);
    assert_memory_equal(a->trans_logw, b->trans_logw, tr_bytes);
    assert_memory_equal(a->root_logw, b->root_logw, 4 * sizeof(double));
    assert_memory_not_equal(a->input_logp, c->input_logp, in_bytes);
    pc_hclt_free(a);
    pc_hclt_free(b);
    pc_hclt_free(c);
    pc_data_free(d);
}

/* Mini-batch steps over shuffled rows with a step size below 1 and a pseudocount: the model
 * validates and fits better than its initialisation. */
static void test_mini_batch_em(void **state) {
    (void)state;
    int32_t tree[10];
    pc_data *d = tree_data(10, 2000, g_seed ^ 99, tree);
    pc_hclt *m = NULL;
    assert_int_equal(pc_learn_hclt_create(10, tree, 4, 3, &m), PC_OK);
    assert_int_equal(pc_learn_init_params(m, d, g_seed), PC_OK);
    double *lp = malloc(2000 * sizeof *lp), before = 0, after = 0;
    assert_non_null(lp);
    assert_int_equal(pc_learn_loglik(m, d, lp), PC_OK);
    for (int i = 0; i < 2000; i++) before += lp[i];
    pc_em *em = NULL;
    assert_int_equal(pc_em_create(m, &em), PC_OK);
    int64_t rows[2000];
    pc_rng rng = {g_seed};
    for (int i = 0; i < 2000; i++) rows[i] = i;
    for (int epoch = 0; epoch < 3; epoch++) {
        for (int i = 1999; i > 0; i--) {
            int64_t j = pc_rng_below(&rng, i + 1), t = rows[i];
            rows[i] = rows[j];
            rows[j] = t;
        }
        for (int b = 0; b < 2000; b += 250)
            assert_int_equal(pc_em_step(em, d, rows + b, 250, 0.5, 1.0, NULL), PC_OK);
    }
    assert_int_equal(pc_em_export(em, m), PC_OK);
    assert_int_equal(pc_hclt_validate(m, NULL), PC_OK);
    for (int i = 0; i < 2000; i++) lp[i] = NAN;
    assert_int_equal(pc_learn_loglik(m, d, lp), PC_OK);
    for (int i = 0; i < 2000; i++) after += lp[i];
    assert_true(after > before + 100.0);
    free(lp);
    pc_em_free(em);
    pc_hclt_free(m);
    pc_data_free(d);
}

static void test_em_bad_arguments(void **state) {
    (void)state;
    int32_t tree[5];
    pc_data *d = tree_data(5, 50, g_seed, tree);
    pc_hclt *m = NULL, *copy = NULL;
    assert_int_equal(pc_learn_hclt_create(5, tree, 4, 2, &m), PC_OK);
    assert_int_equal(pc_learn_init_params(m, d, 3), PC_OK);
    assert_int_equal(pc_learn_hclt_create(5, tree, 4, 2, &copy), PC_OK);
    pc_em *em = NULL;
    assert_int_equal(pc_em_create(m, &em), PC_OK);
    assert_int_equal(pc_em_step(em, d, NULL, 50, 0.0, 0.1, NULL), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "step"));
    assert_int_equal(pc_em_step(em, d, NULL, 50, 1.5, 0.1, NULL), PC_ERR_ARG);
    assert_int_equal(pc_em_step(em, d, NULL, 50, NAN, 0.1, NULL), PC_ERR_ARG);
    assert_int_equal(pc_em_step(em, d, NULL, 50, 1.0, -1.0, NULL), PC_ERR_ARG);
    assert_int_equal(pc_em_step(em, d, NULL, 50, 1.0, INFINITY, NULL), PC_ERR_ARG);
    assert_int_equal(pc_em_step(em, d, NULL, 51, 1.0, 0.1, NULL), PC_ERR_ARG);
    const int64_t bad_rows[2] = {3, 50};
    assert_int_equal(pc_em_step(em, d, bad_rows, 2, 1.0, 0.1, NULL), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "rows[1]"));
    d->values[7 * 5 + 2] = 4; /* C = 4: value 4 is out of range */
    assert_int_equal(pc_em_step(em, d, NULL, 50, 1.0, 0.1, NULL), PC_ERR_DATA);
    assert_non_null(strstr(pc_last_error(), "row 7, variable 2"));
    double lp[50];
    assert_int_equal(pc_learn_loglik(m, d, lp), PC_ERR_DATA);
    d->values[7 * 5 + 2] = 0;
    /* nothing changed: the exported parameters equal the initial ones */
    assert_int_equal(pc_em_export(em, copy), PC_OK);
    for (int64_t i = 0; i < 5 * 2 * 4; i++)
        assert_true(fabs(copy->input_logp[i] - m->input_logp[i]) < 1e-14);
    pc_data *narrow = NULL;
    assert_int_equal(pc_data_create(10, 4, &narrow), PC_OK);
    assert_int_equal(pc_em_step(em, narrow, NULL, 10, 1.0, 0.1, NULL), PC_ERR_DATA);
    assert_non_null(strstr(pc_last_error(), "variables"));
    pc_hclt *other = NULL;
    assert_int_equal(pc_learn_hclt_create(5, tree, 4, 3, &other), PC_OK);
    assert_int_equal(pc_em_export(em, other), PC_ERR_ARG);
    /* A value marked missing is never read: out of range there is accepted and changes nothing,
     * in the log-likelihood and in an EM step. */
    d->missing = calloc(50 * 5, 1);
    assert_non_null(d->missing);
    d->missing[7 * 5 + 2] = 1;
    double lp0[50], lp1[50];
    pc_hclt *after0 = NULL, *after1 = NULL;
    assert_int_equal(pc_learn_hclt_create(5, tree, 4, 2, &after0), PC_OK);
    assert_int_equal(pc_learn_hclt_create(5, tree, 4, 2, &after1), PC_OK);
    for (int pass = 0; pass < 2; pass++) {
        pc_em *e2 = NULL;
        d->values[7 * 5 + 2] = pass == 0 ? 0 : 200;
        assert_int_equal(pc_learn_loglik(m, d, pass == 0 ? lp0 : lp1), PC_OK);
        assert_int_equal(pc_em_create(m, &e2), PC_OK);
        assert_int_equal(pc_em_step(e2, d, NULL, 50, 1.0, 0.1, NULL), PC_OK);
        assert_int_equal(pc_em_export(e2, pass == 0 ? after0 : after1), PC_OK);
        pc_em_free(e2);
    }
    for (int i = 0; i < 50; i++) assert_true(lp0[i] == lp1[i]);
    for (int64_t i = 0; i < 5 * 2 * 4; i++)
        assert_true(after0->input_logp[i] == after1->input_logp[i]);
    d->values[7 * 5 + 2] = 0;
    free(d->missing);
    d->missing = NULL;
    pc_hclt_free(after0);
    pc_hclt_free(after1);
    m->input_logp[3] = NAN; /* an invalid model is refused */
    pc_em *bad = NULL;
    assert_int_not_equal(pc_em_create(m, &bad), PC_OK);
    assert_null(bad);
    pc_hclt_free(other);
    pc_data_free(narrow);
    pc_em_free(em);
    pc_hclt_free(m);
    pc_hclt_free(copy);
    pc_data_free(d);
}

int main(void) {
    g_seed = pc_test_seed(); /* printed; PC_TEST_SEED replays a failing run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loglik_worked_example),
        cmocka_unit_test(test_loglik_matches_definition),
        cmocka_unit_test(test_em_step_matches_enumeration),
        cmocka_unit_test(test_em_kernels_agree),
        cmocka_unit_test(test_full_batch_em_monotone),
        cmocka_unit_test(test_em_deterministic),
        cmocka_unit_test(test_mini_batch_em),
        cmocka_unit_test(test_em_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
