/* The plan of GPU EM on the CPU: its buffers, parameter layouts and the steps of a pass
 * (src/learn/cuda/em_plan.h), run by a CPU executor that does what each CUDA kernel does
 * (em_kernels.cuh, em_fused.cuh, em_chain.cuh) and what cuBLAS's column-major GEMM does, on
 * every path (per-step ops, with the chains or without, and the fused ones), checked against
 * the CPU EM.
 * With values rounded to float where the GPU's FP32 mode stores them, it also measures the
 * FP32 mode's distance from FP64 on the shipped model. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "learn/cuda/em_plan.h"
#include "learn_models.h"
#include "pc/learn.h"
#include "testutil.h"

/* The CPU executor: the buffers of em_plan.h as doubles, rounded to float after every store
 * when f32 is set (the GEMMs then also add in float, as SGEMM does). */
typedef struct cpu_exec {
    const pc_em_plan *p;
    int f32, fused, chained; /* chained: the GEMM path with the chain steps */
    int64_t chain_calls;
    double *buf[PC_EM_BUFS];
    double *root, *input; /* [K], [V][C + 1][K] */
    double *trans;        /* FP64 W, [G - 1][K][K] */
    int32_t *off;         /* [G][chunk] */
    uint16_t *xc;         /* [chunk][V] */
    double *logp;         /* [chunk] */
} cpu_exec;

static double store(const cpu_exec *x, double v) { return x->f32 ? (double)(float)v : v; }

static pc_status exec_product(void *ctx, int64_t n, int32_t g0, int32_t g1) {
    cpu_exec *x = ctx;
    const pc_em_plan *p = x->p;
    const pc_circuit *c = p->circuit;
    const int64_t K = p->K, ch = p->chunk;
    double *E = x->buf[PC_EM_BUF_E], *S = x->buf[PC_EM_BUF_S], *v = malloc(K * sizeof *v);
    assert_non_null(v);
    for (int32_t g = g0; g < g1; g++)
        for (int64_t b = 0; b < n; b++) {
            double m = 0;
            for (int64_t k = 0; k < K; k++) {
                v[k] = 1;
                for (int32_t j = c->var_start[g]; j < c->var_start[g + 1]; j++) {
                    const int32_t var = c->group_vars[j];
                    v[k] *= x->input[((int64_t)var * (p->C + 1) + x->xc[b * p->V + var]) * K + k];
                }
                for (int32_t j = c->child_start[g]; j < c->child_start[g + 1]; j++)
                    v[k] *= S[((int64_t)c->group_children[j] * ch + b) * K + k];
                m = v[k] > m ? v[k] : m;
            }
            int ex = 0;
            double inv1 = 0, inv2 = 0;
            if (m > 0 && isfinite(m)) {
                frexp(m, &ex);
                inv1 = ldexp(1.0, -ex / 2), inv2 = ldexp(1.0, -ex - (-ex / 2));
            }
            int32_t off = ex;
            for (int32_t j = c->child_start[g]; j < c->child_start[g + 1]; j++)
                off += x->off[(int64_t)c->group_children[j] * ch + b];
            x->off[(int64_t)g * ch + b] = off;
            double z = 0;
            for (int64_t k = 0; k < K; k++) {
                E[((int64_t)g * ch + b) * K + k] = store(x, v[k] * inv1 * inv2);
                z += x->root[k] * E[((int64_t)g * ch + b) * K + k];
            }
            if (g == p->G - 1) x->logp[b] = z > 0 ? off * log(2.0) + log(z) : -INFINITY;
        }
    free(v);
    return PC_OK;
}

