/* The SIMD primitives of lse_cpu.h, written once over the vector vocabulary and compiled once
 * per instruction set: the including file (lse_cpu_avx2.c, lse_cpu_avx512.c) includes its
 * lse_vec_<isa>.h, defines exp_shifted (whose range handling differs by instruction set) and
 * PC_LSE_CPU_IMPL (the name of the table of primitives), then includes this file.
 *
 * W floats or int32s per vector. A run's last n % W values go through one partial vector whose
 * spare lanes hold -inf (nothing to a max or a sum) or 0, so every value gets the arithmetic of
 * a full lane; the int primitives give the scalar path's bits. */
#define W PC_VEC_W

/* Max ignoring NaN: x is the first operand, so a NaN x leaves the accumulator as it was. */
static float max_pass(const float *x, int64_t n) {
    const vf ninf = vf_set1(-INFINITY);
    vf m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
        m0 = vf_max(vf_load(x + i), m0);
        m1 = vf_max(vf_load(x + i + W), m1);
        m2 = vf_max(vf_load(x + i + 2 * W), m2);
        m3 = vf_max(vf_load(x + i + 3 * W), m3);
    }
    for (; i + W <= n; i += W)
        m0 = vf_max(vf_load(x + i), m0);
    if (i < n)
        m1 = vf_max(vf_load_part(x + i, n - i, -INFINITY), m1);
    return vf_hmax(vf_max(vf_max(m0, m1), vf_max(m2, m3)));
}

/* sum 2^t over x[0:n] with t = x * log2(e) - ml (one FMA; the product is exact inside it), or
 * t = (x - m) * log2(e) when scaled = 0. A step reads 4 W floats (W / 4 cache lines) and
 * prefetches the same lines one chunk ahead into L1 (with the max pass and this pass
 * alternating per chunk, nothing else would overlap its memory traffic with arithmetic) and
 * PC_CPU_FUSE_FAR ahead into L2 (see lse_cpu.h). */
static inline __attribute__((always_inline)) float exp_sum(const float *x, int64_t n, float m,
                                                           float ml, int scaled) {
    const vf vm = vf_set1(scaled ? -ml : m), l2e = vf_set1(PC_LOG2E_F);
#define TERM(v) vf_exp2(scaled ? vf_fma(v, l2e, vm) : vf_mul(vf_sub(v, vm), l2e))
    vf s0 = vf_zero(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
        pc_fuse_prefetch(x + i, W / 4);
        s0 = vf_add(s0, TERM(vf_load(x + i)));
        s1 = vf_add(s1, TERM(vf_load(x + i + W)));
        s2 = vf_add(s2, TERM(vf_load(x + i + 2 * W)));
        s3 = vf_add(s3, TERM(vf_load(x + i + 3 * W)));
    }
    for (; i + W <= n; i += W)
        s0 = vf_add(s0, TERM(vf_load(x + i)));
    if (i < n)
        s1 = vf_add(s1, TERM(vf_load_part(x + i, n - i, -INFINITY)));
#undef TERM
    return vf_hsum(vf_add(vf_add(s0, s1), vf_add(s2, s3)));
}

static void fuse_chunk(const float *x, int64_t n, float *m_out, float *s_out) {
    float m = max_pass(x, n);
    *m_out = m;
    if (m == INFINITY) {
        *s_out = NAN;
        return;
    }
    /* An all -inf chunk still runs the exp pass (shift 0) so that a NaN shows in s; its -inf
     * lanes give 0 (AVX-512) or about 2^-126 each (AVX2), which is dropped here. */
    float shift = m == -INFINITY ? 0.0f : m, ml = shift * PC_LOG2E_F, s;
    if (fabsf(shift) < PC_CPU_SCALED_MAX) {
        /* The sum used 2^-ml in place of 2^-(shift log2 e): undo the rounding of ml. */
        double err = (double)ml - (double)shift * (double)PC_LOG2E_F;
        s = (float)(exp_sum(x, n, shift, ml, 1) * (1.0 + err * 0.6931471805599453));
    } else {
        s = exp_sum(x, n, shift, ml, 0); /* see PC_CPU_SCALED_MAX */
    }
    *s_out = m == -INFINITY && !isnan(s) ? 0.0f : s;
}

