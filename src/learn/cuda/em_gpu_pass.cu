/* GPU EM passes: the executor of em_plan.h's steps (kernels of em_kernels.cuh, cuBLAS), each
 * pass captured once as a CUDA graph per (rows, source, mask), the rows staged or gathered,
 * and the benchmark's timed replays. */
#include "base/fail.h"
#include "learn/cuda/em_chain.cuh"
#include "learn/cuda/em_fused.cuh"
#include "learn/cuda/em_gpu_state.cuh"

#include <stdlib.h>
#include <string.h>

/* The kernels for one compute type T; KPL (values per lane) from K. */
template <typename T> struct pass_kernels {
    /* The fused path's wavefront (em_fused.cuh), forward (which = 0) or downward (1), an item
     * to a warp, as many blocks as fit the GPU at once; the forward zeroes the counters. */
    static pc_status wave(pc_em_gpu *g, int which, int64_t n) {
        pc_status st = PC_OK;
        const pc_em_args a = pc_em_gpu_args(g);
        const int32_t iter = pc_em_plan_fused_iter(g->plan, n);
        const int64_t tiles = pc_em_plan_tiles(g->plan, n);
        const int32_t paths = g->plan->num_paths;
        const int64_t items = (which == 0 ? paths : paths - 1) * tiles;
        const size_t smem = which == 0 ? 0 : pc_em_wave_downward_smem(); /* 36 KB, < 48 */
        pc_em_wave w;
        w.ticket = g->d_wave, w.done = g->d_wave + 2, w.parent = g->d_parent;
        w.path_start = g->d_path_start, w.path_groups = g->d_path_groups;
        w.path_of = g->d_path_of;
        w.tiles = (int32_t)tiles, w.paths = paths;
        T *E = (T *)g->d_buf[PC_EM_BUF_E], *S = (T *)g->d_buf[PC_EM_BUF_S];
        /* the parameters in FP64 in both modes (FP32's copies are the GEMMs'): an FP32 read
         * is a load and a conversion; FP32 step at K = 16 on an H200 0.564 -> 0.541 ms at
         * 512 rows, 1.245 -> 1.200 at 4,096 */
        const double *W = g->d_trans;
        int sms = 0, per_sm = 0;
        PC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g->dev));
        if (which == 0) {
            PC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &per_sm, pc_em_wave_forward<T>, PC_EM_THREADS, smem));
        } else {
            PC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &per_sm, pc_em_wave_downward<T>, PC_EM_THREADS, smem));
        }
        if (items < 1) return PC_OK;
        {
            const int64_t fit = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
            const int64_t need = (items + PC_EM_WAVE_WARPS - 1) / PC_EM_WAVE_WARPS;
            const unsigned blocks = (unsigned)(need < fit ? need : fit);
            if (which == 0) {
                PC_CUDA_CHECK(cudaMemsetAsync(g->d_wave, 0, (size_t)(2 + paths * tiles) * 4,
                                              g->stream));
                pc_em_wave_forward<T><<<blocks, PC_EM_THREADS, smem, g->stream>>>(
                    a, w, n, iter, g->d_input, E, S, W);
            } else {
                pc_em_wave_downward<T><<<blocks, PC_EM_THREADS, smem, g->stream>>>(
                    a, w, n, iter, E, S, W, g->d_partial);
            }
            PC_CUDA_CHECK(cudaGetLastError());
        }
    fail:
        return st;
    }
    /* A chain on the GEMM path, up (which = 0) or down (1); K <= PC_EM_STEP_CHAIN_MAX_K. */
    template <int KPL>
    static pc_status step_chain(pc_em_gpu *g, const pc_em_args &a, int which, int64_t n,
                                int32_t chain) {
        pc_status st = PC_OK;
        const pc_em_chain *c = &g->plan->chains[chain];
        const int64_t warps = PC_EM_THREADS / 32; /* a row to a warp */
        const dim3 grid((unsigned)((n + warps - 1) / warps), (unsigned)(c->s1 - c->s0));
        const size_t kk = (size_t)a.K * a.K * sizeof(double); /* 32 KB at K = 64 */
        T *E = (T *)g->d_buf[PC_EM_BUF_E], *S = (T *)g->d_buf[PC_EM_BUF_S];
        const T *W = (const T *)g->d_buf[PC_EM_BUF_W];
        if (which == 0)
            pc_em_step_chain_forward<T, KPL><<<grid, PC_EM_THREADS, kk, g->stream>>>(
                a, n, c->s0, (const T *)g->d_input_c, E, S, W);
        else
            pc_em_step_chain_downward<T, KPL><<<grid, PC_EM_THREADS, kk, g->stream>>>(
                a, n, c->s0, E, S, (T *)g->d_buf[PC_EM_BUF_U], W);
        PC_CUDA_CHECK(cudaGetLastError());
    fail:
        return st;
    }
    static pc_status step_chain_of(pc_em_gpu *g, int which, int64_t n, int32_t chain) {
        const pc_em_args a = pc_em_gpu_args(g);
        return a.K <= 32 ? step_chain<1>(g, a, which, n, chain)
                         : step_chain<2>(g, a, which, n, chain);
    }
    template <int KPL>
    static pc_status product(pc_em_gpu *g, const pc_em_args &a, int64_t n, int32_t g0,
                             int32_t g1, unsigned grid) {
        pc_status st = PC_OK;
        pc_em_product<T, KPL><<<grid, PC_EM_THREADS, 0, g->stream>>>(
            a, n, g0, g1, (const T *)g->d_input_c, (T *)g->d_buf[PC_EM_BUF_E],
            (const T *)g->d_buf[PC_EM_BUF_S]);
        PC_CUDA_CHECK(cudaGetLastError());
    fail:
        return st;
    }
    template <int KPL>
    static pc_status posterior(pc_em_gpu *g, const pc_em_args &a, int64_t n, int32_t g0,
                               int32_t g1, unsigned grid) {
        pc_status st = PC_OK;
        T *U = (T *)g->d_buf[PC_EM_BUF_U], *Q = (T *)g->d_buf[pc_em_plan_posteriors(g->fused)];
        pc_em_posterior<T, KPL><<<grid, PC_EM_THREADS, 0, g->stream>>>(
            a, n, g0, g1, (const T *)g->d_buf[PC_EM_BUF_E], (T *)g->d_buf[PC_EM_BUF_S], U, Q);
        PC_CUDA_CHECK(cudaGetLastError());
    fail:
        return st;
    }
    /* which = 0: products, 1: posteriors; K <= 32 * 32 (em_gpu.cu checks). */
    static pc_status rows(pc_em_gpu *g, int which, int64_t n, int32_t g0, int32_t g1) {
        const pc_em_args a = pc_em_gpu_args(g);
        const int64_t rows = (int64_t)(g1 - g0) * n, per_block = PC_EM_THREADS / a.tw;
        const unsigned grid = (unsigned)((rows + per_block - 1) / per_block);
        const int kpl = (a.K + 31) / 32;
        auto run = which == 0 ? &product<1> : &posterior<1>;
        if (kpl > 16) run = which == 0 ? &product<32> : &posterior<32>;
        else if (kpl > 8) run = which == 0 ? &product<16> : &posterior<16>;
        else if (kpl > 4) run = which == 0 ? &product<8> : &posterior<8>;
        else if (kpl > 2) run = which == 0 ? &product<4> : &posterior<4>;
        else if (kpl > 1) run = which == 0 ? &product<2> : &posterior<2>;
        return run(g, a, n, g0, g1, grid);
    }
    /* The flows of a pass into the counts: root, inputs, transitions. */
    static pc_status flows(pc_em_gpu *g, int64_t n) {
        pc_status st = PC_OK;
        const pc_em_args a = pc_em_gpu_args(g);
        const T *Q = (const T *)g->d_buf[pc_em_plan_posteriors(g->fused)];
        const int64_t seg_rows = pc_em_input_seg(n, a.V, a.K);
        const int64_t segs = (n + seg_rows - 1) / seg_rows;
        const int64_t inputs = (int64_t)a.V * segs * a.K;
        const int64_t trans = (int64_t)(a.G - 1) * a.K * a.K;
        const unsigned tgrid = (unsigned)((trans + PC_EM_THREADS - 1) / PC_EM_THREADS);
        const int64_t tiles = pc_em_plan_tiles(g->plan, n);
        pc_em_root_flows<T><<<a.K, PC_EM_THREADS, 0, g->stream>>>(a, n, Q, g->d_n_root,
                                                                  g->d_scale);
        PC_CUDA_CHECK(cudaGetLastError());
        pc_em_input_flows<T><<<(unsigned)((inputs + PC_EM_THREADS - 1) / PC_EM_THREADS),
                               PC_EM_THREADS, 0, g->stream>>>(
            a, n, seg_rows, Q, (unsigned long long *)g->d_n_input, g->d_scale);
        PC_CUDA_CHECK(cudaGetLastError());
        if (trans > 0 && g->fused) {
            pc_em_fused_trans_flows<<<tgrid, PC_EM_THREADS, 0, g->stream>>>(
                trans, a.K * a.K, g->d_partial, tiles, g->d_trans, g->d_n_trans,
                g->d_scale);
            PC_CUDA_CHECK(cudaGetLastError());
        } else if (trans > 0) {
            pc_em_trans_flows<T><<<tgrid, PC_EM_THREADS, 0, g->stream>>>(
                trans, (const T *)g->d_buf[PC_EM_BUF_F], g->d_trans, g->d_n_trans, g->d_scale);
            PC_CUDA_CHECK(cudaGetLastError());
        }
    fail:
        return st;
    }
};

