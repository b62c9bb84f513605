/* The plan of GPU EM: buffer sizes, the steps of a pass, parameter layouts (em_plan.h). */
#include "base/fail.h"
#include "learn/cuda/em_plan.h"

#include <math.h>
#include <stdlib.h>

void pc_em_plan_free(pc_em_plan *plan) {
    if (!plan) return;
    pc_circuit_free(plan->circuit);
    free(plan->var_group);
    free(plan->parent);
    free(plan->chains);
    free(plan->strand_start);
    free(plan->strand_groups);
    free(plan->path_start);
    free(plan->path_groups);
    free(plan->path_of);
    free(plan);
}

/* Root of g's piece in the union-find forest `up` (path halving). */
static int32_t piece_of(int32_t *up, int32_t g) {
    while (up[g] != g) g = up[g] = up[up[g]];
    return g;
}

/* The chains and their strands (em_plan.h). */
static pc_status find_chains(pc_em_plan *p) {
    const pc_circuit *c = p->circuit;
    const int32_t *ls = c->layer_start;
    p->chains = malloc((size_t)p->L * sizeof *p->chains);
    p->strand_start = malloc(((size_t)p->G + 1) * sizeof(int32_t));
    p->strand_groups = calloc((size_t)p->G, sizeof(int32_t));
    int32_t *up = malloc((size_t)p->G * sizeof(int32_t));
    uint8_t *seen = calloc((size_t)p->G, 1); /* pieces (by their root) given a strand */
    if (!p->chains || !p->strand_start || !p->strand_groups || !up || !seen) {
        free(up), free(seen);
        return pc_fail(PC_ERR_NOMEM, "GPU EM plan: chains of %d groups", p->G);
    }
    int32_t strands = 0, placed = 0;
    p->strand_start[0] = 0;
    for (int32_t l0 = 0, l1; l0 + 1 < p->L; l0 = l1) {
        l1 = l0 + 1;
        if (ls[l0 + 1] - ls[l0] > PC_EM_CHAIN_WIDTH) continue;
        while (l1 + 1 < p->L && ls[l1 + 1] - ls[l1] <= PC_EM_CHAIN_WIDTH) l1++;
        if (l1 - l0 < 2) continue;
        const int32_t g0 = ls[l0], g1 = ls[l1];
        for (int32_t g = g0; g < g1; g++) up[g] = g;
        for (int32_t g = g0; g < g1; g++)
            for (int32_t j = c->child_start[g]; j < c->child_start[g + 1]; j++) {
                const int32_t kid = c->group_children[j];
                if (kid >= g0) up[piece_of(up, kid)] = piece_of(up, g);
            }
        pc_em_chain *ch = &p->chains[p->num_chains++];
        ch->l0 = l0, ch->l1 = l1, ch->s0 = strands;
        /* strands in the order of their first group, each group's in increasing order */
        for (int32_t first = g0; first < g1; first++) {
            const int32_t piece = piece_of(up, first);
            if (seen[piece]) continue;
            seen[piece] = 1;
            for (int32_t g = first; g < g1; g++)
                if (piece_of(up, g) == piece) p->strand_groups[placed++] = g;
            p->strand_start[++strands] = placed;
        }
        ch->s1 = strands;
    }
    free(up), free(seen);
    return PC_OK;
}

/* The fused path's paths (em_plan.h): groups in increasing order, each appended to its one
 * child's path where that path is not full (a group's child comes before it, and is the top of
 * its path then), else the bottom of a new one; then the paths sorted by their tops. */
static pc_status find_paths(pc_em_plan *p) {
    const pc_circuit *c = p->circuit;
    const int32_t G = p->G;
    /* paths in creation order: each group's, and each path's length and top */
    int32_t *made = malloc((size_t)G * sizeof(int32_t));
    int32_t *len = calloc((size_t)G, sizeof(int32_t));
    int32_t *top = malloc((size_t)G * sizeof(int32_t));
    int32_t *sorted = malloc((size_t)G * sizeof(int32_t)); /* creation index -> sorted index */
    p->path_start = calloc((size_t)G + 1, sizeof(int32_t));
    p->path_groups = malloc((size_t)G * sizeof(int32_t));
    p->path_of = malloc((size_t)G * sizeof(int32_t));
    if (!made || !len || !top || !sorted || !p->path_start || !p->path_groups || !p->path_of) {
        free(made), free(len), free(top), free(sorted);
        return pc_fail(PC_ERR_NOMEM, "GPU EM plan: paths of %d groups", G);
    }
    int32_t paths = 0;
    for (int32_t g = 0; g < G; g++) {
        const int32_t cb = c->child_start[g], ce = c->child_start[g + 1];
        const int32_t below = ce - cb == 1 && g != G - 1 ? made[c->group_children[cb]] : -1;
        made[g] = below >= 0 && len[below] < PC_EM_PATH_MAX ? below : paths++;
        len[made[g]]++;
        top[made[g]] = g;
    }
    /* sorted by top: walk the groups, numbering each path at its top */
    for (int32_t g = 0, r = 0; g < G; g++)
        if (top[made[g]] == g) sorted[made[g]] = r++;
    p->num_paths = paths;
    for (int32_t g = 0; g < G; g++) p->path_of[g] = sorted[made[g]];
    for (int32_t g = 0; g < G; g++) p->path_start[p->path_of[g] + 1]++;
    for (int32_t i = 0; i < paths; i++) p->path_start[i + 1] += p->path_start[i];
    for (int32_t i = 0; i < paths; i++) len[i] = p->path_start[i]; /* each path's next slot */
    for (int32_t g = 0; g < G; g++) p->path_groups[len[p->path_of[g]]++] = g; /* bottom first */
    free(made), free(len), free(top), free(sorted);
    return PC_OK;
}

