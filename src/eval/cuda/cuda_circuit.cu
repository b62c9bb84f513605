/* Host side of the GPU circuit engine: the slot plan, parameter upload, buffers sized once,
 * CUDA graphs per batch size, and batches streamed through pinned buffers on two streams
 * (copies on one, the graph on the other) so that the next chunk's upload overlaps compute. */
#include "base/fail.h"
#include "eval/cuda/cuda_circuit.cuh"
#include "eval/cuda/cuda_circuit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Largest internal batch: buffers beyond this gain nothing (the GPU is full at ~4k samples)
 * while memory grows linearly. */
#define PC_GPU_CHUNK_MAX 16384
/* Fraction of the free device memory the evaluator may take. */
#define PC_GPU_MEM_SHARE 0.9

pc_status pc_gpu_alloc(pc_gpu_state *s, void **ptr, size_t bytes, const char *what) {
    *ptr = NULL;
    if (bytes == 0) return PC_OK;
    cudaError_t e = cudaMalloc(ptr, bytes);
    if (e != cudaSuccess) {
        *ptr = NULL;
        (void)cudaGetLastError();
        return pc_fail(e == cudaErrorMemoryAllocation ? PC_ERR_DEVICE_MEMORY : PC_ERR_CUDA,
                       "cudaMalloc of %.1f MiB for %s failed: %s", bytes / 1048576.0, what,
                       cudaGetErrorString(e));
    }
    s->bytes += bytes;
    if (s->bytes > s->peak_bytes) s->peak_bytes = s->bytes;
    return PC_OK;
}

void pc_gpu_release(pc_gpu_state *s, void *ptr, size_t bytes) {
    if (!ptr) return;
    cudaFree(ptr);
    s->bytes -= bytes;
}

/* ---- plan ---------------------------------------------------------------------------------*/

/* The slot plan (src/eval/cuda/gpu_plan.c, tested without a GPU) into the host copy of the groups;
 * with the warp strategy also its chain plans, each chain with a slot of its own. */
static pc_status plan_slots(pc_gpu_state *s) {
    pc_status st = PC_OK;
    s->h_groups = (pc_gpu_group *)calloc((size_t)s->G, sizeof(pc_gpu_group));
    if (!s->h_groups)
        return pc_fail(PC_ERR_NOMEM, "GPU plan for %d groups: out of host memory", s->G);
    if ((st = pc_gpu_plan(s->circuit, s->h_groups, &s->num_slots))) return st;
    if (!s->warp_ok) return PC_OK;
    const int32_t longest[PC_GPU_CHAIN_PLANS] = {PC_GPU_CHAIN_SHORT, PC_GPU_CHAIN_LONG};
    for (int p = 0; p < PC_GPU_CHAIN_PLANS; p++) {
        if ((st = pc_gpu_chain_plan(s->circuit, longest[p], PC_GPU_CHAIN_WINDOW_VARS,
                                    &s->chains[p])))
            return st;
        if (s->chains[p].num_chains > s->num_slots) s->num_slots = s->chains[p].num_chains;
    }
    return PC_OK;
}

/* Device bytes for a chunk of `chunk` samples. */
static size_t bytes_for(const pc_gpu_state *s, int64_t chunk, size_t *fixed_out) {
    const size_t K = (size_t)s->K, G = (size_t)s->G, V = (size_t)s->V;
    size_t fixed = G * sizeof(pc_gpu_group) + V * 4 + 2 * G * 4 + V * ((size_t)s->C + 1) * K * 4 +
                   G * K * K * 4 + K * 8 + (1 << 16);
    size_t tiles = (size_t)((chunk + s->bm - 1) / s->bm);
    size_t per = (size_t)s->num_slots * (size_t)chunk * (K * 4 + 8) + 2 * (size_t)chunk * V * 2 +
                 2 * (size_t)chunk * 8 + (G * tiles + 1) * 4;
    if (fixed_out) *fixed_out = fixed;
    return fixed + per + (s->impl->extra_bytes ? s->impl->extra_bytes(s, chunk) : 0);
}

