/* The GPU queries' state (gpu_query_state.cuh): creation on the backend's device, the plan,
 * the parameter sets uploaded on first need, the chunk buffers, and their release. */
#include "eval/cuda/query/gpu_query_state.cuh"

#include <stdio.h>
#include <stdlib.h>

#include "base/cuda_check.cuh"
#include "eval/cuda/gpu_engine.cuh"
#include "eval/cuda/query/gpu_query_tables.h"

/* Device memory the query buffers may take: a quarter of what is free, at most this. */
#define GQ_BUDGET_MAX (4ull << 30)

/* Device allocation; PC_ERR_DEVICE_MEMORY naming `what`. */
static pc_status device_alloc(void **ptr, size_t bytes, const char *what) {
    return pc_cuda_alloc_for(ptr, bytes, "GPU queries", what);
}

/* Allocates `bytes` at *dst and copies src there. What *dst held is freed first: a set whose
 * upload failed part of the way is uploaded again whole by the next call. */
static pc_status upload(void *dst, const void *src, size_t bytes, const char *what) {
    void **d = (void **)dst;
    cudaFree(*d);
    pc_status st = device_alloc(d, bytes, what);
    if (st != PC_OK || bytes == 0) return st;
    PC_CUDA_CHECK(cudaMemcpy(*d, src, bytes, cudaMemcpyHostToDevice));
fail:
    return st;
}

pc_status pc_gq_enter(const pc_gq_state *s, int *prev) {
    pc_status st = PC_OK;
    PC_CUDA_CHECK(cudaGetDevice(prev));
    if (*prev != s->device) PC_CUDA_CHECK(cudaSetDevice(s->device));
fail:
    return st;
}

void pc_gq_leave(const pc_gq_state *s, int prev) {
    if (prev != s->device) cudaSetDevice(prev);
}

static size_t kk_bytes(const pc_circuit *c) {
    const size_t K = (size_t)c->num_latents, T = (size_t)c->num_trans;
    return (T > 0 ? T : 1) * K * K * sizeof(double);
}

static size_t in_bytes(const pc_circuit *c) {
    return (size_t)c->num_vars * (c->num_cats + 1) * c->num_latents * sizeof(double);
}

static size_t vkc(const pc_circuit *c) {
    return (size_t)c->num_vars * c->num_latents * c->num_cats;
}

/* The transition and root weights as logs, read by every query with a downward pass. */
static pc_status need_logw(pc_gq_state *s) {
    if (s->root_logw) return PC_OK;
    const pc_circuit *c = s->c;
    pc_status st = upload(&s->logw, c->trans_logw, kk_bytes(c), "trans_logw");
    if (st != PC_OK) return st;
    return upload(&s->root_logw, c->root_logw, c->num_latents * sizeof(double), "root_logw");
}

pc_status pc_gq_need_mpe(pc_gq_state *s) {
    if (s->mpe_arg) return PC_OK;
    const pc_circuit *c = s->c;
    pc_gpu_query_mpe_tables t = {NULL, NULL, NULL};
    pc_status st = pc_gpu_query_mpe_tables_make(c, &t);
    if (st == PC_OK) st = need_logw(s);
    if (st == PC_OK) st = upload(&s->mpe_in, t.in, in_bytes(c), "MPE input rows");
    if (st == PC_OK) st = upload(&s->mpe_logw_t, t.w_t, kk_bytes(c), "MPE weights");
    if (st == PC_OK)
        st = upload(&s->mpe_arg, t.arg, (size_t)c->num_vars * c->num_latents, "MPE values");
    free(t.in), free(t.w_t), free(t.arg);
    return st;
}

pc_status pc_gq_need_sum_product(pc_gq_state *s) {
    if (s->root_exp) return PC_OK;
    const pc_circuit *c = s->c;
    pc_gpu_query_sp_tables t = {NULL, NULL, NULL, NULL};
    pc_status st = pc_gpu_query_sp_tables_make(c, &t);
    if (st == PC_OK) st = need_logw(s);
    if (st == PC_OK) st = upload(&s->sp_in, t.in, in_bytes(c), "input rows");
    if (st == PC_OK) st = upload(&s->wexp, t.wexp, kk_bytes(c), "exp(trans_logw)");
    if (st == PC_OK) st = upload(&s->wexp_t, t.wexp_t, kk_bytes(c), "exp(trans_logw)");
    if (st == PC_OK)
        st = upload(&s->root_exp, t.root_exp, c->num_latents * sizeof(double), "root weights");
    free(t.in), free(t.wexp), free(t.wexp_t), free(t.root_exp);
    return st;
}