/* Row kernels of groups [g0, g1) of a layer, products (which = 0) or posteriors (1). */
static pc_status launch_rows(void *ctx, int which, int64_t n, int32_t g0, int32_t g1) {
    pc_em_gpu *g = (pc_em_gpu *)ctx;
    return g->f32 ? pass_kernels<float>::rows(g, which, n, g0, g1)
                  : pass_kernels<double>::rows(g, which, n, g0, g1);
}

static pc_status op_product(void *ctx, int64_t n, int32_t g0, int32_t g1) {
    return launch_rows(ctx, 0, n, g0, g1);
}

static pc_status op_posterior(void *ctx, int64_t n, int32_t g0, int32_t g1) {
    return launch_rows(ctx, 1, n, g0, g1);
}

static pc_status launch_wave(void *ctx, int which, int64_t n) {
    pc_em_gpu *g = (pc_em_gpu *)ctx;
    return g->f32 ? pass_kernels<float>::wave(g, which, n)
                  : pass_kernels<double>::wave(g, which, n);
}

/* Fused forward: the whole pass in one wavefront. */
static pc_status op_forward(void *ctx, int64_t n) { return launch_wave(ctx, 0, n); }

/* Fused downward: the root by the posterior kernel, the other groups in one wavefront. */
static pc_status op_downward(void *ctx, int64_t n) {
    const int32_t root = ((pc_em_gpu *)ctx)->plan->G - 1;
    const pc_status st = op_posterior(ctx, n, root, root + 1);
    return st ? st : launch_wave(ctx, 1, n);
}

