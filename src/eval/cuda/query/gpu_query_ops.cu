/* The GPU queries' calls (pc_query_gpu_ops): the parameter sets a query needs, then its
 * chunks, each staged through pinned memory (buffer i % 2 for chunk i, so the host copies one
 * chunk while the device runs the next), run and copied back; and the benchmarks' timer
 * (gpu_query.h). */
#include "eval/cuda/query/gpu_query.h"

#include <stdlib.h>
#include <string.h>

#include "base/cuda_check.cuh"
#include "eval/backend.h"
#include "eval/cuda/query/gpu_query_state.cuh"

enum gq_kind { GQ_MPE, GQ_COND32, GQ_COND64, GQ_SAMPLE, GQ_PRIOR };

/* One call: its host arrays (NULL where the query has none) and its draws. */
struct gq_call {
    gq_kind kind;
    const uint8_t *x, *missing; /* [n][V] */
    uint8_t *out;               /* [n][V] */
    double *logp;               /* [n] */
    void *probs;                /* [n][V][C] float or double */
    uint64_t seed;
    int64_t first;
};

static size_t probs_row_bytes(const pc_gq_state *s, gq_kind kind) {
    const size_t real = kind == GQ_COND64 ? sizeof(double) : sizeof(float);
    return (size_t)s->c->num_vars * s->c->num_cats * real;
}

/* The kernels' arguments for rows [row0, row0 + m) of a call staged in buffer buf. */
static pc_gq_args args_for(const pc_gq_state *s, const gq_call *call, int buf, int64_t row0,
                           int64_t m) {
    const pc_circuit *c = s->c;
    pc_gq_args a;
    memset(&a, 0, sizeof a);
    a.groups = s->groups, a.layer_start = s->layer_start, a.vars = s->vars;
    a.children = s->children, a.var_group = s->var_group, a.var_draw = s->var_draw;
    a.range_start = s->range_start, a.ranges = s->ranges;
    a.logw = s->logw, a.root_logw = s->root_logw;
    if (call->kind == GQ_MPE) {
        a.in = s->mpe_in, a.logw_t = s->mpe_logw_t, a.arg = s->mpe_arg;
    } else if (call->kind != GQ_PRIOR) {
        a.in = s->sp_in, a.wexp = s->wexp, a.wexp_t = s->wexp_t, a.root_exp = s->root_exp;
    }
    a.x_cdf = s->x_cdf, a.root_cdf = s->root_cdf, a.prior_cdf = s->prior_cdf;
    a.x = s->stage.d_x[buf], a.missing = call->missing ? s->stage.d_missing[buf] : NULL;
    a.P = s->P, a.M = s->M, a.zarg = s->zarg, a.z = s->z, a.draw = s->draw, a.rank = s->rank;
    a.logp = s->stage.d_logp[buf], a.out = s->stage.d_out[buf], a.bad = s->bad;
    a.seed = call->seed, a.row0 = row0, a.first = call->first;
    a.n = (int32_t)m, a.V = c->num_vars, a.C = c->num_cats, a.K = c->num_latents;
    a.G = c->num_groups, a.L = c->num_layers;
    a.rows = pc_gpu_query_rows_for(m, s->launch.sms, s->forced_rows);
    a.team = s->launch.shape.team;
    a.z_shared = s->launch.shape.smem + (size_t)a.rows * a.G * sizeof(int32_t) <= PC_GQ_Z_SMEM_MAX;
    a.half_c = pc_gpu_query_half(a.C), a.half_k = pc_gpu_query_half(a.K);
    return a;
}

static pc_status launch(pc_gq_state *s, const gq_call *call, const pc_gq_args *a) {
    switch (call->kind) {
    case GQ_MPE: return pc_gq_launch_mpe(&s->launch, a, s->stream);
    case GQ_COND32:
        return pc_gq_launch_conditionals(&s->launch, a, s->stream, s->cond32, s->probs, 0);
    case GQ_COND64:
        return pc_gq_launch_conditionals(&s->launch, a, s->stream, s->cond64, s->probs, 1);
    case GQ_SAMPLE: return pc_gq_launch_sample_conditional(&s->launch, a, s->stream);
    case GQ_PRIOR: return pc_gq_launch_sample_prior(&s->launch, a, s->stream);
    }
    return pc_fail(PC_ERR_INTERNAL, "GPU queries: unknown query");
}