static pc_status choose_chunk(pc_gpu_state *s, int64_t max_batch) {
    pc_status st = PC_OK;
    size_t free_b = 0, total_b = 0, fixed = 0;
    PC_GPU_CHECK(cudaMemGetInfo(&free_b, &total_b));
    {
        const double budget = PC_GPU_MEM_SHARE * (double)free_b;
        int64_t chunk = max_batch < PC_GPU_CHUNK_MAX ? max_batch : PC_GPU_CHUNK_MAX;
        while ((double)bytes_for(s, chunk, &fixed) > budget && chunk > s->bm) chunk /= 2;
        if ((double)bytes_for(s, chunk, &fixed) > budget)
            return pc_fail(PC_ERR_DEVICE_MEMORY,
                           "model (V=%d, C=%d, K=%d, %d groups) needs %.1f MiB of GPU memory "
                           "even for %lld samples at a time; %.1f MiB of %.1f MiB are free",
                           s->V, s->C, s->K, s->G, bytes_for(s, chunk, NULL) / 1048576.0,
                           (long long)chunk, free_b / 1048576.0, total_b / 1048576.0);
        s->chunk = chunk;
        s->max_tiles = (int32_t)((chunk + s->bm - 1) / s->bm);
    }
fail:
    return st;
}

/* ---- upload -------------------------------------------------------------------------------*/

static pc_status upload_common(pc_gpu_state *s) {
    pc_status st = PC_OK;
    const pc_circuit *c = s->circuit;
    const int32_t V = s->V, C = s->C, K = s->K, G = s->G;
    const size_t in_n = (size_t)V * (size_t)(C + 1) * (size_t)K;
    float *h_in = (float *)malloc(in_n * sizeof(float));
    int32_t *h_cs = (int32_t *)malloc(sizeof(int32_t) * (size_t)(G > 1 ? G - 1 : 1));
    if (!h_in || !h_cs) {
        st = pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for %zu input values", in_n);
        goto fail;
    }
    /* input[v][c][k]; row C holds LSE_c input_logp[v, k, c] (the marginal), in FP64. */
    for (int32_t v = 0; v < V; v++) {
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
    for (int32_t i = 0; i < G - 1; i++) h_cs[i] = s->h_groups[c->group_children[i]].slot;

    if ((st = pc_gpu_alloc(s, (void **)&s->d_groups, sizeof(pc_gpu_group) * G, "groups"))) goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_vars, sizeof(int32_t) * V, "variables"))) goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_children, sizeof(int32_t) * (G - 1 + 1), "children")))
        goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_child_slot, sizeof(int32_t) * (G - 1 + 1), "slots")))
        goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_input, in_n * sizeof(float), "input_logp"))) goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_root_logw, sizeof(double) * K, "root_logw"))) goto fail;
    PC_GPU_CHECK(cudaMemcpy(s->d_groups, s->h_groups, sizeof(pc_gpu_group) * G,
                            cudaMemcpyHostToDevice));
    PC_GPU_CHECK(cudaMemcpy(s->d_vars, c->group_vars, sizeof(int32_t) * V, cudaMemcpyHostToDevice));
    if (G > 1) {
        PC_GPU_CHECK(cudaMemcpy(s->d_children, c->group_children, sizeof(int32_t) * (G - 1),
                                cudaMemcpyHostToDevice));
        PC_GPU_CHECK(cudaMemcpy(s->d_child_slot, h_cs, sizeof(int32_t) * (G - 1),
                                cudaMemcpyHostToDevice));
    }
    PC_GPU_CHECK(cudaMemcpy(s->d_input, h_in, in_n * sizeof(float), cudaMemcpyHostToDevice));
    PC_GPU_CHECK(cudaMemcpy(s->d_root_logw, c->root_logw, sizeof(double) * K,
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
    pc_status st = PC_OK;
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
    if ((st = pc_gpu_alloc(s, (void **)dst, bytes, "exp(trans_logw), padded"))) goto fail;
    PC_GPU_CHECK(cudaMemcpy(*dst, h, bytes, cudaMemcpyHostToDevice));
fail:
    free(h);
    return st;
}

pc_status pc_gpu_upload_wexp(pc_gpu_state *s) {
    pc_status st = PC_OK;
    const pc_circuit *c = s->circuit;
    const size_t K = (size_t)s->K, G = (size_t)s->G;
    float *h = (float *)calloc(G * K * K, sizeof(float));
    if (!h) return pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for weights");
    for (size_t g = 0; g < G; g++) {
        int32_t t = c->group_trans[g];
        if (t < 0) continue;
        const double *w = c->trans_logw + (size_t)t * K * K;
        for (size_t j = 0; j < K; j++)
            for (size_t k = 0; k < K; k++) h[(g * K + k) * K + j] = (float)exp(w[j * K + k]);
    }
    if ((st = pc_gpu_alloc(s, (void **)&s->d_wexp, G * K * K * sizeof(float), "exp(trans_logw)")))
        goto fail;
    PC_GPU_CHECK(cudaMemcpy(s->d_wexp, h, G * K * K * sizeof(float), cudaMemcpyHostToDevice));
fail:
    free(h);
    return st;
}

pc_status pc_gpu_reset_counters(const pc_gpu_args *a, cudaStream_t stream) {
    pc_status st = PC_OK;
    PC_GPU_CHECK(cudaMemsetAsync(a->done, 0, (size_t)a->G * a->tiles * sizeof(int32_t), stream));
    PC_GPU_CHECK(cudaMemsetAsync(a->queue, 0, sizeof(int32_t), stream));
fail:
    return st;
}

static pc_status alloc_buffers(pc_gpu_state *s) {
    pc_status st = PC_OK;
    const size_t ch = (size_t)s->chunk, V = (size_t)s->V;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_off, (size_t)s->num_slots * ch * 8, "offsets")))
        return st;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_rel, (size_t)s->num_slots * ch * s->K * 4, "messages")))
        return st;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_done,
                           ((size_t)s->G * s->max_tiles + 1) * sizeof(int32_t), "counters")))
        return st;
    for (int i = 0; i < 2; i++) {
        if ((st = pc_gpu_alloc(s, (void **)&s->d_x[i], ch * V, "samples"))) return st;
        if ((st = pc_gpu_alloc(s, (void **)&s->d_missing[i], ch * V, "missing mask"))) return st;
        if ((st = pc_gpu_alloc(s, (void **)&s->d_logp[i], ch * 8, "log p(x)"))) return st;
        PC_GPU_CHECK(cudaHostAlloc((void **)&s->h_x[i], ch * V, cudaHostAllocDefault));
        PC_GPU_CHECK(cudaHostAlloc((void **)&s->h_missing[i], ch * V, cudaHostAllocDefault));
        PC_GPU_CHECK(cudaHostAlloc((void **)&s->h_logp[i], ch * 8, cudaHostAllocDefault));
        PC_GPU_CHECK(cudaEventCreateWithFlags(&s->ev_in[i], cudaEventDisableTiming));
        PC_GPU_CHECK(cudaEventCreateWithFlags(&s->ev_out[i], cudaEventDisableTiming));
    }
    PC_GPU_CHECK(cudaStreamCreateWithFlags(&s->compute, cudaStreamNonBlocking));
    PC_GPU_CHECK(cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking));
