/* GPU EM: creation, parameters, data, counts and the M-step (em_gpu.h, em_gpu_state.cuh). */
#include "base/fail.h"
#include "learn/cuda/em_gpu_state.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows per pass at most: the GPU is busy from a few thousand rows on, memory grows linearly. */
#define PC_EM_CHUNK_MAX 8192
/* Share of the device's memory a state may take. */
#define PC_EM_MEM_SHARE 0.8
/* cuBLAS's workspace (its guide asks for 32 MiB on Hopper when capturing graphs). */
#define PC_EM_BLAS_WS (32u << 20)
/* Largest K: KPL = K / 32 values per lane held in registers. */
#define PC_EM_GPU_MAX_K 1024

pc_status pc_em_gpu_alloc(void **ptr, size_t bytes, const char *what) {
    return pc_cuda_alloc_for(ptr, bytes, "GPU EM", what);
}

pc_status pc_em_gpu_enter(const pc_em_gpu *g, int *prev) {
    pc_status st = PC_OK;
    PC_CUDA_CHECK(cudaGetDevice(prev));
    if (*prev != g->dev) PC_CUDA_CHECK(cudaSetDevice(g->dev));
fail:
    return st;
}

void pc_em_gpu_leave(const pc_em_gpu *g, int prev) {
    if (prev != g->dev) cudaSetDevice(prev);
}

pc_em_args pc_em_gpu_args(const pc_em_gpu *g) {
    const pc_em_plan *p = g->plan;
    pc_em_args a;
    a.var_start = g->d_var_start, a.vars = g->d_vars;
    a.child_start = g->d_child_start, a.children = g->d_children;
    a.var_group = g->d_var_group, a.root_w = g->d_root;
    a.strand_start = g->d_strand_start, a.strand_groups = g->d_strand_groups;
    a.xc = g->d_xc, a.xct = g->d_xct, a.off = g->d_off, a.logp = g->d_logp;
    a.chunk = p->chunk;
    a.V = p->V, a.C = p->C, a.K = p->K, a.G = p->G;
    a.tw = pc_em_plan_lanes(p);
    return a;
}

void pc_em_gpu_drop_graphs(pc_em_gpu *g) {
    for (int i = 0; i < PC_EM_GRAPHS; i++) {
        if (g->graphs[i].exec) cudaGraphExecDestroy(g->graphs[i].exec);
        g->graphs[i] = {};
    }
}

/* The device: opts->cuda_device modulo the number of GPUs (so a rank's number picks one), the
 * current one when it is negative; PC_ERR_NO_DEVICE without any. */
static pc_status pick_device(pc_em_gpu *g, const pc_em_opts *opts) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        (void)cudaGetLastError();
        return pc_fail(PC_ERR_NO_DEVICE, "EM on the GPU needs an NVIDIA GPU: %s",
                       e != cudaSuccess ? cudaGetErrorString(e) : "no device found");
    }
    if (opts->cuda_device >= 0) {
        g->dev = opts->cuda_device % count;
    } else if (cudaGetDevice(&g->dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return pc_fail(PC_ERR_CUDA, "EM on the GPU: no current device");
    }
    return PC_OK;
}

/* The largest chunk (halved from the limit) whose buffers fit the budget: a share of the GPU's
 * whole memory, not of what is free now, so that the chunk (and with it how a full-batch step
 * is cut into passes, which decides the last bits) is the same on every run on this GPU. */
