/* The warp strategy's gathers (warp.cuh): the counters' wait, the staged input rows, a
 * chain's bottom in the log domain and its links in the linear domain, the top's log. */
#ifndef PC_GPU_WARP_GATHER_CUH
#define PC_GPU_WARP_GATHER_CUH

#include <type_traits>

#include "eval/cuda/fuse_warp/warp.cuh"
#include "eval/cuda/fuse_warp/warp_layout.cuh"
#include "eval/cuda/fuse_warp/warp_trace.cuh"

/* Four floats at p[k .. k + 3] (0 where k >= K). K % 4 == 0 (fuse pads its circuit,
 * pc_gpu_create), so p + k is 16-byte aligned and the four are all in or all out. CG: read
 * through L2 (messages written during this kernel by other SMs); else through the read-only
 * path. */
template <bool CG>
static __device__ __forceinline__ void warp_load4(const float *p, int k, int K, float (&v)[4]) {
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (k < K) {
        const float4 *q = reinterpret_cast<const float4 *>(p + k);
        x = CG ? __ldcg(q) : __ldg(q);
    }
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
}

/* Lanes wait (one child each) until every child chain of a chain's bottom g has finished the
 * item's 16-sample tile t; then their writes are visible to the whole warp. (Chains have slots of
 * their own, so no chain waits on the reader of a slot's previous message.) */
static __device__ __forceinline__ void warp_wait(const pc_gpu_args &a, const pc_gpu_group &g,
                                                 int t, int lane) {
    /* An acquire, no fence; relaxed polls before it rather than acquire polls, which would drop
     * the SM's L1 on every poll (tuning.md#counters). */
    for (int i = g.child_begin + lane; i < g.child_end; i += 32)
        pc_gpu_acquire_count<100>(a.done + (size_t)__ldg(a.chain_child + i) * a.tiles + t, a.K);
    __syncwarp();
}

/* The input rows of a chain's variables for an item's samples (S: 16 or 8), a window of 32
 * variables at a time in the warp's shared memory. */
struct warp_rows {
    int *srow;  /* [WARP_STAGE_VARS][S]: variable w0 + i, sample s at [i][s] */
    int vb, nv; /* the chain's variables: chain_vars[vb .. vb + nv) */
    int nb;     /* the bottom's: the first nb of them */
    int b0;     /* the item's first sample */
    int w0;     /* the window: variables w0 .. w0 + WARP_STAGE_VARS - 1 */
};

/* The sample that an item's rows past n read: b0 (16-sample items start below n), or for
 * 8-sample items, whose second half of a tile may lie past n, the last. */
template <int S> static __device__ __forceinline__ int warp_fallback(int b0, int n) {
    return S == 16 || b0 < n ? b0 : n - 1;
}

/* Stages the window at r.w0: srow[i][s] = v (C + 1) + x[b0 + s][v] for variable v = w0 + i (C
 * where missing; samples past n read warp_fallback's), lane i for variable w0 + i. One round of
 * loads (variable, pixels) per 32 variables, where walking the groups' variables took three
 * dependent loads (variable, pixel, row) per variable, on the tree's critical path (the MNIST
 * tree's largest group has 101 variables: the image's border, constant pixels). */
template <int S>
static __device__ __forceinline__ void warp_stage(const int32_t *vars, const uint8_t *x,
                                                  const uint8_t *missing, int n, int V, int C,
                                                  int i, int nv, int b0, int *srow) {
    if (i < nv) {
        const int v = __ldg(vars + i), base = v * (C + 1);
        int row[S];
#pragma unroll
        for (int s = 0; s < S; s++) {
            const size_t at = (size_t)(b0 + s < n ? b0 + s : warp_fallback<S>(b0, n)) * V + v;
            row[s] = base + (missing && __ldg(missing + at) ? C : __ldg(x + at));
        }
        int4 *d = reinterpret_cast<int4 *>(srow);
#pragma unroll
        for (int q = 0; q < S / 4; q++)
            d[q] = make_int4(row[4 * q], row[4 * q + 1], row[4 * q + 2], row[4 * q + 3]);
    }
    __syncwarp();
}