static pc_status exec_gemm(void *ctx, const pc_em_gemm *op) {
    cpu_exec *x = ctx;
    for (int32_t i = 0; i < op->batch; i++) {
        const double *A = x->buf[op->buf_a] + op->a + i * op->stride_a;
        const double *B = x->buf[op->buf_b] + op->b + i * op->stride_b;
        double *C = x->buf[op->buf_c] + op->c + i * op->stride_c;
        for (int32_t r = 0; r < op->m; r++)
            for (int32_t col = 0; col < op->n; col++) {
                double s = 0;
                for (int32_t l = 0; l < op->k; l++) {
                    const double a = op->trans_a ? A[l + (int64_t)r * op->lda]
                                                 : A[r + (int64_t)l * op->lda];
                    const double b = op->trans_b ? B[col + (int64_t)l * op->ldb]
                                                 : B[l + (int64_t)col * op->ldb];
                    s = store(x, s + a * b);
                }
                double *out = C + r + (int64_t)col * op->ldc;
                *out = op->beta == 0 ? s : store(x, op->beta * *out + s); /* beta 0: C unread */
            }
    }
    return PC_OK;
}

static pc_status exec_posterior(void *ctx, int64_t n, int32_t g0, int32_t g1) {
    cpu_exec *x = ctx;
    const pc_em_plan *p = x->p;
    const pc_circuit *c = p->circuit;
    const int64_t K = p->K, ch = p->chunk;
    double *E = x->buf[PC_EM_BUF_E], *S = x->buf[PC_EM_BUF_S], *U = x->buf[PC_EM_BUF_U];
    double *Q = x->buf[pc_em_plan_posteriors(x->fused)];
    for (int32_t g = g0; g < g1; g++)
        for (int64_t b = 0; b < n; b++) {
            const int64_t at = ((int64_t)g * ch + b) * K;
            double z = 0;
            if (g == p->G - 1)
                for (int64_t k = 0; k < K; k++) z += x->root[k] * E[at + k];
            for (int64_t k = 0; k < K; k++) {
                double q = g == p->G - 1 ? (z > 0 ? x->root[k] * E[at + k] / z : 0)
                                         : E[at + k] * U[at + k];
                Q[at + k] = store(x, q);
                for (int32_t j = c->child_start[g]; j < c->child_start[g + 1]; j++) {
                    double *s = S + ((int64_t)c->group_children[j] * ch + b) * K + k;
                    *s = store(x, *s > 0 ? q / *s : 0);
                }
            }
        }
    return PC_OK;
}

/* One group's step up and down as the GPU's fused kernels and chain kernels compute them: the
 * same products, GEMMs and posteriors; down, the flows too on the fused path (a chain on the
 * GEMM path leaves them to the pass's one flow GEMM). */
static void exec_group_up(cpu_exec *x, int64_t n, int32_t g) {
    exec_product(x, n, g, g + 1);
    if (g < x->p->G - 1) {
        const pc_em_gemm op = pc_em_plan_gemm(x->p, n, g, g + 1, 0);
        exec_gemm(x, &op);
    }
}

static void exec_group_down(cpu_exec *x, int64_t n, int32_t g) {
    if (g < x->p->G - 1) {
        const pc_em_gemm flows = pc_em_plan_gemm(x->p, n, g, g + 1, 1);
        const pc_em_gemm down = pc_em_plan_gemm(x->p, n, g, g + 1, 2);
        if (x->fused) exec_gemm(x, &flows);
        exec_gemm(x, &down);
    }
    exec_posterior(x, n, g, g + 1);
}

/* The fused path's two steps in the order of the wavefront's tickets (groups up in increasing
 * order, down in decreasing), so a group that ran before a child (up) or its parent (down)
 * were done would read the poisoned buffers. */
static pc_status exec_forward(void *ctx, int64_t n) {
    cpu_exec *x = ctx;
    for (int32_t g = 0; g < x->p->G; g++) exec_group_up(x, n, g);
    return PC_OK;
}

static pc_status exec_downward(void *ctx, int64_t n) {
    cpu_exec *x = ctx;
    for (int32_t g = x->p->G - 1; g >= 0; g--) exec_group_down(x, n, g);
    return PC_OK;
}

/* A chain on the GEMM path as the chain kernels walk it: each strand's groups one at a time,
 * the strands one after the other, so a strand that read a group of another strand before it
 * was done would read the poisoned buffers or the last pass's values. */
