/* Host side of the GPU circuit engine (gpu_engine.cuh): an evaluator's creation in named steps,
 * its CUDA graphs per batch size, the batches streamed through the staging buffers, and the
 * testing hooks (gpu_hooks.h). */
#include "base/fail.h"
#include "eval/cuda/gpu_engine.cuh"

#include <stdlib.h>
#include <string.h>

#include "eval/cuda/gpu_choice.h"
#include "eval/cuda/gpu_hooks.h"

/* Largest internal batch: buffers beyond this gain nothing (the GPU is full at ~4k samples)
 * while memory grows linearly. */
#define PC_GPU_CHUNK_MAX 16384
/* Fraction of the free device memory the evaluator may take. */
#define PC_GPU_MEM_SHARE 0.9

/* Parameters uploaded for every strategy (gpu_upload.cu). */
pc_status pc_gpu_upload_common(pc_gpu_state *s);

/* ---- the evaluator's device ---------------------------------------------------------------*/

/* Makes the evaluator's device current for one of its calls; *prev gets the caller's. */
static pc_status device_enter(const pc_gpu_state *s, int *prev) {
    pc_status st = PC_OK;
    PC_CUDA_CHECK(cudaGetDevice(prev));
    if (*prev != s->dev.id) PC_CUDA_CHECK(cudaSetDevice(s->dev.id));
fail:
    return st;
}

static void device_leave(const pc_gpu_state *s, int prev) {
    if (prev != s->dev.id) cudaSetDevice(prev);
}

/* The calling thread's current device, its size and its tuning table. */
static pc_status device_query(pc_gpu_state *s) {
    pc_status st = PC_OK;
    pc_gpu_device *d = &s->dev;
    PC_CUDA_CHECK(cudaGetDevice(&d->id));
    PC_CUDA_CHECK(cudaDeviceGetAttribute(&d->sms, cudaDevAttrMultiProcessorCount, d->id));
    PC_CUDA_CHECK(
        cudaDeviceGetAttribute(&d->max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, d->id));
    PC_CUDA_CHECK(cudaDeviceGetAttribute(&d->major, cudaDevAttrComputeCapabilityMajor, d->id));
    PC_CUDA_CHECK(cudaDeviceGetAttribute(&d->minor, cudaDevAttrComputeCapabilityMinor, d->id));
    s->tuning = pc_gpu_tuning_for(d->major, d->minor);
fail:
    return st;
}

/* ---- creation -----------------------------------------------------------------------------*/

static pc_status check_circuit(const pc_gpu_impl *impl, const pc_circuit *c,
                               const pc_eval_opts *opts) {
    const char *name = pc_backend_name(impl->backend);
    if (!c || !opts || opts->max_batch < 1)
        return pc_fail(PC_ERR_ARG,
                       "GPU backend '%s': circuit, opts and max_batch >= 1 are required", name);
    if (c->num_latents < 1 || c->num_vars < 1 || c->num_groups < 1 || c->num_cats < 2)
        return pc_fail(PC_ERR_ARG, "GPU backend '%s': empty circuit", name);
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices < 1) {
        (void)cudaGetLastError();
        return pc_fail(PC_ERR_NO_DEVICE, "backend '%s' needs an NVIDIA GPU: %s", name,
                       e != cudaSuccess ? cudaGetErrorString(e) : "no device found");
    }
    return PC_OK;
}

/* fuse runs the circuit with zero-probability states up to pc_gpu_fuse_states(K): the same
 * log p(x). Every fuse strategy is created here, so its kernels may rely on it. The copy takes
 * host memory for every parameter: a model whose input table alone exceeds the GPU's memory
 * fails first, as it would unpadded (choose_chunk). */
static pc_status pad_states(pc_gpu_state *s) {
    pc_status st = PC_OK;
    const pc_circuit *c = s->circuit;
    const int32_t KF = pc_gpu_fuse_states(s->tuning, c->num_latents);
    if (s->impl->backend != PC_BACKEND_FUSE || KF == c->num_latents) return PC_OK;
    const double in_bytes = 4.0 * c->num_vars * (c->num_cats + 1.0) * KF;
    size_t free_b = 0, total_b = 0;
    PC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (in_bytes > (double)total_b)
        return pc_fail(PC_ERR_DEVICE_MEMORY,
                       "model (V=%d, C=%d, K=%d) needs %.1f MiB of GPU memory for its input table "
                       "alone; the GPU has %.1f MiB",
                       c->num_vars, c->num_cats, KF, in_bytes / 1048576.0, total_b / 1048576.0);
    if ((st = pc_circuit_pad_latents(c, KF, &s->padded))) return st;
    s->circuit = s->padded;
fail:
    return st;
}