fail:
    return st;
}

/* ---- ops ----------------------------------------------------------------------------------*/

pc_status pc_gpu_create(const pc_gpu_impl *impl, const pc_circuit *circuit,
                        const pc_eval_opts *opts, void **state) {
    pc_status st = PC_OK;
    pc_gpu_state *s = NULL;
    int devices = 0;
    *state = NULL;
    if (!circuit || !opts || opts->max_batch < 1)
        return pc_fail(PC_ERR_ARG, "GPU backend '%s': circuit, opts and max_batch >= 1 are required",
                       pc_backend_name(impl->backend));
    if (circuit->num_latents < 1 || circuit->num_vars < 1 || circuit->num_groups < 1 ||
        circuit->num_cats < 2)
        return pc_fail(PC_ERR_ARG, "GPU backend '%s': empty circuit", pc_backend_name(impl->backend));
    {
        cudaError_t e = cudaGetDeviceCount(&devices);
        if (e != cudaSuccess || devices < 1) {
            (void)cudaGetLastError();
            return pc_fail(PC_ERR_NO_DEVICE, "backend '%s' needs an NVIDIA GPU: %s",
                           pc_backend_name(impl->backend),
                           e != cudaSuccess ? cudaGetErrorString(e) : "no device found");
        }
    }
    s = (pc_gpu_state *)calloc(1, sizeof(*s));
    if (!s) return pc_fail(PC_ERR_NOMEM, "GPU backend: out of host memory");
    s->impl = impl, s->circuit = circuit;
    /* fuse runs the same circuit with zero-probability states up to pc_gpu_fuse_states(K)
     * (a multiple of 4 for its 16-byte loads; the tile kernel's row where that is faster):
     * the same log p(x). Every fuse strategy is created here, so its kernels may rely on it. */
    const int32_t KF = pc_gpu_fuse_states(circuit->num_latents);
    if (impl->backend == PC_BACKEND_FUSE && KF != circuit->num_latents) {
        /* The copy takes host memory for every parameter: a model whose input table alone
         * exceeds the GPU's memory fails first, as it would unpadded (choose_chunk). */
        const double in_bytes = 4.0 * circuit->num_vars * (circuit->num_cats + 1.0) * KF;
        size_t free_b = 0, total_b = 0;
        PC_GPU_CHECK(cudaMemGetInfo(&free_b, &total_b));
        if (in_bytes > (double)total_b) {
            st = pc_fail(PC_ERR_DEVICE_MEMORY,
                         "model (V=%d, C=%d, K=%d) needs %.1f MiB of GPU memory for its input "
                         "table alone; the GPU has %.1f MiB",
                         circuit->num_vars, circuit->num_cats, KF, in_bytes / 1048576.0,
                         total_b / 1048576.0);
            goto fail;
        }
        if ((st = pc_circuit_pad_latents(circuit, KF, &s->padded))) goto fail;
        s->circuit = s->padded;
    }
    s->V = s->circuit->num_vars, s->C = s->circuit->num_cats, s->K = s->circuit->num_latents;
    s->G = s->circuit->num_groups;
    PC_GPU_CHECK(cudaDeviceGetAttribute(&s->sms, cudaDevAttrMultiProcessorCount, 0));
    if ((st = impl->configure(s))) goto fail;
    if ((st = plan_slots(s))) goto fail;
    if ((st = choose_chunk(s, opts->max_batch))) goto fail;
    if ((st = upload_common(s))) goto fail;
    if ((st = impl->upload(s))) goto fail;
    if ((st = alloc_buffers(s))) goto fail;
    if (impl->alloc_extra && (st = impl->alloc_extra(s))) goto fail;
    *state = s;
    return PC_OK;
fail:
    pc_gpu_destroy(s);
    return st;
}

