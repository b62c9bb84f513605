/* The cpu-fuse block kernel, compiled once per instruction set: the including file includes
 * its vector vocabulary (lse/lse_vec_<isa>.h: PC_VEC_W lanes), defines PC_FUSE_BLOCK (the
 * function's name) and PC_FUSE_JT (outputs per register tile: 16 for AVX-512, 4 otherwise),
 * then includes this file.
 *
 * Lane layout: a block's node values are [K, B], samples in vector lanes, so that every step
 * of a sum layer is whole vectors across samples whatever K is (odd K included) and nothing is
 * reduced across lanes. Per group g, in the order of pc_cpu_schedule (see cpu_fuse.c for the
 * offsets):
 *   P[k, b]  = sum of input relatives (gathered: one row per sample) + child messages (FP32)
 *   m[b]     = max_k P[k, b], d = P - m (<= 0), e = exp(d)
 *   S[j, b]  = sum_k W[j, k] e[k, b]: a [K, K] x [K, B] product in register tiles of
 *              PC_FUSE_JT outputs x 16 samples, weights broadcast from memory
 *   msg[j, b] = log S[j, b], moff[b] = off[b] + m[b] (FP64).
 * A tile holding a sum below 2^-60 recomputes those outputs exactly in FP64. */
#include <float.h>
#include <math.h>

#include "eval/cpu/cpu_fuse.h"
#include "eval/cpu/cpu_vec_math.h"

/* Vectors per 16 samples. */
#define NV (PC_CPU_LANE_BLOCK / PC_VEC_W)
/* The input rows of the group this many places ahead in the schedule are prefetched: one
 * group's work at K = 16 (about a microsecond per block) covers a miss to DRAM. */
#define PREFETCH_AHEAD 2

/* Exact LSE_k (logw[k] + d[k * stride]) in FP64 for an output whose FP32 sum underflowed. */
static double exact_output(const double *logw, const float *d, int64_t stride, int64_t K) {
    double mm = -INFINITY, ss = 0.0;
    for (int64_t k = 0; k < K; k++) mm = fmax(mm, logw[k] + (double)d[k * stride]);
    if (mm == -INFINITY) return -INFINITY;
    for (int64_t k = 0; k < K; k++) ss += exp(logw[k] + (double)d[k * stride] - mm);
    return mm + log(ss);
}

/* out[jt * B + l] = log S[j0 + jt, b0 + l] for jt < jn <= JT, l < 16, with the JT x 16 sums
 * held in registers across the k loop (e = &e[0, b0], w = &w_t[0, j0], rows kp apart). Returns
 * whether a sum fell below 2^-60; the tile's sums are then in raw [JT, 16] for the caller's
 * exact fallback. */
static inline __attribute__((always_inline)) int sum_tile(const int JT, const float *e,
                                                          int64_t B, const float *w, int64_t kp,
                                                          int64_t K, int64_t jn, float *out,
                                                          float *raw) {
    vf acc[16][NV];
#pragma GCC unroll 16
    for (int jt = 0; jt < JT; jt++)
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++) acc[jt][v] = vf_zero();
    for (int64_t k = 0; k < K; k++) {
        vf ev[NV];
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++) ev[v] = vf_load(e + k * B + v * PC_VEC_W);
        const float *wk = w + k * kp;
#pragma GCC unroll 16
        for (int jt = 0; jt < JT; jt++) {
            const vf wj = vf_set1(wk[jt]);
#pragma GCC unroll 16
            for (int v = 0; v < NV; v++) acc[jt][v] = vf_fma(wj, ev[v], acc[jt][v]);
        }
    }
    /* Sums are >= 0, so their bit patterns order as the values do. */
    vi lo = vi_set1(INT32_MAX);
#pragma GCC unroll 16
    for (int jt = 0; jt < JT; jt++)
        if (jt < jn)
#pragma GCC unroll 16
            for (int v = 0; v < NV; v++) lo = vi_min(lo, vf_bits(acc[jt][v]));
    const int unsafe = vi_hmin(lo) < PC_FUSE_SAFE_BITS;
#pragma GCC unroll 16
    for (int jt = 0; jt < JT; jt++)
        if (jt < jn)
