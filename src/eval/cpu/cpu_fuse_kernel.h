/* The cpu-fuse block kernel, compiled once per instruction set: the including file defines
 * PC_FUSE_BLOCK (the function's name) and PC_FMA(a, b, c) (a * b + c, fused where the
 * instruction set has FMA), then includes this file. The loops are written so that the
 * compiler vectorises them; cpu_math.h has the branch-free exp and log.
 *
 * Per group g and sample b of the block (see cpu_fuse.c for the offsets):
 *   P[k] = sum of input relatives + child messages (FP64), off = sum of their offsets (FP64)
 *   m = max_k P[k], d[k] = P[k] - m (FP32, <= 0), e[k] = exp(d[k])
 *   s[j] = sum_k W[j, k] e[k] (K^2 multiply-adds), msg[j] = log s[j], moff = off + m.
 * A sum too small for FP32 (pc_cpu_sum_is_safe) is recomputed exactly in FP64. */
#include <float.h>
#include <math.h>

#include "eval/cpu/cpu_fuse.h"
#include "eval/cpu/cpu_math.h"

/* Exact LSE_k (logw[k] + d[k]) in FP64 for an output whose FP32 sum underflowed. */
static double exact_output(const double *logw, const float *d, int64_t K) {
    double mm = -INFINITY, ss = 0.0;
    for (int64_t k = 0; k < K; k++) mm = fmax(mm, logw[k] + (double)d[k]);
    if (mm == -INFINITY) return -INFINITY;
    for (int64_t k = 0; k < K; k++) ss += exp(logw[k] + (double)d[k] - mm);
    return mm + log(ss);
}

void PC_FUSE_BLOCK(void *p, int thread, const uint8_t *x, const uint8_t *missing, int64_t nb,
                   double *logp) {
    const pc_cpu_fuse_state *s = p;
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C = c->num_cats, C1 = C + 1, V = c->num_vars,
                  G = c->num_groups, B = s->block;
    float *msg = s->bufs.scratch[thread]; /* [G, B, K] */
    float *d = msg + G * B * K, *e = d + K, *sum = e + K;
    double *P = s->bufs.wide[thread];
    double *moff = s->bufs.offsets[thread]; /* [G, B] */
    for (int64_t g = 0; g < G; g++) {
        const int64_t t = c->group_trans[g];
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *xb = x + b * V, *mb = missing ? missing + b * V : NULL;
            /* The input table is far larger than L2 and each sample reads scattered rows of it:
             * fetch the next sample's rows of this group while this one computes. */
            if (b + 1 < nb)
                for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
                    const int64_t v = c->group_vars[i];
                    __builtin_prefetch(s->in_rel + (v * C1 + xb[V + v]) * K);
                }
            double off = 0.0;
            for (int64_t k = 0; k < K; k++) P[k] = 0.0;
            for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
                const int64_t v = c->group_vars[i];
                const int64_t at = v * C1 + (mb && mb[v] ? C : xb[v]);
                const float *r = s->in_rel + at * K;
                off += s->in_off[at];
#pragma omp simd
                for (int64_t k = 0; k < K; k++) P[k] += (double)r[k];
            }
            for (int32_t i = c->child_start[g]; i < c->child_start[g + 1]; i++) {
                const int64_t ch = c->group_children[i];
                const float *r = msg + (ch * B + b) * K;
                off += moff[ch * B + b];
#pragma omp simd
                for (int64_t k = 0; k < K; k++) P[k] += (double)r[k];
            }
            double m = -INFINITY;
            for (int64_t k = 0; k < K; k++) m = P[k] > m ? P[k] : m;
            if (m == -INFINITY) off = -INFINITY; /* this sample has probability 0 */
            const double shift = m == -INFINITY ? 0.0 : m;
#pragma omp simd
            for (int64_t k = 0; k < K; k++) d[k] = (float)(P[k] - shift);
            /* A loop of its own: mixed double/float lanes keep AVX2 builds from vectorising. */
#pragma omp simd
            for (int64_t k = 0; k < K; k++) e[k] = pc_cpu_exp_nonpos(d[k]);
            if (t < 0) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++) acc = PC_FMA(s->root_exp[k], e[k], acc);
                double tail = pc_cpu_sum_is_safe(acc) ? log((double)acc)
                                                      : exact_output(c->root_logw, d, K);
                logp[b] = off + shift + tail;
                continue;
            }
            /* s = W e in tiles of PC_FUSE_TILE outputs held in registers across the k loop
             * (w_t rows are padded with zeros to a whole number of tiles). */
            const float *wt = s->w_t + t * K * s->k_pad;
            for (int64_t j0 = 0; j0 < K; j0 += PC_FUSE_TILE) {
                float acc[PC_FUSE_TILE] = {0.0f};
                for (int64_t k = 0; k < K; k++) {
                    const float ek = e[k];
                    const float *wk = wt + k * s->k_pad + j0;
#pragma omp simd
                    for (int jj = 0; jj < PC_FUSE_TILE; jj++) acc[jj] = PC_FMA(wk[jj], ek, acc[jj]);
                }
                for (int jj = 0; jj < PC_FUSE_TILE; jj++) sum[j0 + jj] = acc[jj];
            }
            float *out = msg + (g * B + b) * K;
            float lo = FLT_MAX, hi = 0.0f;
#pragma omp simd reduction(min : lo) reduction(max : hi)
            for (int64_t j = 0; j < K; j++) {
                lo = sum[j] < lo ? sum[j] : lo;
                hi = sum[j] > hi ? sum[j] : hi;
            }
            if (pc_cpu_sum_is_safe(lo) && pc_cpu_sum_is_safe(hi)) {
#pragma omp simd
                for (int64_t j = 0; j < K; j++) out[j] = pc_cpu_log_normal(sum[j]);
            } else {
                for (int64_t j = 0; j < K; j++)
                    out[j] = pc_cpu_sum_is_safe(sum[j])
                                 ? pc_cpu_log_normal(sum[j])
                                 : (float)exact_output(c->trans_logw + (t * K + j) * K, d, K);
            }
            moff[g * B + b] = off + shift;
        }
    }
}
