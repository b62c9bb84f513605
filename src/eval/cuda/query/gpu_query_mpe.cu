/* MPE on the GPU: one kernel per chunk, one block per `rows` samples, walking the tree as
 * src/eval/query/query_mpe.c does (the same FP64 tables, the same additions in the same
 * order, the same lowest-index ties), so its completions and log-probabilities are ref's:
 *   gather, then per layer upward   P_g += msg_c;  msg_g(j) = max_k (logw_t[t][k][j] + P_g(k))
 *   per layer from the root down    z_g = lowest argmax_k (logw[t][z_parent][k] + P_g(k))
 *                                   (the root: root_logw; its maximum is log p(x*, z*))
 *   then every variable             missing: arg[v][z_g], observed: x_v. */
#include "eval/cuda/query/gpu_query_device.cuh"

#include "base/cuda_check.cuh"

/* msg_g(b, j) = max_k (logw_t[t][k][j] + P_g(b, k)) with sh = P_g(b, .); lane j reads the
 * row k of the transposed weights, so a team's loads of one k are contiguous. */
static __device__ void mpe_message(const pc_gq_args &a, const gq_team &t, int g, int64_t b,
                                   const double *sh) {
    const double *wt = a.logw_t + (size_t)a.groups[g].trans * a.K * a.K;
    double *msg = a.M + gq_node(a, b, g);
    for (int j = t.lane; j < a.K; j += t.size) {
        double best = -INFINITY;
        for (int k = 0; k < a.K; k++) best = fmax(best, wt[(size_t)k * a.K + j] + sh[k]);
        msg[j] = best;
    }
    __syncwarp(t.mask);
}

/* z_g(b): the lowest k maximising row[k] + P_g(b, k), row the root's weights or the
 * transition row of the parent's state; the root's maximum is the sample's log p. */
static __device__ void mpe_backtrack(const pc_gq_args &a, const gq_team &t, int g, int64_t b) {
    const pc_gpu_query_group gr = a.groups[g];
    const int K = a.K;
    const double *row = gr.parent < 0 ? a.root_logw
                                      : a.logw + ((size_t)gr.trans * K +
                                                  a.z[(size_t)b * a.G + gr.parent]) * K;
    const double *P = a.P + gq_node(a, b, g);
    double best = -INFINITY;
    int arg = K; /* above every state: a lane without a finite candidate never wins a tie */
    for (int k = t.lane; k < K; k += t.size) {
        const double cand = row[k] + P[k];
        if (cand > best || arg == K) best = cand, arg = k;
    }
    gq_team_argmax(t, best, arg);
    if (t.lane == 0) {
        a.z[(size_t)b * a.G + g] = arg;
        if (gr.parent < 0) a.logp[b] = best;
    }
}

static __global__ void mpe_kernel(const pc_gq_args a) {
    const gq_block k = gq_block_of(a);
    gq_gather(a, k.t, k.b0, k.nb, false);
    __syncthreads();
    gq_for_layers(a, k, false, [&](int g, int64_t b) {
        gq_add_children(a, k.t, g, b, k.sh);
        if (a.groups[g].parent >= 0) mpe_message(a, k.t, g, b, k.sh);
    });
    gq_for_layers(a, k, true, [&](int g, int64_t b) { mpe_backtrack(a, k.t, g, b); });
    for (int i = threadIdx.x; i < k.nb * a.V; i += blockDim.x) {
        const size_t at = (size_t)k.b0 * a.V + i;
        const int v = i % a.V;
        const int z = a.z[(size_t)(k.b0 + i / a.V) * a.G + a.var_group[v]];
        a.out[at] = a.missing && a.missing[at] ? a.arg[(size_t)v * a.K + z] : a.x[at];
    }
}

pc_status pc_gq_launch_mpe(const pc_gq_launch *l, const pc_gq_args *a, cudaStream_t stream) {
    pc_status st = PC_OK;
    const unsigned blocks = (unsigned)((a->n + a->rows - 1) / a->rows);
    if (l->shape.smem > 48 * 1024)
        PC_CUDA_CHECK(cudaFuncSetAttribute(mpe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)l->shape.smem));
    mpe_kernel<<<blocks, l->shape.threads, l->shape.smem, stream>>>(*a);
    PC_CUDA_CHECK(cudaGetLastError());
fail:
    return st;
}