/* Copies rows [row0, row0 + m) of the call's inputs into buffer buf and queues their upload. */
static pc_status stage_in(pc_gq_state *s, const gq_call *call, int buf, int64_t row0, int64_t m) {
    pc_status st = PC_OK;
    pc_gq_stage *g = &s->stage;
    const size_t bytes = (size_t)m * s->c->num_vars, at = (size_t)row0 * s->c->num_vars;
    if (call->x) {
        memcpy(g->h_x[buf], call->x + at, bytes);
        PC_CUDA_CHECK(cudaMemcpyAsync(g->d_x[buf], g->h_x[buf], bytes, cudaMemcpyHostToDevice,
                                      s->stream));
    }
    if (call->missing) {
        memcpy(g->h_missing[buf], call->missing + at, bytes);
        PC_CUDA_CHECK(cudaMemcpyAsync(g->d_missing[buf], g->h_missing[buf], bytes,
                                      cudaMemcpyHostToDevice, s->stream));
    }
fail:
    return st;
}

/* Queues the copies of a chunk's results back: rows and log p into buffer buf's pinned
 * memory, the conditionals straight into the caller's array. */
static pc_status stage_out(pc_gq_state *s, const gq_call *call, int buf, int64_t row0,
                           int64_t m) {
    pc_status st = PC_OK;
    pc_gq_stage *g = &s->stage;
    if (call->out)
        PC_CUDA_CHECK(cudaMemcpyAsync(g->h_out[buf], g->d_out[buf], (size_t)m * s->c->num_vars,
                                      cudaMemcpyDeviceToHost, s->stream));
    if (call->logp)
        PC_CUDA_CHECK(cudaMemcpyAsync(g->h_logp[buf], g->d_logp[buf], (size_t)m * sizeof(double),
                                      cudaMemcpyDeviceToHost, s->stream));
    if (call->probs) {
        const size_t row = probs_row_bytes(s, call->kind);
        PC_CUDA_CHECK(cudaMemcpyAsync((char *)call->probs + (size_t)row0 * row, s->probs,
                                      (size_t)m * row, cudaMemcpyDeviceToHost, s->stream));
    }
    PC_CUDA_CHECK(cudaEventRecord(g->done[buf], s->stream));
fail:
    return st;
}

/* Waits for the chunk in buffer buf and copies its rows and log p to the caller. */
static pc_status collect(pc_gq_state *s, const gq_call *call, int buf, int64_t row0,
                         int64_t m) {
    pc_status st = PC_OK;
    PC_CUDA_CHECK(cudaEventSynchronize(s->stage.done[buf]));
    if (call->out)
        memcpy(call->out + (size_t)row0 * s->c->num_vars, s->stage.h_out[buf],
               (size_t)m * s->c->num_vars);
    if (call->logp) memcpy(call->logp + row0, s->stage.h_logp[buf], (size_t)m * sizeof(double));
fail:
    return st;
}

/* The call's n rows in chunks of at most `chunk` (MPE and the samplers: pieces,
 * pc_gpu_query_piece). */