/* The slot plan (gpu_plan.h) into the host copy of the groups, then the strategy's own. */
static pc_status plan_slots(pc_gpu_state *s) {
    pc_status st = PC_OK;
    s->h_groups = (pc_gpu_group *)calloc((size_t)s->G, sizeof(pc_gpu_group));
    if (!s->h_groups)
        return pc_fail(PC_ERR_NOMEM, "GPU plan for %d groups: out of host memory", s->G);
    if ((st = pc_gpu_plan(s->circuit, s->h_groups, &s->num_slots))) return st;
    return s->impl->plan ? s->impl->plan(s) : PC_OK;
}

/* Device bytes for a chunk of `chunk` samples: the common ones and the strategy's. */
static size_t bytes_for(const pc_gpu_state *s, int64_t chunk) {
    const size_t K = (size_t)s->K, G = (size_t)s->G, V = (size_t)s->V;
    const size_t fixed = G * sizeof(pc_gpu_group) + V * 4 + 2 * G * 4 +
                         V * ((size_t)s->C + 1) * K * 4 + K * 8 + (1 << 16);
    const size_t tiles = (size_t)((chunk + s->bm - 1) / s->bm);
    const size_t per = (size_t)s->num_slots * (size_t)chunk * (K * 4 + 8) +
                       2 * (size_t)chunk * V * 2 + 2 * (size_t)chunk * 8 + (G * tiles + 1) * 4;
    return fixed + per + s->impl->bytes(s, chunk);
}

/* The largest chunk up to max_batch (halved from PC_GPU_CHUNK_MAX) that fits the budget. */
static pc_status choose_chunk(pc_gpu_state *s, int64_t max_batch) {
    pc_status st = PC_OK;
    size_t free_b = 0, total_b = 0;
    PC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    {
        const double budget = PC_GPU_MEM_SHARE * (double)free_b;
        int64_t chunk = max_batch < PC_GPU_CHUNK_MAX ? max_batch : PC_GPU_CHUNK_MAX;
        while ((double)bytes_for(s, chunk) > budget && chunk > s->bm) chunk /= 2;
        if ((double)bytes_for(s, chunk) > budget)
            return pc_fail(PC_ERR_DEVICE_MEMORY,
                           "model (V=%d, C=%d, K=%d, %d groups) needs %.1f MiB of GPU memory "
                           "even for %lld samples at a time; %.1f MiB of %.1f MiB are free",
                           s->V, s->C, s->K, s->G, bytes_for(s, chunk) / 1048576.0,
                           (long long)chunk, free_b / 1048576.0, total_b / 1048576.0);
        s->chunk = chunk;
        s->max_tiles = (int32_t)((chunk + s->bm - 1) / s->bm);
    }
fail:
    return st;
}

/* The message slots, the counters and the staging buffers for s->chunk samples. */
static pc_status alloc_buffers(pc_gpu_state *s) {
    pc_status st = PC_OK;
    pc_gpu_stage *g = &s->stage;
    const size_t ch = (size_t)s->chunk, V = (size_t)s->V;
    if ((st = pc_gpu_alloc(s, (void **)&s->d.off, (size_t)s->num_slots * ch * 8, "offsets")))
        return st;
    if ((st = pc_gpu_alloc(s, (void **)&s->d.rel, (size_t)s->num_slots * ch * s->K * 4,
                           "messages")))
        return st;
    if ((st = pc_gpu_alloc(s, (void **)&s->d.done,
                           ((size_t)s->G * s->max_tiles + 1) * sizeof(int32_t), "counters")))
        return st;
    for (int i = 0; i < 2; i++) {
        if ((st = pc_gpu_alloc(s, (void **)&g->d_x[i], ch * V, "samples"))) return st;
        if ((st = pc_gpu_alloc(s, (void **)&g->d_missing[i], ch * V, "missing mask"))) return st;
        if ((st = pc_gpu_alloc(s, (void **)&g->d_logp[i], ch * 8, "log p(x)"))) return st;
        PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_x[i], ch * V, cudaHostAllocDefault));
        PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_missing[i], ch * V, cudaHostAllocDefault));
        PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_logp[i], ch * 8, cudaHostAllocDefault));
        PC_CUDA_CHECK(cudaEventCreateWithFlags(&g->ev_in[i], cudaEventDisableTiming));
        PC_CUDA_CHECK(cudaEventCreateWithFlags(&g->ev_out[i], cudaEventDisableTiming));
    }
    PC_CUDA_CHECK(cudaStreamCreateWithFlags(&g->compute, cudaStreamNonBlocking));
    PC_CUDA_CHECK(cudaStreamCreateWithFlags(&g->copy, cudaStreamNonBlocking));