template <int S>
static __device__ __forceinline__ void warp_stage_rows(const pc_gpu_args &a, const warp_rows &r,
                                                       int lane) {
    const int i = lane < WARP_STAGE_VARS ? r.w0 + lane : r.nv;
    int *srow = r.srow + lane * S;
    /* Inlined at every K: it spills less so than as a call (tuning.md#warp-staging). */
    warp_stage<S>(a.chain_vars + r.vb, a.x, a.missing, a.n, a.V, a.C, i, r.nv, r.b0, srow);
}

/* Moves the window so that it holds variables i .. min(i + u, e) - 1, if it does not
 * (warp-uniform). */
template <int S>
static __device__ __forceinline__ void warp_window(const pc_gpu_args &a, warp_rows &r, int i,
                                                   int u, int e, int lane) {
    if (i < r.w0 || min(i + u, e) > r.w0 + WARP_STAGE_VARS) {
        __syncwarp(); /* every lane is done with the old window */
        r.w0 = i;
        warp_stage_rows<S>(a, r, lane);
    }
}

/* A chain's links take one window (the chain plan keeps their variables to it), staged once
 * the bottom is done with its variables; one variable per lane. */
static_assert(WARP_STAGE_VARS <= 32, "a window takes one variable per lane");

/* The staged input row of variable i (in the window) for the item's sample s. */
template <int S>
static __device__ __forceinline__ size_t warp_row(const warp_rows &r, int i, int s) {
    return (size_t)r.srow[(i - r.w0) * S + s];
}

/* The chain's bottom, in the log domain: p[row][k] = the sum of its inputs (the chain's first
 * nb variables, rows staged) and its children's messages (from their slots, in L2), in FP64,
 * both rows together; the inputs first, then the wait for the children (item t), then the
 * children; the sources U at a time, whose loads all travel before the first sum; m = max per
 * row over the row's four lanes; ed = exp(p - m) (0 past K, past n and where m = -inf) for the
 * product; o = the children's offsets + m. At K = 64 the two rows' FP64 sums take 64
 * registers, so the sources go one at a time there (U = 1): each source's loads are then one
 * round trip for both rows (tuning.md#warp-bottom). */
