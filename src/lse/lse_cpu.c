/* CPU entry points of lse.h: argument checks, the choice of instruction set, threads over rows,
 * and the row drivers of fuse, int and the backward pass (the weighted form is in
 * lse_cpu_weighted.c).
 *
 * fuse, one row of n values: chunks of PC_CPU_FUSE_CHUNK; per chunk the path returns its max m
 * and s = sum exp(x - m) (a max pass, then an exp2 pass from L1); chunk pairs merge as
 * (M, S) <- (max, S e^(M - max) + s e^(m - max)) with one scalar exp per chunk; one log per row.
 * Where the path has fuse_chunk_at, the chunks after the first are summed in one pass against
 * the running max M instead, S += s, with a scalar exp only when the max grows.
 * A chunk that reports NaN or +inf sends the row to the FP64 reference, which gives the NaN or
 * +inf the contract asks for; the hot loop never tests for them.
 *
 * int, one row: the row max in float (NaN, +inf, and an all -inf row end here), then chunks of
 * PC_CPU_INT_CHUNK are converted to Q16.16 of x - max and reduced by a balanced integer tree,
 * then a tree over the chunk results; out = max + q ln2 / 2^16.
 */
#include <pthread.h>
#include <stdlib.h>

#include "base/fail.h"
#include "lse/lse_cpu.h"

/* ---- instruction set --------------------------------------------------------------------- */

pc_status pc_lse_cpu_resolve(const pc_lse_cpu_opts *opts, const pc_lse_cpu_impl **impl,
                             int *threads) {
    pc_isa isa = opts ? opts->isa : PC_ISA_AUTO;
    if (isa < PC_ISA_AUTO || isa > PC_ISA_AVX512)
        return pc_fail(PC_ERR_ARG, "opts->isa = %d is not a pc_isa", (int)isa);
    pc_isa best = pc_cpu_best_isa();
    if (isa == PC_ISA_AUTO)
        isa = best;
    if (isa > best)
        return pc_fail(PC_ERR_UNSUPPORTED, "opts->isa = %s: this CPU supports at most %s",
                       pc_isa_name(isa), pc_isa_name(best));
    *impl = isa == PC_ISA_AVX512 ? &pc_lse_cpu_avx512
            : isa == PC_ISA_AVX2 ? &pc_lse_cpu_avx2
                                 : &pc_lse_cpu_scalar;
    *threads = opts && opts->threads > 1 ? opts->threads : 1;
    return PC_OK;
}

/* ---- the IntLSE table -------------------------------------------------------------------- */

static int32_t int_table[PC_INT_TABLE_LEN];
static uint32_t int_packed[PC_INT_PACKED_LEN];
static pthread_once_t int_table_once = PTHREAD_ONCE_INIT;

static void int_table_init(void) {
    pc_int_table_fill(int_table);
    for (int i = 0; i < PC_INT_PACKED_LEN; i++)
        int_packed[i] = (uint32_t)int_table[i] |
                        ((uint32_t)(int_table[i] - int_table[i + 1]) << PC_INT_PACK_BITS);
}

const int32_t *pc_lse_int_table(const uint32_t **packed) {
    pthread_once(&int_table_once, int_table_init);
    *packed = int_packed;
    return int_table;
}

/* ---- threads ----------------------------------------------------------------------------- */

/* Every thread runs its rows with FTZ and DAZ set (pc_flush_begin) and puts the caller's mode
 * back after. Terms far below a row's max make exp results under 2^-126, and each float
 * operation that produces or reads such a subnormal (or underflows to 0) takes a microcode
 * assist on x86: measured here, fuse on U(-2000, 0) ran at 4.8 ns per value instead of 0.37,
 * the weighted fuse and the backward pass likewise (docs/kernels.md, CPU speed). A clamp of the
 * exp argument at -126 would cure the row exp-sum alone, but not the weighted form's dot
 * product (two normal factors such as 2^-70 * 2^-70 still give a subnormal product) and not the
 * backward pass, whose -inf inputs must give exactly 0. Flushing costs nothing in accuracy: a
 * value under 2^-126 read or made as 0 is far below the float resolution of a sum whose largest
 * term is 1, and a softmax entry under 2^-126 becomes 0 (absolute error < 1.2e-38). NaN, +-inf
 * and normal values are untouched; the FP64 fallbacks flush only under 2^-1022. */