static pc_status choose_chunk(pc_em_gpu *g, const pc_hclt *model, int64_t max_chunk) {
    pc_status st = PC_OK;
    size_t free_b = 0, total_b = 0;
    int64_t chunk = max_chunk > 0 && max_chunk < PC_EM_CHUNK_MAX ? max_chunk : PC_EM_CHUNK_MAX;
    PC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if ((st = pc_em_plan_create(model, chunk, &g->plan))) return st;
    {
        const double budget = PC_EM_MEM_SHARE * (double)total_b - PC_EM_BLAS_WS;
        while (chunk > 32 && pc_em_plan_bytes(g->plan, chunk, g->elem) > budget) chunk /= 2;
        const double need = pc_em_plan_bytes(g->plan, chunk, g->elem);
        if (need > budget)
            return pc_fail(PC_ERR_DEVICE_MEMORY,
                           "GPU EM: the model (V = %d, C = %d, K = %d, %d groups) needs %.1f MiB "
                           "of GPU memory even for %lld rows per pass; %.1f MiB of %.1f MiB are "
                           "free",
                           g->plan->V, g->plan->C, g->plan->K, g->plan->G, need / 1048576.0,
                           (long long)chunk, free_b / 1048576.0, total_b / 1048576.0);
        g->plan->chunk = chunk;
    }
fail:
    return st;
}

static pc_status upload(pc_em_gpu *g, void **dst, const void *src, size_t bytes,
                        const char *what) {
    pc_status st = pc_em_gpu_alloc(dst, bytes, what);
    if (st || bytes == 0) return st;
    PC_CUDA_CHECK(cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice));
fail:
    return st;
}

/* src [count] doubles rounded to FP32 into a new device array. */
static pc_status upload_f32(pc_em_gpu *g, void **dst, const double *src, size_t count,
                            const char *what) {
    float *f = (float *)malloc(count * sizeof(float));
    if (!f) return pc_fail(PC_ERR_NOMEM, "GPU EM: %s in FP32", what);
    for (size_t i = 0; i < count; i++) f[i] = (float)src[i];
    const pc_status st = upload(g, dst, f, count * 4, what);
    free(f);
    return st;
}

static pc_status upload_structure(pc_em_gpu *g) {
    const pc_circuit *c = g->plan->circuit;
    const size_t G = (size_t)c->num_groups, V = (size_t)c->num_vars;
    pc_status st = PC_OK;
    if ((st = upload(g, (void **)&g->d_var_start, c->var_start, (G + 1) * 4, "structure")) ||
        (st = upload(g, (void **)&g->d_vars, c->group_vars, V * 4, "structure")) ||
        (st = upload(g, (void **)&g->d_child_start, c->child_start, (G + 1) * 4, "structure")) ||
        (st = upload(g, (void **)&g->d_children, c->group_children, (G > 1 ? G - 1 : 1) * 4,
                     "structure")) ||
        (st = upload(g, (void **)&g->d_var_group, g->plan->var_group, V * 4, "structure")) ||
        (st = upload(g, (void **)&g->d_parent, g->plan->parent, G * 4, "structure")) ||
        (st = upload(g, (void **)&g->d_path_start, g->plan->path_start,
                     ((size_t)g->plan->num_paths + 1) * 4, "structure")) ||
        (st = upload(g, (void **)&g->d_path_groups, g->plan->path_groups, G * 4, "structure")) ||
        (st = upload(g, (void **)&g->d_path_of, g->plan->path_of, G * 4, "structure")))
        return st;
    const pc_em_plan *p = g->plan;
    const size_t strands = p->num_chains ? (size_t)p->chains[p->num_chains - 1].s1 : 0;
    const size_t placed = (size_t)p->strand_start[strands];
    if ((st = upload(g, (void **)&g->d_strand_start, p->strand_start, (strands + 1) * 4,
                     "structure")) ||
        (st = upload(g, (void **)&g->d_strand_groups, p->strand_groups,
                     (placed > 0 ? placed : 1) * 4, "structure")))
        return st;
    return PC_OK;
}