template <int KP, bool KX, int S>
static __device__ __forceinline__ void warp_bottom(const pc_gpu_args &a, const pc_gpu_group &g,
                                                   int t, warp_rows &wr,
                                                   const int (&rr)[S / 8],
                                                   const bool (&ok)[S / 8], int g8, int k0,
                                                   int lane, bool active,
                                                   double (&ed)[S / 8][KP / 4],
                                                   double (&o)[S / 8]) {
    constexpr int NQ = KP / 16, U = KP <= 32 ? WARP_BOTTOM_U : 1, H = S / 8;
    const int K = KX ? KP : a.K, nc = active ? g.child_end - g.child_begin : 0;
    const int nb = active ? wr.nb : 0; /* the bottom's variables: 0 .. nb - 1 */
    /* A long run of variables (MNIST's group of 101): its last nwide, UWB at a time, 32 floats
     * in flight per lane (K = 16: 4 variables against U = 2); the rest U at a time. */
    constexpr int UWB = 32 / (H * NQ * 4) > U ? 32 / (H * NQ * 4) : U;
    const int nwide = UWB > U && nb >= 2 * UWB ? nb / UWB * UWB : 0;
    double p[H][NQ][4], oh[H];
#pragma unroll
    for (int h = 0; h < H; h++) {
        oh[h] = 0.0;
#pragma unroll
        for (int q = 0; q < NQ; q++)
#pragma unroll
            for (int i = 0; i < 4; i++) p[h][q][i] = 0.0;
    }
    /* Variables i0 .. i0 + N - 1 (those below i_end), their loads together. */
    const auto add_vars = [&](auto unroll, int i0, int i_end) {
        constexpr int N = decltype(unroll)::value;
        float v[N][H][NQ][4];
        warp_window<S>(a, wr, i0, N, i_end, lane);
#pragma unroll
        for (int u = 0; u < N; u++)
#pragma unroll
            for (int h = 0; h < H; h++) {
                const bool here = i0 + u < i_end;
                const size_t row = here ? warp_row<S>(wr, i0 + u, g8 + 8 * h) : 0;
#pragma unroll
                for (int q = 0; q < NQ; q++) {
                    if (here)
                        warp_load4<false>(a.input + row * K, k0 + 4 * q, K, v[u][h][q]);
                    else
#pragma unroll
                        for (int i = 0; i < 4; i++) v[u][h][q][i] = 0.0f;
                }
            }
#pragma unroll
        for (int u = 0; u < N; u++)
#pragma unroll
            for (int h = 0; h < H; h++)
#pragma unroll
                for (int q = 0; q < NQ; q++)
#pragma unroll
                    for (int i = 0; i < 4; i++) p[h][q][i] += pc_gpu_f2d(v[u][h][q][i]);
    };
    /* The inputs depend on nothing: their loads overlap the children's wait. */
    if constexpr (UWB > U)
        for (int i0 = nb - nwide; i0 < nb; i0 += UWB)
            add_vars(std::integral_constant<int, UWB>(), i0, nb);
    for (int i0 = 0; i0 < nb - nwide; i0 += U)
        add_vars(std::integral_constant<int, U>(), i0, nb - nwide);
    if (active) warp_wait(a, g, t, lane);
    PC_TRACED(warp_trace_seen(active, t, lane));
    for (int c0 = 0; c0 < nc; c0 += U) {
        float v[U][H][NQ][4];
        double od[U][H];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const bool here = c0 + u < nc;
            const size_t slot = here ? (size_t)__ldg(a.chain_child + g.child_begin + c0 + u) : 0;
#pragma unroll
            for (int h = 0; h < H; h++) {
                const size_t at = slot * a.chunk + rr[h];
#pragma unroll
                for (int q = 0; q < NQ; q++) {
                    if (here)
                        warp_load4<true>(a.rel + at * K, k0 + 4 * q, K, v[u][h][q]);
                    else
#pragma unroll
                        for (int i = 0; i < 4; i++) v[u][h][q][i] = 0.0f;
                }
                od[u][h] = here ? __ldcg(a.off + at) : 0.0;
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int h = 0; h < H; h++) {
                oh[h] += od[u][h];
#pragma unroll
                for (int q = 0; q < NQ; q++)
#pragma unroll
                    for (int i = 0; i < 4; i++) p[h][q][i] += pc_gpu_f2d(v[u][h][q][i]);
            }
    }
#pragma unroll
    for (int h = 0; h < H; h++) {
        float e[NQ][4], x = -INFINITY;
#pragma unroll
        for (int q = 0; q < NQ; q++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                e[q][i] = ok[h] && k0 + 4 * q + i < K ? pc_gpu_d2f(p[h][q][i]) : -INFINITY;
                x = fmaxf(x, e[q][i]);
            }
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
#pragma unroll
        for (int q = 0; q < NQ; q++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                ed[h][4 * q + i] = x == -INFINITY ? 0.0 : pc_gpu_f2d(__expf(e[q][i] - x));
        o[h] = x == -INFINITY ? -INFINITY : oh[h] + pc_gpu_f2d(x);
    }
}

/* A group above the chain's bottom, in the linear domain: the group below left its product
 * acc = sum_k ed[k] exp(w[j, k]) in carry (FP32, 0 or at least 2^-126), and the inputs come
 * pre-exponentiated, lin[v][c][k] = exp(input - mx[v][c]) (FP32, 0 or at least 2^-126). So
 * p[k] = acc[k] prod_v lin[v][x_v][k] exactly in FP64 (at most PC_GPU_CHAIN_LINK_VARS + 1
 * factors: no underflow), o += sum_v mx[v][x_v], and the row is scaled by the power of two
 * 2^-e that brings its max into [1, 2) (exact; o += e ln 2). The log of the group below and
 * this group's exp are gone: the value is the same as the log domain's to FP64 rounding. The
 * variables (the chain's vi0 .. vi1 - 1, in the window) go U at a time, their loads together. */
template <int KP, int S>
static __device__ __forceinline__ void warp_link(const pc_gpu_args &a, const warp_rows &wr,
                                                 int vi0, int vi1, int g8, int k0, bool active,
                                                 const float *carry,
                                                 double (&ed)[S / 8][KP / 4],
                                                 double (&o)[S / 8]) {
    constexpr int NQ = KP / 16, U = WARP_LINK_U, H = S / 8;
#pragma unroll
    for (int h = 0; h < H; h++) {
#pragma unroll
        for (int q = 0; q < NQ; q++) {
            float4 c = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (active)
                c = *reinterpret_cast<const float4 *>(carry +
                                                     warp_carry_at<KP, S>(g8 + 8 * h, k0, 4 * q));
            ed[h][4 * q] = pc_gpu_f2d(c.x), ed[h][4 * q + 1] = pc_gpu_f2d(c.y);
            ed[h][4 * q + 2] = pc_gpu_f2d(c.z), ed[h][4 * q + 3] = pc_gpu_f2d(c.w);
        }
    }
    const int nv = active ? vi1 - vi0 : 0;
    for (int s0 = 0; s0 < nv; s0 += U) {
        float4 l[U][H][NQ];
        double mx[U][H];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int h = 0; h < H; h++) {
                if (s0 + u < nv) {
                    const size_t row = warp_row<S>(wr, vi0 + s0 + u, g8 + 8 * h);
                    const float4 *lin = reinterpret_cast<const float4 *>(a.in_lin + row * KP + k0);
#pragma unroll
                    for (int q = 0; q < NQ; q++) l[u][h][q] = __ldg(lin + q);
                    mx[u][h] = __ldg(a.in_max + row);
                } else { /* past the last variable: a factor of 1 */
#pragma unroll
                    for (int q = 0; q < NQ; q++) l[u][h][q] = make_float4(1.0f, 1.0f, 1.0f, 1.0f);
                    mx[u][h] = 0.0;
                }
            }
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int h = 0; h < H; h++) {
                o[h] += mx[u][h];
#pragma unroll
                for (int q = 0; q < NQ; q++) {
                    ed[h][4 * q] *= pc_gpu_f2d(l[u][h][q].x);
                    ed[h][4 * q + 1] *= pc_gpu_f2d(l[u][h][q].y);
                    ed[h][4 * q + 2] *= pc_gpu_f2d(l[u][h][q].z);
                    ed[h][4 * q + 3] *= pc_gpu_f2d(l[u][h][q].w);
                }
            }
    }