pc_status pc_em_plan_create(const pc_hclt *model, int64_t chunk, pc_em_plan **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "GPU EM plan: NULL output");
    *out = NULL;
    if (chunk < 1) return pc_fail(PC_ERR_ARG, "GPU EM plan: chunk = %lld", (long long)chunk);
    pc_em_plan *p = calloc(1, sizeof *p);
    if (!p) return pc_fail(PC_ERR_NOMEM, "GPU EM plan: out of host memory");
    pc_status st = pc_circuit_compile(model, &p->circuit);
    if (st != PC_OK) {
        pc_em_plan_free(p);
        return st;
    }
    const pc_circuit *c = p->circuit;
    p->V = c->num_vars;
    p->C = c->num_cats;
    p->K = c->num_latents;
    p->G = c->num_groups;
    p->L = c->num_layers;
    p->chunk = chunk;
    p->var_group = malloc((size_t)p->V * sizeof(int32_t));
    p->parent = malloc((size_t)p->G * sizeof(int32_t));
    if (!p->var_group || !p->parent) {
        const int32_t v = p->V;
        pc_em_plan_free(p);
        return pc_fail(PC_ERR_NOMEM, "GPU EM plan: %d variables", v);
    }
    for (int32_t g = 0; g < p->G; g++) {
        p->parent[g] = -1;
        for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++)
            p->var_group[c->group_vars[i]] = g;
    }
    for (int32_t g = 0; g < p->G; g++)
        for (int32_t j = c->child_start[g]; j < c->child_start[g + 1]; j++)
            p->parent[c->group_children[j]] = g;
    if ((st = find_chains(p)) || (st = find_paths(p))) {
        pc_em_plan_free(p);
        return st;
    }
    *out = p;
    return PC_OK;
}

int64_t pc_em_plan_elems(const pc_em_plan *p, pc_em_buf buf) {
    const int64_t K = p->K, rows = p->chunk * K;
    switch (buf) {
    case PC_EM_BUF_W:
    case PC_EM_BUF_F: return (int64_t)(p->G - 1) * K * K;
    case PC_EM_BUF_E:
    case PC_EM_BUF_U: return (int64_t)p->G * rows;
    case PC_EM_BUF_S: return (int64_t)(p->G - 1) * rows;
    }
    return 0;
}

double pc_em_plan_bytes(const pc_em_plan *p, int64_t chunk, int elem) {
    pc_em_plan q = *p;
    q.chunk = chunk;
    double bytes = 0;
    const int fused = pc_em_plan_fused(p);
    for (int b = 0; b < PC_EM_BUFS; b++) /* fused: no U and F, and W is d_trans */
        if (!fused || (b != PC_EM_BUF_U && b != PC_EM_BUF_F && b != PC_EM_BUF_W))
            bytes += (double)pc_em_plan_elems(&q, (pc_em_buf)b) * elem;
    const double K = p->K, trans = (double)(p->G - 1) * K * K;
    const double input = (double)p->V * (p->C + 1) * K;
    bytes += 8.0 * (trans + input + K) * 2;          /* FP64 parameters and int64 counts */
    if (elem != 8 && !fused) bytes += (double)elem * input; /* the GEMM path's FP32 inputs */
    bytes += (double)chunk * (4.0 * p->G + 4.0 * p->V + 16); /* offsets, rows x 2, logp, ids */
    bytes += 8.0 * (double)pc_em_plan_partial_elems(p, chunk) + 4.0 * p->G; /* parents */
    bytes += 4.0 * (double)pc_em_plan_wave_elems(p, chunk);
    return bytes;
}

