/* The `cpu` backend: IntLSE integer sum layers (Q16.16 base-2 fixed point, src/kernels/lse_int.h).
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

#include "kernels/lse_int.h"
#include "layers/backend.h"
#include "layers/cpu_common.h"

#define PC_INT_ZERO (PC_INT_FLOOR / 2)

typedef struct int_state {
    const pc_circuit *c;
    int threads;
    int64_t block;
    int32_t table[PC_INT_TABLE_LEN];
    int32_t *in_q;     /* [V, C + 1, K]; category C = missing (the marginal) */
    double *in_off;    /* [V, C + 1] nats */
    int32_t *w_q;      /* [T, K, K] trans_logw in Q16.16 log2 units, row j over k */
    int32_t *root_q;   /* [K] */
    int32_t **scratch; /* per thread: msg [G, B, K], d [K], buf [K] */
    int64_t **wide;    /* per thread: P [K] */
    double **offsets;  /* per thread: moff [G, B] */
} int_state;

/* A natural-log value <= 0 (or -inf) to Q16.16 log2 units, clamped at PC_INT_FLOOR. */
static int32_t to_q(double x) {
    double q = x * PC_INT_SCALE_F;
    return q > (double)PC_INT_FLOOR ? (int32_t)llround(q) : PC_INT_FLOOR;
}

static void int_destroy(void *p) {
    int_state *s = p;
    if (!s) return;
    for (int t = 0; t < s->threads; t++) {
        if (s->scratch) free(s->scratch[t]);
        if (s->offsets) free(s->offsets[t]);
        if (s->wide) free(s->wide[t]);
    }
    free(s->wide);
    free(s->scratch);
    free(s->offsets);
    free(s->in_q);
    free(s->in_off);
    free(s->w_q);
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
    pc_int_table_fill(s->table);
    s->in_q = malloc((size_t)(V * C1 * K) * sizeof(int32_t));
    s->in_off = malloc((size_t)(V * C1) * sizeof(double));
    s->w_q = malloc((size_t)(T > 0 ? T * K * K : 1) * sizeof(int32_t));
    s->root_q = malloc((size_t)K * sizeof(int32_t));
    s->scratch = calloc((size_t)s->threads, sizeof *s->scratch);
    s->offsets = calloc((size_t)s->threads, sizeof *s->offsets);
    s->wide = calloc((size_t)s->threads, sizeof *s->wide);
    double *row = malloc((size_t)K * sizeof(double));
    int ok = s->in_q && s->in_off && s->w_q && s->root_q && s->scratch && s->offsets && s->wide &&
             row;
    for (int t = 0; ok && t < s->threads; t++) {
        s->scratch[t] = malloc((size_t)((G * s->block + 2) * K) * sizeof(int32_t));
        s->offsets[t] = malloc((size_t)(G * s->block) * sizeof(double));
        s->wide[t] = malloc((size_t)K * sizeof(int64_t));
        ok = s->scratch[t] && s->offsets[t] && s->wide[t];
    }
    if (!ok) {
        free(row);
        int_destroy(s);
        return pc_fail(PC_ERR_NOMEM, "cpu backend: out of memory for tables and buffers");
    }
    for (int64_t v = 0; v < V; v++)
        for (int64_t cat = 0; cat < C1; cat++) {
            s->in_off[v * C1 + cat] = pc_cpu_input_row(c, (int32_t)v, (int32_t)cat, row);
            for (int64_t k = 0; k < K; k++) s->in_q[(v * C1 + cat) * K + k] = to_q(row[k]);
        }
    for (int64_t i = 0; i < T * K * K; i++) s->w_q[i] = to_q(c->trans_logw[i]);
    for (int64_t k = 0; k < K; k++) s->root_q[k] = to_q(c->root_logw[k]);
    free(row);
    *out = s;
    return PC_OK;
}

static inline void add_wide(int64_t *P, const int32_t *r, int64_t K) {
#pragma omp simd
    for (int64_t k = 0; k < K; k++) P[k] += r[k];
}

/* LSE_k (w[k] + d[k]) as an IntLSE tree; d[k] = P[k] - max in [PC_INT_FLOOR, 0]. The sum of two
 * values >= PC_INT_FLOOR stays in int32; a result at or below PC_INT_ZERO becomes the floor. */
static inline int32_t weighted_tree(const int32_t *w, const int32_t *d, int32_t *buf, int64_t K,
                                    const int32_t *table) {
    for (int64_t k = 0; k < K; k++) buf[k] = w[k] + d[k];
    int32_t r = pc_int_tree(buf, K, table);
    return r > PC_INT_ZERO ? r : PC_INT_FLOOR;
}

static void int_block(void *p, int thread, const uint8_t *x, const uint8_t *missing, int64_t nb,
                      double *logp) {
    const int_state *s = p;
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C = c->num_cats, C1 = C + 1, V = c->num_vars,
                  G = c->num_groups, B = s->block;
    int32_t *msg = s->scratch[thread]; /* [G, B, K] */
    int32_t *d = msg + G * B * K, *buf = d + K;
    int64_t *P = s->wide[thread];
    double *moff = s->offsets[thread]; /* [G, B] */
    for (int64_t g = 0; g < G; g++) {
        const int64_t t = c->group_trans[g];
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *xb = x + b * V, *mb = missing ? missing + b * V : NULL;
            double off = 0.0;
            for (int64_t k = 0; k < K; k++) P[k] = 0;
            for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
                const int64_t v = c->group_vars[i];
                const int64_t at = v * C1 + (mb && mb[v] ? C : xb[v]);
                off += s->in_off[at];
                add_wide(P, s->in_q + at * K, K);
            }
            for (int32_t i = c->child_start[g]; i < c->child_start[g + 1]; i++) {
                const int64_t ch = c->group_children[i];
                off += moff[ch * B + b];
                add_wide(P, msg + (ch * B + b) * K, K);
            }
            int64_t m = P[0];
            for (int64_t k = 1; k < K; k++) m = P[k] > m ? P[k] : m;
            if (m <= PC_INT_ZERO) off = -INFINITY, m = 0; /* every state has probability 0 */
            /* Clamped at the floor, d and w add without leaving int32. */
            for (int64_t k = 0; k < K; k++) {
                int64_t dk = P[k] - m;
                d[k] = P[k] > PC_INT_ZERO && dk > PC_INT_FLOOR ? (int32_t)dk : PC_INT_FLOOR;
            }
            const double shift = (double)m * PC_INT_UNIT_NATS;
            if (t < 0) {
                int32_t r = weighted_tree(s->root_q, d, buf, K, s->table);
                logp[b] = r == PC_INT_FLOOR ? -INFINITY : off + shift + (double)r * PC_INT_UNIT_NATS;
                continue;
            }
            const int32_t *w = s->w_q + t * K * K;
            int32_t *out = msg + (g * B + b) * K;
            for (int64_t j = 0; j < K; j++) out[j] = weighted_tree(w + j * K, d, buf, K, s->table);
            moff[g * B + b] = off + shift;
        }
    }
}

static pc_status int_evaluate(void *p, const uint8_t *x, const uint8_t *missing, int64_t n,
                              double *logp) {
    int_state *s = p;
    pc_cpu_run_blocks(s, int_block, s->threads, s->block, s->c->num_vars, x, missing, n, logp);
    return PC_OK;
}

static size_t int_peak(const void *p) {
    (void)p;
    return 0;
}

const pc_backend_ops pc_backend_cpu_ops = {int_create, int_evaluate, int_peak, int_destroy};