#pragma unroll
    for (int h = 0; h < H; h++) {
        /* The row's largest exponent: p >= 0, so the high words order as the values. */
        int hi = 0;
#pragma unroll
        for (int i = 0; i < KP / 4; i++) hi = max(hi, __double2hiint(ed[h][i]));
        hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, 1));
        hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, 2));
        const int e = hi == 0 ? 0 : (hi >> 20) - 1023; /* a row of zeros stays as it is */
        const double scale = __hiloint2double((1023 - e) << 20, 0);
#pragma unroll
        for (int i = 0; i < KP / 4; i++) ed[h][i] *= scale;
        o[h] += (double)e * 0.6931471805599453;
    }
}

/* The log of a chain top's output, a sum of products of non-negative finite numbers. At K = 64
 * straight from the FP64 sum (integer operations instead of an FP64 -> FP32 conversion, which
 * shares its pipe with the mma); K = 16 and 32 keep the conversion (tuning.md#warp-top-log). */
template <int KP> static __device__ __forceinline__ float warp_top_log(double y) {
    if constexpr (KP == 64)
        return pc_gpu_log_nonneg_d(y);
    else
        return pc_gpu_log_nonneg(pc_gpu_d2f(y));
}

/* One item: chain c, samples S t .. S t + S - 1 (S: 16 or 8), all K outputs of
 * each group, by one warp. Every warp of the block calls it for the gang when exp(w) goes
 * through shared memory (the copies and their barriers are the block's); `active` is false
 * for a warp whose tile lies past the batch. `carry` is the warp's [S][warp_ld] buffer in
 * which a group hands its product to the next group of the chain, before the log; `srow` its
 * staged input rows. Counters count 16-sample tiles: an 8-sample item adds K / 2 to its
 * tile's (K is a multiple of 4: fuse pads its circuit), so a tile is done at K as before. */
#endif
