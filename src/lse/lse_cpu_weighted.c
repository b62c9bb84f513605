/* The weighted form on the CPU: out[b, j] = LSE_k (w[j, k] + x[b, k]); w [outs, ins],
 * x [batch, x_stride], out [batch, outs].
 *
 * fuse (exp once): per call, wmax[j] = max_k w[j, k] and ew[k, j] = exp(w[j, k] - wmax[j]);
 * per sample, m = max_k x[b, k] and e[k] = exp(x[b, k] - m) (batch * ins exps); then
 * out[b, j] = m + wmax[j] + log(sum_k ew[k, j] e[k]) (batch * outs * ins FMAs, one log per
 * output).
 *
 * int: per call, wq[k, j] = Q16.16 of w[j, k] - wmax[j]; per sample xq[k] = Q16.16 of
 * x[b, k] - m; out[b, j] = m + wmax[j] + tree_k(wq[k, j] + xq[k]) ln2 / 2^16 with the same
 * chunked tree as the rows.
 *
 * The weight tables are stored transposed, [ins, outs], so that the vector paths put outputs
 * in lanes: the fuse sum is a matrix-vector product with several accumulators, and every level
 * of the int trees is whole vectors of independent work (one tree per output, side by side).
 *
 * Outputs the fast forms cannot get right go to the FP64 reference, one output at a time: a
 * sample or weight row holding NaN or +inf or nothing but -inf (the contract's NaN/+inf/-inf
 * rules, and -inf + +inf = NaN), and outputs whose best term lies far below m + wmax[j] (the
 * dot product underflows below 2^-60, or the integer result sits within 64 log2 units of the
 * clamp floor), where the shifted forms would lose the answer.
 */
#include <stdlib.h>

#include "base/fail.h"
#include "lse/lse_cpu.h"

/* Below this the exp-once dot product may have lost terms to float underflow. */
#define FUSE_DOT_MIN 0x1p-60f
/* An int result this close to the floor may include clamped terms: recompute it. */
#define INT_FLOOR_MARGIN (PC_INT_FLOOR + (64 << PC_INT_FRAC_BITS))

typedef struct weighted_ctx {
    const pc_lse_cpu_impl *impl;
    pc_lse_kernel kernel;
    const float *w, *x;
    int64_t outs, ins, x_stride;
    float *out;
    const float *wmax;         /* [outs] */
    const unsigned char *wbad; /* [outs]: 1 = the row of w needs the reference */
    const float *ew;           /* [ins, outs], fuse */
    const int32_t *wq;         /* [ins, outs], int */
    const int32_t *table;
    const uint32_t *packed;
} weighted_ctx;

static void weighted_one(const void *ctx, int64_t b, void *scratch) {
    const weighted_ctx *c = ctx;
    const float *xb = c->x + b * c->x_stride;
    float *ob = c->out + b * c->outs;
    float m;
    int nan;
    c->impl->max_f32(xb, c->ins, &m, &nan);
    int all_ref = nan || m == INFINITY || m == -INFINITY || c->kernel == PC_LSE_REF;
    /* scratch: [ins] e or xq, [outs] y or q, then the lane trees' scratch. */
    float *e = scratch, *y = e + c->ins;
    int32_t *xq = scratch, *q = xq + c->ins, *trees = q + c->outs;
    if (!all_ref && c->kernel == PC_LSE_FUSE) {
        c->impl->exp_shifted(xb, c->ins, m, e);
        c->impl->gemv_t(c->ew, c->ins, c->outs, e, y);
    } else if (!all_ref) {
        c->impl->quantize_f32(xb, c->ins, m, xq);
        c->impl->int_terms_t(c->wq, c->ins, c->outs, xq, trees, c->table, c->packed, q);
    }
    for (int64_t j = 0; j < c->outs; j++) {
        int ok = !all_ref && !c->wbad[j];
        if (ok && c->kernel == PC_LSE_FUSE) {
            ok = y[j] >= FUSE_DOT_MIN;
            if (ok)
                ob[j] = (m + c->wmax[j]) + logf(y[j]);
        } else if (ok) {
            ok = q[j] >= INT_FLOOR_MARGIN;
            if (ok)
                ob[j] = (float)((double)m + c->wmax[j] + (double)q[j] * PC_INT_UNIT_NATS);
        }
        if (!ok)
            ob[j] = (float)pc_lse_ref_weighted_one(c->w + j * c->ins, xb, c->ins);
    }
}

