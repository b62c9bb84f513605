/* The sum-product block kernels of the queries (conditionals, conditional sampling), compiled
 * once per flavour (query_sp_f64.h, query_sp_f32.h) and instruction set (query_isa_*.h).
 * The including files define
 *   QSP_REAL          double (ref) or float (cpu-fuse, cpu): node values, tables, sums
 *   QSP_KERNELS       the name of the pc_query_kernels table exported
 *   QSP_EXP(x)        e^x for x <= 0 or -inf, as QSP_REAL
 *   QSP_LOG(s)        log s for a sum that QSP_SAFE accepts, as QSP_REAL
 *   QSP_SAFE(s)       whether a sum s of terms w e (w, e <= 1) kept every bit that matters;
 *                     other sums are recomputed exactly in FP64
 *   QSP_FMA(a, b, c)  a * b + c
 * and, where the instruction set has them, QSP_STREAM_F32 / QSP_STREAM_F64 (dst, src) (store
 * one 64-byte line without reading it first) and QSP_STREAM_END() (order those stores).
 * Values per group g and sample b of a block (query.h), as in cpu-fuse's forward pass:
 *   d_g[k]   = P_g(k) - m, m = max_k P_g(k) (<= 0; -inf for a state of probability 0)
 *   msg_g[j] = log sum_k W[j, k] e^{d_g[k]}, so that the message is moff_g + msg_g[j] with the
 *              FP64 offset moff_g = (sum of the offsets of g's terms) + m
 * and the downward pass replaces msg_g by lpost_g[k] = log p(Z_g = k | evidence). Sums over
 * K states run in tiles of QSP_TILE outputs kept in registers (tables padded to k_pad
 * columns), as in cpu-fuse: a sum kept in memory across its loop waits on its own store and
 * load at every step (the downward pass took twice the forward pass that way). The outputs
 * (conditionals rows, samples) are in query_sp_out.h, included at the end. */
#include <math.h>
#include <string.h>

#include "eval/query/query.h"

typedef QSP_REAL real;

/* Outputs of a sum computed together in registers: one AVX-512 vector of floats. */
#define QSP_TILE 16

typedef struct bufs {
    real *d, *msg, *e, *sum, *acc, *lam, *row;
    double *moff, *logp, *wide, *exact;
    int32_t *z;
} bufs;

static bufs carve(const pc_query_state *s, void *scratch) {
    char *p = scratch;
    const pc_query_layout *l = &s->lay;
    bufs b = {(real *)(p + l->d),       (real *)(p + l->msg),    (real *)(p + l->e),
              (real *)(p + l->sum),     (real *)(p + l->acc),    (real *)(p + l->lam),
              (real *)(p + l->row),     (double *)(p + l->moff), (double *)(p + l->logp),
              (double *)(p + l->wide),  (double *)(p + l->exact), (int32_t *)(p + l->z)};
    return b;
}

/* Exact LSE_k (logw[k * stride] + a[k]) in FP64 for an output whose sum underflowed; a [K]
 * is converted into `tmp` [K] first. */
static double exact_lse(const double *logw, int64_t stride, const real *a, int64_t K,
                        double *tmp) {
    double m = -INFINITY, s = 0.0;
    for (int64_t k = 0; k < K; k++) {
        tmp[k] = logw[k * stride] + (double)a[k];
        m = fmax(m, tmp[k]);
    }
    if (m == -INFINITY) return -INFINITY;
    for (int64_t k = 0; k < K; k++) s += exp(tmp[k] - m);
    return m + log(s);
}

/* Sum of a group's input terms and child messages for one sample: P [K] (FP64, since a group
 * may have many terms whose relative values disagree) and the sum of their offsets. */
static double gather(const pc_query_state *s, const bufs *b, int64_t g, int64_t bi,
                     const uint8_t *xb, const uint8_t *mb, double *P) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C = c->num_cats, C1 = C + 1, B = s->block;
    const real *in_rel = s->in_rel;
    double off = 0.0;
    for (int64_t k = 0; k < K; k++) P[k] = 0.0;
    for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
        const int64_t v = c->group_vars[i];
        const int64_t at = v * C1 + (mb && mb[v] ? C : xb[v]);
        const real *r = in_rel + at * K;
        off += s->in_off[at];
