/* The sum-product passes on the GPU, in FP64 (exp and log too: exp and log to FP32's accuracy,
 * with the sums in FP64, were slower on an H200, the kernels being bound by their chains of
 * dependent loads and barriers, not by FP64 arithmetic): the upward pass, then either the
 * posteriors
 * (for the conditionals) or ancestral draws (conditional sampling), one kernel per chunk and
 * one block per `rows` samples (gpu_query_plan.h). Node values are absolute log values:
 *   upward    m = max_k P_g(k), e_k = e^{P_g(k) - m}
 *             msg_g(j) = m + log sum_k wexp_t[t][k][j] e_k,  log p = m + log sum_k root_exp e_k
 *   posterior lpost_root(k) = root_logw[k] + P_root(k) - log p
 *             lam_j = lpost_p(j) - msg_g(j), M = max_j lam_j,
 *             lpost_g(k) = P_g(k) + M + log sum_j wexp[t][j][k] e^{lam_j - M}
 *             written over msg_g, and post_g = e^{lpost_g} / sum_k e^{lpost_g} over P_g
 *   draws     Z_g ~ w(k) = row[k] + P_g(k) (row: root_logw, or trans_logw[t][z_parent]) layer by
 *             layer, the states in the block's z; then every missing X_v | Z_g ~ x_cdf[v][z_g]
 *             at once (gq_draw_values), numbered as the CPU numbers its draws.
 * A sum below PC_GQ_SAFE is recomputed as an exact LSE (docs/queries.md, edge cases). */
#include "eval/cuda/query/gpu_query_draw.cuh"

/* log sum_i exp(logw[i * stride] + v[i]) over K terms, by one lane (the rare exact path). */
static __device__ double exact_lse(const double *logw, int stride, const double *v, int K) {
    double m = -INFINITY, s = 0.0;
    for (int i = 0; i < K; i++) m = fmax(m, logw[(size_t)i * stride] + v[i]);
    if (m == -INFINITY) return m;
    for (int i = 0; i < K; i++) s += exp(logw[(size_t)i * stride] + v[i] - m);
    return m + log(s);
}

/* One upward item: P_g, then msg_g or (the root) log p. sh = P_g(b, .), e = its exp. */
static __device__ void sp_up_item(const pc_gq_args &a, const gq_team &t, int g, int64_t b,
                                  double *sh) {
    const int K = a.K;
    double *e = sh + K;
    gq_add_children(a, t, g, b, sh, true);
    double m = -INFINITY;
    for (int k = t.lane; k < K; k += t.size) m = fmax(m, sh[k]);
    m = gq_team_max(t, m);
    for (int k = t.lane; k < K; k += t.size) e[k] = m == -INFINITY ? 0.0 : exp(sh[k] - m);
    __syncwarp(t.mask);
    const pc_gpu_query_group gr = a.groups[g];
    if (gr.parent < 0) {
        double acc = 0.0;
        for (int k = t.lane; k < K; k += t.size) acc += a.root_exp[k] * e[k];
        acc = gq_team_sum(t, acc);
        if (t.lane == 0)
            a.logp[b] = m == -INFINITY ? -INFINITY
                        : acc >= PC_GQ_SAFE ? m + log(acc)
                                            : exact_lse(a.root_logw, 1, sh, K);
    } else {
        const double *wt = a.wexp_t + (size_t)gr.trans * K * K;
        const double *lw = a.logw + (size_t)gr.trans * K * K;
        double *msg = a.M + gq_node(a, b, g);
        for (int j = t.lane; j < K; j += t.size) {
            double acc = 0.0;
#pragma unroll 8
            for (int k = 0; k < K; k++) acc = fma(wt[(size_t)k * K + j], e[k], acc);
            msg[j] = m == -INFINITY ? -INFINITY
                     : acc >= PC_GQ_SAFE ? m + log(acc)
                                         : exact_lse(lw + (size_t)j * K, 1, sh, K);
        }
    }
    __syncwarp(t.mask);
}

/* Gather and the upward pass of the block's samples; ends with a barrier. */
static __device__ void sp_upward(const pc_gq_args &a, const gq_block &k, bool count_missing) {
    gq_gather(a, k, count_missing);
    __syncthreads();
    gq_for_layers(a, k, false, [&](int g, int64_t b) { sp_up_item(a, k.t, g, b, k.sh); });
}

/* post = e^{lpost} (at most 1) normalised by its sum, over P_g (lpost is over msg_g). */
static __device__ void sp_normalise(const pc_gq_args &a, const gq_team &t, int g, int64_t b) {
    const double *lpost = a.M + gq_node(a, b, g);
    double *post = a.P + gq_node(a, b, g);
    double total = 0.0;
    for (int k = t.lane; k < a.K; k += t.size) total += post[k] = exp(fmin(lpost[k], 0.0));
    const double scale = 1.0 / gq_team_sum(t, total);
    for (int k = t.lane; k < a.K; k += t.size) post[k] *= scale;
}