static pc_status exec_forward_chain(void *ctx, int64_t n, int32_t chain) {
    cpu_exec *x = ctx;
    const pc_em_plan *p = x->p;
    x->chain_calls++;
    for (int32_t s = p->chains[chain].s0; s < p->chains[chain].s1; s++)
        for (int32_t i = p->strand_start[s]; i < p->strand_start[s + 1]; i++)
            exec_group_up(x, n, p->strand_groups[i]);
    return PC_OK;
}

static pc_status exec_downward_chain(void *ctx, int64_t n, int32_t chain) {
    cpu_exec *x = ctx;
    const pc_em_plan *p = x->p;
    x->chain_calls++;
    for (int32_t s = p->chains[chain].s1 - 1; s >= p->chains[chain].s0; s--)
        for (int32_t i = p->strand_start[s + 1] - 1; i >= p->strand_start[s]; i--)
            exec_group_down(x, n, p->strand_groups[i]);
    return PC_OK;
}

static void exec_init(cpu_exec *x, const pc_em_plan *p, const pc_hclt *m, int f32) {
    memset(x, 0, sizeof *x);
    x->p = p, x->f32 = f32;
    const int64_t K = p->K;
    for (int b = 0; b < PC_EM_BUFS; b++) {
        const int64_t elems = pc_em_plan_elems(p, (pc_em_buf)b);
        x->buf[b] = pc_test_alloc((size_t)(elems > 0 ? elems : 1) * sizeof(double));
        pc_test_poison_f64(x->buf[b], (size_t)elems);
    }
    x->root = pc_test_alloc((size_t)K * sizeof(double));
    x->trans = pc_test_alloc((size_t)((p->G - 1) * K * K + 1) * sizeof(double));
    x->input = pc_test_alloc((size_t)p->V * (p->C + 1) * K * sizeof(double));
    pc_em_plan_pack(p, m, x->root, x->trans, x->input);
    const int64_t elems = pc_em_plan_elems(p, PC_EM_BUF_W);
    for (int64_t i = 0; i < elems; i++) x->buf[PC_EM_BUF_W][i] = store(x, x->trans[i]);
    for (int64_t i = 0; i < (int64_t)p->V * (p->C + 1) * K; i++)
        x->input[i] = store(x, x->input[i]);
    x->off = pc_test_alloc((size_t)p->G * p->chunk * sizeof(int32_t));
    x->xc = pc_test_alloc((size_t)p->chunk * p->V * sizeof(uint16_t));
    x->logp = pc_test_alloc((size_t)p->chunk * sizeof(double));
}

static void exec_free(cpu_exec *x) {
    for (int b = 0; b < PC_EM_BUFS; b++) free(x->buf[b]);
    free(x->root), free(x->trans), free(x->input), free(x->off), free(x->xc), free(x->logp);
}

/* Counts of a pass as the GPU forms them (em_kernels.cuh), as doubles: root [K], trans
 * [G - 1][K][K] = W F, input [V][C][K]; log p(x) summed into *ll. */
static void exec_pass(cpu_exec *x, const pc_data *d, const int64_t *rows, int64_t n,
                      double *root, double *trans, double *input, double *ll) {
    const pc_em_plan *p = x->p;
    const int64_t K = p->K, ch = p->chunk;
    for (int64_t i = 0; i < n; i++)
        for (int32_t v = 0; v < p->V; v++) {
            const int64_t r = rows ? rows[i] : i;
            const int64_t at = r * p->V + v;
            x->xc[i * p->V + v] = d->missing && d->missing[at] ? (uint16_t)p->C : d->values[at];
        }
    pc_em_ops ops = {x, exec_product, exec_gemm, exec_posterior, NULL, NULL, NULL, NULL};
    if (x->fused) ops.forward = exec_forward, ops.downward = exec_downward;
    if (x->chained)
        ops.forward_chain = exec_forward_chain, ops.downward_chain = exec_downward_chain;
    const int phases = PC_EM_PASS_FORWARD | PC_EM_PASS_DOWNWARD;
    assert_int_equal(pc_em_plan_pass(p, n, phases, &ops), PC_OK);
    const double *Q = x->buf[pc_em_plan_posteriors(x->fused)], *F = x->buf[PC_EM_BUF_F];
    for (int64_t b = 0; b < n; b++) {
        *ll += x->logp[b];
        for (int64_t k = 0; k < K; k++) root[k] += Q[((int64_t)(p->G - 1) * ch + b) * K + k];
        for (int32_t v = 0; v < p->V; v++) {
            const int64_t c = x->xc[b * p->V + v];
            if (c == p->C) continue;
            for (int64_t k = 0; k < K; k++)
                input[(v * p->C + c) * K + k] +=
                    Q[((int64_t)p->var_group[v] * ch + b) * K + k];
        }
    }
    for (int64_t i = 0; i < (int64_t)(p->G - 1) * K * K; i++) trans[i] += x->trans[i] * F[i];
}