#pragma omp simd
        for (int64_t k = 0; k < K; k++) P[k] += (double)r[k];
    }
    for (int32_t i = c->child_start[g]; i < c->child_start[g + 1]; i++) {
        const int64_t ch = c->group_children[i];
        const real *r = b->msg + (ch * B + bi) * K;
        off += b->moff[ch * B + bi];
#pragma omp simd
        for (int64_t k = 0; k < K; k++) P[k] += (double)r[k];
    }
    return off;
}

/* The root: log p(e) of the sample, and lpost_root written over the root's msg slot. */
static void root_step(const pc_query_state *s, const bufs *b, int64_t g, int64_t bi,
                      double off, double shift) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, B = s->block;
    const real *d = b->d + (g * B + bi) * K, *root_exp = s->root_exp;
    real acc = 0;
    for (int64_t k = 0; k < K; k++) acc = QSP_FMA(root_exp[k], b->e[k], acc);
    const double tail =
        QSP_SAFE(acc) ? log((double)acc) : exact_lse(c->root_logw, 1, d, K, b->exact);
    b->logp[bi] = off + shift + tail; /* -inf when off or tail is */
    real *lpost = b->msg + (g * B + bi) * K;
    for (int64_t k = 0; k < K; k++) lpost[k] = (real)(c->root_logw[k] + (double)d[k] - tail);
}

/* out[j] = sum_k w[k * k_pad + j] e[k] for j < k_pad, in tiles of QSP_TILE outputs held in
 * registers across the k loop (the rows of w are padded with zeros to k_pad). */
static void weighted_sums(const real *w, const real *e, int64_t K, int64_t k_pad, real *out) {
    for (int64_t j0 = 0; j0 < k_pad; j0 += QSP_TILE) {
        real acc[QSP_TILE] = {0};
        for (int64_t k = 0; k < K; k++) {
            const real ek = e[k], *wk = w + k * k_pad + j0;
#pragma omp simd
            for (int64_t jj = 0; jj < QSP_TILE; jj++) acc[jj] = QSP_FMA(wk[jj], ek, acc[jj]);
        }
        for (int64_t jj = 0; jj < QSP_TILE; jj++) out[j0 + jj] = acc[jj];
    }
}

/* Whether QSP_SAFE accepts every one of the n sums (it accepts an interval: check its ends). */
static int all_safe(const real *sum, int64_t n) {
    real lo = sum[0], hi = sum[0];
#pragma omp simd reduction(min : lo) reduction(max : hi)
    for (int64_t j = 0; j < n; j++) {
        lo = sum[j] < lo ? sum[j] : lo;
        hi = sum[j] > hi ? sum[j] : hi;
    }
    return QSP_SAFE(lo) && QSP_SAFE(hi);
}

/* A non-root group's message msg_g[j] = log sum_k W[j, k] e_k. */
static void message_step(const pc_query_state *s, const bufs *b, int64_t g, int64_t bi) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, B = s->block, t = c->group_trans[g], kp = s->k_pad;
    const real *d = b->d + (g * B + bi) * K;
    real *sum = b->sum, *out = b->msg + (g * B + bi) * K;
    weighted_sums((const real *)s->w_up + t * K * kp, b->e, K, kp, sum);
    if (all_safe(sum, K)) {
#pragma omp simd
        for (int64_t j = 0; j < K; j++) out[j] = QSP_LOG(sum[j]);
        return;
    }
    const double *logw = c->trans_logw + t * K * K;
    for (int64_t j = 0; j < K; j++)
        out[j] = QSP_SAFE(sum[j]) ? QSP_LOG(sum[j])
                                  : (real)exact_lse(logw + j * K, 1, d, K, b->exact);
}