static pc_status run_chunks(pc_gq_state *s, const gq_call *call, int64_t n, int64_t chunk) {
    pc_status st = PC_OK;
    int64_t pending[2] = {-1, -1}, pending_n[2] = {0, 0}, i = 0;
    unsigned long long bad = ~0ull;
    if (call->kind == GQ_SAMPLE)
        PC_CUDA_CHECK(cudaMemsetAsync(s->bad, 0xff, sizeof bad, s->stream));
    for (int64_t row0 = 0; row0 < n; row0 += chunk, i++) {
        const int buf = (int)(i & 1);
        const int64_t m = n - row0 < chunk ? n - row0 : chunk;
        if (pending[buf] >= 0 && (st = collect(s, call, buf, pending[buf], pending_n[buf])))
            goto fail;
        pending[buf] = -1;
        const pc_gq_args a = args_for(s, call, buf, row0, m);
        if ((st = stage_in(s, call, buf, row0, m)) || (st = launch(s, call, &a)) ||
            (st = stage_out(s, call, buf, row0, m)))
            goto fail;
        pending[buf] = row0, pending_n[buf] = m;
    }
    for (int buf = 0; buf < 2; buf++)
        if (pending[buf] >= 0 && (st = collect(s, call, buf, pending[buf], pending_n[buf])))
            goto fail;
    if (call->kind == GQ_SAMPLE) {
        PC_CUDA_CHECK(cudaMemcpy(&bad, s->bad, sizeof bad, cudaMemcpyDeviceToHost));
        if (bad != ~0ull)
            return pc_fail(PC_ERR_DATA,
                           "sample %llu: the evidence has probability 0 under the model, so "
                           "p(x_missing | x_observed) is undefined",
                           bad);
    }
    return PC_OK;
fail:
    cudaStreamSynchronize(s->stream);
    return st;
}

/* The parameter sets and buffers of a query kind. */
static pc_status prepare(pc_gq_state *s, gq_kind kind) {
    pc_status st = PC_OK;
    if (kind == GQ_MPE) st = pc_gq_need_mpe(s);
    if (kind == GQ_COND32 || kind == GQ_COND64 || kind == GQ_SAMPLE)
        st = pc_gq_need_sum_product(s);
    if (st == PC_OK && (kind == GQ_COND32 || kind == GQ_COND64))
        st = pc_gq_need_cond(s, kind == GQ_COND64);
    if (st == PC_OK && (kind == GQ_COND32 || kind == GQ_COND64)) st = pc_gq_need_probs(s);
    if (st == PC_OK && (kind == GQ_SAMPLE || kind == GQ_PRIOR)) st = pc_gq_need_sampling(s);
    if (st == PC_OK && kind != GQ_PRIOR) st = pc_gq_need_nodes(s);
    return st;
}

/* A call on the state's device. */
static pc_status call_query(void *state, const gq_call *call, int64_t n) {
    pc_gq_state *s = (pc_gq_state *)state;
    int prev = 0;
    pc_status st = pc_gq_enter(s, &prev);
    if (st != PC_OK) return st;
    const int cond = call->kind == GQ_COND32 || call->kind == GQ_COND64;
    const int64_t piece = cond ? s->cond_chunk
                               : pc_gpu_query_piece(n, s->chunk, s->launch.sms, s->forced_piece);
    if ((st = prepare(s, call->kind)) == PC_OK) st = run_chunks(s, call, n, piece);
    pc_gq_leave(s, prev);
    return st;
}

static pc_status query_conditionals(void *state, const uint8_t *x, const uint8_t *missing,
                                    int64_t n, double *probs64, float *probs32, double *logp) {
    gq_call call = {probs64 ? GQ_COND64 : GQ_COND32, x, missing, NULL, logp, NULL, 0, 0};
    call.probs = probs64 ? (void *)probs64 : (void *)probs32;
    return call_query(state, &call, n);
}

static pc_status query_mpe(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                           uint8_t *completed, double *logp) {
    const gq_call call = {GQ_MPE, x, missing, completed, logp, NULL, 0, 0};
    return call_query(state, &call, n);
}

static pc_status query_sample(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                              uint64_t seed, int64_t first, uint8_t *samples) {
    const gq_call call = {x ? GQ_SAMPLE : GQ_PRIOR, x, missing, samples, NULL, NULL, seed, first};
    return call_query(state, &call, n);
}