/* A chain of narrow layers on the GEMM path in one launch (em_chain.cuh), up or down. */
static pc_status run_chain(void *ctx, int which, int64_t n, int32_t index) {
    pc_em_gpu *g = (pc_em_gpu *)ctx;
    return g->f32 ? pass_kernels<float>::step_chain_of(g, which, n, index)
                  : pass_kernels<double>::step_chain_of(g, which, n, index);
}

static pc_status op_forward_chain(void *ctx, int64_t n, int32_t index) {
    return run_chain(ctx, 0, n, index);
}

static pc_status op_downward_chain(void *ctx, int64_t n, int32_t index) {
    return run_chain(ctx, 1, n, index);
}

static pc_status op_gemm(void *ctx, const pc_em_gemm *op) {
    pc_status st = PC_OK;
    pc_em_gpu *g = (pc_em_gpu *)ctx;
    const cublasOperation_t ta = op->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = op->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (g->f32) {
        const float one = 1.0f, beta = (float)op->beta;
        const float *A = (const float *)g->d_buf[op->buf_a] + op->a;
        const float *B = (const float *)g->d_buf[op->buf_b] + op->b;
        float *C = (float *)g->d_buf[op->buf_c] + op->c;
        PC_CUBLAS_CHECK(g->blas->base->sgemm_strided_batched(
            g->handle, ta, tb, op->m, op->n, op->k, &one, A, op->lda, op->stride_a, B, op->ldb,
            op->stride_b, &beta, C, op->ldc, op->stride_c, op->batch));
    } else {
        const double one = 1.0, beta = op->beta;
        const double *A = (const double *)g->d_buf[op->buf_a] + op->a;
        const double *B = (const double *)g->d_buf[op->buf_b] + op->b;
        double *C = (double *)g->d_buf[op->buf_c] + op->c;
        PC_CUBLAS_CHECK(g->blas->dgemm_strided_batched(
            g->handle, ta, tb, op->m, op->n, op->k, &one, A, op->lda, op->stride_a, B, op->ldb,
            op->stride_b, &beta, C, op->ldc, op->stride_c, op->batch));
    }
fail:
    return st;
}