/* Upward pass over nb samples of rows x, missing (block-relative). */
static void upward(const pc_query_state *s, const bufs *b, const uint8_t *x,
                   const uint8_t *missing, int64_t nb) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, V = c->num_vars, G = c->num_groups, B = s->block;
    const int64_t C1 = (int64_t)c->num_cats + 1;
    double *P = b->wide;
    for (int64_t g = 0; g < G; g++)
        for (int64_t bi = 0; bi < nb; bi++) {
            const uint8_t *xb = x + bi * V, *mb = missing ? missing + bi * V : NULL;
            /* The input table is far larger than L2 and each sample reads scattered rows of
             * it: fetch the next sample's rows of this group while this one computes. */
            if (bi + 1 < nb)
                for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
                    const int64_t v = c->group_vars[i];
                    const int64_t cat = mb && mb[V + v] ? C1 - 1 : xb[V + v];
                    __builtin_prefetch((const real *)s->in_rel + (v * C1 + cat) * K);
                }
            double off = gather(s, b, g, bi, xb, mb, P);
            double m = -INFINITY;
            for (int64_t k = 0; k < K; k++) m = P[k] > m ? P[k] : m;
            if (m == -INFINITY) off = -INFINITY; /* this sample has probability 0 */
            const double shift = m == -INFINITY ? 0.0 : m;
            real *d = b->d + (g * B + bi) * K;
#pragma omp simd
            for (int64_t k = 0; k < K; k++) d[k] = (real)(P[k] - shift);
#pragma omp simd
            for (int64_t k = 0; k < K; k++) b->e[k] = QSP_EXP(d[k]);
            if (c->group_parent[g] < 0) {
                root_step(s, b, g, bi, off, shift);
            } else {
                message_step(s, b, g, bi);
                b->moff[g * B + bi] = off + shift;
            }
        }
}

/* lpost_g from the parent's lpost for one sample (g not the root):
 *   lam_j = lpost_p(j) - msg_g(j), M = max_j lam_j, u_j = e^{lam_j - M},
 *   lpost_g(k) = d_g(k) + M + log sum_j W[j, k] u_j. */
static void posterior_step(const pc_query_state *s, const bufs *b, int64_t g, int64_t bi) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, B = s->block, t = c->group_trans[g];
    const real *lp = b->msg + (c->group_parent[g] * B + bi) * K, *d = b->d + (g * B + bi) * K;
    real *own = b->msg + (g * B + bi) * K, *lam = b->lam, *u = b->e, *acc = b->acc;
    real M = -INFINITY;
#pragma omp simd reduction(max : M)
    for (int64_t j = 0; j < K; j++) {
        /* A parent state of probability 0 sends nothing (its message may be -inf too). */
        lam[j] = lp[j] == -INFINITY ? -INFINITY : lp[j] - own[j];
        M = lam[j] > M ? lam[j] : M;
    }
#pragma omp simd
    for (int64_t j = 0; j < K; j++) u[j] = QSP_EXP(lam[j] - M);
    weighted_sums((const real *)s->w_down + t * K * s->k_pad, u, K, s->k_pad, acc);
    /* d + M may cancel (both far from 0 where the evidence is extreme): added in FP64. */
    const double Md = (double)M;
    if (all_safe(acc, K)) {
#pragma omp simd
        for (int64_t k = 0; k < K; k++)
            own[k] = (real)(((double)d[k] + Md) + (double)QSP_LOG(acc[k]));
        return;
    }
    const double *logw = c->trans_logw + t * K * K;
    for (int64_t k = 0; k < K; k++) {
        const double tail = QSP_SAFE(acc[k]) ? Md + (double)QSP_LOG(acc[k])
                                             : exact_lse(logw + k, K, lam, K, b->exact);
        own[k] = (real)((double)d[k] + tail); /* -inf for a state of probability 0 */
    }
}

/* Downward pass: lpost of every group (root down) for the samples of nonzero probability. */
static void downward(const pc_query_state *s, const bufs *b, int64_t nb) {
    const pc_circuit *c = s->c;
    for (int64_t g = c->num_groups - 2; g >= 0; g--)
        for (int64_t bi = 0; bi < nb; bi++)
            if (b->logp[bi] > -INFINITY) posterior_step(s, b, g, bi);
}

#include "eval/query/query_sp_out.h"
