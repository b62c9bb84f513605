/* The outputs of the sum-product query kernels: conditionals rows and conditional samples.
 * Part of query_sp_kernel.h (included at its end, with its types and passes). */

/* Writes the row t [C] at element `at` of the output, as float or double. The rows are
 * written once and not read again, and there are many of them (800 KB per MNIST image in
 * float): where the instruction set has streaming stores, the row's whole 64-byte lines skip
 * being read before they are written (cpu-fuse's conditionals on MNIST took 0.75x to 0.9x
 * the time with them, into a 64-byte aligned output). */
static void put_row(pc_query_job *job, size_t at, const real *t, int64_t C) {
    int64_t i = 0;
    if (job->probs64) {
        double *dst = job->probs64 + at;
#ifdef QSP_STREAM_F64
        for (; i < C && ((uintptr_t)(dst + i) & 63) != 0; i++) dst[i] = (double)t[i];
        for (; i + 8 <= C; i += 8) {
            double line[8];
            for (int j = 0; j < 8; j++) line[j] = (double)t[i + j];
            QSP_STREAM_F64(dst + i, line);
        }
#endif
        for (; i < C; i++) dst[i] = (double)t[i];
        return;
    }
    float *dst = job->probs32 + at;
#ifdef QSP_STREAM_F32
    for (; i < C && ((uintptr_t)(dst + i) & 63) != 0; i++) dst[i] = (float)t[i];
    for (; i + 16 <= C; i += 16) {
        float line[16];
        for (int j = 0; j < 16; j++) line[j] = (float)t[i + j];
        QSP_STREAM_F32(dst + i, line);
    }
#endif
    for (; i < C; i++) dst[i] = (float)t[i];
}

/* out[i] += p * c[i] for one tile. */
#define QSP_TILE_FMA(out, p, c)                                                                  \
    _Pragma("omp simd") for (int64_t i_ = 0; i_ < QSP_TILE; i_++)                               \
        (out)[i_] = QSP_FMA((p), (c)[i_], (out)[i_])

/* The row [C] of a missing variable: p(X_v = x | e) = sum_k post[k] cond[k, x]. post [K] is
 * already divided by its sum; the rows of cond sum to 1, so the row does too (normalising by
 * a sum over the C values instead would add hundreds of tiny terms to one near 1, in FP32 an
 * error of ~7e-6 on MNIST). Four tiles at a time: each tile's sum over k is a chain of
 * dependent multiply-adds, and four chains keep the FMA units busy. */
static void missing_row(const real *post, const real *cond, int64_t K, int64_t C, real *row) {
    int64_t x0 = 0;
    for (; x0 + 4 * QSP_TILE <= C; x0 += 4 * QSP_TILE) {
        real t0[QSP_TILE] = {0}, t1[QSP_TILE] = {0}, t2[QSP_TILE] = {0}, t3[QSP_TILE] = {0};
        for (int64_t k = 0; k < K; k++) {
            const real pk = post[k], *ck = cond + k * C + x0;
            QSP_TILE_FMA(t0, pk, ck);
            QSP_TILE_FMA(t1, pk, ck + QSP_TILE);
            QSP_TILE_FMA(t2, pk, ck + 2 * QSP_TILE);
            QSP_TILE_FMA(t3, pk, ck + 3 * QSP_TILE);
        }
        for (int64_t i = 0; i < QSP_TILE; i++) {
            row[x0 + i] = t0[i], row[x0 + QSP_TILE + i] = t1[i];
            row[x0 + 2 * QSP_TILE + i] = t2[i], row[x0 + 3 * QSP_TILE + i] = t3[i];
        }
    }
    for (int64_t i = x0; i < C; i++) row[i] = 0;
    for (int64_t k = 0; k < K && x0 < C; k++)
        for (int64_t i = x0; i < C; i++) row[i] = QSP_FMA(post[k], cond[k * C + i], row[i]);
}