pc_status pc_lse_cpu_for(int64_t count, int threads, size_t scratch_bytes, pc_lse_cpu_row_fn fn,
                         const void *ctx) {
    if (count <= 0)
        return PC_OK;
    int64_t nt = threads < count ? threads : count;
    int failed = 0;
    if (nt <= 1) {
        void *scratch = malloc(scratch_bytes ? scratch_bytes : 1);
        if (!scratch)
            return pc_fail(PC_ERR_NOMEM, "LSE scratch of %zu bytes", scratch_bytes);
        unsigned mode = pc_flush_begin();
        for (int64_t r = 0; r < count; r++)
            fn(ctx, r, scratch);
        pc_flush_end(mode);
        free(scratch);
        return PC_OK;
    }
#pragma omp parallel num_threads((int)nt)
    {
        void *scratch = malloc(scratch_bytes ? scratch_bytes : 1);
        if (!scratch) {
#pragma omp atomic write
            failed = 1;
        }
        unsigned mode = pc_flush_begin();
#pragma omp for schedule(static)
        for (int64_t r = 0; r < count; r++)
            if (scratch)
                fn(ctx, r, scratch);
        pc_flush_end(mode);
        free(scratch);
    }
    if (failed)
        return pc_fail(PC_ERR_NOMEM, "LSE scratch of %zu bytes per thread", scratch_bytes);
    return PC_OK;
}

/* ---- argument checks --------------------------------------------------------------------- */

static pc_status check_shape(int64_t rows, int64_t cols, int64_t stride) {
    if (rows < 0)
        return pc_fail(PC_ERR_ARG, "rows = %lld is negative", (long long)rows);
    if (cols < 0)
        return pc_fail(PC_ERR_ARG, "cols = %lld is negative", (long long)cols);
    if (stride < cols)
        return pc_fail(PC_ERR_ARG, "stride = %lld is less than cols = %lld", (long long)stride,
                       (long long)cols);
    return PC_OK;
}

static pc_status check_kernel_dtype(pc_lse_kernel kernel, pc_dtype dtype) {
    if (kernel < PC_LSE_REF || kernel > PC_LSE_INT)
        return pc_fail(PC_ERR_ARG, "kernel = %d is not a pc_lse_kernel", (int)kernel);
    if (dtype < PC_F32 || dtype > PC_Q10_6)
        return pc_fail(PC_ERR_ARG, "dtype = %d is not a pc_dtype", (int)dtype);
    if ((kernel == PC_LSE_FUSE && dtype == PC_Q10_6) ||
        (kernel == PC_LSE_INT && (dtype == PC_F16 || dtype == PC_BF16)))
        return pc_fail(PC_ERR_ARG,
                       "kernel %s does not take dtype %s (fuse: f32, f16, bf16; int: "
                       "f32, q10.6)",
                       pc_lse_kernel_name(kernel), pc_dtype_name(dtype));
    return PC_OK;
}

/* Every argument of a row call: kernel/dtype pair, shape, then the two pointers. */
static pc_status check_rows_args(pc_lse_kernel kernel, pc_dtype dtype, const void *x,
                                 int64_t rows, int64_t cols, int64_t stride, const void *out) {
    pc_status st = check_kernel_dtype(kernel, dtype);
    if (st == PC_OK)
        st = check_shape(rows, cols, stride);
    if (st != PC_OK)
        return st;
    if (!x)
        return pc_fail(PC_ERR_ARG, "x is NULL");
    if (!out)
        return pc_fail(PC_ERR_ARG, "out is NULL");
    return PC_OK;
}

/* ---- row drivers ------------------------------------------------------------------------- */

typedef struct rows_ctx {
    const pc_lse_cpu_impl *impl;
    pc_lse_kernel kernel;
    pc_dtype dtype;
    const char *x; /* row r starts at x + r * row_bytes */
    size_t row_bytes;
    int64_t rows, cols;
    float *out;
    const int32_t *table;
    const uint32_t *packed;
} rows_ctx;

/* The row's LSE from its (max, sum) pair; NaN in the sum or +inf max: the reference rescans. */
static float fuse_finish(const rows_ctx *c, const void *row, float m, float s) {
    if (isnan(s) || m == INFINITY)
        return (float)pc_lse_ref_row(c->dtype, row, c->cols);
    return m == -INFINITY ? -INFINITY : m + logf(s);
}