/* See pc_lse_cpu_impl.fuse_chunk_at: one loop takes the chunk max and the sum relative to g
 * together, so the exp arithmetic does not wait at each chunk for a max pass and its reduction,
 * and the chunk is read once. -inf values give 0 or (AVX2) about 2^-126 each, nothing beside
 * the running sum, which holds at least 1. */
static int fuse_chunk_at(const float *x, int64_t n, float g, float *m_out, float *s_out) {
    if (!(fabsf(g) < PC_CPU_SCALED_MAX))
        return 0;
    const float ml = g * PC_LOG2E_F;
    const vf vm = vf_set1(-ml), l2e = vf_set1(PC_LOG2E_F), ninf = vf_set1(-INFINITY);
    vf a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
    vf s0 = vf_zero(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
        pc_fuse_prefetch(x + i, W / 4);
        vf v0 = vf_load(x + i), v1 = vf_load(x + i + W);
        vf v2 = vf_load(x + i + 2 * W), v3 = vf_load(x + i + 3 * W);
        a0 = vf_max(v0, a0);
        a1 = vf_max(v1, a1);
        a2 = vf_max(v2, a2);
        a3 = vf_max(v3, a3);
        s0 = vf_add(s0, vf_exp2(vf_fma(v0, l2e, vm)));
        s1 = vf_add(s1, vf_exp2(vf_fma(v1, l2e, vm)));
        s2 = vf_add(s2, vf_exp2(vf_fma(v2, l2e, vm)));
        s3 = vf_add(s3, vf_exp2(vf_fma(v3, l2e, vm)));
    }
    for (; i + W <= n; i += W) {
        vf v = vf_load(x + i);
        a0 = vf_max(v, a0);
        s0 = vf_add(s0, vf_exp2(vf_fma(v, l2e, vm)));
    }
    if (i < n) {
        vf v = vf_load_part(x + i, n - i, -INFINITY);
        a1 = vf_max(v, a1);
        s1 = vf_add(s1, vf_exp2(vf_fma(v, l2e, vm)));
    }
    float m = vf_hmax(vf_max(vf_max(a0, a1), vf_max(a2, a3)));
    if (!(m - g <= PC_CPU_AT_SPAN))
        return 0; /* also m = +inf */
    float s = vf_hsum(vf_add(vf_add(s0, s1), vf_add(s2, s3)));
    /* As in fuse_chunk: the sum used 2^-ml in place of 2^-(g log2 e); undo the rounding of ml. */
    double err = (double)ml - (double)g * (double)PC_LOG2E_F;
    *m_out = m;
    *s_out = (float)(s * (1.0 + err * 0.6931471805599453));
    return 1;
}

/* fuse_chunk on 4 rows at once: each loop step feeds four independent chains. Rows that need
 * the unscaled form or report +inf go through fuse_chunk instead (rare). */