/* The larger of two differences, NaN when either is (a NaN count must fail the test, not
 * vanish in a comparison). */
static double worse(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }

/* The largest relative difference, over rows rows of `size` entries (counts `stride` apart,
 * rows `row_step` apart; log-parameters `l_stride` apart, rows `l_row_step` apart), between
 * the M-step from the counts n of the old parameters `old` (as pc_em_step forms it: est = (N +
 * alpha / size) / (sum N + alpha), p <- (1 - step) p + step est) and the parameters `got`. */
static double step_diff(const double *n, int64_t rows, int64_t row_step, int64_t size,
                        int64_t stride, const double *old, const double *got, int64_t l_row_step,
                        int64_t l_stride, double step, double alpha) {
    double worst = 0;
    for (int64_t r = 0; r < rows; r++) {
        double total = 0;
        for (int64_t i = 0; i < size; i++) total += n[r * row_step + i * stride];
        for (int64_t i = 0; i < size; i++) {
            const int64_t at = r * l_row_step + i * l_stride;
            const double est = (n[r * row_step + i * stride] + alpha / size) / (total + alpha);
            const double want = (1 - step) * exp(old[at]) + step * est;
            worst = worse(worst, fabs(exp(got[at]) - want) / want);
        }
    }
    return worst;
}

/* The executor's paths: per-step ops, fused, per-step ops with the chains. */
enum exec_mode { EXEC_STEPS, EXEC_FUSED, EXEC_STEP_CHAINS };

/* One EM step (step 0.9, pseudocount 0.1) from the plan executor's counts against pc_em_step's;
 * returns the largest relative difference of any parameter (in probability), and of the
 * log-likelihood into *ll_diff; *chains gets the chain steps the passes ran. */
static double step_vs_cpu(const pc_hclt *m, const pc_data *d, const int64_t *rows, int64_t n,
                          int64_t chunk, int f32, enum exec_mode mode, double *ll_diff,
                          int64_t *chains) {
    const double step = 0.9, alpha = 0.1;
    pc_em_plan *p = NULL;
    assert_int_equal(pc_em_plan_create(m, chunk, &p), PC_OK);
    cpu_exec x;
    exec_init(&x, p, m, f32);
    x.fused = mode == EXEC_FUSED;
    x.chained = mode == EXEC_STEP_CHAINS;
    const int64_t K = p->K, T = p->G - 1, C = p->C;
    double *root = calloc((size_t)K, sizeof(double));
    double *trans = calloc((size_t)(T * K * K + 1), sizeof(double));
    double *input = calloc((size_t)p->V * C * K, sizeof(double));
    assert_true(root && trans && input);
    double ll = 0;
    for (int64_t at = 0; at < n; at += chunk)
        exec_pass(&x, d, rows + at, n - at < chunk ? n - at : chunk, root, trans, input, &ll);

    pc_hclt *got = pc_lm_same_shape(m);
    pc_em *em = NULL;
    double ll_cpu = NAN;
    assert_int_equal(pc_em_create(m, &em), PC_OK);
    assert_int_equal(pc_em_step(em, d, rows, n, step, alpha, &ll_cpu), PC_OK);
    assert_int_equal(pc_em_export(em, got), PC_OK);
    pc_em_free(em);
    *ll_diff = ll == ll_cpu ? 0 : fabs(ll - ll_cpu) / fabs(ll_cpu);

    double worst = step_diff(root, 1, 0, K, 1, m->root_logw, got->root_logw, 0, 1, step, alpha);
    for (int32_t g = 0; g < T; g++) {
        const int64_t t = p->circuit->group_trans[g];
        const double dt = step_diff(trans + g * K * K, K, K, K, 1, m->trans_logw + t * K * K,
                                    got->trans_logw + t * K * K, K, 1, step, alpha);
        worst = worse(worst, dt);
    }
    /* input rows (v, k): counts at input[(v C + c) K + k], parameters at [(v K + k) C + c] */
    for (int32_t v = 0; v < p->V; v++) {
        const double dv = step_diff(input + (int64_t)v * C * K, K, 1, C, K,
                                    m->input_logp + (int64_t)v * K * C,
                                    got->input_logp + (int64_t)v * K * C, C, 1, step, alpha);
        worst = worse(worst, dv);
    }
    free(root), free(trans), free(input);
    *chains = x.chain_calls;
    pc_hclt_free(got);
    exec_free(&x);
    pc_em_plan_free(p);
    return worst;
}