/* The parameters (FP64 and the compute copies) and zeroed counts. */
static pc_status upload_params(pc_em_gpu *g, const pc_hclt *model) {
    const pc_em_plan *p = g->plan;
    const size_t K = (size_t)p->K, trans = (size_t)(p->G - 1) * K * K;
    const size_t input = (size_t)p->V * (p->C + 1) * K, counts = (size_t)p->V * p->C * K;
    double *root = (double *)malloc(K * 8), *tr = (double *)malloc((trans ? trans : 1) * 8);
    double *in = (double *)malloc(input * 8);
    pc_status st = PC_OK;
    if (!root || !tr || !in) {
        st = pc_fail(PC_ERR_NOMEM, "GPU EM: host copy of the parameters");
        goto fail;
    }
    pc_em_plan_pack(p, model, root, tr, in);
    if ((st = upload(g, (void **)&g->d_root, root, K * 8, "parameters")) ||
        (st = upload(g, (void **)&g->d_trans, tr, trans * 8, "parameters")) ||
        (st = upload(g, (void **)&g->d_input, in, input * 8, "parameters")))
        goto fail;
    if (g->f32 && !pc_em_plan_fused(p)) { /* the fused kernels read the FP64 tables */
        if ((st = upload_f32(g, &g->d_trans_c, tr, trans, "FP32 transitions")) ||
            (st = upload_f32(g, &g->d_input_c, in, input, "FP32 inputs")))
            goto fail;
    } else {
        g->d_trans_c = g->d_trans, g->d_input_c = g->d_input;
    }
    if ((st = pc_em_gpu_alloc((void **)&g->d_n_root, K * 8, "counts")) ||
        (st = pc_em_gpu_alloc((void **)&g->d_n_trans, trans * 8, "counts")) ||
        (st = pc_em_gpu_alloc((void **)&g->d_n_input, counts * 8, "counts")))
        goto fail;
    st = pc_em_gpu_clear_counts(g);
fail:
    free(root), free(tr), free(in);
    return st;
}

/* A pass's buffers, the pinned host buffers, the stream and cuBLAS. */
static pc_status alloc_pass(pc_em_gpu *g) {
    const pc_em_plan *p = g->plan;
    const size_t ch = (size_t)p->chunk, V = (size_t)p->V, G = (size_t)p->G;
    pc_status st = PC_OK;
    g->d_buf[PC_EM_BUF_W] = g->d_trans_c;
    g->fused = pc_em_plan_fused(p);
    for (int b = 1; b < PC_EM_BUFS; b++) {
        if (g->fused && (b == PC_EM_BUF_U || b == PC_EM_BUF_F)) continue;
        if ((st = pc_em_gpu_alloc(&g->d_buf[b],
                                  (size_t)pc_em_plan_elems(p, (pc_em_buf)b) * g->elem,
                                  "pass buffers")))
            return st;
    }
    if (pc_em_plan_wave_elems(p, p->chunk) > INT32_MAX)
        return pc_fail(PC_ERR_UNSUPPORTED, "GPU EM: %d groups are too many for the fused path",
                       p->G);
    if ((st = pc_em_gpu_alloc((void **)&g->d_partial,
                              (size_t)pc_em_plan_partial_elems(p, p->chunk) * 8, "tile flows")) ||
        (st = pc_em_gpu_alloc((void **)&g->d_wave,
                              (size_t)pc_em_plan_wave_elems(p, p->chunk) * 4, "counters")))
        return st;
    if ((st = pc_em_gpu_alloc((void **)&g->d_off, G * ch * 4, "offsets")) ||
        (st = pc_em_gpu_alloc((void **)&g->d_xc, ch * V * 2, "rows")) ||
        (st = pc_em_gpu_alloc((void **)&g->d_xct, ch * V * 2, "rows")) ||
        (st = pc_em_gpu_alloc((void **)&g->d_logp, ch * 8, "log p(x)")) ||
        (st = pc_em_gpu_alloc((void **)&g->d_rows, ch * 8, "row indices")) ||
        (st = pc_em_gpu_alloc((void **)&g->d_scale, 8, "scale")) ||
        (st = pc_em_gpu_alloc(&g->d_ws, PC_EM_BLAS_WS, "cuBLAS workspace")))
        return st;
    PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_rows, ch * 8, cudaHostAllocDefault));
    PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_logp, ch * 8, cudaHostAllocDefault));
    PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_scale, 8, cudaHostAllocDefault));
    PC_CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    if ((st = pc_em_blas_load(&g->blas))) return st;
    PC_CUBLAS_CHECK(g->blas->base->create(&g->handle));
    PC_CUBLAS_CHECK(g->blas->base->set_math_mode(g->handle, CUBLAS_DEFAULT_MATH));
    PC_CUBLAS_CHECK(g->blas->base->set_workspace(g->handle, g->d_ws, PC_EM_BLAS_WS));
    PC_CUBLAS_CHECK(g->blas->base->set_stream(g->handle, g->stream));