pc_status pc_gq_need_cond(pc_gq_state *s, int f64) {
    if (f64 ? s->cond64 != NULL : s->cond32 != NULL) return PC_OK;
    double *cond = NULL;
    pc_status st = pc_gpu_query_cond_table_make(s->c, &cond);
    const size_t n = vkc(s->c);
    if (st == PC_OK && f64) {
        st = upload(&s->cond64, cond, n * sizeof(double), "conditionals' table");
    } else if (st == PC_OK) {
        float *f = (float *)malloc(n * sizeof(float));
        if (!f) st = pc_fail(PC_ERR_NOMEM, "GPU queries: out of host memory for a table");
        for (size_t i = 0; st == PC_OK && i < n; i++) f[i] = (float)cond[i];
        if (st == PC_OK) st = upload(&s->cond32, f, n * sizeof(float), "conditionals' table");
        free(f);
    }
    free(cond);
    return st;
}

pc_status pc_gq_need_sampling(pc_gq_state *s) {
    if (s->prior_cdf) return PC_OK;
    const pc_circuit *c = s->c;
    const size_t K = (size_t)c->num_latents, G = (size_t)c->num_groups;
    pc_gpu_query_sampling_tables t = {NULL, NULL, NULL};
    pc_status st = pc_gpu_query_sampling_tables_make(c, &t);
    if (st == PC_OK) st = need_logw(s);
    if (st == PC_OK) st = upload(&s->x_cdf, t.x_cdf, vkc(c) * sizeof(double), "value CDFs");
    if (st == PC_OK) st = upload(&s->root_cdf, t.root_cdf, K * sizeof(double), "root CDF");
    if (st == PC_OK)
        st = upload(&s->prior_cdf, t.prior_cdf, G * K * K * sizeof(double), "latent CDFs");
    free(t.x_cdf), free(t.root_cdf), free(t.prior_cdf);
    return st;
}

pc_status pc_gq_need_nodes(pc_gq_state *s) {
    if (s->rank) return PC_OK;
    const size_t nodes = (size_t)s->chunk * s->c->num_groups * s->c->num_latents;
    pc_status st = device_alloc((void **)&s->P, nodes * sizeof(double), "node values");
    if (st == PC_OK) st = device_alloc((void **)&s->M, nodes * sizeof(double), "messages");
    if (st == PC_OK) st = device_alloc((void **)&s->zarg, nodes * sizeof(uint16_t), "argmaxes");
    if (st == PC_OK)
        st = device_alloc((void **)&s->rank, (size_t)s->chunk * s->c->num_vars * sizeof(int32_t),
                          "draw numbers");
    return st;
}

pc_status pc_gq_need_probs(pc_gq_state *s) {
    if (s->probs) return PC_OK;
    const size_t n = (size_t)s->cond_chunk * s->c->num_vars * s->c->num_cats * sizeof(double);
    return device_alloc(&s->probs, n, "conditionals");
}

/* The plan on the device; the gather's ranges of about V / teams variables. */
static pc_status upload_plan(pc_gq_state *s) {
    const pc_circuit *c = s->c;
    const size_t G = (size_t)c->num_groups, V = (size_t)c->num_vars;
    const int32_t teams = s->launch.shape.teams;
    pc_gpu_query_group *groups = (pc_gpu_query_group *)malloc(G * sizeof *groups);
    int32_t *var_group = (int32_t *)malloc(V * sizeof(int32_t));
    int32_t *var_draw = (int32_t *)malloc(V * sizeof(int32_t));
    int32_t *starts = (int32_t *)malloc((G + 1) * sizeof(int32_t));
    int32_t *children = (int32_t *)calloc(G, sizeof(int32_t)); /* G - 1 and one spare, so that
                                                                  a lone root gets memory */
    pc_status st = groups && var_group && var_draw && starts && children
                       ? pc_gpu_query_plan(c, groups, var_group, var_draw)
                       : pc_fail(PC_ERR_NOMEM, "GPU queries: out of host memory");
    if (st == PC_OK)
        s->ranges = pc_gpu_query_gather_ranges(c, (int32_t)((V + teams - 1) / teams), starts);
    for (size_t i = 0; st == PC_OK && i + 1 < G; i++) children[i] = c->group_children[i];
    if (st == PC_OK) st = upload(&s->groups, groups, G * sizeof *groups, "groups");
    if (st == PC_OK) st = upload(&s->var_group, var_group, V * sizeof(int32_t), "groups");
    if (st == PC_OK) st = upload(&s->var_draw, var_draw, V * sizeof(int32_t), "draw numbers");
    if (st == PC_OK)
        st = upload(&s->range_start, starts, (s->ranges + 1) * sizeof(int32_t), "ranges");
    if (st == PC_OK) st = upload(&s->vars, c->group_vars, V * sizeof(int32_t), "variables");
    if (st == PC_OK) st = upload(&s->children, children, G * sizeof(int32_t), "children");
    if (st == PC_OK)
        st = upload(&s->layer_start, c->layer_start, (c->num_layers + 1) * sizeof(int32_t),
                    "layers");
    free(groups), free(var_group), free(var_draw), free(starts), free(children);
    return st;
}