/* The plan's chains: the maximal runs of at least two non-root layers of at most
 * PC_EM_CHAIN_WIDTH groups, in layer order; their strands split each run's groups, each strand
 * in increasing order, and every child a group has in its run is in its strand. */
static void check_chains(const pc_em_plan *p) {
    const pc_circuit *c = p->circuit;
    const int32_t *ls = c->layer_start;
    int32_t *strand_of = pc_test_alloc((size_t)p->G * sizeof(int32_t));
    for (int32_t g = 0; g < p->G; g++) strand_of[g] = -1;
    int32_t in_chain[64] = {0}; /* per layer (the trees here are shallower) */
    assert_true(p->L <= 64);
    int32_t last = 0, strands = 0;
    for (int32_t i = 0; i < p->num_chains; i++) {
        const pc_em_chain *ch = &p->chains[i];
        assert_true(ch->l0 >= last && ch->l1 - ch->l0 >= 2 && ch->l1 <= p->L - 1);
        assert_int_equal(ch->s0, strands);
        for (int32_t l = ch->l0; l < ch->l1; l++) in_chain[l] = 1;
        int32_t groups = 0;
        for (int32_t s = ch->s0; s < ch->s1; s++)
            for (int32_t j = p->strand_start[s]; j < p->strand_start[s + 1]; j++) {
                const int32_t g = p->strand_groups[j];
                assert_true(g >= ls[ch->l0] && g < ls[ch->l1] && strand_of[g] == -1);
                if (j > p->strand_start[s]) assert_true(g > p->strand_groups[j - 1]);
                strand_of[g] = s, groups++;
            }
        assert_int_equal(groups, ls[ch->l1] - ls[ch->l0]);
        for (int32_t g = ls[ch->l0]; g < ls[ch->l1]; g++)
            for (int32_t j = c->child_start[g]; j < c->child_start[g + 1]; j++)
                if (c->group_children[j] >= ls[ch->l0])
                    assert_int_equal(strand_of[c->group_children[j]], strand_of[g]);
        last = ch->l1, strands = ch->s1;
    }
    for (int32_t l = 0; l + 1 < p->L; l++) {
        const int narrow = ls[l + 1] - ls[l] <= PC_EM_CHAIN_WIDTH;
        const int next = l + 2 < p->L && ls[l + 2] - ls[l + 1] <= PC_EM_CHAIN_WIDTH;
        const int prev = l > 0 && ls[l] - ls[l - 1] <= PC_EM_CHAIN_WIDTH;
        assert_int_equal(in_chain[l], narrow && (next || prev));
    }
    free(strand_of);
}

/* The fused path's paths (em_plan.h): every group in one path, bottom to top; above the bottom
 * a group's one child is the group below; at most PC_EM_PATH_MAX groups; the root alone; a group
 * with one child starts a path only when the child's is full or it is the root; paths in
 * increasing order of their tops, a bottom's children tops of earlier paths. */
