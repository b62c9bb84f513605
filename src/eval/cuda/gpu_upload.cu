/* Device memory of the GPU engine: counted allocations, the parameters every strategy reads
 * and the weight forms several share (gpu_engine.cuh). */
#include "base/fail.h"
#include "eval/cuda/gpu_engine.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

pc_status pc_gpu_alloc(pc_gpu_state *s, void **ptr, size_t bytes, const char *what) {
    pc_status st = PC_OK;
    *ptr = NULL;
    if (bytes == 0) return PC_OK;
    PC_CUDA_CHECK(cudaMalloc(ptr, bytes));
    s->bytes += bytes;
    if (s->bytes > s->peak_bytes) s->peak_bytes = s->bytes;
    return PC_OK;
fail:
    *ptr = NULL;
    {
        char why[256];
        snprintf(why, sizeof why, "%s", pc_last_error());
        return pc_fail(st, "%.1f MiB of GPU memory for %s: %s", bytes / 1048576.0, what, why);
    }
}

void pc_gpu_release(pc_gpu_state *s, void *ptr, size_t bytes) {
    if (!ptr) return;
    cudaFree(ptr);
    s->bytes -= bytes;
}

pc_status pc_gpu_upload(pc_gpu_state *s, void **dst, const void *src, size_t bytes,
                        const char *what) {
    pc_status st = pc_gpu_alloc(s, dst, bytes, what);
    if (st || bytes == 0) return st;
    PC_CUDA_CHECK(cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice));
fail:
    return st;
}

pc_status pc_gpu_kernel_grid(const pc_gpu_state *s, const void *fn, int threads, size_t smem,
                             size_t static_smem, const char *who, int32_t *grid) {
    pc_status st = PC_OK;
    int per_sm = 0;
    if (smem + static_smem > (size_t)s->dev.max_smem)
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "%s: K = %d needs %zu bytes of shared memory per block, the GPU has %d",
                       who, s->K, smem + static_smem, s->dev.max_smem);
    PC_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)smem));
    PC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, smem));
    *grid = s->dev.sms * (per_sm > 0 ? per_sm : 1);
fail:
    return st;
}

/* input[v][c][k] in FP32; row C holds LSE_c input_logp[v, k, c] (the marginal), in FP64. */
static void input_rows(const pc_circuit *c, float *h_in) {
    const int32_t V = c->num_vars, C = c->num_cats, K = c->num_latents;
    for (int32_t v = 0; v < V; v++)
        for (int32_t k = 0; k < K; k++) {
            const double *row = c->input_logp + ((size_t)v * K + k) * C;
            double mx = -INFINITY, sum = 0.0;
            for (int32_t x = 0; x < C; x++) mx = row[x] > mx ? row[x] : mx;
            for (int32_t x = 0; x < C; x++) {
                h_in[((size_t)v * (C + 1) + x) * K + k] = (float)row[x];
                if (mx != -INFINITY) sum += exp(row[x] - mx);
            }
            h_in[((size_t)v * (C + 1) + C) * K + k] =
                (float)(mx == -INFINITY ? -INFINITY : mx + log(sum));
        }
}

/* The plan, the input rows and the root's weights (pc_gpu_args' parameters). */
pc_status pc_gpu_upload_common(pc_gpu_state *s) {
    pc_status st = PC_OK;
    const pc_circuit *c = s->circuit;
    const int32_t V = s->V, K = s->K, G = s->G;
    const size_t in_n = (size_t)V * (size_t)(s->C + 1) * (size_t)K;
    float *h_in = (float *)malloc(in_n * sizeof(float));
    int32_t *h_cs = (int32_t *)malloc(sizeof(int32_t) * (size_t)G);
    if (!h_in || !h_cs) {
        st = pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for %zu input values", in_n);
        goto fail;
    }
    input_rows(c, h_in);
    for (int32_t i = 0; i < G - 1; i++) h_cs[i] = s->h_groups[c->group_children[i]].slot;
    /* one entry more than G - 1 children, so that a lone root still gets memory */
    if ((st = pc_gpu_upload(s, (void **)&s->d.groups, s->h_groups, sizeof(pc_gpu_group) * G,
                            "groups")) ||
        (st = pc_gpu_upload(s, (void **)&s->d.vars, c->group_vars, sizeof(int32_t) * V,
                            "variables")) ||
        (st = pc_gpu_alloc(s, (void **)&s->d.children, sizeof(int32_t) * G, "children")) ||
        (st = pc_gpu_upload(s, (void **)&s->d.child_slot, h_cs, sizeof(int32_t) * G, "slots")) ||
        (st = pc_gpu_upload(s, (void **)&s->d.input, h_in, in_n * sizeof(float), "input_logp")) ||
        (st = pc_gpu_upload(s, (void **)&s->d.root_logw, c->root_logw, sizeof(double) * K,
                            "root_logw")))
        goto fail;
    if (G > 1)
        PC_CUDA_CHECK(cudaMemcpy(s->d.children, c->group_children, sizeof(int32_t) * (G - 1),
                                 cudaMemcpyHostToDevice));
fail:
    free(h_in), free(h_cs);
    return st;
}