static void fuse4(const float *x, int64_t n, int64_t stride, float *m_out, float *s_out) {
    const vf ninf = vf_set1(-INFINITY), l2e = vf_set1(PC_LOG2E_F);
    const float *r0 = x, *r1 = x + stride, *r2 = x + 2 * stride, *r3 = x + 3 * stride;
    vf a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
    int64_t i = 0, left = n % W;
    for (; i + W <= n; i += W) {
        a0 = vf_max(vf_load(r0 + i), a0);
        a1 = vf_max(vf_load(r1 + i), a1);
        a2 = vf_max(vf_load(r2 + i), a2);
        a3 = vf_max(vf_load(r3 + i), a3);
    }
    if (left) {
        a0 = vf_max(vf_load_part(r0 + i, left, -INFINITY), a0);
        a1 = vf_max(vf_load_part(r1 + i, left, -INFINITY), a1);
        a2 = vf_max(vf_load_part(r2 + i, left, -INFINITY), a2);
        a3 = vf_max(vf_load_part(r3 + i, left, -INFINITY), a3);
    }
    float m[4] = {vf_hmax(a0), vf_hmax(a1), vf_hmax(a2), vf_hmax(a3)}, ml[4];
    for (int r = 0; r < 4; r++) {
        if (!(fabsf(m[r]) < PC_CPU_SCALED_MAX) && m[r] != -INFINITY) {
            for (int q = 0; q < 4; q++)
                fuse_chunk(x + q * stride, n, &m_out[q], &s_out[q]);
            return;
        }
        ml[r] = (m[r] == -INFINITY ? 0.0f : m[r]) * PC_LOG2E_F;
    }
    const vf v0 = vf_set1(-ml[0]), v1 = vf_set1(-ml[1]);
    const vf v2 = vf_set1(-ml[2]), v3 = vf_set1(-ml[3]);
    vf s0 = vf_zero(), s1 = s0, s2 = s0, s3 = s0;
    /* Prefetch the next 4 rows, one line of each per 16 floats (the hardware streams one row
     * well, four interleaved ones less so). */
    const char *next = (const char *)(x + 4 * stride);
    const size_t row_bytes = (size_t)stride * sizeof(float);
    for (i = 0; i + W <= n; i += W) {
        if (W >= 16 || i % 16 == 0) {
            _mm_prefetch(next + 4 * i, _MM_HINT_T0);
            _mm_prefetch(next + row_bytes + 4 * i, _MM_HINT_T0);
            _mm_prefetch(next + 2 * row_bytes + 4 * i, _MM_HINT_T0);
            _mm_prefetch(next + 3 * row_bytes + 4 * i, _MM_HINT_T0);
        }
        s0 = vf_add(s0, vf_exp2(vf_fma(vf_load(r0 + i), l2e, v0)));
        s1 = vf_add(s1, vf_exp2(vf_fma(vf_load(r1 + i), l2e, v1)));
        s2 = vf_add(s2, vf_exp2(vf_fma(vf_load(r2 + i), l2e, v2)));
        s3 = vf_add(s3, vf_exp2(vf_fma(vf_load(r3 + i), l2e, v3)));
    }
    if (left) {
        s0 = vf_add(s0, vf_exp2(vf_fma(vf_load_part(r0 + i, left, -INFINITY), l2e, v0)));
        s1 = vf_add(s1, vf_exp2(vf_fma(vf_load_part(r1 + i, left, -INFINITY), l2e, v1)));
        s2 = vf_add(s2, vf_exp2(vf_fma(vf_load_part(r2 + i, left, -INFINITY), l2e, v2)));
        s3 = vf_add(s3, vf_exp2(vf_fma(vf_load_part(r3 + i, left, -INFINITY), l2e, v3)));
    }
    float s[4] = {vf_hsum(s0), vf_hsum(s1), vf_hsum(s2), vf_hsum(s3)};
    for (int r = 0; r < 4; r++) {
        /* As in fuse_chunk: undo the rounding of ml; an all -inf row's padding terms are
         * dropped (0 unless NaN); +inf rows report NaN for the rescan. */
        double shift = m[r] == -INFINITY ? 0.0 : (double)m[r];
        double err = (double)ml[r] - shift * (double)PC_LOG2E_F;
        float sr = (float)(s[r] * (1.0 + err * 0.6931471805599453));
        m_out[r] = m[r];
        s_out[r] = m[r] == INFINITY ? NAN : m[r] == -INFINITY && !isnan(sr) ? 0.0f : sr;
    }
}

static void fuse_rows(const float *x, int64_t rows, int64_t n, int64_t stride, float *m_out,
                      float *s_out) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4)
        fuse4(x + r * stride, n, stride, m_out + r, s_out + r);
    for (; r < rows; r++)
        fuse_chunk(x + r * stride, n, m_out + r, s_out + r);
}

