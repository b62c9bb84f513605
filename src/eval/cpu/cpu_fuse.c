/* The `cpu-fuse` backend: FP32 sum layers in the exp-once + multiply-add form.
 *
 * Accuracy (docs/accuracy.md): every K-vector is kept relative to an FP64 offset per
 * (sample, group), so FP32 only holds numbers near 0 while log p(x) itself (about -700 nats on
 * MNIST, where one FP32 ulp is 6e-5) accumulates in FP64:
 *   input row    in(v, c)[k]  = in_off[v, c] (FP64, max over k) + in_rel[v, c, k] (FP32, <= 0)
 *   product      P_g[k]       = off_g (FP64 sum of offsets) + sum of FP32 relatives (added in
 *                FP64: a group may have many children whose relatives disagree)
 *   sum layer    m = max_k P_g, e_k = exp(P_g[k] - m) in [0, 1] (FP32 from here on),
 *                s_j = sum_k W[j, k] e_k,
 *                msg_g[j] = log s_j (FP32, <= ~0), moff_g = off_g + m (FP64).
 * Node values live in msg[g][b][k] for a block of B samples (pc_cpu_block_size) so that a
 * block's values stay in L2 while every group's weights are read once per block. */
#include <math.h>
#include <stdlib.h>

#include "base/fail.h"
#include "eval/backend.h"
#include "eval/cpu/cpu_common.h"
#include "eval/cpu/cpu_fuse.h"
#include "pc/lse.h"

/* The baseline build of the block kernel (no FMA: a * b + c rounds twice there). */
#define PC_FUSE_BLOCK pc_cpu_fuse_block_base
#define PC_FMA(a, b, c) ((a) * (b) + (c))
#include "eval/cpu/cpu_fuse_kernel.h"

typedef pc_cpu_fuse_state fuse_state;

static void fuse_destroy(void *p) {
    fuse_state *s = p;
    if (!s) return;
    pc_cpu_thread_bufs_free(&s->bufs, s->threads);
    free(s->in_rel);
    free(s->in_off);
    free(s->w_t);
    free(s->root_exp);
    free(s);
}

static pc_status fuse_create(const pc_circuit *c, const pc_eval_opts *opts, void **out) {
    const int64_t K = c->num_latents, C1 = (int64_t)c->num_cats + 1, V = c->num_vars,
                  T = c->num_trans, G = c->num_groups;
    fuse_state *s = calloc(1, sizeof *s);
    if (!s) return pc_fail(PC_ERR_NOMEM, "cpu-fuse backend: out of memory");
    s->c = c;
    s->threads = pc_cpu_threads(opts->threads);
    s->block = pc_cpu_block_size(c, sizeof(float));
    pc_isa isa = pc_cpu_eval_isa();
    s->kernel = isa == PC_ISA_AVX512 ? pc_cpu_fuse_block_avx512
                : isa == PC_ISA_AVX2 ? pc_cpu_fuse_block_avx2
                                     : pc_cpu_fuse_block_base;
    s->in_rel = malloc((size_t)(V * C1 * K) * sizeof(float));
    s->in_off = malloc((size_t)(V * C1) * sizeof(double));
    s->k_pad = (K + PC_FUSE_TILE - 1) / PC_FUSE_TILE * PC_FUSE_TILE;
    s->w_t = calloc((size_t)(T > 0 ? T * K * s->k_pad : 1), sizeof(float));
    s->root_exp = malloc((size_t)K * sizeof(float));
    double *row = malloc((size_t)K * sizeof(double));
    int ok = s->in_rel && s->in_off && s->w_t && s->root_exp && row &&
             pc_cpu_thread_bufs_alloc(&s->bufs, s->threads,
                                      (size_t)((G * s->block + 2) * K + s->k_pad) * sizeof(float),
                                      (size_t)(G * s->block), (size_t)K * sizeof(double));
    pc_status st = PC_OK;
    if (!ok) {
        st = pc_fail(PC_ERR_NOMEM, "cpu-fuse backend: out of memory for tables and buffers");
        goto fail;
    }
    for (int64_t v = 0; v < V; v++)
        for (int64_t cat = 0; cat < C1; cat++) {
            s->in_off[v * C1 + cat] = pc_cpu_input_row(c, (int32_t)v, (int32_t)cat, row);
            for (int64_t k = 0; k < K; k++) s->in_rel[(v * C1 + cat) * K + k] = (float)row[k];
        }
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < K; j++)
            for (int64_t k = 0; k < K; k++)
                s->w_t[(t * K + k) * s->k_pad + j] =
                    (float)exp(c->trans_logw[(t * K + j) * K + k]);
    for (int64_t k = 0; k < K; k++) s->root_exp[k] = (float)exp(c->root_logw[k]);
    *out = s;
fail:
    free(row);
    if (st != PC_OK) fuse_destroy(s);
    return st;
}

static pc_status fuse_evaluate(void *p, const uint8_t *x, const uint8_t *missing, int64_t n,
                               double *logp) {
    fuse_state *s = p;
    pc_cpu_run_blocks(s, s->kernel, s->threads, s->block, s->c->num_vars, x, missing, n, logp);
    return PC_OK;
}

const pc_backend_ops pc_backend_cpu_fuse_ops = {fuse_create, fuse_evaluate,
                                                pc_cpu_peak_device_bytes, fuse_destroy};