static float fuse_row(const rows_ctx *c, const void *row, float *fbuf) {
    float big_m = -INFINITY, big_s = 0.0f;
    for (int64_t c0 = 0; c0 < c->cols; c0 += PC_CPU_FUSE_CHUNK) {
        int64_t len = c->cols - c0 < PC_CPU_FUSE_CHUNK ? c->cols - c0 : PC_CPU_FUSE_CHUNK;
        const float *p = (const float *)row + c0;
        if (c->dtype != PC_F32) {
            c->impl->widen(c->dtype, (const uint16_t *)row + c0, len, fbuf);
            p = fbuf;
        }
        float m, s;
        if (big_m != -INFINITY && c->impl->fuse_chunk_at &&
            c->impl->fuse_chunk_at(p, len, big_m, &m, &s)) {
            /* s is already against big_m: no exp unless the max grew (by at most
             * PC_CPU_AT_SPAN), when the shift moves to the new max. */
            if (isnan(s))
                return fuse_finish(c, row, m, s);
            if (m > big_m) {
                big_s = (big_s + s) * expf(big_m - m);
                big_m = m;
            } else {
                big_s += s;
            }
            continue;
        }
        c->impl->fuse_chunk(p, len, &m, &s);
        if (isnan(s) || m == INFINITY)
            return fuse_finish(c, row, m, s);
        if (m == -INFINITY)
            continue;
        if (big_m == -INFINITY) {
            big_m = m, big_s = s;
        } else if (m > big_m) {
            big_s = big_s * expf(big_m - m) + s;
            big_m = m;
        } else {
            big_s += s * expf(m - big_m);
        }
    }
    return fuse_finish(c, row, big_m, big_s);
}

/* Q16.16 of row[c0 : c0 + len] - m into q: f32 through the path; q10.6 in integers, x - max
 * with 6 -> 16 fraction bits, -inf -> the floor (m is then the integer max). */
static void int_quantize(const rows_ctx *c, const void *row, float m, int64_t c0, int64_t len,
                         int32_t *q) {
    if (c->dtype == PC_F32) {
        c->impl->quantize_f32((const float *)row + c0, len, m, q);
        return;
    }
    const int16_t *x = (const int16_t *)row + c0;
    int32_t mq = (int32_t)m;
    for (int64_t i = 0; i < len; i++)
        q[i] = x[i] == PC_Q10_6_NEG_INF ? PC_INT_FLOOR : (int32_t)((uint32_t)(x[i] - mq) << 10);
}

/* Per chunk of PC_CPU_INT_CHUNK values: Q16.16 of x - m and its tree; then the tree of the
 * chunk results. */
static int32_t int_chunks(const rows_ctx *c, const void *row, float m, int32_t *ibuf,
                          int32_t *res) {
    int64_t nc = 0;
    for (int64_t c0 = 0; c0 < c->cols; c0 += PC_CPU_INT_CHUNK) {
        int64_t len = c->cols - c0 < PC_CPU_INT_CHUNK ? c->cols - c0 : PC_CPU_INT_CHUNK;
        int_quantize(c, row, m, c0, len, ibuf);
        res[nc++] = c->impl->int_tree(ibuf, len, c->table, c->packed);
    }
    return nc == 1 ? res[0] : c->impl->int_tree(res, nc, c->table, c->packed);
}

/* The row max for int: NaN, +inf, and an empty or all -inf row are answered here (*done = 1),
 * else m is the shift (q10.6: the integer max, as a float). */
static float int_max(const rows_ctx *c, const void *row, int *done) {
    *done = 1;
    if (c->dtype == PC_F32) {
        float m;
        int nan;
        c->impl->max_f32((const float *)row, c->cols, &m, &nan);
        if (nan)
            return NAN;
        if (m == INFINITY || m == -INFINITY)
            return m; /* any +inf; empty or all -inf */
        *done = 0;
        return m;
    }
    const int16_t *x = (const int16_t *)row;
    int16_t mq = PC_Q10_6_NEG_INF;
    for (int64_t i = 0; i < c->cols; i++)
        mq = x[i] > mq ? x[i] : mq;
    if (mq == PC_Q10_6_NEG_INF)
        return -INFINITY;
    *done = 0;
    return (float)mq;
}