static inline vf widen_v(pc_dtype dtype, vh h) {
    return dtype == PC_F16 ? vf_from_f16(h) : vf_from_bf16(h);
}

static void widen(pc_dtype dtype, const uint16_t *src, int64_t n, float *dst) {
    int64_t i = 0;
    for (; i + W <= n; i += W)
        vf_store(dst + i, widen_v(dtype, vh_load(src + i)));
    if (i < n)
        vf_store_part(dst + i, n - i, widen_v(dtype, vh_load_part(src + i, n - i)));
}

static void max_f32(const float *x, int64_t n, float *m_out, int *has_nan) {
    const vf ninf = vf_set1(-INFINITY);
    vf m0 = ninf, m1 = ninf;
    vmask nan = vmask_none();
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
        vf a = vf_load(x + i), b = vf_load(x + i + W);
        nan = vmask_or(nan, vf_unordered(a, b));
        m0 = vf_max(a, m0);
        m1 = vf_max(b, m1);
    }
    for (; i < n; i += W) {
        vf a = n - i < W ? vf_load_part(x + i, n - i, -INFINITY) : vf_load(x + i);
        nan = vmask_or(nan, vf_unordered(a, a));
        m0 = vf_max(a, m0);
    }
    *m_out = vf_hmax(vf_max(m0, m1));
    *has_nan = vmask_any(nan);
}

static inline vi quantize_v(vf x, vf m) {
    vf q = vf_mul(vf_sub(x, m), vf_set1((float)PC_INT_SCALE_F));
    /* Out of range and -inf convert to INT32_MIN, which the max lifts to the floor. */
    return vi_max(vf_to_vi(q), vi_set1(PC_INT_FLOOR));
}

static void quantize_f32(const float *x, int64_t n, float m, int32_t *q) {
    const vf vm = vf_set1(m);
    int64_t i = 0;
    for (; i + W <= n; i += W)
        vi_store(q + i, quantize_v(vf_load(x + i), vm));
    if (i < n)
        vi_store_part(q + i, n - i, quantize_v(vf_load_part(x + i, n - i, 0.0f), vm));
}

static int32_t int_tree(int32_t *buf, int64_t n, const int32_t *table, const uint32_t *packed) {
    while (n > 1) {
        int64_t half = n / 2, rest = n - half, i = 0;
        /* Reads buf[i + rest] with i < half <= rest, never a slot this level writes. */
        for (; i + W <= half; i += W)
            vi_store(buf + i, vi_lse2(vi_load(buf + i), vi_load(buf + i + rest), packed));
        if (half - i >= 8) {
            /* 8 to 15 pairs left (16 lanes): one partial vector. */
            vi a = vi_load_part(buf + i, half - i), b = vi_load_part(buf + i + rest, half - i);
            vi_store_part(buf + i, half - i, vi_lse2(a, b, packed));
        } else {
            /* A few pairs: scalar steps have less latency than a gather (same integers). */
            for (; i < half; i++)
                buf[i] = pc_int_lse2(buf[i], buf[i + rest], table);
        }
        n = rest;
    }
    return buf[0];
}

/* One tile of gemv_t: outputs j .. j + u W - 1 in u vector accumulators held in registers
 * across the k loop. */
static inline __attribute__((always_inline)) void gemv_tile(const float *at, int64_t ins,
                                                            int64_t outs, const float *e,
                                                            float *y, int64_t j, int u) {
    vf a[8];
    for (int l = 0; l < u; l++)
        a[l] = vf_zero();
    for (int64_t k = 0; k < ins; k++) {
        const float *row = at + k * outs + j;
        const vf ek = vf_set1(e[k]);
        for (int l = 0; l < u; l++)
            a[l] = vf_fma(vf_load(row + l * W), ek, a[l]);
    }
    for (int l = 0; l < u; l++)
        vf_store(y + j + l * W, a[l]);
}