fail:
    return st;
}

pc_status pc_gpu_create(const pc_gpu_impl *impl, const pc_circuit *circuit,
                        const pc_eval_opts *opts, void **state) {
    pc_status st = PC_OK;
    pc_gpu_state *s = NULL;
    *state = NULL;
    if ((st = check_circuit(impl, circuit, opts))) return st;
    s = (pc_gpu_state *)calloc(1, sizeof(*s));
    if (!s) return pc_fail(PC_ERR_NOMEM, "GPU backend: out of host memory");
    s->impl = impl, s->circuit = circuit;
    if ((st = device_query(s))) goto fail;
    if ((st = pad_states(s))) goto fail;
    s->V = s->circuit->num_vars, s->C = s->circuit->num_cats, s->K = s->circuit->num_latents;
    s->G = s->circuit->num_groups;
    if ((st = impl->configure(s))) goto fail;
    if ((st = plan_slots(s))) goto fail;
    if ((st = choose_chunk(s, opts->max_batch))) goto fail;
    if ((st = pc_gpu_upload_common(s))) goto fail;
    if ((st = impl->upload(s))) goto fail;
    if ((st = alloc_buffers(s))) goto fail;
    *state = s;
    return PC_OK;
fail:
    pc_gpu_destroy(s);
    return st;
}

/* ---- forward passes -----------------------------------------------------------------------*/

void pc_gpu_fill_args(const pc_gpu_state *s, int64_t n, int buf, int has_missing,
                      pc_gpu_args *a) {
    memset(a, 0, sizeof(*a));
    a->groups = s->d.groups, a->vars = s->d.vars, a->children = s->d.children;
    a->child_slot = s->d.child_slot, a->input = s->d.input, a->root_logw = s->d.root_logw;
    a->x = s->stage.d_x[buf], a->missing = has_missing ? s->stage.d_missing[buf] : NULL;
    a->off = s->d.off, a->rel = s->d.rel, a->logp = s->stage.d_logp[buf];
    a->done = s->d.done, a->queue = s->d.done + (size_t)s->G * s->max_tiles;
    a->chunk = s->chunk, a->n = (int32_t)n;
    a->V = s->V, a->C = s->C, a->K = s->K, a->G = s->G;
    a->tiles = (int32_t)((n + s->bm - 1) / s->bm);
}

/* A forward pass captured as a graph into slot g. */
static pc_status capture(pc_gpu_state *s, pc_gpu_graph *g, int64_t n, int buf,
                         int has_missing) {
    pc_status st = PC_OK;
    cudaGraph_t graph = NULL;
    pc_gpu_args a;
    pc_gpu_fill_args(s, n, buf, has_missing, &a);
    PC_CUDA_CHECK(cudaStreamBeginCapture(s->stage.compute, cudaStreamCaptureModeThreadLocal));
    {
        const pc_status est = s->impl->enqueue(s, &a, s->stage.compute);
        const cudaError_t e = cudaStreamEndCapture(s->stage.compute, &graph);
        if (est) {
            st = est;
            goto fail;
        }
        PC_CUDA_CHECK(e);
    }
    PC_CUDA_CHECK(cudaGraphInstantiate(&g->exec, graph, 0));
    g->n = n, g->buf = buf, g->has_missing = has_missing;
    g->strategy = s->impl->strategy_for(s, n);
fail:
    if (graph) cudaGraphDestroy(graph);
    return st;
}

/* The graph of one forward pass for (n, buffer, missing or not), captured on first use. */
static pc_status get_graph(pc_gpu_state *s, int64_t n, int buf, int has_missing,
                           cudaGraphExec_t *exec) {
    pc_status st = PC_OK;
    pc_gpu_graphs *gs = &s->graphs;
    int victim = 0;
    for (int i = 0; i < PC_GPU_GRAPHS; i++) {
        const pc_gpu_graph *g = &gs->slot[i];
        if (g->exec && g->n == n && g->buf == buf && g->has_missing == has_missing) {
            victim = i;
            break;
        }
        if (!g->exec || g->used < gs->slot[victim].used) victim = i;
    }
    pc_gpu_graph *g = &gs->slot[victim];
    if (!(g->exec && g->n == n && g->buf == buf && g->has_missing == has_missing)) {
        if (g->exec) cudaGraphExecDestroy(g->exec);
        g->exec = NULL;
        if ((st = capture(s, g, n, buf, has_missing))) return st;
    }
    g->used = ++gs->clock;
    gs->last_strategy = g->strategy;
    *exec = g->exec;
    return PC_OK;
}