/* One posterior item (g, b) of a sample with log p > -inf; sh and lam are the team's. */
static __device__ void sp_post_item(const pc_gq_args &a, const gq_team &t, int g, int64_t b,
                                    double *sh) {
    const pc_gpu_query_group gr = a.groups[g];
    const int K = a.K;
    double *own = a.M + gq_node(a, b, g), *lam = sh + K;
    const double *P = a.P + gq_node(a, b, g);
    if (gr.parent < 0) {
        for (int k = t.lane; k < K; k += t.size) own[k] = a.root_logw[k] + P[k] - a.logp[b];
        __syncwarp(t.mask);
        sp_normalise(a, t, g, b);
        return;
    }
    const double *lp = a.M + gq_node(a, b, gr.parent);
    const double p0 = t.lane < K ? P[t.lane] : 0.0; /* loaded with lp and own */
    double mx = -INFINITY;
    for (int j = t.lane; j < K; j += t.size) {
        /* A parent state of probability 0 sends nothing (its message may be -inf too). */
        lam[j] = lp[j] == -INFINITY ? -INFINITY : lp[j] - own[j];
        mx = fmax(mx, lam[j]);
    }
    mx = gq_team_max(t, mx);
    for (int j = t.lane; j < K; j += t.size) sh[j] = exp(lam[j] - mx);
    __syncwarp(t.mask); /* every lane has read own before any writes over it */
    const double *w = a.wexp + (size_t)gr.trans * K * K, *lw = a.logw + (size_t)gr.trans * K * K;
    for (int k = t.lane; k < K; k += t.size) {
        double acc = 0.0;
#pragma unroll 8
        for (int j = 0; j < K; j++) acc = fma(w[(size_t)j * K + k], sh[j], acc);
        const double tail =
            acc >= PC_GQ_SAFE ? mx + log(acc) : exact_lse(lw + k, K, lam, K);
        own[k] = (k == t.lane ? p0 : P[k]) + tail; /* -inf for a state of probability 0 */
    }
    __syncwarp(t.mask);
    sp_normalise(a, t, g, b);
    __syncwarp(t.mask);
}

static __global__ void PC_GQ_TREE_BOUNDS posterior_kernel(const pc_gq_args a) {
    const gq_block k = gq_block_of(a, true);
    sp_upward(a, k, false);
    gq_for_layers(a, k, true, [&](int g, int64_t b) {
        if (a.logp[b] > -INFINITY) sp_post_item(a, k.t, g, b, k.sh);
    });
}

/* draw[b][g]: the CPU's number of Z_g's draw in row b, from the missing counts the gather left
 * there: the groups above g in the CPU's order (G - 1 down to 0) take one draw each and one
 * per missing variable. */
static __device__ void draw_numbers(const pc_gq_args &a, int64_t b0, int nb) {
    const int G = a.G, per = (G + blockDim.x - 1) / blockDim.x;
    const int r0 = threadIdx.x * per, r1 = r0 + per < G ? r0 + per : G; /* r = G - 1 - g */
    for (int bl = 0; bl < nb; bl++) {
        int32_t *d = a.draw + (size_t)(b0 + bl) * G;
        int local = 0;
        for (int r = r0; r < r1; r++) local += 1 + d[G - 1 - r];
        int at = gq_block_exclusive_scan(local);
        for (int r = r0; r < r1; r++) {
            const int count = d[G - 1 - r];
            d[G - 1 - r] = at;
            at += 1 + count;
        }
        __syncthreads();
    }
}

/* One draw item: Z_g of sample b into the block's states zb (that sample's row). */
static __device__ void sp_draw_item(const pc_gq_args &a, const gq_team &t, int g, int64_t b,
                                    double *sh, int32_t *zb) {
    const pc_gpu_query_group gr = a.groups[g];
    const int K = a.K;
    const double *P = a.P + gq_node(a, b, g);
    const double *row = gr.parent < 0 ? a.root_logw
                                      : a.logw + ((size_t)gr.trans * K + zb[gr.parent]) * K;
    double mx = -INFINITY;
    for (int k = t.lane; k < K; k += t.size) mx = fmax(mx, sh[k] = row[k] + P[k]);
    mx = gq_team_max(t, mx);
    for (int k = t.lane; k < K; k += t.size) sh[k] = exp(sh[k] - mx);
    __syncwarp(t.mask);
    if (t.lane == 0) { /* the cumulative sums in the CPU's order */
        const uint64_t stream = pc_gq_stream(a.seed, a.first + a.row0 + b);
        double sum = 0.0;
        for (int k = 0; k < K; k++) sh[k] = sum += sh[k];
        zb[g] = pc_gq_search(sh, K, a.half_k,
                             pc_gq_unit(stream, a.draw[(size_t)b * a.G + g]) * sh[K - 1]);
    }
    __syncwarp(t.mask);
}

static __global__ void PC_GQ_TREE_BOUNDS sample_kernel(const pc_gq_args a) {
    const gq_block k = gq_block_of(a, true);
    sp_upward(a, k, true);
    draw_numbers(a, k.b0, k.nb);
    gq_for_layers(a, k, true, [&](int g, int64_t b) {
        if (a.logp[b] > -INFINITY)
            sp_draw_item(a, k.t, g, b, k.sh, k.z + (b - k.b0) * a.G);
        else if (k.t.lane == 0 && a.groups[g].parent < 0)
            atomicMin(a.bad, (unsigned long long)(a.row0 + b));
    });
    gq_draw_values(a, k, false);
}

pc_status pc_gq_launch_posteriors(const pc_gq_launch *l, const pc_gq_args *a,
                                  cudaStream_t stream) {
    return pc_gq_launch_kernel((const void *)posterior_kernel, l, a, 1, stream);
}

pc_status pc_gq_launch_sample_conditional(const pc_gq_launch *l, const pc_gq_args *a,
                                          cudaStream_t stream) {
    return pc_gq_launch_kernel((const void *)sample_kernel, l, a, 1, stream);
}
