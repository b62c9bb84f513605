/* The CPU query state: scratch layout, the block driver, and the two ops tables (FP64 for ref,
 * FP32 for cpu-fuse and cpu). Tables are built by query_tables.c on a query's first call. */
#include <stdlib.h>

#include <omp.h>

#include "base/fail.h"
#include "eval/backend.h"
#include "eval/cpu/cpu_common.h"
#include "eval/query/query.h"

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

/* Bytes of a block's per-sample buffers (d, msg and moff) per sample. */
static size_t per_sample_bytes(const pc_circuit *c, size_t real_bytes) {
    const size_t G = (size_t)c->num_groups, K = (size_t)c->num_latents;
    return G * K * 2 * real_bytes + G * sizeof(double);
}

static pc_query_layout layout_for(const pc_circuit *c, int64_t B, int64_t k_pad, size_t rb) {
    const size_t G = (size_t)c->num_groups, K = (size_t)c->num_latents, KP = (size_t)k_pad;
    const size_t C = (size_t)c->num_cats, KC = KP > C ? KP : C, nodes = G * (size_t)B * K;
    pc_query_layout l;
    size_t at = 0;
    l.d = at, at += align64(nodes * rb);
    l.msg = at, at += align64(nodes * rb);
    l.pm = l.d; /* MPE's G B K doubles fit in d and msg for either real type */
    l.moff = at, at += align64(G * (size_t)B * sizeof(double));
    l.logp = at, at += align64((size_t)B * sizeof(double));
    l.wide = at, at += align64(KC * sizeof(double));
    l.exact = at, at += align64(K * sizeof(double));
    l.lam = at, at += align64(K * rb);
    l.e = at, at += align64(KP * rb);
    l.sum = at, at += align64(KP * rb);
    l.acc = at, at += align64(KC * rb);
    l.row = at, at += align64(C * rb);
    l.z = at, at += align64(G * sizeof(int32_t));
    l.total = at;
    return l;
}

static void query_destroy(void *p) {
    pc_query_state *s = p;
    if (!s) return;
    if (s->scratch)
        for (int t = 0; t < s->threads; t++) free(s->scratch[t]);
    free(s->scratch);
    free(s->in_rel), free(s->in_off), free(s->w_up), free(s->w_down), free(s->root_exp);
    free(s->cond);
    free(s->mpe_in), free(s->mpe_w_t), free(s->mpe_arg);
    free(s->x_cdf), free(s->root_cdf), free(s->prior_cdf);
    free(s);
}

static pc_status create_flavour(const pc_circuit *c, const pc_eval_opts *opts,
                                pc_query_flavour flavour, void **out) {
    pc_query_state *s = calloc(1, sizeof *s);
    if (!s) return pc_fail(PC_ERR_NOMEM, "queries: out of memory");
    s->c = c;
    s->flavour = flavour;
    s->real_bytes = flavour == PC_QUERY_F64 ? sizeof(double) : sizeof(float);
    s->threads = pc_cpu_threads(opts->threads);
    /* A block's node values stay within about 1 MiB (half of L2), as in the forward pass. */
    const size_t per = per_sample_bytes(c, s->real_bytes);
    const int64_t b = (int64_t)((1u << 20) / (per > 0 ? per : 1));
    s->block = b < 1 ? 1 : b > 64 ? 64 : b;
    s->k_pad = ((int64_t)c->num_latents + 15) / 16 * 16;
    s->lay = layout_for(c, s->block, s->k_pad, s->real_bytes);
    const pc_isa isa = pc_cpu_eval_isa();
    if (flavour == PC_QUERY_F64)
        s->kern = isa == PC_ISA_AVX512 ? pc_query_kernels_f64_avx512
                  : isa == PC_ISA_AVX2 ? pc_query_kernels_f64_avx2
                                       : pc_query_kernels_f64_base;
    else
        s->kern = isa == PC_ISA_AVX512 ? pc_query_kernels_f32_avx512
                  : isa == PC_ISA_AVX2 ? pc_query_kernels_f32_avx2
                                       : pc_query_kernels_f32_base;
    s->scratch = calloc((size_t)s->threads, sizeof *s->scratch);
    int ok = s->scratch != NULL;
    for (int t = 0; ok && t < s->threads; t++) {
        s->scratch[t] = aligned_alloc(64, s->lay.total);
        ok = s->scratch[t] != NULL;
    }
    if (!ok) {
        const int threads = s->threads;
        query_destroy(s);
        return pc_fail(PC_ERR_NOMEM, "queries: out of memory for %d threads' buffers", threads);
    }
    *out = s;
    return PC_OK;
}