/* out = max + q ln2 / 2^16 (q10.6: the max in nats first). */
static float int_out(const rows_ctx *c, float m, int32_t q) {
    double base = c->dtype == PC_F32 ? (double)m : pc_q10_6_to_f64((int16_t)m);
    return (float)(base + (double)q * PC_INT_UNIT_NATS);
}

static float int_row(const rows_ctx *c, const void *row, int32_t *ibuf, int32_t *res) {
    int done;
    float m = int_max(c, row, &done);
    return done ? m : int_out(c, m, int_chunks(c, row, m, ibuf, res));
}

/* Short int rows, PC_CPU_INT_LANES at a time: the rows' Q16.16 values are stored transposed,
 * [cols, lanes], and int_terms_t runs one tree per row side by side in vector lanes (zero
 * weights), so no tree level is a short or latency-bound one. Same trees, same bits. */
static void int_rows_block(const void *ctx, int64_t blk, void *scratch) {
    const rows_ctx *c = ctx;
    int64_t r0 = blk * PC_CPU_INT_LANES, nr = c->rows - r0, n = c->cols;
    nr = nr < PC_CPU_INT_LANES ? nr : PC_CPU_INT_LANES;
    int32_t *t = scratch, *zero = t + n * PC_CPU_INT_LANES, *tmp = zero + n, *q = tmp + n;
    int32_t *trees = q + PC_CPU_INT_LANES;
    float m[PC_CPU_INT_LANES];
    int done[PC_CPU_INT_LANES];
    memset(zero, 0, sizeof(int32_t) * (size_t)n);
    for (int64_t r = 0; r < PC_CPU_INT_LANES; r++) {
        const void *row = c->x + (size_t)(r0 + r) * c->row_bytes;
        done[r] = 1;
        if (r < nr)
            m[r] = int_max(c, row, &done[r]);
        if (done[r]) {
            for (int64_t k = 0; k < n; k++)
                t[k * PC_CPU_INT_LANES + r] = 0; /* unused lane */
            continue;
        }
        int_quantize(c, row, m[r], 0, n, tmp);
        for (int64_t k = 0; k < n; k++)
            t[k * PC_CPU_INT_LANES + r] = tmp[k];
    }
    c->impl->int_terms_t(t, n, PC_CPU_INT_LANES, zero, trees, c->table, c->packed, q);
    for (int64_t r = 0; r < nr; r++)
        c->out[r0 + r] = done[r] ? m[r] : int_out(c, m[r], q[r]);
}

static void rows_one(const void *ctx, int64_t r, void *scratch) {
    const rows_ctx *c = ctx;
    const void *row = c->x + (size_t)r * c->row_bytes;
    float *fbuf = scratch;
    int32_t *ibuf = (int32_t *)(fbuf + PC_CPU_FUSE_CHUNK), *res = ibuf + PC_CPU_INT_CHUNK;
    switch (c->kernel) {
    case PC_LSE_REF:
        c->out[r] = (float)pc_lse_ref_row(c->dtype, row, c->cols);
        break;
    case PC_LSE_FUSE:
        c->out[r] = fuse_row(c, row, fbuf);
        break;
    case PC_LSE_INT:
        c->out[r] = int_row(c, row, ibuf, res);
        break;
    }
}

/* Short f32 fuse rows: blocks of PC_CPU_ROW_BLOCK rows through the path's fuse_rows. */
static void rows_block(const void *ctx, int64_t q, void *scratch) {
    (void)scratch;
    const rows_ctx *c = ctx;
    int64_t r0 = q * PC_CPU_ROW_BLOCK, nr = c->rows - r0;
    nr = nr < PC_CPU_ROW_BLOCK ? nr : PC_CPU_ROW_BLOCK;
    float m[PC_CPU_ROW_BLOCK], s[PC_CPU_ROW_BLOCK];
    const char *x = c->x + (size_t)r0 * c->row_bytes;
    c->impl->fuse_rows((const float *)x, nr, c->cols, (int64_t)(c->row_bytes / sizeof(float)), m,
                       s);
    for (int64_t i = 0; i < nr; i++)
        c->out[r0 + i] = fuse_finish(c, x + (size_t)i * c->row_bytes, m[i], s[i]);
}

