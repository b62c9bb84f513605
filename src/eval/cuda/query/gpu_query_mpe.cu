/* MPE on the GPU: one kernel per chunk, one block per `rows` samples, with the tables, sums and
 * ties of src/eval/query/query_mpe.c, so its completions and log-probabilities are ref's:
 *   gather, then per layer upward   P_g += msg_c;  msg_g(j) = max_k (logw_t[t][k][j] + P_g(k)),
 *                                   zarg_g(j) = the lowest k attaining it
 *                                   (the root: z = lowest argmax_k (root_logw[k] + P_g(k)),
 *                                   its maximum log p(x*, z*))
 *   per layer from the root down    z_g = zarg_g(z_parent)
 *   then every variable             missing: arg[v][z_g], observed: x_v.
 * The CPU backtracks by recomputing trans_logw[t][z_parent][k] + P_g(k) and keeping the lowest
 * k of the largest value (strictly greater, from k = 0): the very numbers and comparisons lane
 * j made on the way up for j = z_parent, so zarg holds its answer for every parent state and
 * the way down is one load per group. */
#include "eval/cuda/query/gpu_query_device.cuh"

/* msg_g(b, j) and zarg_g(b, j) with sh = P_g(b, .); lane j reads the row k of the transposed
 * weights, so a team's loads of one k are contiguous. */
static __device__ void mpe_message(const pc_gq_args &a, const gq_team &t, int g, int64_t b,
                                   const double *sh) {
    const int K = a.K;
    const double *wt = a.logw_t + (size_t)a.groups[g].trans * K * K;
    double *msg = a.M + gq_node(a, b, g);
    uint16_t *zarg = a.zarg + gq_node(a, b, g);
    for (int j = t.lane; j < K; j += t.size) {
        double best = -INFINITY;
        int arg = 0; /* every value -inf: state 0, as the CPU */
#pragma unroll 8
        for (int k = 0; k < K; k++) {
            const double cand = wt[(size_t)k * K + j] + sh[k];
            if (cand > best) best = cand, arg = k;
        }
        msg[j] = best, zarg[j] = (uint16_t)arg;
    }
    __syncwarp(t.mask);
}

/* The root's state: the lowest k maximising root_logw[k] + P(k); its maximum is log p. */
static __device__ void mpe_root(const pc_gq_args &a, const gq_block &k, int g, int64_t b) {
    const gq_team &t = k.t;
    double best = -INFINITY;
    int arg = a.K; /* above every state: a lane without a finite candidate never wins a tie */
    for (int s = t.lane; s < a.K; s += t.size) {
        const double cand = a.root_logw[s] + k.sh[s];
        if (cand > best || arg == a.K) best = cand, arg = s;
    }
    gq_team_argmax(t, best, arg);
    if (t.lane == 0) k.z[(b - k.b0) * a.G + g] = arg, a.logp[b] = best;
}

static __global__ void PC_GQ_TREE_BOUNDS mpe_kernel(const pc_gq_args a) {
    const gq_block k = gq_block_of(a, true);
    gq_gather(a, k, false);
    __syncthreads();
    gq_for_layers(a, k, false, [&](int g, int64_t b) {
        gq_add_children(a, k.t, g, b, k.sh, false);
        if (a.groups[g].parent >= 0) mpe_message(a, k.t, g, b, k.sh);
        else mpe_root(a, k, g, b);
    });
    gq_for_layers_down_threads(a, k.nb, [&](int g, int bl) {
        const int parent = a.groups[g].parent;
        int32_t *zb = k.z + (size_t)bl * a.G;
        if (parent >= 0) zb[g] = a.zarg[gq_node(a, k.b0 + bl, g) + zb[parent]];
    });
    for (int i = threadIdx.x; i < k.nb * a.V; i += blockDim.x) {
        const size_t at = (size_t)k.b0 * a.V + i;
        const int v = i % a.V;
        const int z = k.z[(size_t)(i / a.V) * a.G + a.var_group[v]];
        a.out[at] = a.missing && a.missing[at] ? a.arg[(size_t)v * a.K + z] : a.x[at];
    }
}

pc_status pc_gq_launch_mpe(const pc_gq_launch *l, const pc_gq_args *a, cudaStream_t stream) {
    return pc_gq_launch_kernel((const void *)mpe_kernel, l, a, 1, stream);
}
