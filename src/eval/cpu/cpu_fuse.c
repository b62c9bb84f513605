/* The `cpu-fuse` backend: FP32 sum layers in the exp-once + multiply-add form.
 *
 * Accuracy (docs/accuracy.md): every K-vector is kept relative to its maximum, so FP32 only
 * holds numbers near 0 while log p(x) itself (about -700 nats on MNIST, where one FP32 ulp is
 * 6e-5) accumulates in FP64:
 *   input row    in(v, c)[k]  = in_off[v, c] (FP64, max over k) + in_rel[v, c, k] (FP32, <= 0)
 *   product      P_g[k]       = sum of the FP32 relatives of its inputs and children
 *   sum layer    m_g = max_k P_g, e_k = exp(P_g[k] - m_g) in [0, 1], s_j = sum_k W[j, k] e_k,
 *                msg_g[j] = log s_j (FP32, <= ~0)
 *   log p(x)     = sum_v in_off[v, x_v] + sum_g m_g + the root's log, in FP64.
 * The block kernel (cpu_fuse_kernel.h) keeps a block's node values in lane layout, [K, B] per
 * group with samples in vector lanes, in the few slots of pc_cpu_schedule. */
#include <math.h>
#include <stdlib.h>

#include "base/fail.h"
#include "eval/backend.h"
#include "eval/cpu/cpu_common.h"
#include "eval/cpu/cpu_fuse.h"
#include "lse/lse_vec_scalar.h"
#include "pc/lse.h"

/* The baseline build of the block kernel: one lane, tiles of PC_FUSE_PAD outputs. */
#define PC_FUSE_BLOCK pc_cpu_fuse_block_base
#define PC_FUSE_JT PC_FUSE_PAD
#include "eval/cpu/cpu_fuse_kernel.h"

typedef pc_cpu_fuse_state fuse_state;

static void fuse_destroy(void *p) {
    fuse_state *s = p;
    if (!s) return;
    pc_cpu_thread_bufs_free(&s->bufs, s->threads);
    pc_cpu_schedule_free(&s->sched);
    free(s->in_rel);
    free(s->in_off);
    free(s->w_t);
    free(s->root_exp);
    free(s);
}

static pc_status fuse_create(const pc_circuit *c, const pc_eval_opts *opts, void **out) {
    const int64_t K = c->num_latents, C1 = (int64_t)c->num_cats + 1, V = c->num_vars,
                  T = c->num_trans;
    fuse_state *s = calloc(1, sizeof *s);
    if (!s) return pc_fail(PC_ERR_NOMEM, "cpu-fuse backend: out of memory");
    s->c = c;
    s->threads = pc_cpu_threads(opts->threads);
    pc_isa isa = pc_cpu_eval_isa();
    s->kernel = isa == PC_ISA_AVX512 ? pc_cpu_fuse_block_avx512
                : isa == PC_ISA_AVX2 ? pc_cpu_fuse_block_avx2
                                     : pc_cpu_fuse_block_base;
    s->k_pad = (K + PC_FUSE_PAD - 1) / PC_FUSE_PAD * PC_FUSE_PAD;
    s->in_rel = pc_cpu_alloc_table((size_t)(V * C1 * K + PC_CPU_LANE_BLOCK) * sizeof(float));
    s->in_off = pc_cpu_alloc_table((size_t)(V * C1) * sizeof(double));
    s->w_t = calloc((size_t)(T > 0 ? T * K * s->k_pad : 1), sizeof(float));
    s->root_exp = malloc((size_t)K * sizeof(float));
    double *row = malloc((size_t)K * sizeof(double));
    int ok = s->in_rel && s->in_off && s->w_t && s->root_exp && row &&
             pc_cpu_schedule_make(c, &s->sched);
    if (ok) {
        /* Per sample of a block: the slots and d, e, root (floats), tot (a double), the
         * transposed data (uint16); the register tile's raw sums are per block. */
        const int64_t S = s->sched.num_slots;
        const size_t floats = (size_t)((S + 2) * K + 1);
        s->block = pc_cpu_lane_block_size(floats * sizeof(float) + sizeof(double) +
                                          (size_t)V * sizeof(uint16_t));
        ok = pc_cpu_thread_bufs_alloc(
            &s->bufs, s->threads,
            (floats * (size_t)s->block + 16 * PC_CPU_LANE_BLOCK) * sizeof(float),
            (size_t)s->block, (size_t)(V * s->block) * sizeof(uint16_t));
    }
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