/* Stages chunk [start, start + m) into buffer buf and queues its pass and its copy back. */
static pc_status run_chunk(pc_gpu_state *s, const uint8_t *x, const uint8_t *missing,
                           int64_t start, int64_t m, int buf) {
    pc_status st = PC_OK;
    pc_gpu_stage *g = &s->stage;
    const size_t V = (size_t)s->V;
    cudaGraphExec_t exec = NULL;
    memcpy(g->h_x[buf], x + (size_t)start * V, (size_t)m * V);
    PC_CUDA_CHECK(cudaMemcpyAsync(g->d_x[buf], g->h_x[buf], (size_t)m * V,
                                  cudaMemcpyHostToDevice, g->copy));
    if (missing) {
        memcpy(g->h_missing[buf], missing + (size_t)start * V, (size_t)m * V);
        PC_CUDA_CHECK(cudaMemcpyAsync(g->d_missing[buf], g->h_missing[buf], (size_t)m * V,
                                      cudaMemcpyHostToDevice, g->copy));
    }
    PC_CUDA_CHECK(cudaEventRecord(g->ev_in[buf], g->copy));
    if ((st = get_graph(s, m, buf, missing != NULL, &exec))) return st;
    PC_CUDA_CHECK(cudaStreamWaitEvent(g->compute, g->ev_in[buf], 0));
    PC_CUDA_CHECK(cudaGraphLaunch(exec, g->compute));
    PC_CUDA_CHECK(cudaMemcpyAsync(g->h_logp[buf], g->d_logp[buf], (size_t)m * 8,
                                  cudaMemcpyDeviceToHost, g->compute));
    PC_CUDA_CHECK(cudaEventRecord(g->ev_out[buf], g->compute));
fail:
    return st;
}

/* Chunks of at most s->chunk samples; chunk i uses buffer i % 2. While the GPU runs chunk i,
 * the host stages chunk i + 1 and the copy stream uploads it. A buffer's previous chunk must
 * be out before its staging memory is reused. */
static pc_status evaluate_chunks(pc_gpu_state *s, const uint8_t *x, const uint8_t *missing,
                                 int64_t n, double *logp) {
    pc_status st = PC_OK;
    pc_gpu_stage *g = &s->stage;
    int64_t pending_start[2] = {-1, -1}, pending_n[2] = {0, 0};
    int64_t i = 0;
    for (int64_t start = 0; start < n; start += s->chunk, i++) {
        const int buf = (int)(i & 1);
        const int64_t m = n - start < s->chunk ? n - start : s->chunk;
        if (pending_start[buf] >= 0) {
            PC_CUDA_CHECK(cudaEventSynchronize(g->ev_out[buf]));
            memcpy(logp + pending_start[buf], g->h_logp[buf], (size_t)pending_n[buf] * 8);
            pending_start[buf] = -1;
        }
        if ((st = run_chunk(s, x, missing, start, m, buf))) goto fail;
        pending_start[buf] = start, pending_n[buf] = m;
    }
    for (int buf = 0; buf < 2; buf++) {
        if (pending_start[buf] < 0) continue;
        PC_CUDA_CHECK(cudaEventSynchronize(g->ev_out[buf]));
        memcpy(logp + pending_start[buf], g->h_logp[buf], (size_t)pending_n[buf] * 8);
    }
    return PC_OK;
fail:
    cudaStreamSynchronize(g->compute);
    cudaStreamSynchronize(g->copy);
    return st;
}

pc_status pc_gpu_evaluate(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                          double *logp) {
    pc_gpu_state *s = (pc_gpu_state *)state;
    int prev = 0;
    pc_status st = device_enter(s, &prev);
    if (st) return st;
    st = evaluate_chunks(s, x, missing, n, logp);
    device_leave(s, prev);
    return st;
}

size_t pc_gpu_peak_bytes(const void *state) {
    return state ? ((const pc_gpu_state *)state)->peak_bytes : 0;
}

static void free_stage(pc_gpu_stage *g) {
    for (int i = 0; i < 2; i++) {
        cudaFree(g->d_x[i]), cudaFree(g->d_missing[i]), cudaFree(g->d_logp[i]);
        if (g->h_x[i]) cudaFreeHost(g->h_x[i]);
        if (g->h_missing[i]) cudaFreeHost(g->h_missing[i]);
        if (g->h_logp[i]) cudaFreeHost(g->h_logp[i]);
        if (g->ev_in[i]) cudaEventDestroy(g->ev_in[i]);
        if (g->ev_out[i]) cudaEventDestroy(g->ev_out[i]);
    }
    if (g->compute) cudaStreamDestroy(g->compute);
    if (g->copy) cudaStreamDestroy(g->copy);
}