/* How much of a pass a graph holds: its forward, also its downward step, or all (the flows). */
enum pass_stages { STAGE_FORWARD = 1, STAGE_DOWNWARD = 2, STAGE_ALL = 3 };

/* Gather, the plan's steps, the flows: up to `stages` of one pass of n rows from src, queued on
 * g->stream. */
static pc_status enqueue_pass(pc_em_gpu *g, int64_t n, const pc_em_source &src, int stages) {
    pc_status st = PC_OK;
    const pc_em_args a = pc_em_gpu_args(g);
    pc_em_ops ops = {g, op_product, op_gemm, op_posterior, NULL, NULL, NULL, NULL};
    if (g->fused) ops.forward = op_forward, ops.downward = op_downward;
    else ops.forward_chain = op_forward_chain, ops.downward_chain = op_downward_chain;
    const dim3 grid((unsigned)((n + 31) / 32), (unsigned)((a.V + 31) / 32)), block(32, 8);
    const int phases = stages == STAGE_FORWARD ? PC_EM_PASS_FORWARD
                                               : PC_EM_PASS_FORWARD | PC_EM_PASS_DOWNWARD;
    pc_em_gather<<<grid, block, 0, g->stream>>>(a, n, src.values, src.missing, src.rows,
                                                 g->d_xc, g->d_xct);
    PC_CUDA_CHECK(cudaGetLastError());
    if ((st = pc_em_plan_pass(g->plan, n, phases, &ops))) return st;
    if (stages != STAGE_ALL) return PC_OK;
    return g->f32 ? pass_kernels<float>::flows(g, n) : pass_kernels<double>::flows(g, n);
fail:
    return st;
}

/* Captures `stages` of a pass of n rows (from the staging buffer or the attached data) into
 * *exec. */
static pc_status capture(pc_em_gpu *g, int64_t n, int staged, int has_missing, int stages,
                         cudaGraphExec_t *exec) {
    pc_status st = PC_OK;
    cudaGraph_t graph = NULL;
    pc_em_source src;
    src.values = staged ? g->d_stage_values : g->d_values;
    src.missing = !has_missing ? NULL : staged ? g->d_stage_missing : g->d_missing;
    src.rows = staged ? NULL : g->d_rows;
    /* the pass's inputs were queued just before: let them finish outside the capture */
    PC_CUDA_CHECK(cudaStreamSynchronize(g->stream));
    PC_CUDA_CHECK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal));
    {
        const pc_status est = enqueue_pass(g, n, src, stages);
        const cudaError_t e = cudaStreamEndCapture(g->stream, &graph);
        if (est) {
            st = est;
            goto fail;
        }
        PC_CUDA_CHECK(e);
    }
    PC_CUDA_CHECK(cudaGraphInstantiate(exec, graph, 0));