int pc_em_plan_fused(const pc_em_plan *p) { return p->K <= PC_EM_FUSED_MAX_K; }

int pc_em_plan_chained(const pc_em_plan *p, int fused, int64_t n) {
    return !fused && p->K <= PC_EM_STEP_CHAIN_MAX_K && n * p->K <= PC_EM_STEP_CHAIN_MAX_ROW_STATES;
}

int32_t pc_em_plan_lanes(const pc_em_plan *p) {
    int32_t tw = 1;
    while (tw < p->K && tw < 32) tw *= 2;
    return tw;
}

int32_t pc_em_plan_fused_iter(const pc_em_plan *p, int64_t n) {
    /* rows of a layer of average width G / L, over the rows PC_EM_FUSED_ITEMS items take */
    const double waves = (double)n * p->G / ((double)p->L * PC_EM_FUSED_ROWS * PC_EM_FUSED_ITEMS);
    const int64_t iter = (int64_t)ceil(waves);
    return (int32_t)(iter < 1 ? 1 : iter > PC_EM_FUSED_MAX_ITER ? PC_EM_FUSED_MAX_ITER : iter);
}

int64_t pc_em_plan_tiles(const pc_em_plan *p, int64_t n) {
    const int64_t tile = (int64_t)PC_EM_FUSED_ROWS * pc_em_plan_fused_iter(p, n);
    return (n + tile - 1) / tile;
}

/* The most tiles of a pass of up to `chunk` rows. */
static int64_t max_tiles(const pc_em_plan *p, int64_t chunk) {
    /* tiles(n) rises with n while iter stays, falls where iter steps up: its largest value
     * over n <= chunk is at the last n of some iter, or at chunk */
    int64_t most = pc_em_plan_tiles(p, chunk);
    for (int32_t it = 1; it < PC_EM_FUSED_MAX_ITER; it++) {
        int64_t n =
            (int64_t)floor((double)it * p->L * PC_EM_FUSED_ROWS * PC_EM_FUSED_ITEMS / p->G);
        while (n > 1 && pc_em_plan_fused_iter(p, n) > it) n--; /* rounding of the bound */
        while (n < chunk && pc_em_plan_fused_iter(p, n + 1) <= it) n++;
        if (n >= 1 && n <= chunk) {
            const int64_t t = pc_em_plan_tiles(p, n);
            most = t > most ? t : most;
        }
    }
    return most;
}

int64_t pc_em_plan_partial_elems(const pc_em_plan *p, int64_t chunk) {
    if (!pc_em_plan_fused(p)) return 0;
    return (int64_t)(p->G - 1) * max_tiles(p, chunk) * p->K * p->K;
}

int64_t pc_em_plan_wave_elems(const pc_em_plan *p, int64_t chunk) {
    return pc_em_plan_fused(p) ? 2 + (int64_t)p->num_paths * max_tiles(p, chunk) : 0;
}

pc_em_gemm pc_em_plan_gemm(const pc_em_plan *p, int64_t n, int32_t g0, int32_t g1, int which) {
    const int32_t K = p->K;
    const int64_t kk = (int64_t)K * K, rows = p->chunk * K;
    pc_em_gemm op = {0};
    op.lda = op.ldb = op.ldc = K;
    op.batch = g1 - g0;
    op.beta = 0;
    if (which == 0) { /* forward: S_g^cm (K x n) = (W_g^cm)^T E_g^cm */
        op.trans_a = 1, op.trans_b = 0, op.m = K, op.n = (int32_t)n, op.k = K;
        op.buf_a = PC_EM_BUF_W, op.a = g0 * kk, op.stride_a = kk;
        op.buf_b = PC_EM_BUF_E, op.b = g0 * rows, op.stride_b = rows;
        op.buf_c = PC_EM_BUF_S, op.c = g0 * rows, op.stride_c = rows;
    } else if (which == 1) { /* flows: F_g^cm (K x K) = E_g^cm (A_g^cm)^T, a sum over rows */
        op.trans_a = 0, op.trans_b = 1, op.m = K, op.n = K, op.k = (int32_t)n;
        op.buf_a = PC_EM_BUF_E, op.a = g0 * rows, op.stride_a = rows;
        op.buf_b = PC_EM_BUF_S, op.b = g0 * rows, op.stride_b = rows;
        op.buf_c = PC_EM_BUF_F, op.c = g0 * kk, op.stride_c = kk;
    } else { /* downward: U_g^cm (K x n) = W_g^cm A_g^cm */
        op.trans_a = 0, op.trans_b = 0, op.m = K, op.n = (int32_t)n, op.k = K;
        op.buf_a = PC_EM_BUF_W, op.a = g0 * kk, op.stride_a = kk;
        op.buf_b = PC_EM_BUF_S, op.b = g0 * rows, op.stride_b = rows;
        op.buf_c = PC_EM_BUF_U, op.c = g0 * rows, op.stride_c = rows;
    }
    return op;
}