/* The staging buffers, the latent states and the stream. */
static pc_status alloc_buffers(pc_gq_state *s) {
    pc_status st = PC_OK;
    pc_gq_stage *g = &s->stage;
    const size_t ch = (size_t)s->chunk, V = (size_t)s->c->num_vars, G = (size_t)s->c->num_groups;
    if ((st = device_alloc((void **)&s->z, ch * G * sizeof(int32_t), "latent states")) ||
        (st = device_alloc((void **)&s->draw, ch * G * sizeof(int32_t), "draw numbers")) ||
        (st = device_alloc((void **)&s->bad, sizeof(unsigned long long), "a flag")))
        return st;
    for (int i = 0; i < 2; i++) {
        if ((st = device_alloc((void **)&g->d_x[i], ch * V, "samples")) ||
            (st = device_alloc((void **)&g->d_missing[i], ch * V, "missing mask")) ||
            (st = device_alloc((void **)&g->d_out[i], ch * V, "outputs")) ||
            (st = device_alloc((void **)&g->d_logp[i], ch * sizeof(double), "log p")))
            return st;
        PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_x[i], ch * V, cudaHostAllocDefault));
        PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_missing[i], ch * V, cudaHostAllocDefault));
        PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_out[i], ch * V, cudaHostAllocDefault));
        PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_logp[i], ch * sizeof(double),
                                    cudaHostAllocDefault));
        PC_CUDA_CHECK(cudaEventCreateWithFlags(&g->done[i], cudaEventDisableTiming));
    }
    PC_CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
fail:
    return st;
}

/* The shape, the chunk sizes within the memory budget, then the plan and the buffers. */
static pc_status configure(pc_gq_state *s, const pc_gpu_device *dev, int64_t max_batch) {
    pc_status st = PC_OK;
    const pc_circuit *c = s->c;
    size_t free_b = 0, total_b = 0;
    if ((st = pc_gpu_query_shape_for(c->num_latents, (size_t)dev->max_smem, &s->launch.shape)))
        return st;
    PC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    {
        const size_t budget = free_b / 4 < GQ_BUDGET_MAX ? free_b / 4 : GQ_BUDGET_MAX;
        const size_t per = pc_gpu_query_bytes_per_sample(c);
        s->chunk = pc_gpu_query_chunk(per, budget, max_batch);
        s->cond_chunk = pc_gpu_query_chunk(per + (size_t)c->num_vars * c->num_cats * 8, budget,
                                           s->chunk);
        if ((st = upload_plan(s))) return st;
        st = alloc_buffers(s);
    }
fail:
    return st;
}

void pc_gq_destroy(void *p) {
    pc_gq_state *s = (pc_gq_state *)p;
    int prev = 0;
    if (!s) return;
    const int entered = pc_gq_enter(s, &prev) == PC_OK;
    if (s->stream) cudaStreamSynchronize(s->stream);
    void *const device[] = {s->groups, s->layer_start, s->vars, s->children, s->var_group,
                            s->var_draw, s->range_start, s->logw, s->root_logw, s->mpe_in,
                            s->mpe_logw_t, s->mpe_arg, s->sp_in, s->wexp, s->wexp_t,
                            s->root_exp, s->cond64, s->cond32, s->x_cdf, s->root_cdf,
                            s->prior_cdf, s->P, s->M, s->zarg, s->rank, s->z, s->draw,
                            s->bad, s->probs};
    for (size_t i = 0; i < sizeof device / sizeof device[0]; i++) cudaFree(device[i]);
    pc_gq_stage *g = &s->stage;
    for (int i = 0; i < 2; i++) {
        cudaFree(g->d_x[i]), cudaFree(g->d_missing[i]), cudaFree(g->d_out[i]);
        cudaFree(g->d_logp[i]);
        if (g->h_x[i]) cudaFreeHost(g->h_x[i]);
        if (g->h_missing[i]) cudaFreeHost(g->h_missing[i]);
        if (g->h_out[i]) cudaFreeHost(g->h_out[i]);
        if (g->h_logp[i]) cudaFreeHost(g->h_logp[i]);
        if (g->done[i]) cudaEventDestroy(g->done[i]);
    }
    if (s->stream) cudaStreamDestroy(s->stream);
    if (entered) pc_gq_leave(s, prev);
    free(s);
}

pc_status pc_gq_create(const void *backend_state, const pc_circuit *c, const pc_eval_opts *opts,
                       void **out) {
    const pc_gpu_state *g = (const pc_gpu_state *)backend_state;
    *out = NULL;
    pc_gq_state *s = (pc_gq_state *)calloc(1, sizeof *s);
    if (!s) return pc_fail(PC_ERR_NOMEM, "GPU queries: out of host memory");
    s->c = c, s->device = g->dev.id, s->launch.sms = g->dev.sms;
    int prev = 0;
    pc_status st = pc_gq_enter(s, &prev);
    if (st != PC_OK) {
        free(s);
        return st;
    }
    st = configure(s, &g->dev, opts->max_batch);
    pc_gq_leave(s, prev);
    if (st != PC_OK) {
        pc_gq_destroy(s);
        return st;
    }
    *out = s;
    return PC_OK;
}