fail:
    if (graph) cudaGraphDestroy(graph);
    return st;
}

static pc_status get_graph(pc_em_gpu *g, int64_t n, int staged, int has_missing,
                           cudaGraphExec_t *exec) {
    pc_status st = PC_OK;
    int victim = 0;
    for (int i = 0; i < PC_EM_GRAPHS; i++) {
        const pc_em_graph *s = &g->graphs[i];
        if (s->exec && s->n == n && s->staged == staged && s->has_missing == has_missing) {
            victim = i;
            break;
        }
        if (!s->exec || s->used < g->graphs[victim].used) victim = i;
    }
    pc_em_graph *s = &g->graphs[victim];
    if (!(s->exec && s->n == n && s->staged == staged && s->has_missing == has_missing)) {
        if (s->exec) cudaGraphExecDestroy(s->exec);
        s->exec = NULL;
        if ((st = capture(g, n, staged, has_missing, STAGE_ALL, &s->exec))) return st;
        s->n = n, s->staged = staged, s->has_missing = has_missing;
    }
    s->used = ++g->clock;
    *exec = s->exec;
    return PC_OK;
}

/* Pinned and device staging buffers for rows that are not attached, made on first use. */
static pc_status stage_alloc(pc_em_gpu *g, int has_missing) {
    pc_status st = PC_OK;
    const size_t bytes = (size_t)g->plan->chunk * g->plan->V;
    if (!g->d_stage_values) {
        if ((st = pc_em_gpu_alloc((void **)&g->d_stage_values, bytes, "staged rows"))) return st;
        PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_stage_values, bytes, cudaHostAllocDefault));
    }
    if (has_missing && !g->d_stage_missing) {
        if ((st = pc_em_gpu_alloc((void **)&g->d_stage_missing, bytes, "staged mask")))
            return st;
        PC_CUDA_CHECK(cudaHostAlloc((void **)&g->h_stage_missing, bytes, cudaHostAllocDefault));
    }
fail:
    return st;
}

/* Queues the inputs of a pass of n rows from position p: the row indices (attached data) or
 * the rows themselves (staged), and the fixed-point scale. */
static pc_status stage_pass(pc_em_gpu *g, const pc_data *data, const int64_t *rows, int64_t p,
                            int64_t n, int staged, double scale) {
    pc_status st = PC_OK;
    const size_t V = (size_t)g->plan->V;
    *g->h_scale = scale;
    PC_CUDA_CHECK(cudaMemcpyAsync(g->d_scale, g->h_scale, 8, cudaMemcpyHostToDevice, g->stream));
    if (!staged) {
        for (int64_t i = 0; i < n; i++) g->h_rows[i] = rows ? rows[p + i] : p + i;
        PC_CUDA_CHECK(cudaMemcpyAsync(g->d_rows, g->h_rows, (size_t)n * 8,
                                      cudaMemcpyHostToDevice, g->stream));
        return PC_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = rows ? rows[p + i] : p + i;
        memcpy(g->h_stage_values + (size_t)i * V, data->values + (size_t)r * V, V);
        if (data->missing)
            memcpy(g->h_stage_missing + (size_t)i * V, data->missing + (size_t)r * V, V);
    }
    PC_CUDA_CHECK(cudaMemcpyAsync(g->d_stage_values, g->h_stage_values, (size_t)n * V,
                                  cudaMemcpyHostToDevice, g->stream));
    if (data->missing)
        PC_CUDA_CHECK(cudaMemcpyAsync(g->d_stage_missing, g->h_stage_missing, (size_t)n * V,
                                      cudaMemcpyHostToDevice, g->stream));
fail:
    return st;
}