pc_status pc_em_plan_pass(const pc_em_plan *p, int64_t n, int phases, const pc_em_ops *ops) {
    if (n < 1 || n > p->chunk)
        return pc_fail(PC_ERR_ARG, "GPU EM pass: %lld rows, the buffers hold %lld",
                       (long long)n, (long long)p->chunk);
    const int32_t *ls = p->circuit->layer_start, root = p->G - 1;
    const int fused = ops->forward && ops->downward;
    const int chained =
        ops->forward_chain && ops->downward_chain && pc_em_plan_chained(p, fused, n);
    pc_status st = PC_OK;
    if (fused) {
        if (phases & PC_EM_PASS_FORWARD) st = ops->forward(ops->ctx, n);
        if (st == PC_OK && (phases & PC_EM_PASS_DOWNWARD)) st = ops->downward(ops->ctx, n);
        return st;
    }
    int32_t next = 0; /* the first chain not yet run */
    for (int32_t l = 0; l < p->L && st == PC_OK && (phases & PC_EM_PASS_FORWARD); l++) {
        const int32_t g0 = ls[l], g1 = ls[l + 1], ge = g1 < root ? g1 : root;
        if (chained && next < p->num_chains && p->chains[next].l0 == l) {
            st = ops->forward_chain(ops->ctx, n, next);
            l = p->chains[next++].l1 - 1;
            continue;
        }
        st = ops->product(ops->ctx, n, g0, g1);
        if (st == PC_OK && ge > g0) {
            const pc_em_gemm op = pc_em_plan_gemm(p, n, g0, ge, 0);
            st = ops->gemm(ops->ctx, &op);
        }
    }
    next = p->num_chains - 1; /* the last chain not yet run */
    for (int32_t l = p->L - 1; l >= 0 && st == PC_OK && (phases & PC_EM_PASS_DOWNWARD); l--) {
        const int32_t g0 = ls[l], g1 = ls[l + 1], ge = g1 < root ? g1 : root;
        if (chained && next >= 0 && p->chains[next].l1 - 1 == l) {
            st = ops->downward_chain(ops->ctx, n, next);
            l = p->chains[next--].l0;
            continue;
        }
        if (ge > g0) {
            const pc_em_gemm down = pc_em_plan_gemm(p, n, g0, ge, 2);
            st = ops->gemm(ops->ctx, &down);
        }
        if (st == PC_OK) st = ops->posterior(ops->ctx, n, g0, g1);
    }
    if (st == PC_OK && (phases & PC_EM_PASS_DOWNWARD) && root > 0) {
        const pc_em_gemm flows = pc_em_plan_gemm(p, n, 0, root, 1);
        st = ops->gemm(ops->ctx, &flows);
    }
    return st;
}

void pc_em_plan_pack(const pc_em_plan *p, const pc_hclt *m, double *root, double *trans,
                     double *input) {
    const pc_circuit *c = p->circuit;
    const int64_t K = p->K, C = p->C;
    for (int64_t k = 0; k < K; k++) root[k] = exp(m->root_logw[k]);
    for (int32_t g = 0; g + 1 < p->G; g++) {
        const double *src = m->trans_logw + (int64_t)c->group_trans[g] * K * K;
        for (int64_t i = 0; i < K * K; i++) trans[g * K * K + i] = exp(src[i]);
    }
    for (int64_t v = 0; v < p->V; v++)
        for (int64_t x = 0; x <= C; x++)
            for (int64_t k = 0; k < K; k++)
                input[(v * (C + 1) + x) * K + k] =
                    x == C ? 1.0 : exp(m->input_logp[(v * K + k) * C + x]);
}

void pc_em_plan_unpack(const pc_em_plan *p, const double *root, const double *trans,
                       const double *input, pc_hclt *m) {
    const pc_circuit *c = p->circuit;
    const int64_t K = p->K, C = p->C;
    for (int64_t k = 0; k < K; k++) m->root_logw[k] = log(root[k]);
    for (int32_t g = 0; g + 1 < p->G; g++) {
        double *dst = m->trans_logw + (int64_t)c->group_trans[g] * K * K;
        for (int64_t i = 0; i < K * K; i++) dst[i] = log(trans[g * K * K + i]);
    }
    for (int64_t v = 0; v < p->V; v++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t x = 0; x < C; x++)
                m->input_logp[(v * K + k) * C + x] = log(input[(v * (C + 1) + x) * K + k]);
}