static pc_status create_f64(const pc_circuit *c, const pc_eval_opts *opts, void **out) {
    return create_flavour(c, opts, PC_QUERY_F64, out);
}

static pc_status create_f32(const pc_circuit *c, const pc_eval_opts *opts, void **out) {
    return create_flavour(c, opts, PC_QUERY_F32, out);
}

void pc_query_run_blocks(const pc_query_state *s, pc_query_block_fn fn, int64_t n,
                         pc_query_job *job) {
    const int64_t B = s->block, nblocks = (n + B - 1) / B;
    const int threads = s->threads < nblocks ? s->threads : (int)nblocks;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t i = 0; i < nblocks; i++) {
        const int64_t b0 = i * B;
        fn(s, s->scratch[omp_get_thread_num()], b0, n - b0 < B ? n - b0 : B, job);
    }
}

/* The lowest bad row wins, whichever thread finds it first. A compare-and-swap loop rather than
 * a named OpenMP critical section, whose lock would be a global symbol of the library. */
void pc_query_mark_bad_row(pc_query_job *job, int64_t row) {
    int64_t seen = __atomic_load_n(&job->bad_row, __ATOMIC_RELAXED);
    while ((seen < 0 || row < seen) &&
           !__atomic_compare_exchange_n(&job->bad_row, &seen, row, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
}

static pc_status query_conditionals(void *p, const uint8_t *x, const uint8_t *missing, int64_t n,
                                    double *probs64, float *probs32, double *logp) {
    pc_query_state *s = p;
    pc_status st = pc_query_need_conditionals(s);
    if (st != PC_OK) return st;
    pc_query_job job = {x, missing, probs64, probs32, logp, NULL, 0, 0, -1};
    pc_query_run_blocks(s, s->kern.conditionals, n, &job);
    return PC_OK;
}

static pc_status query_mpe(void *p, const uint8_t *x, const uint8_t *missing, int64_t n,
                           uint8_t *completed, double *logp) {
    pc_query_state *s = p;
    pc_status st = pc_query_need_mpe(s);
    if (st != PC_OK) return st;
    pc_query_job job = {x, missing, NULL, NULL, logp, completed, 0, 0, -1};
    pc_query_run_blocks(s, pc_query_mpe_block, n, &job);
    return PC_OK;
}

static pc_status query_sample(void *p, const uint8_t *x, const uint8_t *missing, int64_t n,
                              uint64_t seed, int64_t first, uint8_t *samples) {
    pc_query_state *s = p;
    pc_status st = pc_query_need_sampling(s);
    if (st == PC_OK && x) st = pc_query_need_sum_product(s);
    if (st != PC_OK) return st;
    pc_query_job job = {x, missing, NULL, NULL, NULL, samples, seed, first, -1};
    pc_query_run_blocks(s, x ? s->kern.sample : pc_query_prior_sample_block, n, &job);
    if (job.bad_row >= 0)
        return pc_fail(PC_ERR_DATA,
                       "sample %lld: the evidence has probability 0 under the model, so "
                       "p(x_missing | x_observed) is undefined",
                       (long long)job.bad_row);
    return PC_OK;
}

const pc_query_ops pc_query_f64_ops = {create_f64, query_conditionals, query_mpe, query_sample,
                                       query_destroy, NULL};
const pc_query_ops pc_query_f32_ops = {create_f32, query_conditionals, query_mpe, query_sample,
                                       query_destroy, NULL};