void pc_gpu_fill_args(const pc_gpu_state *s, int64_t n, int buf, int has_missing,
                      pc_gpu_args *a) {
    memset(a, 0, sizeof(*a));
    a->groups = s->d_groups, a->vars = s->d_vars, a->children = s->d_children;
    a->child_slot = s->d_child_slot, a->input = s->d_input, a->wexp = s->d_wexp;
    a->wf = s->d_wf, a->wt = s->d_wt;
    a->wq = s->d_wq, a->table = s->d_table, a->root_logw = s->d_root_logw;
    a->in_lin = s->d_in_lin, a->in_max = s->d_in_max, a->root_wexp = s->d_root_wexp;
    a->x = s->d_x[buf], a->missing = has_missing ? s->d_missing[buf] : NULL;
    a->off = s->d_off, a->rel = s->d_rel, a->logp = s->d_logp[buf];
    a->done = s->d_done, a->queue = s->d_done + (size_t)s->G * s->max_tiles;
    a->chunk = s->chunk, a->n = (int32_t)n;
    a->V = s->V, a->C = s->C, a->K = s->K, a->G = s->G;
    a->tiles = (int32_t)((n + s->bm - 1) / s->bm);
    a->jtiles = (s->K + s->bn - 1) / s->bn;
}

/* The graph of one forward pass for (n, buffer, missing or not), captured on first use. */
static pc_status get_graph(pc_gpu_state *s, int64_t n, int buf, int has_missing,
                           cudaGraphExec_t *exec) {
    pc_status st = PC_OK;
    cudaGraph_t graph = NULL;
    pc_gpu_args a;
    int victim = 0;
    for (int i = 0; i < PC_GPU_GRAPHS; i++) {
        pc_gpu_graph *g = &s->graphs[i];
        if (g->exec && g->n == n && g->buf == buf && g->has_missing == has_missing) {
            g->used = ++s->graph_clock;
            if (g->strategy) s->last_strategy = g->strategy;
            *exec = g->exec;
            return PC_OK;
        }
        if (!s->graphs[i].exec || s->graphs[i].used < s->graphs[victim].used) victim = i;
    }
    if (s->graphs[victim].exec) {
        cudaGraphExecDestroy(s->graphs[victim].exec);
        s->graphs[victim].exec = NULL;
    }
    pc_gpu_fill_args(s, n, buf, has_missing, &a);
    PC_GPU_CHECK(cudaStreamBeginCapture(s->compute, cudaStreamCaptureModeThreadLocal));
    {
        pc_status est = s->impl->enqueue(s, &a, s->compute);
        cudaError_t e = cudaStreamEndCapture(s->compute, &graph);
        if (est) {
            st = est;
            goto fail;
        }
        PC_GPU_CHECK(e);
    }
    PC_GPU_CHECK(cudaGraphInstantiate(&s->graphs[victim].exec, graph, 0));
    s->graphs[victim].n = n, s->graphs[victim].buf = buf;
    s->graphs[victim].has_missing = has_missing, s->graphs[victim].used = ++s->graph_clock;
    s->graphs[victim].strategy = s->last_strategy;
    *exec = s->graphs[victim].exec;
fail:
    if (graph) cudaGraphDestroy(graph);
    return st;
}