pc_status pc_lse_rows(pc_lse_kernel kernel, pc_dtype dtype, const void *x, int64_t rows,
                      int64_t cols, int64_t stride, float *out, const pc_lse_cpu_opts *opts) {
    pc_status st = check_rows_args(kernel, dtype, x, rows, cols, stride, out);
    if (st != PC_OK)
        return st;
    rows_ctx c = {.kernel = kernel,
                  .dtype = dtype,
                  .x = x,
                  .rows = rows,
                  .cols = cols,
                  .out = out,
                  .row_bytes = (size_t)stride * pc_dtype_size(dtype)};
    int threads;
    if ((st = pc_lse_cpu_resolve(opts, &c.impl, &threads)) != PC_OK)
        return st;
    c.table = pc_lse_int_table(&c.packed);
    int64_t chunks = (cols + PC_CPU_INT_CHUNK - 1) / PC_CPU_INT_CHUNK;
    size_t scratch =
        sizeof(float) * PC_CPU_FUSE_CHUNK + sizeof(int32_t) * (size_t)(PC_CPU_INT_CHUNK + chunks);
    if (kernel == PC_LSE_FUSE && dtype == PC_F32 && cols <= PC_CPU_FUSE_CHUNK && c.impl->fuse_rows)
        return pc_lse_cpu_for((rows + PC_CPU_ROW_BLOCK - 1) / PC_CPU_ROW_BLOCK, threads, 0,
                              rows_block, &c);
    if (kernel == PC_LSE_INT && cols >= 1 && cols <= PC_CPU_INT_SHORT && rows > 1) {
        size_t lanes = sizeof(int32_t) * ((size_t)cols * (PC_CPU_INT_LANES + 2) + PC_CPU_INT_LANES +
                                          PC_CPU_LANE_SCRATCH(cols));
        return pc_lse_cpu_for((rows + PC_CPU_INT_LANES - 1) / PC_CPU_INT_LANES, threads, lanes,
                              int_rows_block, &c);
    }
    return pc_lse_cpu_for(rows, threads, scratch, rows_one, &c);
}

pc_status pc_lse_rows_ref(pc_dtype dtype, const void *x, int64_t rows, int64_t cols, int64_t stride,
                          double *out) {
    pc_status st = check_rows_args(PC_LSE_REF, dtype, x, rows, cols, stride, out);
    if (st != PC_OK)
        return st;
    size_t row_bytes = (size_t)stride * pc_dtype_size(dtype);
    for (int64_t r = 0; r < rows; r++)
        out[r] = pc_lse_ref_row(dtype, (const char *)x + (size_t)r * row_bytes, cols);
    return PC_OK;
}

/* ---- backward ---------------------------------------------------------------------------- */

typedef struct backward_ctx {
    const pc_lse_cpu_impl *impl;
    const float *x, *lse;
    int64_t cols, stride, grad_stride;
    float *grad;
} backward_ctx;

static void backward_one(const void *ctx, int64_t r, void *scratch) {
    (void)scratch;
    const backward_ctx *c = ctx;
    float l = c->lse[r], *g = c->grad + r * c->grad_stride;
    if (isnan(l) || l == -INFINITY) {
        for (int64_t i = 0; i < c->cols; i++)
            g[i] = NAN;
        return;
    }
    c->impl->exp_shifted(c->x + r * c->stride, c->cols, l, g);
}

pc_status pc_lse_backward(const float *x, const float *lse, int64_t rows, int64_t cols,
                          int64_t stride, float *grad, int64_t grad_stride,
                          const pc_lse_cpu_opts *opts) {
    pc_status st = check_shape(rows, cols, stride);
    if (st != PC_OK)
        return st;
    if (grad_stride < cols)
        return pc_fail(PC_ERR_ARG, "grad_stride = %lld is less than cols = %lld",
                       (long long)grad_stride, (long long)cols);
    if (!x)
        return pc_fail(PC_ERR_ARG, "x is NULL");
    if (!lse)
        return pc_fail(PC_ERR_ARG, "lse is NULL");
    if (!grad)
        return pc_fail(PC_ERR_ARG, "grad is NULL");
    backward_ctx c = {.x = x,
                      .lse = lse,
                      .cols = cols,
                      .stride = stride,
                      .grad_stride = grad_stride,
                      .grad = grad};
    int threads;
    if ((st = pc_lse_cpu_resolve(opts, &c.impl, &threads)) != PC_OK)
        return st;
    return pc_lse_cpu_for(rows, threads, 0, backward_one, &c);
}