int pc_gpu_kp(int K, pc_gpu_w_layout layout) {
    if (K > 64 && layout == PC_GPU_W_ROWS) return (K + 15) / 16 * 16;
    return K <= 16 ? 16 : K <= 32 ? 32 : K <= 64 ? 64 : 128;
}

size_t pc_gpu_padded_w_bytes(const pc_gpu_state *s, pc_gpu_w_layout layout) {
    const size_t KP = (size_t)pc_gpu_kp(s->K, layout);
    return (size_t)s->G * KP * KP * sizeof(float);
}

pc_status pc_gpu_upload_padded_w(pc_gpu_state *s, pc_gpu_w_layout layout, float **dst) {
    const pc_circuit *c = s->circuit;
    const int K = s->K;
    const size_t KP = (size_t)pc_gpu_kp(K, layout), bytes = pc_gpu_padded_w_bytes(s, layout);
    float *h = (float *)calloc(bytes / sizeof(float), sizeof(float));
    if (!h) return pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for weights");
    for (int g = 0; g < s->G; g++) {
        const int32_t tr = c->group_trans[g];
        if (tr < 0) continue;
        const double *w = c->trans_logw + (size_t)tr * K * K;
        float *hg = h + (size_t)g * KP * KP;
        for (int j = 0; j < K; j++)
            for (int k = 0; k < K; k++)
                hg[layout == PC_GPU_W_ROWS ? j * KP + k : ((k / 4) * KP + j) * 4 + k % 4] =
                    (float)exp(w[(size_t)j * K + k]);
    }
    const pc_status st = pc_gpu_upload(s, (void **)dst, h, bytes, "exp(trans_logw), padded");
    free(h);
    return st;
}

size_t pc_gpu_wexp_bytes(const pc_gpu_state *s) {
    return (size_t)s->G * s->K * s->K * sizeof(float);
}

pc_status pc_gpu_upload_wexp(pc_gpu_state *s, float **dst) {
    const pc_circuit *c = s->circuit;
    const size_t K = (size_t)s->K, G = (size_t)s->G;
    float *h = (float *)calloc(G * K * K, sizeof(float));
    if (!h) return pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for weights");
    for (size_t g = 0; g < G; g++) {
        const int32_t t = c->group_trans[g];
        if (t < 0) continue;
        const double *w = c->trans_logw + (size_t)t * K * K;
        for (size_t j = 0; j < K; j++)
            for (size_t k = 0; k < K; k++) h[(g * K + k) * K + j] = (float)exp(w[j * K + k]);
    }
    const pc_status st = pc_gpu_upload(s, (void **)dst, h, pc_gpu_wexp_bytes(s), "exp(trans_logw)");
    free(h);
    return st;
}

pc_status pc_gpu_reset_counters(const pc_gpu_args *a, cudaStream_t stream) {
    pc_status st = PC_OK;
    PC_CUDA_CHECK(cudaMemsetAsync(a->done, 0, (size_t)a->G * a->tiles * sizeof(int32_t), stream));
    PC_CUDA_CHECK(cudaMemsetAsync(a->queue, 0, sizeof(int32_t), stream));
fail:
    return st;
}