extern "C" const pc_query_ops pc_query_gpu_ops = {
    .create = NULL,
    .conditionals = query_conditionals,
    .mpe = query_mpe,
    .sample = query_sample,
    .destroy = pc_gq_destroy,
    .create_with = pc_gq_create,
};

/* ---- the benchmarks' timer (gpu_query.h) --------------------------------------------------*/

static int by_value(const void *p, const void *q) {
    const double a = *(const double *)p, b = *(const double *)q;
    return (a > b) - (a < b);
}

static pc_status time_launches(pc_gq_state *s, const gq_call *call, const pc_gq_args *a,
                               int reps, double *times) {
    pc_status st = PC_OK;
    cudaEvent_t t0 = NULL, t1 = NULL;
    PC_CUDA_CHECK(cudaEventCreate(&t0));
    PC_CUDA_CHECK(cudaEventCreate(&t1));
    if ((st = launch(s, call, a))) goto fail; /* warm-up */
    for (int r = 0; r < reps; r++) {
        float ms = 0.0f;
        PC_CUDA_CHECK(cudaEventRecord(t0, s->stream));
        if ((st = launch(s, call, a))) goto fail;
        PC_CUDA_CHECK(cudaEventRecord(t1, s->stream));
        PC_CUDA_CHECK(cudaEventSynchronize(t1));
        PC_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
        times[r] = ms;
    }
fail:
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    return st;
}

static const struct {
    const char *name;
    gq_kind kind;
} gq_names[] = {{"mpe", GQ_MPE},
                {"conditionals_f32", GQ_COND32},
                {"conditionals_f64", GQ_COND64},
                {"sample_conditional", GQ_SAMPLE},
                {"sample", GQ_PRIOR}};

extern "C" pc_status pc_gpu_query_time(void *state, const char *query, const uint8_t *x,
                                       const uint8_t *missing, int64_t n, int reps,
                                       double *median_ms) {
    pc_gq_state *s = (pc_gq_state *)state;
    gq_call call = {GQ_MPE, x, missing, NULL, NULL, NULL, 1, 0};
    size_t q = 0;
    while (q < sizeof gq_names / sizeof gq_names[0] && strcmp(gq_names[q].name, query)) q++;
    if (q == sizeof gq_names / sizeof gq_names[0])
        return pc_fail(PC_ERR_ARG, "pc_gpu_query_time: unknown query '%s'", query);
    call.kind = gq_names[q].kind;
    if (call.kind == GQ_PRIOR) call.x = NULL, call.missing = NULL;
    const int cond = call.kind == GQ_COND32 || call.kind == GQ_COND64;
    if (n < 1 || n > (cond ? s->cond_chunk : s->chunk) || reps < 1 || (call.kind != GQ_PRIOR && !x))
        return pc_fail(PC_ERR_ARG, "pc_gpu_query_time: n = %lld must be in [1, %lld], reps >= 1",
                       (long long)n, (long long)(cond ? s->cond_chunk : s->chunk));
    double *times = (double *)malloc(sizeof(double) * (size_t)reps);
    if (!times) return pc_fail(PC_ERR_NOMEM, "pc_gpu_query_time: out of host memory");
    int prev = 0;
    pc_status st = pc_gq_enter(s, &prev);
    if (st == PC_OK) {
        if (!(st = prepare(s, call.kind)) && !(st = stage_in(s, &call, 0, 0, n))) {
            const pc_gq_args a = args_for(s, &call, 0, 0, n); /* after prepare: its tables */
            if (!(st = time_launches(s, &call, &a, reps, times))) {
                qsort(times, (size_t)reps, sizeof(double), by_value);
                *median_ms = times[reps / 2];
            }
        }
        pc_gq_leave(s, prev);
    }
    free(times);
    return st;
}

extern "C" void pc_gpu_query_force_rows(void *state, int32_t rows) {
    ((pc_gq_state *)state)->forced_rows = rows;
}

extern "C" void pc_gpu_query_force_piece(void *state, int64_t rows) {
    ((pc_gq_state *)state)->forced_piece = rows;
}