static pc_status check_weighted(const float *w, const float *x, int64_t batch, int64_t outs,
                                int64_t ins, int64_t x_stride, const void *out) {
    if (batch < 0)
        return pc_fail(PC_ERR_ARG, "batch = %lld is negative", (long long)batch);
    if (outs < 0)
        return pc_fail(PC_ERR_ARG, "outs = %lld is negative", (long long)outs);
    if (ins < 0)
        return pc_fail(PC_ERR_ARG, "ins = %lld is negative", (long long)ins);
    if (x_stride < ins)
        return pc_fail(PC_ERR_ARG, "x_stride = %lld is less than ins = %lld", (long long)x_stride,
                       (long long)ins);
    if (!w)
        return pc_fail(PC_ERR_ARG, "w is NULL");
    if (!x)
        return pc_fail(PC_ERR_ARG, "x is NULL");
    if (!out)
        return pc_fail(PC_ERR_ARG, "out is NULL");
    return PC_OK;
}

pc_status pc_lse_weighted(pc_lse_kernel kernel, const float *w, const float *x, int64_t batch,
                          int64_t outs, int64_t ins, int64_t x_stride, float *out,
                          const pc_lse_cpu_opts *opts) {
    if (kernel < PC_LSE_REF || kernel > PC_LSE_INT)
        return pc_fail(PC_ERR_ARG, "kernel = %d is not a pc_lse_kernel", (int)kernel);
    pc_status st = check_weighted(w, x, batch, outs, ins, x_stride, out);
    if (st != PC_OK)
        return st;
    weighted_ctx c = {.kernel = kernel,
                      .w = w,
                      .x = x,
                      .outs = outs,
                      .ins = ins,
                      .x_stride = x_stride,
                      .out = out};
    int threads;
    if ((st = pc_lse_cpu_resolve(opts, &c.impl, &threads)) != PC_OK)
        return st;
    if (batch == 0 || outs == 0)
        return PC_OK;
    c.table = pc_lse_int_table(&c.packed);

    /* Per-call weight preparation: [outs] maxima and flags, [ins, outs] exps or integers
     * (a row at a time into `row`, then stored transposed). */
    size_t cells = (size_t)outs * (size_t)ins;
    float *wmax = malloc(sizeof(float) * (size_t)outs);
    unsigned char *wbad = malloc((size_t)outs);
    void *wprep = calloc(cells ? cells : 1, sizeof(float));
    float *row = malloc(sizeof(float) * (size_t)(ins ? ins : 1));
    if (!wmax || !wbad || !wprep || !row) {
        st = pc_fail(PC_ERR_NOMEM, "weighted LSE: weight tables for %lld x %lld", (long long)outs,
                     (long long)ins);
        goto fail;
    }
    unsigned mode = pc_flush_begin(); /* as the per-sample work does (pc_lse_cpu_for) */
    for (int64_t j = 0; j < outs; j++) {
        const float *wj = w + j * ins;
        int nan;
        c.impl->max_f32(wj, ins, &wmax[j], &nan);
        wbad[j] = nan || wmax[j] == INFINITY || wmax[j] == -INFINITY;
        if (wbad[j] || kernel == PC_LSE_REF)
            continue; /* its column stays 0, never used */
        if (kernel == PC_LSE_FUSE) {
            c.impl->exp_shifted(wj, ins, wmax[j], row);
            for (int64_t k = 0; k < ins; k++)
                ((float *)wprep)[k * outs + j] = row[k];
        } else {
            c.impl->quantize_f32(wj, ins, wmax[j], (int32_t *)row);
            for (int64_t k = 0; k < ins; k++)
                ((int32_t *)wprep)[k * outs + j] = ((int32_t *)row)[k];
        }
    }
    pc_flush_end(mode);
    c.wmax = wmax, c.wbad = wbad, c.ew = wprep, c.wq = wprep;
    size_t scratch = sizeof(int32_t) * ((size_t)(ins + outs) + PC_CPU_LANE_SCRATCH(ins));
    st = pc_lse_cpu_for(batch, threads, scratch, weighted_one, &c);
fail:
    free(wmax), free(wbad), free(wprep), free(row);
    return st;
}

pc_status pc_lse_weighted_ref(const float *w, const float *x, int64_t batch, int64_t outs,
                              int64_t ins, int64_t x_stride, double *out) {
    pc_status st = check_weighted(w, x, batch, outs, ins, x_stride, out);
    if (st != PC_OK)
        return st;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t j = 0; j < outs; j++)
            out[b * outs + j] = pc_lse_ref_weighted_one(w + j * ins, x + b * x_stride, ins);
    return PC_OK;
}