/* Chunks of at most s->chunk samples; chunk i uses buffer i % 2. While the GPU runs chunk i,
 * the host stages chunk i + 1 and the copy stream uploads it. */
pc_status pc_gpu_evaluate(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                          double *logp) {
    pc_status st = PC_OK;
    pc_gpu_state *s = (pc_gpu_state *)state;
    const size_t V = (size_t)s->V;
    int64_t pending_start[2] = {-1, -1}, pending_n[2] = {0, 0};
    const int has_missing = missing != NULL;
    int64_t i = 0;
    for (int64_t start = 0; start < n; start += s->chunk, i++) {
        const int buf = (int)(i & 1);
        const int64_t m = n - start < s->chunk ? n - start : s->chunk;
        cudaGraphExec_t exec = NULL;
        /* The buffer's previous chunk must be out before its staging memory is reused. */
        if (pending_start[buf] >= 0) {
            PC_GPU_CHECK(cudaEventSynchronize(s->ev_out[buf]));
            memcpy(logp + pending_start[buf], s->h_logp[buf], (size_t)pending_n[buf] * 8);
            pending_start[buf] = -1;
        }
        memcpy(s->h_x[buf], x + (size_t)start * V, (size_t)m * V);
        PC_GPU_CHECK(cudaMemcpyAsync(s->d_x[buf], s->h_x[buf], (size_t)m * V,
                                     cudaMemcpyHostToDevice, s->copy));
        if (has_missing) {
            memcpy(s->h_missing[buf], missing + (size_t)start * V, (size_t)m * V);
            PC_GPU_CHECK(cudaMemcpyAsync(s->d_missing[buf], s->h_missing[buf], (size_t)m * V,
                                         cudaMemcpyHostToDevice, s->copy));
        }
        PC_GPU_CHECK(cudaEventRecord(s->ev_in[buf], s->copy));
        if ((st = get_graph(s, m, buf, has_missing, &exec))) goto fail;
        PC_GPU_CHECK(cudaStreamWaitEvent(s->compute, s->ev_in[buf], 0));
        PC_GPU_CHECK(cudaGraphLaunch(exec, s->compute));
        PC_GPU_CHECK(cudaMemcpyAsync(s->h_logp[buf], s->d_logp[buf], (size_t)m * 8,
                                     cudaMemcpyDeviceToHost, s->compute));
        PC_GPU_CHECK(cudaEventRecord(s->ev_out[buf], s->compute));
        pending_start[buf] = start, pending_n[buf] = m;
    }
    for (int buf = 0; buf < 2; buf++) {
        if (pending_start[buf] < 0) continue;
        PC_GPU_CHECK(cudaEventSynchronize(s->ev_out[buf]));
        memcpy(logp + pending_start[buf], s->h_logp[buf], (size_t)pending_n[buf] * 8);
    }
    return PC_OK;
fail:
    cudaStreamSynchronize(s->compute);
    cudaStreamSynchronize(s->copy);
    return st;
}

size_t pc_gpu_peak_bytes(const void *state) {
    return state ? ((const pc_gpu_state *)state)->peak_bytes : 0;
}

