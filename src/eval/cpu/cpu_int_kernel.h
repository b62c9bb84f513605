/* The cpu (IntLSE) block kernel, compiled once per instruction set: the including file defines
 * PC_INT_BLOCK (the function's name), after lse/lse_vec_<isa>.h for a vector build, then includes
 * this file.
 *
 * Per group g and sample b of the block (see cpu_int.c for the number formats):
 *   P[k] = integer sum of input and child relatives (int64), off = sum of offsets (FP64)
 *   m = max_k P[k], d[k] = P[k] - m clamped at the floor
 *   tree[k][j] = wq[j, k] + d[k]; then the balanced tree of pc_int_tree over k, one step at a
 *   time for all outputs j together (lanes of a vector), so every step is SIMD and each
 *   output gets exactly the bits pc_int_tree would give it.
 * Zero probability follows the rules in cpu_int.c (PC_INT_ZERO). */
#include <math.h>

#include "eval/cpu/cpu_int.h"

#define PC_INT_ZERO (PC_INT_FLOOR / 2)

/* a[j] = lse2(a[j], o[j]) for j < n (n a multiple of PC_INT_LANES), with the integers of
 * pc_int_correction_packed: one table gather per vector where the including file brought in a
 * vector vocabulary (lse/lse_vec_<isa>.h), plain C for the compiler to vectorise otherwise. */
#if defined(PC_VEC_W)
static inline void int_tree_step(int32_t *a, const int32_t *o, int64_t n,
                                 const uint32_t *packed) {
    for (int64_t j = 0; j < n; j += PC_VEC_W)
        vi_store(a + j, vi_lse2(vi_load(a + j), vi_load(o + j), packed));
}
#else
static inline int32_t lse2_lane(int32_t a, int32_t b, const uint32_t *packed) {
    int32_t hi = a > b ? a : b, lo = a > b ? b : a;
    return hi + pc_int_correction_packed(hi - lo, packed);
}

static inline void int_tree_step(int32_t *a, const int32_t *o, int64_t n,
                                 const uint32_t *packed) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) a[j] = lse2_lane(a[j], o[j], packed);
}
#endif

void PC_INT_BLOCK(void *p, int thread, const uint8_t *x, const uint8_t *missing, int64_t nb,
                  double *logp) {
    const pc_cpu_int_state *s = p;
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C = c->num_cats, C1 = C + 1, V = c->num_vars,
                  G = c->num_groups, B = s->block, kp = s->k_pad;
    const uint32_t *packed = s->packed;
    int32_t *msg = s->bufs.scratch[thread]; /* [G, B, K] */
    int32_t *d = msg + G * B * K, *tree = d + K;
    int64_t *P = s->bufs.wide[thread];
    double *moff = s->bufs.offsets[thread]; /* [G, B] */
    for (int64_t g = 0; g < G; g++) {
        const int64_t t = c->group_trans[g];
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *xb = x + b * V, *mb = missing ? missing + b * V : NULL;
            if (b + 1 < nb) /* the next sample's input rows: see cpu_fuse_kernel.h */
                for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
                    const int64_t v = c->group_vars[i];
                    __builtin_prefetch(s->in_q + (v * C1 + xb[V + v]) * K);
                }
            /* The product has cpu_fuse_kernel.h's shape over other types (int32 relatives
             * summed exactly in int64 here, FP32 ones in FP64 there), hence its own loops. */
            double off = 0.0;
            for (int64_t k = 0; k < K; k++) P[k] = 0;
            for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
                const int64_t v = c->group_vars[i];
                const int64_t at = v * C1 + (mb && mb[v] ? C : xb[v]);
                const int32_t *r = s->in_q + at * K;
                off += s->in_off[at];
#pragma omp simd
                for (int64_t k = 0; k < K; k++) P[k] += r[k];
            }
            for (int32_t i = c->child_start[g]; i < c->child_start[g + 1]; i++) {
                const int64_t ch = c->group_children[i];
                const int32_t *r = msg + (ch * B + b) * K;
                off += moff[ch * B + b];
#pragma omp simd
                for (int64_t k = 0; k < K; k++) P[k] += r[k];
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
                for (int64_t k = 0; k < K; k++) tree[k] = s->root_q[k] + d[k];
                int32_t r = pc_int_tree(tree, K, s->table);
                logp[b] = r <= PC_INT_ZERO ? -INFINITY
                                           : off + shift + (double)r * PC_INT_UNIT_NATS;
                continue;
            }
            const int32_t *wt = s->w_qt + t * K * kp;
            for (int64_t k = 0; k < K; k++) {
                const int32_t dk = d[k];
                const int32_t *wk = wt + k * kp;
                int32_t *row = tree + k * kp;
#pragma omp simd
                for (int64_t j = 0; j < kp; j++) row[j] = wk[j] + dk;
            }
            for (int64_t n = K; n > 1;) {
                const int64_t half = n / 2, rest = n - half;
                for (int64_t i = 0; i < half; i++)
                    int_tree_step(tree + i * kp, tree + (i + rest) * kp, kp, packed);
                n = rest;
            }
            int32_t *out = msg + (g * B + b) * K;
            for (int64_t j = 0; j < K; j++) out[j] = tree[j] > PC_INT_ZERO ? tree[j] : PC_INT_FLOOR;
            moff[g * B + b] = off + shift;
        }
    }
}