static void check_paths(const pc_em_plan *p) {
    const pc_circuit *c = p->circuit;
    int32_t *seen = pc_test_alloc((size_t)p->G * sizeof(int32_t));
    for (int32_t g = 0; g < p->G; g++) seen[g] = 0;
    assert_true(p->num_paths >= 1 && p->num_paths <= p->G);
    assert_int_equal(p->path_start[0], 0);
    assert_int_equal(p->path_start[p->num_paths], p->G);
    int32_t last_top = -1;
    for (int32_t i = 0; i < p->num_paths; i++) {
        const int32_t b = p->path_start[i], e = p->path_start[i + 1];
        assert_true(e > b && e - b <= PC_EM_PATH_MAX);
        const int32_t top = p->path_groups[e - 1], bottom = p->path_groups[b];
        assert_true(top > last_top);
        last_top = top;
        for (int32_t m = b; m < e; m++) {
            const int32_t g = p->path_groups[m];
            assert_true(g >= 0 && g < p->G && !seen[g]);
            seen[g] = 1;
            assert_int_equal(p->path_of[g], i);
            if (m > b) {
                assert_int_equal(c->child_start[g + 1] - c->child_start[g], 1);
                assert_int_equal(c->group_children[c->child_start[g]], p->path_groups[m - 1]);
                assert_true(g != p->G - 1);
            }
        }
        for (int32_t j = c->child_start[bottom]; j < c->child_start[bottom + 1]; j++) {
            const int32_t kid = c->group_children[j], kp = p->path_of[kid];
            assert_true(kp < i);
            assert_int_equal(p->path_groups[p->path_start[kp + 1] - 1], kid);
        }
        const int32_t kids = c->child_start[bottom + 1] - c->child_start[bottom];
        if (kids == 1 && bottom != p->G - 1) {
            const int32_t kp = p->path_of[c->group_children[c->child_start[bottom]]];
            assert_int_equal(p->path_start[kp + 1] - p->path_start[kp], PC_EM_PATH_MAX);
        }
    }
    assert_int_equal(p->path_of[p->G - 1], p->num_paths - 1);
    assert_int_equal(p->path_start[p->num_paths] - p->path_start[p->num_paths - 1], 1);
    free(seen);
}