fail:
    return st;
}

extern "C" pc_status pc_em_gpu_create(const pc_hclt *model, const pc_em_opts *opts,
                                      pc_em_gpu **out) {
    pc_status st = PC_OK;
    int prev = -1;
    *out = NULL;
    if (model->num_latents > PC_EM_GPU_MAX_K)
        return pc_fail(PC_ERR_UNSUPPORTED, "EM on the GPU takes K <= %d, not %d",
                       PC_EM_GPU_MAX_K, model->num_latents);
    if (model->num_cats > 65535)
        return pc_fail(PC_ERR_UNSUPPORTED, "EM on the GPU takes C <= 65535, not %d",
                       model->num_cats);
    pc_em_gpu *g = (pc_em_gpu *)calloc(1, sizeof *g);
    if (!g) return pc_fail(PC_ERR_NOMEM, "GPU EM: state");
    g->f32 = opts->f32 != 0;
    g->elem = g->f32 ? 4 : 8;
    if ((st = pick_device(g, opts))) goto fail;
    if ((st = pc_em_gpu_enter(g, &prev))) goto fail;
    if ((st = choose_chunk(g, model, opts->max_chunk)) || (st = upload_structure(g)) ||
        (st = upload_params(g, model)) || (st = alloc_pass(g)))
        goto fail;
    pc_em_gpu_leave(g, prev);
    *out = g;
    return PC_OK;
fail:
    if (prev >= 0) pc_em_gpu_leave(g, prev);
    pc_em_gpu_free(g);
    return st;
}

static void free_data(pc_em_gpu *g) {
    cudaFree(g->d_values), cudaFree(g->d_missing);
    g->d_values = g->d_missing = NULL;
    g->attached = NULL;
}

extern "C" void pc_em_gpu_free(pc_em_gpu *g) {
    if (!g) return;
    /* Entered quietly: freeing a state that failed for want of a GPU must leave that failure's
     * message, not replace it with its own. */
    int prev = 0;
    const int entered = cudaGetDevice(&prev) == cudaSuccess &&
                        (prev == g->dev || cudaSetDevice(g->dev) == cudaSuccess);
    if (!entered) (void)cudaGetLastError();
    if (g->stream) cudaStreamSynchronize(g->stream);
    pc_em_gpu_drop_graphs(g);
    if (g->handle) g->blas->base->destroy(g->handle);
    if (g->d_trans_c != g->d_trans) cudaFree(g->d_trans_c);
    if (g->d_input_c != g->d_input) cudaFree(g->d_input_c);
    for (int b = 1; b < PC_EM_BUFS; b++) cudaFree(g->d_buf[b]);
    void *dev[] = {g->d_var_start, g->d_vars, g->d_child_start, g->d_children, g->d_var_group,
                   g->d_strand_start, g->d_strand_groups, g->d_parent, g->d_path_start,
                   g->d_path_groups, g->d_path_of, g->d_wave,
                   g->d_root, g->d_trans, g->d_input, g->d_n_root, g->d_n_trans, g->d_n_input,
                   g->d_off, g->d_xc, g->d_xct, g->d_logp, g->d_scale, g->d_rows, g->d_ws,
                   g->d_stage_values, g->d_stage_missing, g->d_partial};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaFree(dev[i]);
    free_data(g);
    void *host[] = {g->h_rows, g->h_logp, g->h_scale, g->h_stage_values, g->h_stage_missing};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        if (host[i]) cudaFreeHost(host[i]);
    if (g->stream) cudaStreamDestroy(g->stream);
    if (entered) pc_em_gpu_leave(g, prev);
    pc_em_plan_free(g->plan);
    free(g);
}