extern "C" pc_status pc_em_gpu_accumulate(pc_em_gpu *g, const pc_data *data,
                                          const int64_t *rows, int64_t lo, int64_t hi,
                                          double scale, double *logp) {
    int prev = 0;
    pc_status st = pc_em_gpu_enter(g, &prev);
    if (st) return st;
    const int staged = !pc_em_gpu_is_attached(g, data), has_missing = data->missing != NULL;
    if (staged && (st = stage_alloc(g, has_missing))) goto fail;
    for (int64_t p = lo; p < hi; p += g->plan->chunk) {
        const int64_t n = hi - p < g->plan->chunk ? hi - p : g->plan->chunk;
        cudaGraphExec_t exec = NULL;
        if ((st = stage_pass(g, data, rows, p, n, staged, scale)) ||
            (st = get_graph(g, n, staged, has_missing, &exec)))
            goto fail;
        PC_CUDA_CHECK(cudaGraphLaunch(exec, g->stream));
        PC_CUDA_CHECK(cudaMemcpyAsync(g->h_logp, g->d_logp, (size_t)n * 8,
                                      cudaMemcpyDeviceToHost, g->stream));
        PC_CUDA_CHECK(cudaStreamSynchronize(g->stream));
        memcpy(logp + (p - lo), g->h_logp, (size_t)n * 8);
        g->last_n = n, g->last_staged = staged, g->last_missing = has_missing;
    }
fail:
    if (st != PC_OK) cudaStreamSynchronize(g->stream); /* nothing queued may outlive the call */
    pc_em_gpu_leave(g, prev);
    return st;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of reps timed replays of exec (after one untimed one), in milliseconds. */
static pc_status time_replays(pc_em_gpu *g, cudaGraphExec_t exec, int reps, double *times,
                              double *median_ms) {
    pc_status st = PC_OK;
    cudaEvent_t t0 = NULL, t1 = NULL;
    PC_CUDA_CHECK(cudaEventCreate(&t0));
    PC_CUDA_CHECK(cudaEventCreate(&t1));
    PC_CUDA_CHECK(cudaGraphLaunch(exec, g->stream));
    for (int i = 0; i < reps; i++) {
        float ms = 0.0f;
        PC_CUDA_CHECK(cudaEventRecord(t0, g->stream));
        PC_CUDA_CHECK(cudaGraphLaunch(exec, g->stream));
        PC_CUDA_CHECK(cudaEventRecord(t1, g->stream));
        PC_CUDA_CHECK(cudaEventSynchronize(t1));
        PC_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
        times[i] = ms;
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    *median_ms = times[reps / 2];
fail:
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    return st;
}

extern "C" pc_status pc_em_gpu_time_pass(pc_em_gpu *g, int reps, double *ms) {
    pc_status st = PC_OK;
    int prev = 0;
    cudaGraphExec_t part = NULL, whole = NULL;
    if (g->last_n < 1 || reps < 1)
        return pc_fail(PC_ERR_ARG, "GPU EM timing: no pass run yet, or reps = %d", reps);
    double *times = (double *)malloc(sizeof(double) * (size_t)reps);
    if (!times) return pc_fail(PC_ERR_NOMEM, "GPU EM timing: out of host memory");
    if ((st = pc_em_gpu_enter(g, &prev))) {
        free(times);
        return st;
    }
    for (int stages = STAGE_FORWARD; stages <= STAGE_DOWNWARD && st == PC_OK; stages++) {
        if ((st = capture(g, g->last_n, g->last_staged, g->last_missing, stages, &part)) ||
            (st = time_replays(g, part, reps, times, &ms[stages - 1])))
            break;
        cudaGraphExecDestroy(part);
        part = NULL;
    }
    if (st == PC_OK &&
        (st = get_graph(g, g->last_n, g->last_staged, g->last_missing, &whole)) == PC_OK &&
        (st = time_replays(g, whole, reps, times, &ms[2])) == PC_OK)
        st = pc_em_gpu_clear_counts(g);
    if (part) cudaGraphExecDestroy(part);
    if (st) cudaStreamSynchronize(g->stream);
    pc_em_gpu_leave(g, prev);
    free(times);
    return st;
}
