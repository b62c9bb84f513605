/* The `cpu` backend: IntLSE integer sum layers (Q16.16 base-2 fixed point, src/lse/lse_int.h).
 *
 * As in cpu-fuse, every K-vector is relative to an FP64 offset per (sample, group); here the
 * relative values are int32 Q16.16 log2 units, clamped at PC_INT_FLOOR:
 *   input row    in(v, c)[k] = in_off[v, c] (FP64 nats) + in_q[v, c, k] (Q16.16, <= 0)
 *   product      P_g[k]      = integer sum in int64 (no term can overflow it)
 *   sum layer    m = max_k P_g, d_k = max(P_g[k] - m, PC_INT_FLOOR) in int32,
 *                msg_g[j] = tree_k (wq[j, k] + d_k) over a
 *                balanced tree of pairwise IntLSE steps; moff_g = off_g + m (in nats, FP64).
 * Only the offsets are floating point; the sum layer's arithmetic is integer adds, shifts and
 * the interpolated correction table.
 *
 * Zero probability: an input of -inf becomes PC_INT_FLOOR (-8192 log2 units). A relative value
 * at or below PC_INT_ZERO (-4096 log2 units, -2839 nats below its group's maximum) counts as
 * zero; a group whose every entry is zero makes the sample's log p(x) = -inf, as in FP64. The
 * margin between the two leaves room for the small positive rounding of normalised rows. */
#include <math.h>
#include <stdlib.h>

#include "base/fail.h"
#include "eval/backend.h"
#include "eval/cpu/cpu_common.h"
#include "eval/cpu/cpu_int.h"
#include "pc/lse.h"

#define PC_INT_BLOCK pc_cpu_int_block_base
#include "eval/cpu/cpu_int_kernel.h"

typedef pc_cpu_int_state int_state;

/* A natural-log value <= 0 (or -inf) to Q16.16 log2 units, clamped at PC_INT_FLOOR. */
static int32_t to_q(double x) {
    double q = x * PC_INT_SCALE_F;
    return q > (double)PC_INT_FLOOR ? (int32_t)llround(q) : PC_INT_FLOOR;
}

static void int_destroy(void *p) {
    int_state *s = p;
    if (!s) return;
    pc_cpu_thread_bufs_free(&s->bufs, s->threads);
    free(s->in_q);
    free(s->in_off);
    free(s->w_qt);
    free(s->root_q);
    free(s);
}

static pc_status int_create(const pc_circuit *c, const pc_eval_opts *opts, void **out) {
    const int64_t K = c->num_latents, C1 = (int64_t)c->num_cats + 1, V = c->num_vars,
                  T = c->num_trans, G = c->num_groups;
    int_state *s = calloc(1, sizeof *s);
    if (!s) return pc_fail(PC_ERR_NOMEM, "cpu backend: out of memory");
    s->c = c;
    s->threads = pc_cpu_threads(opts->threads);
    s->block = pc_cpu_block_size(c, sizeof(int32_t));
    s->table = pc_lse_int_table(&s->packed);
    s->k_pad = (K + PC_INT_LANES - 1) / PC_INT_LANES * PC_INT_LANES;
    pc_isa isa = pc_cpu_eval_isa();
    s->kernel = isa == PC_ISA_AVX512 ? pc_cpu_int_block_avx512
                : isa == PC_ISA_AVX2 ? pc_cpu_int_block_avx2
                                     : pc_cpu_int_block_base;
    s->in_q = malloc((size_t)(V * C1 * K) * sizeof(int32_t));
    s->in_off = malloc((size_t)(V * C1) * sizeof(double));
    s->w_qt = malloc((size_t)(T > 0 ? T * K * s->k_pad : 1) * sizeof(int32_t));
    s->root_q = malloc((size_t)K * sizeof(int32_t));
    double *row = malloc((size_t)K * sizeof(double));
    int ok = s->in_q && s->in_off && s->w_qt && s->root_q && row &&
             pc_cpu_thread_bufs_alloc(
                 &s->bufs, s->threads,
                 (size_t)((G * s->block + 1) * K + K * s->k_pad) * sizeof(int32_t),
                 (size_t)(G * s->block), (size_t)K * sizeof(int64_t));
    pc_status st = PC_OK;
    if (!ok) {
        st = pc_fail(PC_ERR_NOMEM, "cpu backend: out of memory for tables and buffers");
        goto fail;
    }
    for (int64_t v = 0; v < V; v++)
        for (int64_t cat = 0; cat < C1; cat++) {
            s->in_off[v * C1 + cat] = pc_cpu_input_row(c, (int32_t)v, (int32_t)cat, row);
            for (int64_t k = 0; k < K; k++) s->in_q[(v * C1 + cat) * K + k] = to_q(row[k]);
        }
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < s->k_pad; j++)
                s->w_qt[(t * K + k) * s->k_pad + j] =
                    j < K ? to_q(c->trans_logw[(t * K + j) * K + k]) : PC_INT_FLOOR;
    for (int64_t k = 0; k < K; k++) s->root_q[k] = to_q(c->root_logw[k]);
    *out = s;
fail:
    free(row);
    if (st != PC_OK) int_destroy(s);
    return st;
}

static pc_status int_evaluate(void *p, const uint8_t *x, const uint8_t *missing, int64_t n,
                              double *logp) {
    int_state *s = p;
    pc_cpu_run_blocks(s, s->kernel, s->threads, s->block, s->c->num_vars, x, missing, n, logp);
    return PC_OK;
}

const pc_backend_ops pc_backend_cpu_ops = {int_create, int_evaluate, pc_cpu_peak_device_bytes,
                                           int_destroy};