/* The plan's derived arrays and layouts on random models. */
static void test_plan_layout(void **state) {
    (void)state;
    for (int trial = 0; trial < 9; trial++) {
        /* the last: wide layers, so that iter reaches its top within the n tried */
        const int32_t V = trial < 8 ? (int32_t)pc_hr_int(1, 20) : 300;
        const int32_t C = (int32_t)pc_hr_int(2, 6);
        const int32_t K = trial < 8 ? (int32_t)pc_hr_int(1, 9) : PC_EM_FUSED_MAX_K;
        pc_hclt *m = pc_hr_model(V, C, K, 0.3, trial & 1);
        pc_em_plan *p = NULL;
        assert_int_equal(pc_em_plan_create(m, 0, &p), PC_ERR_ARG);
        assert_int_equal(pc_em_plan_create(m, 37, &p), PC_OK);
        const pc_circuit *c = p->circuit;
        assert_int_equal(p->G, 1 + m->num_trans);
        for (int32_t g = 0; g < p->G; g++)
            for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++)
                assert_int_equal(p->var_group[c->group_vars[i]], g);
        /* every group's parent names it as a child; the root has none */
        assert_int_equal(p->parent[p->G - 1], -1);
        for (int32_t g = 0; g + 1 < p->G; g++) {
            const int32_t up = p->parent[g];
            assert_true(up > g && up < p->G);
            int named = 0;
            for (int32_t j = c->child_start[up]; j < c->child_start[up + 1]; j++)
                named += c->group_children[j] == g;
            assert_int_equal(named, 1);
        }
        /* the root alone in the last layer */
        assert_int_equal(c->layer_start[p->L] - c->layer_start[p->L - 1], 1);
        check_chains(p);
        check_paths(p);
        assert_int_equal(pc_em_plan_elems(p, PC_EM_BUF_E), (int64_t)p->G * 37 * K);
        assert_int_equal(pc_em_plan_elems(p, PC_EM_BUF_U), (int64_t)p->G * 37 * K);
        assert_int_equal(pc_em_plan_elems(p, PC_EM_BUF_F), (int64_t)(p->G - 1) * K * K);
        assert_true(pc_em_plan_bytes(p, 74, 4) > pc_em_plan_bytes(p, 37, 4));
        /* the fused path (K <= PC_EM_FUSED_MAX_K here): the row kernels' tw = K rounded up to a
         * power of two; tiles of 16 * iter rows, iter rising with n; P holds the most tiles of
         * any n */
        int32_t tw = 1;
        while (tw < K) tw *= 2;
        assert_true(pc_em_plan_fused(p));
        assert_int_equal(pc_em_plan_lanes(p), tw);
        int64_t most = 0;
        int32_t last_iter = 1;
        for (int64_t n = 1; n <= 40000; n++) {
            const int32_t it = pc_em_plan_fused_iter(p, n);
            assert_true(it >= last_iter && it <= PC_EM_FUSED_MAX_ITER);
            last_iter = it;
            const int64_t tile = (int64_t)PC_EM_FUSED_ROWS * it, tiles = pc_em_plan_tiles(p, n);
            assert_int_equal(tiles, (n + tile - 1) / tile);
            most = tiles > most ? tiles : most;
            if (n == 1000 || n == 20000) {
                assert_int_equal(pc_em_plan_partial_elems(p, n),
                                 (int64_t)(p->G - 1) * most * K * K);
                assert_int_equal(pc_em_plan_wave_elems(p, n), 2 + (int64_t)p->num_paths * most);
            }
        }
        assert_int_equal(pc_em_plan_fused_iter(p, 1), 1);
        if (trial == 8) assert_int_equal(last_iter, PC_EM_FUSED_MAX_ITER);
        /* pack then unpack: the same parameters, in a fresh model */
        const int64_t T = p->G - 1;
        double *root = pc_test_alloc((size_t)K * 8);
        double *tr = pc_test_alloc((size_t)(T * K * K + 1) * 8);
        double *in = pc_test_alloc((size_t)V * (C + 1) * K * 8);
        pc_em_plan_pack(p, m, root, tr, in);
        for (int64_t i = 0; i < (int64_t)K; i++)
            assert_true(in[((int64_t)(V - 1) * (C + 1) + C) * K + i] == 1.0); /* missing row */
        pc_hclt *back = pc_lm_same_shape(m);
        pc_em_plan_unpack(p, root, tr, in, back);
        for (int64_t i = 0; i < (int64_t)m->num_trans * K * K; i++)
            assert_true(fabs(back->trans_logw[i] - m->trans_logw[i]) < 1e-12 ||
                        (isinf(back->trans_logw[i]) && isinf(m->trans_logw[i])));
        for (int64_t i = 0; i < (int64_t)V * K * C; i++)
            assert_true(fabs(back->input_logp[i] - m->input_logp[i]) < 1e-12 ||
                        (isinf(back->input_logp[i]) && isinf(m->input_logp[i])));
        assert_int_equal(pc_em_plan_pass(p, 38, PC_EM_PASS_FORWARD, NULL), PC_ERR_ARG);
        free(root), free(tr), free(in);
        pc_hclt_free(back);
        pc_em_plan_free(p);
        pc_hclt_free(m);
    }
    /* one state more: the GEMM path, no partial flows */
    pc_hclt *m = pc_hr_model(12, 3, PC_EM_FUSED_MAX_K + 1, 0.3, 0);
    pc_em_plan *p = NULL;
    assert_int_equal(pc_em_plan_create(m, 37, &p), PC_OK);
    assert_false(pc_em_plan_fused(p));
    assert_int_equal(pc_em_plan_partial_elems(p, 37), 0);
    assert_int_equal(pc_em_plan_wave_elems(p, 37), 0);
    pc_em_plan_free(p);
    pc_hclt_free(m);
}

/* Random models (zero probabilities, shared latents, K from 1 to 33; the last four two-branch
 * trees at K = 40 and 64, one chain below the root), random data with missing values, passes
 * of a chunk smaller than the step, on every path of the executor, each K on each: the
 * executor's step is pc_em_step's to 1e-9. Some random models have chains too, which only the
 * GEMM path takes. */