void pc_gpu_destroy(void *state) {
    pc_gpu_state *s = (pc_gpu_state *)state;
    if (!s) return;
    if (s->compute) cudaStreamSynchronize(s->compute);
    if (s->copy) cudaStreamSynchronize(s->copy);
    for (int i = 0; i < PC_GPU_GRAPHS; i++)
        if (s->graphs[i].exec) cudaGraphExecDestroy(s->graphs[i].exec);
    if (s->impl && s->impl->free_extra) s->impl->free_extra(s);
    cudaFree(s->d_groups), cudaFree(s->d_vars), cudaFree(s->d_children);
    cudaFree(s->d_child_slot), cudaFree(s->d_input), cudaFree(s->d_wexp), cudaFree(s->d_wq);
    cudaFree(s->d_table), cudaFree(s->d_root_logw), cudaFree(s->d_off), cudaFree(s->d_rel);
    cudaFree(s->d_done);
    for (int i = 0; i < 2; i++) {
        cudaFree(s->d_x[i]), cudaFree(s->d_missing[i]), cudaFree(s->d_logp[i]);
        if (s->h_x[i]) cudaFreeHost(s->h_x[i]);
        if (s->h_missing[i]) cudaFreeHost(s->h_missing[i]);
        if (s->h_logp[i]) cudaFreeHost(s->h_logp[i]);
        if (s->ev_in[i]) cudaEventDestroy(s->ev_in[i]);
        if (s->ev_out[i]) cudaEventDestroy(s->ev_out[i]);
    }
    if (s->compute) cudaStreamDestroy(s->compute);
    if (s->copy) cudaStreamDestroy(s->copy);
    free(s->h_groups);
    for (int p = 0; p < PC_GPU_CHAIN_PLANS; p++) pc_gpu_chains_free(&s->chains[p]);
    pc_circuit_free(s->padded);
    free(s);
}

/* ---- timing hook (layers/cuda_circuit.h) --------------------------------------------------*/

int64_t pc_gpu_chunk(const void *state) { return ((const pc_gpu_state *)state)->chunk; }

const char *pc_gpu_strategy(const void *state) {
    const pc_gpu_state *s = (const pc_gpu_state *)state;
    return s->impl->strategy ? s->impl->strategy : s->impl->strategy_for(s);
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

pc_status pc_gpu_time_forward(void *state, int64_t n, int warmup, int reps, uint64_t seed,
                              double *median_ms) {
    pc_status st = PC_OK;
    pc_gpu_state *s = (pc_gpu_state *)state;
    cudaGraphExec_t exec = NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    double *times = NULL;
    uint64_t r = seed * 2862933555777941757ull + 3037000493ull;
    if (n < 1 || n > s->chunk || reps < 1 || warmup < 0)
        return pc_fail(PC_ERR_ARG, "timing: n = %lld must be in [1, %lld], reps >= 1",
                       (long long)n, (long long)s->chunk);
    times = (double *)malloc(sizeof(double) * (size_t)reps);
    if (!times) return pc_fail(PC_ERR_NOMEM, "timing: out of host memory");
    for (size_t i = 0; i < (size_t)n * s->V; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        s->h_x[0][i] = (uint8_t)((r >> 33) % (uint64_t)s->C);
    }
    PC_GPU_CHECK(cudaMemcpy(s->d_x[0], s->h_x[0], (size_t)n * s->V, cudaMemcpyHostToDevice));
    PC_GPU_CHECK(cudaEventCreate(&t0));
    PC_GPU_CHECK(cudaEventCreate(&t1));
    if ((st = get_graph(s, n, 0, 0, &exec))) goto fail;
    for (int i = 0; i < warmup; i++) PC_GPU_CHECK(cudaGraphLaunch(exec, s->compute));
    for (int i = 0; i < reps; i++) {
        float ms = 0.0f;
        PC_GPU_CHECK(cudaEventRecord(t0, s->compute));
        PC_GPU_CHECK(cudaGraphLaunch(exec, s->compute));
        PC_GPU_CHECK(cudaEventRecord(t1, s->compute));
        PC_GPU_CHECK(cudaEventSynchronize(t1));
        PC_GPU_CHECK(cudaEventElapsedTime(&ms, t0, t1));
        times[i] = ms;
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    *median_ms = times[reps / 2];
fail:
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    free(times);
    return st;
}