extern "C" int pc_em_gpu_is_attached(const pc_em_gpu *g, const pc_data *data) {
    return g->attached && g->attached == data && g->attached_count == data->count &&
           g->attached_width == data->width && g->attached_values == data->values &&
           g->attached_missing == data->missing;
}

/* Fails with PC_ERR_DATA at the first observed value >= C. */
static pc_status check_values(const pc_em_gpu *g, const pc_data *d) {
    const int64_t total = d->count * (int64_t)d->width;
    for (int64_t i = 0; i < total; i++)
        if (d->values[i] >= g->plan->C && !(d->missing && d->missing[i]))
            return pc_fail(PC_ERR_DATA,
                           "EM: value %d at row %lld, variable %lld is not below num_cats = %d",
                           d->values[i], (long long)(i / d->width), (long long)(i % d->width),
                           g->plan->C);
    return PC_OK;
}

extern "C" pc_status pc_em_gpu_attach(pc_em_gpu *g, const pc_data *data) {
    pc_status st = PC_OK;
    int prev = 0;
    if (data && data->width != g->plan->V)
        return pc_fail(PC_ERR_DATA, "EM: data has %d variables per sample, the model %d",
                       data->width, g->plan->V);
    if (data && (st = check_values(g, data))) return st;
    if ((st = pc_em_gpu_enter(g, &prev))) return st;
    PC_CUDA_CHECK(cudaStreamSynchronize(g->stream));
    pc_em_gpu_drop_graphs(g);
    free_data(g);
    if (data && data->count > 0) {
        const size_t bytes = (size_t)data->count * (size_t)data->width;
        if ((st = upload(g, (void **)&g->d_values, data->values, bytes, "the data")) ||
            (data->missing &&
             (st = upload(g, (void **)&g->d_missing, data->missing, bytes, "the data's mask"))))
            goto fail;
        g->attached = data;
        g->attached_count = data->count;
        g->attached_width = data->width;
        g->attached_values = data->values;
        g->attached_missing = data->missing;
    }
fail:
    if (st) free_data(g);
    pc_em_gpu_leave(g, prev);
    return st;
}

extern "C" pc_status pc_em_gpu_counts(pc_em_gpu *g, int64_t *root, int64_t *trans,
                                      int64_t *input, int to_device) {
    pc_status st = PC_OK;
    int prev = 0;
    const pc_em_plan *p = g->plan;
    const size_t K = (size_t)p->K, sizes[3] = {K * 8, (size_t)(p->G - 1) * K * K * 8,
                                                (size_t)p->V * p->C * K * 8};
    void *dev[3] = {g->d_n_root, g->d_n_trans, g->d_n_input}, *host[3] = {root, trans, input};
    if ((st = pc_em_gpu_enter(g, &prev))) return st;
    PC_CUDA_CHECK(cudaStreamSynchronize(g->stream));
    for (int i = 0; i < 3; i++) {
        if (!sizes[i]) continue;
        if (to_device)
            PC_CUDA_CHECK(cudaMemcpy(dev[i], host[i], sizes[i], cudaMemcpyHostToDevice));
        else
            PC_CUDA_CHECK(cudaMemcpy(host[i], dev[i], sizes[i], cudaMemcpyDeviceToHost));
    }
fail:
    pc_em_gpu_leave(g, prev);
    return st;
}

extern "C" pc_status pc_em_gpu_clear_counts(pc_em_gpu *g) {
    pc_status st = PC_OK;
    int prev = 0;
    const pc_em_plan *p = g->plan;
    const size_t K = (size_t)p->K;
    if ((st = pc_em_gpu_enter(g, &prev))) return st;
    PC_CUDA_CHECK(cudaMemset(g->d_n_root, 0, K * 8));
    if (p->G > 1) PC_CUDA_CHECK(cudaMemset(g->d_n_trans, 0, (size_t)(p->G - 1) * K * K * 8));
    PC_CUDA_CHECK(cudaMemset(g->d_n_input, 0, (size_t)p->V * p->C * K * 8));
    PC_CUDA_CHECK(cudaDeviceSynchronize());
fail:
    pc_em_gpu_leave(g, prev);
    return st;
}