static void test_pass_matches_cpu_em(void **state) {
    (void)state;
    const int32_t ks[6] = {1, 2, 5, 16, 17, 33};
    int64_t step_chains_run = 0;
    for (int trial = 0; trial < 28; trial++) {
        const int32_t V = (int32_t)pc_hr_int(trial < 24 ? 1 : 5, 24), C = (int32_t)pc_hr_int(2, 7);
        const int32_t K = trial < 24 ? ks[trial % 6] : trial % 2 ? 64 : 40;
        pc_hclt *m = trial < 24 ? pc_hr_model(V, C, K, 0.3, trial % 3 == 0)
                                : pc_hr_two_branches(V, C, K, trial % 3 == 0);
        uint8_t *missing = NULL;
        const int64_t count = 150;
        uint8_t *values = pc_hr_data(count, V, C, trial % 2 ? 0.2 : 0.0, &missing);
        pc_data d = {.count = count, .width = V, .values = values, .missing = missing};
        int64_t rows[97];
        for (int i = 0; i < 97; i++) rows[i] = pc_hr_int(0, count - 1);
        double ll_diff = 1;
        int64_t chains = 0;
        const enum exec_mode mode = trial < 24 ? (enum exec_mode)((trial + trial / 6) % 3)
                                               : trial < 26 ? EXEC_STEP_CHAINS : EXEC_STEPS;
        const double worst = step_vs_cpu(m, &d, rows, 97, 40, 0, mode, &ll_diff, &chains);
        if (mode == EXEC_STEP_CHAINS) step_chains_run += chains;
        else assert_int_equal(chains, 0);
        if (trial >= 24 && mode == EXEC_STEP_CHAINS) assert_true(chains > 0);
        if (worst > 1e-9 || ll_diff > 1e-12)
            printf("V %d C %d K %d: parameters %.3g, LL %.3g\n", V, C, K, worst, ll_diff);
        assert_true(worst < 1e-9);
        assert_true(ll_diff < 1e-12);
        free(values), free(missing);
        pc_hclt_free(m);
    }
    assert_true(step_chains_run > 0);
}

/* The shipped model, one step on 512 MNIST training images: FP64 as the CPU to 1e-9 (the CPU's
 * counts are rounded per sample, the executor's per pass), and the GPU's f32 mode emulated
 * (every stored value and every GEMM partial sum rounded to float): about 1.5e-5, most of it
 * from the FP32 sums over the batch in the flow GEMM (1.6e-6 when those add in double).
 * Skipped without the model or MNIST. */
static void test_shipped_model_f32(void **state) {
    (void)state;
    pc_hclt *m = NULL;
    pc_data *all = NULL;
    if (!pc_lm_shipped(&m, &all)) skip();
    int64_t rows[512];
    for (int i = 0; i < 512; i++) rows[i] = pc_hr_int(0, all->count - 1);
    double ll64 = 1, ll_chains = 1, ll32 = 1;
    int64_t chains = 0, unused = 0;
    const double d64 = step_vs_cpu(m, all, rows, 512, 512, 0, EXEC_FUSED, &ll64, &unused);
    const double d_chains =
        step_vs_cpu(m, all, rows, 512, 512, 0, EXEC_STEP_CHAINS, &ll_chains, &chains);
    const double d32 = step_vs_cpu(m, all, rows, 512, 512, 1, EXEC_STEPS, &ll32, &unused);
    assert_int_equal(chains, 2); /* the tree's top: one chain, up and down */
    printf("one step on 512 images: FP64 %.3g (LL %.3g), with the chains %.3g (LL %.3g), FP32 "
           "storage %.3g (LL %.3g)\n",
           d64, ll64, d_chains, ll_chains, d32, ll32);
    assert_true(d64 < 1e-9 && d_chains < 1e-9);
    assert_true(d32 < 5e-5);
    pc_data_free(all);
    pc_hclt_free(m);
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_layout),
        cmocka_unit_test(test_pass_matches_cpu_em),
        cmocka_unit_test(test_shipped_model_f32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