void pc_gpu_destroy(void *state) {
    pc_gpu_state *s = (pc_gpu_state *)state;
    int prev = 0;
    if (!s) return;
    const int entered = device_enter(s, &prev) == PC_OK;
    if (s->stage.compute) cudaStreamSynchronize(s->stage.compute);
    if (s->stage.copy) cudaStreamSynchronize(s->stage.copy);
    for (int i = 0; i < PC_GPU_GRAPHS; i++)
        if (s->graphs.slot[i].exec) cudaGraphExecDestroy(s->graphs.slot[i].exec);
    if (s->impl->release) s->impl->release(s);
    cudaFree(s->d.groups), cudaFree(s->d.vars), cudaFree(s->d.children);
    cudaFree(s->d.child_slot), cudaFree(s->d.input), cudaFree(s->d.root_logw);
    cudaFree(s->d.off), cudaFree(s->d.rel), cudaFree(s->d.done);
    free_stage(&s->stage);
    if (entered) device_leave(s, prev);
    free(s->h_groups);
    pc_circuit_free(s->padded);
    free(s);
}

/* ---- testing hooks (gpu_hooks.h) ----------------------------------------------------------*/

int pc_gpu_owns(const pc_backend_ops *ops) { return ops && ops->destroy == pc_gpu_destroy; }

int64_t pc_gpu_chunk(const void *state) { return ((const pc_gpu_state *)state)->chunk; }

const char *pc_gpu_strategy(const void *state) {
    const pc_gpu_state *s = (const pc_gpu_state *)state;
    return s->graphs.last_strategy ? s->graphs.last_strategy : s->impl->strategy_for(s, 1);
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Random samples (values < C, from seed) into buffer 0, on the device. */
static pc_status stage_random(pc_gpu_state *s, int64_t n, uint64_t seed) {
    pc_status st = PC_OK;
    uint64_t r = seed * 2862933555777941757ull + 3037000493ull;
    for (size_t i = 0; i < (size_t)n * s->V; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        s->stage.h_x[0][i] = (uint8_t)((r >> 33) % (uint64_t)s->C);
    }
    PC_CUDA_CHECK(cudaMemcpy(s->stage.d_x[0], s->stage.h_x[0], (size_t)n * s->V,
                             cudaMemcpyHostToDevice));
fail:
    return st;
}

/* times[i] = the i-th of reps timed replays of exec, after `warmup` untimed ones. */
static pc_status time_replays(pc_gpu_state *s, cudaGraphExec_t exec, int warmup, int reps,
                              double *times) {
    pc_status st = PC_OK;
    cudaEvent_t t0 = NULL, t1 = NULL;
    const cudaStream_t stream = s->stage.compute;
    PC_CUDA_CHECK(cudaEventCreate(&t0));
    PC_CUDA_CHECK(cudaEventCreate(&t1));
    for (int i = 0; i < warmup; i++) PC_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    for (int i = 0; i < reps; i++) {
        float ms = 0.0f;
        PC_CUDA_CHECK(cudaEventRecord(t0, stream));
        PC_CUDA_CHECK(cudaGraphLaunch(exec, stream));
        PC_CUDA_CHECK(cudaEventRecord(t1, stream));
        PC_CUDA_CHECK(cudaEventSynchronize(t1));
        PC_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
        times[i] = ms;
    }
fail:
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    return st;
}

pc_status pc_gpu_time_forward(void *state, int64_t n, int warmup, int reps, uint64_t seed,
                              double *median_ms) {
    pc_gpu_state *s = (pc_gpu_state *)state;
    cudaGraphExec_t exec = NULL;
    int prev = 0;
    if (n < 1 || n > s->chunk || reps < 1 || warmup < 0 || !median_ms)
        return pc_fail(PC_ERR_ARG, "timing: n = %lld must be in [1, %lld], reps >= 1",
                       (long long)n, (long long)s->chunk);
    double *times = (double *)malloc(sizeof(double) * (size_t)reps);
    if (!times) return pc_fail(PC_ERR_NOMEM, "timing: out of host memory");
    pc_status st = device_enter(s, &prev);
    if (st == PC_OK) {
        if (!(st = stage_random(s, n, seed)) && !(st = get_graph(s, n, 0, 0, &exec)) &&
            !(st = time_replays(s, exec, warmup, reps, times))) {
            qsort(times, (size_t)reps, sizeof(double), cmp_double);
            *median_ms = times[reps / 2];
        }
        device_leave(s, prev);
    }
    free(times);
    return st;
}