static void gemv_t(const float *at, int64_t ins, int64_t outs, const float *e, float *y) {
    int64_t j = 0;
    /* 8 vectors of outputs per pass: eight independent accumulators cover the FMA latency
     * (4 cycles) at two FMAs per cycle; then 4, then 1 at a time, then a partial one. */
    for (; j + 8 * W <= outs; j += 8 * W)
        gemv_tile(at, ins, outs, e, y, j, 8);
    for (; j + 4 * W <= outs; j += 4 * W)
        gemv_tile(at, ins, outs, e, y, j, 4);
    for (; j + W <= outs; j += W)
        gemv_tile(at, ins, outs, e, y, j, 1);
    if (j < outs) {
        vf a = vf_zero();
        for (int64_t k = 0; k < ins; k++)
            a = vf_fma(vf_load_part(at + k * outs + j, outs - j, 0.0f), vf_set1(e[k]), a);
        vf_store_part(y + j, outs - j, a);
    }
}

/* The tree of pc_int_tree over n vectors (v holds them W int32s apart), lane by lane. */
static vi lane_tree(int32_t *v, int64_t n, const uint32_t *packed) {
    while (n > 1) {
        int64_t half = n / 2, rest = n - half;
        for (int64_t i = 0; i < half; i++)
            vi_store(v + i * W, vi_lse2(vi_load(v + i * W), vi_load(v + (i + rest) * W), packed));
        n = rest;
    }
    return vi_load(v);
}

/* int_terms_t for outputs j .. j + lanes - 1 (lanes <= W), one per vector lane; lanes past
 * `lanes` add xq to zeros, and nothing is stored from them. */
static inline __attribute__((always_inline)) void terms_lanes(const int32_t *wqt, int64_t ins,
                                                              int64_t outs, const int32_t *xq,
                                                              int32_t *scratch,
                                                              const uint32_t *packed, int32_t *q,
                                                              int64_t j, int64_t lanes) {
    int32_t *buf = scratch, *res = scratch + PC_CPU_INT_CHUNK * W;
    int64_t nc = 0;
    for (int64_t c0 = 0; c0 < ins; c0 += PC_CPU_INT_CHUNK) {
        int64_t len = ins - c0 < PC_CPU_INT_CHUNK ? ins - c0 : PC_CPU_INT_CHUNK;
        for (int64_t i = 0; i < len; i++) {
            const int32_t *w = wqt + (c0 + i) * outs + j;
            vi wv = lanes == W ? vi_load(w) : vi_load_part(w, lanes);
            vi_store(buf + i * W, vi_add(wv, vi_set1(xq[c0 + i])));
        }
        vi_store(res + nc++ * W, lane_tree(buf, len, packed));
    }
    vi r = lane_tree(res, nc, packed);
    if (lanes == W)
        vi_store(q + j, r);
    else
        vi_store_part(q + j, lanes, r);
}

static void int_terms_t(const int32_t *wqt, int64_t ins, int64_t outs, const int32_t *xq,
                        int32_t *scratch, const int32_t *table, const uint32_t *packed,
                        int32_t *q) {
    (void)table; /* every tree level is whole vectors */
    int64_t j = 0;
    for (; j + W <= outs; j += W)
        terms_lanes(wqt, ins, outs, xq, scratch, packed, q, j, W);
    if (j < outs)
        terms_lanes(wqt, ins, outs, xq, scratch, packed, q, j, outs - j);
}

const pc_lse_cpu_impl PC_LSE_CPU_IMPL = {
    .fuse_chunk = fuse_chunk,
    .fuse_chunk_at = fuse_chunk_at,
    .fuse_rows = fuse_rows,
    .widen = widen,
    .max_f32 = max_f32,
    .quantize_f32 = quantize_f32,
    .int_tree = int_tree,
    .exp_shifted = exp_shifted,
    .gemv_t = gemv_t,
    .int_terms_t = int_terms_t,
};

#undef W