#pragma GCC unroll 16
            for (int v = 0; v < NV; v++) {
                if (unsafe) vf_store(raw + jt * PC_CPU_LANE_BLOCK + v * PC_VEC_W, acc[jt][v]);
                vf_store(out + jt * B + v * PC_VEC_W, pc_fuse_log_normal(acc[jt][v]));
            }
    return unsafe;
}

/* The exact fallback of a tile that sum_tile flagged: outputs whose sum is below 2^-60 (raw)
 * are recomputed from d = &d[0, b0] and the FP64 log-weights (row j of `logw`, lw_stride
 * apart). */
static void tile_fallback(const float *raw, int64_t jn, const double *logw, int64_t lw_stride,
                          const float *d, int64_t B, int64_t K, float *out) {
    for (int64_t jt = 0; jt < jn; jt++)
        for (int64_t l = 0; l < PC_CPU_LANE_BLOCK; l++)
            if (!(raw[jt * PC_CPU_LANE_BLOCK + l] >= 0x1p-60f))
                out[jt * B + l] = (float)exact_output(logw + jt * lw_stride, d + l, B, K);
}

/* xt[v, b] = x[b, v], or C where missing (C may be 256, hence 16 bits); lanes nb..nbl-1 get category 0 (scored, unused). */
static void transpose_block(const uint8_t *x, const uint8_t *missing, int64_t nb, int64_t nbl,
                            int64_t V, int64_t C, int64_t B, uint16_t *xt) {
    for (int64_t b = 0; b < nb; b++)
        for (int64_t v = 0; v < V; v++)
            xt[v * B + b] = missing && missing[b * V + v] ? (uint16_t)C : x[b * V + v];
    for (int64_t v = 0; v < V; v++)
        for (int64_t b = nb; b < nbl; b++) xt[v * B + b] = 0;
}

/* The input rows of group g for every lane of the block, towards L1. */
static void prefetch_inputs(const pc_cpu_fuse_state *s, int64_t g, const uint16_t *xt,
                            int64_t nbl) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C1 = (int64_t)c->num_cats + 1, B = s->block;
    for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
        const int64_t v = c->group_vars[i];
        const float *base = s->in_rel + v * C1 * K;
        for (int64_t b = 0; b < nbl; b++) {
            const char *row = (const char *)(base + xt[v * B + b] * K);
            for (int64_t at = 0; at < K * 4; at += 64) __builtin_prefetch(row + at);
            __builtin_prefetch(row + K * 4 - 1);
        }
    }
}

/* P = the input relatives of group g's variables, off = their offsets (both [.., B]). */
static void gather_inputs(const pc_cpu_fuse_state *s, int64_t g, const uint16_t *xt, int64_t nbl,
                          float *P, double *off) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C1 = (int64_t)c->num_cats + 1, B = s->block;
    const vi vK = vi_set1((int32_t)K);
    for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
        const int64_t v = c->group_vars[i];
        const float *base = s->in_rel + v * C1 * K;
        const double *ob = s->in_off + v * C1;
        const uint16_t *xv = xt + v * B;
        const int first = i == c->var_start[g];
        for (int64_t b = 0; b < nbl; b += PC_VEC_W) {
            const vi idx = vi_mul(vi_load_u16(xv + b), vK);
            for (int64_t k = 0; k < K; k++) {
                vf r = vf_gather(base + k, idx);
                vf_store(P + k * B + b, first ? r : vf_add(vf_load(P + k * B + b), r));
            }
        }
        for (int64_t b = 0; b < nbl; b++) off[b] = (first ? 0.0 : off[b]) + ob[xv[b]];
    }
}