template <typename T>
static pc_status launch_update(pc_em_gpu *g, const pc_em_update_args &u) {
    const int tk = u.K < 32 ? u.K : 32; /* inputs: states per block, slices of the categories */
    const dim3 in_grid((unsigned)u.V, (unsigned)((u.K + tk - 1) / tk)); /* V may pass 65535 */
    const dim3 in_block((unsigned)tk, (unsigned)(PC_EM_THREADS / tk));
    pc_status st = PC_OK;
    const int64_t trans_blocks = (u.trans_rows + PC_EM_THREADS / 32 - 1) / (PC_EM_THREADS / 32);
    const int copies = g->d_trans_c != g->d_trans; /* FP32 copies for the GEMM path */
    T *trans_c = copies ? (T *)g->d_trans_c : NULL, *input_c = copies ? (T *)g->d_input_c : NULL;
    pc_em_update_root<<<1, 1, 0, g->stream>>>(u, g->d_root, g->d_n_root);
    PC_CUDA_CHECK(cudaGetLastError());
    if (u.trans_rows > 0) {
        pc_em_update_trans<T><<<(unsigned)trans_blocks, PC_EM_THREADS, 0, g->stream>>>(
            u, g->d_trans, trans_c, g->d_n_trans); /* a warp per row */
        PC_CUDA_CHECK(cudaGetLastError());
    }
    pc_em_update_input<T><<<in_grid, in_block, 0, g->stream>>>(u, g->d_input, input_c,
                                                               g->d_n_input);
    PC_CUDA_CHECK(cudaGetLastError());
fail:
    return st;
}

extern "C" pc_status pc_em_gpu_update(pc_em_gpu *g, double inv_scale, double step,
                                      double pseudocount) {
    int prev = 0;
    const pc_em_plan *p = g->plan;
    pc_status st = pc_em_gpu_enter(g, &prev);
    if (st) return st;
    pc_em_update_args u;
    u.inv_scale = inv_scale, u.step = step, u.pseudocount = pseudocount;
    u.V = p->V, u.C = p->C, u.K = p->K;
    u.trans_rows = (int64_t)(p->G - 1) * p->K;
    st = g->f32 ? launch_update<float>(g, u) : launch_update<double>(g, u);
    pc_em_gpu_leave(g, prev);
    return st;
}

extern "C" pc_status pc_em_gpu_export(const pc_em_gpu *g, pc_hclt *model) {
    pc_status st = PC_OK;
    int prev = 0, entered = 0;
    const pc_em_plan *p = g->plan;
    const size_t K = (size_t)p->K, trans = (size_t)(p->G - 1) * K * K;
    const size_t input = (size_t)p->V * (p->C + 1) * K;
    double *root = (double *)malloc(K * 8), *tr = (double *)malloc((trans ? trans : 1) * 8);
    double *in = (double *)malloc(input * 8);
    if (!root || !tr || !in) {
        free(root), free(tr), free(in);
        return pc_fail(PC_ERR_NOMEM, "GPU EM export: host copy of the parameters");
    }
    if ((st = pc_em_gpu_enter(g, &prev))) goto fail;
    entered = 1;
    PC_CUDA_CHECK(cudaStreamSynchronize(g->stream));
    PC_CUDA_CHECK(cudaMemcpy(root, g->d_root, K * 8, cudaMemcpyDeviceToHost));
    if (trans) PC_CUDA_CHECK(cudaMemcpy(tr, g->d_trans, trans * 8, cudaMemcpyDeviceToHost));
    PC_CUDA_CHECK(cudaMemcpy(in, g->d_input, input * 8, cudaMemcpyDeviceToHost));
    pc_em_plan_unpack(p, root, tr, in, model);
fail:
    if (entered) pc_em_gpu_leave(g, prev);
    free(root), free(tr), free(in);
    return st;
}
