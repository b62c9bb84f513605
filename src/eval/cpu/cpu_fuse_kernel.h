/* The cpu-fuse block kernel, compiled once per instruction set: the including file includes
 * its vector vocabulary (lse/lse_vec_<isa>.h: PC_VEC_W lanes), defines PC_FUSE_BLOCK (the
 * function's name) and PC_FUSE_JT (outputs per register tile: 16 for AVX-512, 4 otherwise),
 * then includes this file.
 *
 * Lane layout: a block's node values are [K, B] per group, samples in vector lanes, so that
 * every step of a sum layer is whole vectors across samples whatever K is (odd K included) and
 * nothing is reduced across lanes. Per group g, in the order of pc_cpu_schedule:
 *   P[k, b]  = sum of input relatives + child messages (FP32); the input rows are loaded per
 *              sample (K consecutive floats) and transposed in registers, PC_VEC_W x PC_VEC_W
 *   m[b]     = max_k P[k, b], d = P - m (<= 0), e = exp(d)
 *   S[j, b]  = sum_k W[j, k] e[k, b]: a [K, K] x [K, B] product in register tiles of
 *              PC_FUSE_JT outputs x 16 samples, weights broadcast from memory
 *   msg[j, b] = log S[j, b]
 * The offsets need no per-group bookkeeping: log p(x) = sum over variables of in_off[v, x_v] +
 * sum over groups of m + the root's log, added per sample in FP64 (tot[b]).
 * A tile holding a sum below 2^-60 recomputes those outputs exactly in FP64. */
#include <float.h>
#include <math.h>

#include "eval/cpu/cpu_fuse.h"
#include "eval/cpu/cpu_vec_math.h"

/* Vectors per 16 samples. */
#define NV (PC_CPU_LANE_BLOCK / PC_VEC_W)

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

/* xt[v, b] = x[b, v], or C where missing (C may be 256, hence 16 bits); lanes nb..nbl-1 get
 * category 0 (scored, unused). tot[b] = the sum of the inputs' FP64 offsets. */
static void transpose_block(const pc_cpu_fuse_state *s, const uint8_t *x, const uint8_t *missing,
                            int64_t nb, int64_t nbl, uint16_t *xt, double *tot) {
    const int64_t V = s->c->num_vars, C = s->c->num_cats, C1 = C + 1, B = s->block;
    /* 16 samples at a time, variable by variable: their 16 rows of x (16 x V bytes) stay in
     * L1 and each variable's 16 values are one contiguous store (sample by sample, every store
     * would touch another line of xt, which is larger than L1). */
    for (int64_t b0 = 0; b0 < nbl; b0 += PC_CPU_LANE_BLOCK) {
        const int64_t n = nb - b0 < PC_CPU_LANE_BLOCK ? nb - b0 : PC_CPU_LANE_BLOCK;
        for (int64_t v = 0; v < V; v++) {
            uint16_t *to = xt + v * B + b0;
            for (int64_t l = 0; l < PC_CPU_LANE_BLOCK; l++) {
                const int64_t at = (b0 + l) * V + v;
                to[l] = l >= n ? 0 : missing && missing[at] ? (uint16_t)C : x[at];
            }
        }
    }
    for (int64_t b = 0; b < nbl; b++) tot[b] = 0.0;
    /* Variable by variable, so that the B sums are independent (one FP64 add chain over V
     * would wait ~4 cycles per add). */
    for (int64_t v = 0; v < V; v++) {
        const double *ob = s->in_off + v * C1;
        const uint16_t *xv = xt + v * B;
        for (int64_t b = 0; b < nbl; b++) tot[b] += ob[xv[b]];
    }
}

/* P = the input relatives of group g's variables ([K, B]): PC_VEC_W rows at a time (one per
 * lane), PC_VEC_W floats of each, transposed into k-vectors. The table has PC_CPU_LANE_BLOCK
 * floats of padding, so a load past the last row's end stays in bounds. The PC_VEC_W row loads
 * are independent, so their cache misses overlap: software prefetches of the rows one to three
 * groups ahead made no measurable difference. */
static void gather_inputs(const pc_cpu_fuse_state *s, int64_t g, const uint16_t *xt,
                          int64_t nbl, float *P) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C1 = (int64_t)c->num_cats + 1, B = s->block;
    for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
        const int64_t v = c->group_vars[i];
        const float *base = s->in_rel + v * C1 * K;
        const uint16_t *xv = xt + v * B;
        const int first = i == c->var_start[g];
        for (int64_t b = 0; b < nbl; b += PC_VEC_W) {
            const float *rows[PC_VEC_W];
            for (int l = 0; l < PC_VEC_W; l++) rows[l] = base + (int64_t)xv[b + l] * K;
            for (int64_t k0 = 0; k0 < K; k0 += PC_VEC_W) {
                vf r[PC_VEC_W];
                for (int l = 0; l < PC_VEC_W; l++) r[l] = vf_load(rows[l] + k0);
                vf_transpose(r);
                const int64_t kn = K - k0 < PC_VEC_W ? K - k0 : PC_VEC_W;
                for (int64_t q = 0; q < kn; q++) {
                    float *at = P + (k0 + q) * B + b;
                    vf_store(at, first ? r[q] : vf_add(vf_load(at), r[q]));
                }
            }
        }
    }
}

void PC_FUSE_BLOCK(void *p, int thread, const uint8_t *x, const uint8_t *missing, int64_t nb,
                   double *logp) {
    const pc_cpu_fuse_state *s = p;
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, G = c->num_groups, B = s->block, kp = s->k_pad, KB = K * B;
    const int64_t nbl = (nb + PC_CPU_LANE_BLOCK - 1) / PC_CPU_LANE_BLOCK * PC_CPU_LANE_BLOCK;
    const int32_t *order = s->sched.order, *slot = s->sched.slot;
    float *msg = s->bufs.scratch[thread]; /* [num_slots, K, B] */
    float *d = msg + s->sched.num_slots * KB, *e = d + KB, *raw = e + KB;
    float *root = raw + 16 * PC_CPU_LANE_BLOCK;
    double *tot = s->bufs.offsets[thread];
    uint16_t *xt = s->bufs.wide[thread];
    transpose_block(s, x, missing, nb, nbl, xt, tot);
    for (int64_t i = 0; i < G; i++) {
        const int64_t g = order[i], t = c->group_trans[g];
        gather_inputs(s, g, xt, nbl, d);
        for (int32_t ci = c->child_start[g]; ci < c->child_start[g + 1]; ci++) {
            const float *m = msg + slot[c->group_children[ci]] * KB;
            for (int64_t k = 0; k < K; k++)
                for (int64_t b = 0; b < nbl; b += PC_VEC_W)
                    vf_store(d + k * B + b, vf_add(vf_load(d + k * B + b), vf_load(m + k * B + b)));
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
            vf_store(root + b, m);
        }
        for (int64_t b = 0; b < nbl; b++) tot[b] += root[b] == -FLT_MAX ? -INFINITY : root[b];
        if (t < 0) {
            for (int64_t b0 = 0; b0 < nbl; b0 += PC_CPU_LANE_BLOCK)
                if (sum_tile(1, e + b0, B, s->root_exp, 1, K, 1, root + b0, raw))
                    tile_fallback(raw, 1, c->root_logw, 0, d + b0, B, K, root + b0);
            for (int64_t b = 0; b < nb; b++) logp[b] = tot[b] + (double)root[b];
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
    }
}