/* The conditionals of every variable of group g for the block's samples. */
static void conditionals_of_group(const pc_query_state *s, const bufs *b, int64_t g,
                                  int64_t b0, int64_t nb, pc_query_job *job) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C = c->num_cats, V = c->num_vars, B = s->block;
    real *post = b->acc, *out = b->row;
    for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
        const int64_t v = c->group_vars[i];
        const real *cond = (const real *)s->cond + v * K * C; /* [K, C] */
        for (int64_t bi = 0; bi < nb; bi++) {
            const int64_t row = b0 + bi;
            const size_t at = ((size_t)row * (size_t)V + (size_t)v) * (size_t)C;
            if (b->logp[bi] == -INFINITY) {
                for (int64_t x = 0; x < C; x++) out[x] = (real)NAN; /* no conditionals */
            } else if (!(job->missing && job->missing[row * V + v])) {
                for (int64_t x = 0; x < C; x++) out[x] = 0; /* one-hot on the value */
                out[job->x[row * V + v]] = 1;
            } else {
                const real *lpost = b->msg + (g * B + bi) * K;
                /* Rounding may leave lpost a hair above 0; QSP_EXP takes x <= 0. */
#pragma omp simd
                for (int64_t k = 0; k < K; k++) post[k] = QSP_EXP(lpost[k] < 0 ? lpost[k] : 0);
                double total = 0.0;
                for (int64_t k = 0; k < K; k++) total += (double)post[k];
                const real scale = (real)(1.0 / total);
#pragma omp simd
                for (int64_t k = 0; k < K; k++) post[k] *= scale;
                missing_row(post, cond, K, C, out);
            }
            put_row(job, at, out, C);
        }
    }
}

static void conditionals_block(const pc_query_state *s, void *scratch, int64_t b0, int64_t nb,
                               pc_query_job *job) {
    const pc_circuit *c = s->c;
    const int64_t V = c->num_vars;
    const bufs b = carve(s, scratch);
    const uint8_t *x = job->x + b0 * V, *missing = job->missing ? job->missing + b0 * V : NULL;
    upward(s, &b, x, missing, nb);
    downward(s, &b, nb);
    for (int64_t g = 0; g < c->num_groups; g++) conditionals_of_group(s, &b, g, b0, nb, job);
#ifdef QSP_STREAM_END
    QSP_STREAM_END(); /* streamed stores are weakly ordered: make them visible before return */
#endif
    if (job->logp) memcpy(job->logp + b0, b.logp, (size_t)nb * sizeof(double));
}

/* One sample drawn top-down given the block's upward values: Z_root ~ root_w e^{d_root},
 * Z_g | Z_parent = j ~ W[j, .] e^{d_g}, missing X_v | Z_g ~ x_cdf (weights in FP64). */
static void sample_down(const pc_query_state *s, const bufs *b, int64_t bi, pc_rng *rng,
                        const uint8_t *xb, const uint8_t *mb, uint8_t *out) {
    const pc_circuit *c = s->c;
    const int64_t K = c->num_latents, C = c->num_cats, B = s->block;
    double *w = b->wide, *cdf = b->exact;
    for (int64_t g = c->num_groups - 1; g >= 0; g--) {
        const real *d = b->d + (g * B + bi) * K;
        const double *logw = c->group_parent[g] < 0
                                 ? c->root_logw
                                 : c->trans_logw + ((int64_t)c->group_trans[g] * K +
                                                    b->z[c->group_parent[g]]) * K;
        double m = -INFINITY, sum = 0.0;
        for (int64_t k = 0; k < K; k++) {
            w[k] = logw[k] + (double)d[k];
            m = fmax(m, w[k]);
        }
        for (int64_t k = 0; k < K; k++) cdf[k] = sum += exp(w[k] - m);
        const int32_t z = pc_query_draw_cdf(cdf, (int32_t)K, rng);
        b->z[g] = z;
        for (int32_t i = c->var_start[g]; i < c->var_start[g + 1]; i++) {
            const int64_t v = c->group_vars[i];
            out[v] = mb && mb[v] ? (uint8_t)pc_query_draw_cdf(s->x_cdf + (v * K + z) * C,
                                                             (int32_t)C, rng)
                                 : xb[v];
        }
    }
}

static void sample_block(const pc_query_state *s, void *scratch, int64_t b0, int64_t nb,
                         pc_query_job *job) {
    const int64_t V = s->c->num_vars;
    const bufs b = carve(s, scratch);
    const uint8_t *x = job->x + b0 * V, *missing = job->missing ? job->missing + b0 * V : NULL;
    upward(s, &b, x, missing, nb);
    for (int64_t bi = 0; bi < nb; bi++) {
        if (b.logp[bi] == -INFINITY) {
            pc_query_mark_bad_row(job, b0 + bi);
            continue;
        }
        pc_rng rng = pc_query_stream(job->seed, job->first + b0 + bi);
        sample_down(s, &b, bi, &rng, x + bi * V, missing ? missing + bi * V : NULL,
                    job->out + (b0 + bi) * V);
    }
}

const pc_query_kernels QSP_KERNELS = {conditionals_block, sample_block};