void PC_FUSE_BLOCK(void *p, int thread, const uint8_t *x, const uint8_t *missing, int64_t nb,
                   double *logp) {
    const pc_cpu_fuse_state *s = p;
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C = c->num_cats, V = c->num_vars, G = c->num_groups,
                  B = s->block, kp = s->k_pad, KB = K * B;
    const int64_t nbl = (nb + PC_CPU_LANE_BLOCK - 1) / PC_CPU_LANE_BLOCK * PC_CPU_LANE_BLOCK;
    const int32_t *order = s->sched.order, *slot = s->sched.slot;
    float *msg = s->bufs.scratch[thread]; /* [num_slots, K, B] */
    float *d = msg + s->sched.num_slots * KB, *e = d + KB, *raw = e + KB;
    float *root = raw + 16 * PC_CPU_LANE_BLOCK;
    double *moff = s->bufs.offsets[thread], *off = moff + s->sched.num_slots * B;
    uint16_t *xt = s->bufs.wide[thread];
    transpose_block(x, missing, nb, nbl, V, C, B, xt);
    for (int64_t i = 0; i < PREFETCH_AHEAD && i < G; i++) prefetch_inputs(s, order[i], xt, nbl);
    for (int64_t i = 0; i < G; i++) {
        const int64_t g = order[i], t = c->group_trans[g];
        if (i + PREFETCH_AHEAD < G) prefetch_inputs(s, order[i + PREFETCH_AHEAD], xt, nbl);
        gather_inputs(s, g, xt, nbl, d, off);
        for (int32_t ci = c->child_start[g]; ci < c->child_start[g + 1]; ci++) {
            const int64_t at = slot[c->group_children[ci]];
            const float *m = msg + at * KB;
            for (int64_t k = 0; k < K; k++)
                for (int64_t b = 0; b < nbl; b += PC_VEC_W)
                    vf_store(d + k * B + b, vf_add(vf_load(d + k * B + b), vf_load(m + k * B + b)));
            for (int64_t b = 0; b < nbl; b++) off[b] += moff[at * B + b];
        }
        /* m = -inf (every state has probability 0) shifts by -FLT_MAX: d stays -inf there. */
        for (int64_t b = 0; b < nbl; b += PC_VEC_W) {
            vf m = vf_set1(-FLT_MAX);
            for (int64_t k = 0; k < K; k++) m = vf_max(vf_load(d + k * B + b), m);
            for (int64_t k = 0; k < K; k++) {
                vf dk = vf_sub(vf_load(d + k * B + b), m);
                vf_store(d + k * B + b, dk);
                vf_store(e + k * B + b, pc_fuse_exp_nonpos(dk));
            }
            vf_store(root + b, m); /* the shift, read by the offsets below */
        }
        for (int64_t b = 0; b < nbl; b++)
            off[b] = root[b] == -FLT_MAX ? -INFINITY : off[b] + (double)root[b];
        if (t < 0) {
            for (int64_t b0 = 0; b0 < nbl; b0 += PC_CPU_LANE_BLOCK)
                if (sum_tile(1, e + b0, B, s->root_exp, 1, K, 1, root + b0, raw))
                    tile_fallback(raw, 1, c->root_logw, 0, d + b0, B, K, root + b0);
            for (int64_t b = 0; b < nb; b++) logp[b] = off[b] + (double)root[b];
            continue;
        }
        const float *w = s->w_t + t * K * kp;
        const double *logw = c->trans_logw + t * K * K;
        float *out = msg + slot[g] * KB;
        /* Whole tiles of PC_FUSE_JT outputs, then tiles of PC_FUSE_PAD (the padded rows of
         * w_t keep their reads in bounds; only the jn real outputs are stored). */
        for (int64_t j0 = 0; j0 < K;) {
            const int big = K - j0 >= PC_FUSE_JT;
            const int64_t jn = big ? PC_FUSE_JT : K - j0 < PC_FUSE_PAD ? K - j0 : PC_FUSE_PAD;
            for (int64_t b0 = 0; b0 < nbl; b0 += PC_CPU_LANE_BLOCK) {
                float *o = out + j0 * B + b0;
                int unsafe = big ? sum_tile(PC_FUSE_JT, e + b0, B, w + j0, kp, K, jn, o, raw)
                                 : sum_tile(PC_FUSE_PAD, e + b0, B, w + j0, kp, K, jn, o, raw);
                if (unsafe) tile_fallback(raw, jn, logw + j0 * K, K, d + b0, B, K, o);
            }
            j0 += big ? PC_FUSE_JT : PC_FUSE_PAD;
        }
        for (int64_t b = 0; b < nbl; b++) moff[slot[g] * B + b] = off[b];
    }
}
