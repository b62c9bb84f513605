/* Sampling from p(x) on the GPU: a block per `rows` samples draws the latents layer by layer
 * from the root (a thread per (group, sample); the states in shared memory where they fit,
 * gq_block), then every value at once (gq_draw_values), over the same cumulative tables as
 * src/eval/query/query_sample.c (root_cdf, prior_cdf, x_cdf) with the same draws
 * (gpu_query_rng.h: the CPU's stream, its draw numbers), so its rows are the CPU's bit for
 * bit. A latent's state is a binary search of its cumulative row. */
#include "eval/cuda/query/gpu_query_draw.cuh"

static __global__ void prior_kernel(const pc_gq_args a) {
    const gq_block k = gq_block_of(a, false);
    const int K = a.K;
    gq_for_layers_down_threads(a, k.nb, [&](int g, int bl) {
        const pc_gpu_query_group gr = a.groups[g];
        int32_t *zb = k.z + (size_t)bl * a.G;
        const double *cdf = gr.parent < 0 ? a.root_cdf
                                          : a.prior_cdf + ((size_t)g * K + zb[gr.parent]) * K;
        const double u = pc_gq_unit(pc_gq_stream(a.seed, a.first + a.row0 + k.b0 + bl), gr.draw);
        zb[g] = pc_gq_search(cdf, K, a.half_k, u * cdf[K - 1]);
    });
    gq_draw_values(a, k, true);
}

pc_status pc_gq_launch_sample_prior(const pc_gq_launch *l, const pc_gq_args *a,
                                    cudaStream_t stream) {
    return pc_gq_launch_kernel((const void *)prior_kernel, l, a, 0, stream);
}
