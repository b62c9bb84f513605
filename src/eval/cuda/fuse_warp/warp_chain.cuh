/* The warp strategy's items (warp.cuh): a chain's groups bottom to top, its products on the
 * FP64 tensor cores, and the persistent kernel over the queue of gangs. */
#ifndef PC_GPU_WARP_CHAIN_CUH
#define PC_GPU_WARP_CHAIN_CUH

#include "eval/cuda/fuse_warp/warp_gather.cuh"

/* exp(w) of group gi from L1 (K <= 16): the lane's rows 8 n + g, k0 .. k0 + KP / 4, so that the
 * group's loads travel with the gather's; nothing where the gang copies exp(w) to shared
 * memory. */
template <int KP, int S>
static __device__ __forceinline__ void warp_wreg(const pc_gpu_args &a, int gi, int g8, int k0,
                                                 bool active, bool root,
                                                 float4 (&wreg)[warp_smem_w<KP>() ? 1 : KP / 8]
                                                               [KP / 16]) {
    constexpr int NT = KP / 8; /* 8-wide n-tiles of outputs */
    if constexpr (!warp_smem_w<KP>()) {
#pragma unroll
        for (int n = 0; n < NT; n++) {
            const float4 *w4 = reinterpret_cast<const float4 *>(
                a.wf + ((size_t)gi * KP + 8 * n + g8) * KP + k0);
#pragma unroll
            for (int s4 = 0; s4 < KP / 16; s4++)
                wreg[n][s4] = active && !root ? __ldg(w4 + s4) : make_float4(0, 0, 0, 0);
        }
    }
}

/* The root: log p(x) = o + log sum_k ed[k] exp(root_logw[k]), in FP64. */
template <int KP, int S>
static __device__ __forceinline__ void warp_root(const pc_gpu_args &a,
                                                 const double (&ed)[S / 8][KP / 4],
                                                 const double (&o)[S / 8], const int (&r)[S / 8],
                                                 const bool (&ok)[S / 8], int k0, int t4) {
    constexpr int H = S / 8;
#pragma unroll
    for (int h = 0; h < H; h++) {
        double sum = 0.0;
#pragma unroll
        for (int i = 0; i < KP / 4; i++) sum += ed[h][i] * __ldg(a.root_wexp + k0 + i);
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (t4 == 0 && ok[h]) a.logp[r[h]] = o[h] + log(sum);
    }
}

/* Steps 4 and 5 of a 16-sample item. n-tiles per pass of the product: two independent mma
 * chains in flight (tuning.md#warp-unroll). */
template <int KP, int S>
static __device__ __forceinline__ void warp_product16(
    const pc_gpu_args &a, int c, const double (&ed)[S / 8][KP / 4],
    const float4 (&wreg)[warp_smem_w<KP>() ? 1 : KP / 8][KP / 16], const float *ws, float *carry,
    bool top, int K, const int (&r)[S / 8], const bool (&ok)[S / 8], int g8, int t4, int k0) {
    constexpr int NT = KP / 8, NP = 2, H = S / 8;
    /* 4.-5. Per n-tile of 8 outputs: acc = ed exp(w)^T in FP64 on the tensor cores (the
     *    lane's exp(w)[8 n + g][k0 .. k0 + KP / 4) as 16-byte words), at (row g or
     *    g + 8, j = 8 n + 2 t and + 1): to carry as it is, or, at the chain's top, its
     *    log to the chain's slot with off = o. */
    float *out[H];
#pragma unroll
    for (int h = 0; h < H; h++) out[h] = a.rel + ((size_t)c * a.chunk + r[h]) * K;
    /* Unrolled at every K (tuning.md#warp-unroll). */
#pragma unroll
    for (int n0 = 0; n0 < NT; n0 += NP) {
        double acc[NP][2][2];
#pragma unroll
        for (int np = 0; np < NP; np++)
            acc[np][0][0] = acc[np][0][1] = acc[np][1][0] = acc[np][1][1] = 0.0;
#pragma unroll
        for (int s4 = 0; s4 < KP / 16; s4++) {
            double wv[NP][4];
#pragma unroll
            for (int np = 0; np < NP; np++) {
                float4 w;
                if constexpr (warp_smem_w<KP>())
                    w = *reinterpret_cast<const float4 *>(
                        ws + warp_at<KP>(8 * (n0 + np) + g8, k0, 4 * s4));
                else
                    w = wreg[n0 + np][s4];
                wv[np][0] = pc_gpu_f2d(w.x), wv[np][1] = pc_gpu_f2d(w.y);
                wv[np][2] = pc_gpu_f2d(w.z), wv[np][3] = pc_gpu_f2d(w.w);
            }
#pragma unroll
            for (int np = 0; np < NP; np++)
                pc_gpu_dmma16<4>(acc[np][0], acc[np][1], &ed[0][4 * s4],
                                 &ed[H - 1][4 * s4], wv[np]);
        }
#pragma unroll
        for (int np = 0; np < NP; np++) {
            const int j = 8 * (n0 + np) + 2 * t4;
#pragma unroll
            for (int h = 0; h < H; h++) {
                if (!top) {
                    *reinterpret_cast<float2 *>(
                        carry + warp_carry_at<KP, S>(g8 + 8 * h, j)) =
                        make_float2(pc_gpu_d2f(acc[np][h][0]),
                                    pc_gpu_d2f(acc[np][h][1]));
                    continue;
                }
                const float v0 = warp_top_log<KP>(acc[np][h][0]);
                const float v1 = warp_top_log<KP>(acc[np][h][1]);
                if (ok[h] && j < K) out[h][j] = v0;
                if (ok[h] && j + 1 < K) out[h][j + 1] = v1;
            }
        }
    }
}

/* Steps 4 and 5 of an 8-sample item, the product transposed. */
template <int KP, int S>
static __device__ __forceinline__ void warp_product8(const pc_gpu_args &a, int c,
                                                     const double (&ed)[S / 8][KP / 4],
                                                     const float *ws, float *carry, bool top,
                                                     int K, int b0, int g8, int t4, int k0) {
    /* 4.-5. Transposed, per m-tile of 16 outputs: acc^T = exp(w) ed^T in FP64 on the
     *    tensor cores, exp(w) the A operand (the lane's exp(w)[16 m + g and + 8][k0 ..
     *    k0 + KP / 4) as 16-byte words: twice the conversions per output of the
     *    16-sample form), ed the B operand; out at (j = 16 m + g or + 8, samples 2 t
     *    and 2 t + 1): to carry as it is, or, at the chain's top, its log to the slot. */
    constexpr int NM = KP / 16, NPM = NM % 2 == 0 ? 2 : 1;
    const int sc = b0 + 2 * t4; /* the samples of the lane's outputs: sc, sc + 1 */
    float *out[2] = {a.rel + ((size_t)c * a.chunk + sc) * K,
                     a.rel + ((size_t)c * a.chunk + sc + 1) * K};
    const bool okc[2] = {sc < a.n, sc + 1 < a.n};
#pragma unroll
    for (int m0 = 0; m0 < NM; m0 += NPM) {
        double acc[NPM][2][2];
#pragma unroll
        for (int np = 0; np < NPM; np++)
            acc[np][0][0] = acc[np][0][1] = acc[np][1][0] = acc[np][1][1] = 0.0;
#pragma unroll
        for (int s4 = 0; s4 < KP / 16; s4++) {
            double wa[NPM][2][4];
#pragma unroll
            for (int np = 0; np < NPM; np++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const float4 w = *reinterpret_cast<const float4 *>(
                        ws + warp_at<KP>(16 * (m0 + np) + 8 * h + g8, k0, 4 * s4));
                    wa[np][h][0] = pc_gpu_f2d(w.x), wa[np][h][1] = pc_gpu_f2d(w.y);
                    wa[np][h][2] = pc_gpu_f2d(w.z), wa[np][h][3] = pc_gpu_f2d(w.w);
                }
#pragma unroll
            for (int np = 0; np < NPM; np++)
                pc_gpu_dmma16<4>(acc[np][0], acc[np][1], wa[np][0], wa[np][1],
                                 &ed[0][4 * s4]);
        }
#pragma unroll
        for (int np = 0; np < NPM; np++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int j = 16 * (m0 + np) + 8 * h + g8;
#pragma unroll
                for (int cc = 0; cc < 2; cc++) {
                    if (!top)
                        carry[warp_carry_at<KP, S>(2 * t4 + cc, j)] =
                            pc_gpu_d2f(acc[np][h][cc]);
                    else if (okc[cc] && j < K)
                        out[cc][j] = warp_top_log<KP>(acc[np][h][cc]);
                }
            }
    }
}

/* The chain's top publishes: the rows' offsets, then every lane's stores and one release of
 * the counter of its 16-sample tile t16 (an 8-sample item adds K / 2). */
template <int S>
static __device__ __forceinline__ void warp_publish(const pc_gpu_args &a, int c,
                                                    const double (&o)[S / 8],
                                                    const int (&r)[S / 8], const bool (&ok)[S / 8],
                                                    int t4, int lane, int t16, int K) {
    constexpr int H = S / 8;
#pragma unroll
    for (int h = 0; h < H; h++)
        if (ok[h] && t4 == 0) a.off[(size_t)c * a.chunk + r[h]] = o[h];
    /* Publish: every lane's stores, then one release of the counter. */
    __syncwarp();
    if (lane == 0)
        pc_gpu_release_add(a.done + (size_t)c * a.tiles + t16, K * S / WARP_TILE);
}

/* One item: chain c, samples S t .. S t + S - 1 (S: 16 or 8), all K outputs of each group, by
 * one warp. Every warp of the block calls it for the gang when exp(w) goes through shared
 * memory (the copies and their barriers are the block's); `active` is false for a warp whose
 * tile lies past the batch. `carry` is the warp's [S][warp_ld] buffer in which a group hands
 * its product to the next group of the chain, before the log; `srow` its staged input rows.
 * Counters count 16-sample tiles: an 8-sample item adds K / 2 to its tile's (K is a multiple
 * of 4: fuse pads its circuit), so a tile is done at K as before. */
template <int KP, bool KX, int S>
static __device__ void warp_chain(const pc_gpu_args &a, int c, int t, int lane, bool active,
                                  float *ws, float *carry, int *srow) {
    constexpr int NT = KP / 8, H = S / 8; /* 8-wide n-tiles of outputs; rows per lane */
    const int g8 = lane >> 2, t4 = lane & 3, K = KX ? KP : a.K, k0 = t4 * (KP / 4);
    const int cb = __ldg(a.chain_begin + c), ce = __ldg(a.chain_begin + c + 1);
    PC_TRACED(warp_trace tr(a, c, t, S, lane, active));
    /* Rows as int (n is an int32): fewer registers for the state kept through a chain. */
    const int b0 = t * S, t16 = t * S / WARP_TILE;
    int r[H], rr[H]; /* the lane's samples; the rows it reads */
    bool ok[H];
#pragma unroll
    for (int h = 0; h < H; h++)
        r[h] = b0 + g8 + 8 * h, ok[h] = r[h] < a.n,
        rr[h] = ok[h] ? r[h] : warp_fallback<S>(b0, a.n);
    PC_TRACED(tr.begin(cb, ce));
    warp_rows wr;
    wr.srow = srow, wr.vb = __ldg(a.chain_vb + cb), wr.b0 = b0, wr.w0 = 0;
    wr.nv = __ldg(a.chain_vb + ce) - wr.vb, wr.nb = __ldg(a.chain_vb + cb + 1) - wr.vb;
    int gi = __ldg(a.chain_groups + cb);
    const pc_gpu_group g = a.groups[gi]; /* the bottom's children */
    if (warp_smem_w<KP>() && gi != a.G - 1) warp_stage_w<KP, S>(a.wf + (size_t)gi * KP * KP, ws);
    if (active) warp_stage_rows<S>(a, wr, lane); /* warp_bottom waits for the children */
    PC_TRACED(tr.staged(gi));
    double o[H]; /* the rows' offsets: msg = o + log(ed exp(w)^T) */
#pragma unroll
    for (int h = 0; h < H; h++) o[h] = 0.0;

    for (int m = cb, vi0 = 0; m < ce; m++) {
        const bool root = gi == a.G - 1, top = m + 1 == ce;
        const int vi1 = __ldg(a.chain_vb + m + 1) - wr.vb; /* its variables: vi0 .. vi1 - 1 */
        float4 wreg[warp_smem_w<KP>() ? 1 : NT][KP / 16];
        warp_wreg<KP, S>(a, gi, g8, k0, active, root, wreg);
        /* 1.-3. The product's operand ed (FP64, max 1 or in [1, 2) per row) and o. */
        double ed[H][KP / 4];
        if (m == cb) {
            warp_bottom<KP, KX, S>(a, g, t16, wr, rr, ok, g8, k0, lane, active, ed, o);
            PC_TRACED(tr.bottom_done());
            if (active && !top) warp_window<S>(a, wr, wr.nb, wr.nv - wr.nb, wr.nv, lane);
        } else {
            warp_link<KP, S>(a, wr, vi0, vi1, g8, k0, active, carry, ed, o);
        }
        __syncwarp(); /* every lane has read carry before the product overwrites it */
        vi0 = vi1;
        PC_TRACED(tr.gathered(m - cb));
        if (root) {
            warp_root<KP, S>(a, ed, o, r, ok, k0, t4);
            PC_TRACED(tr.produced(m - cb), tr.done());
            return;
        }
        /* The gang's exp(w) of this group has arrived (every warp of the block gets here: the
         * chain, so whether a group is the root, is the gang's). */
        const int gn = top ? gi : __ldg(a.chain_groups + m + 1);
        if (warp_smem_w<KP>()) {
            asm volatile("cp.async.wait_all;\n" ::: "memory");
            __syncthreads();
        }
        if constexpr (S == 16) {
            if (active) warp_product16<KP, S>(a, c, ed, wreg, ws, carry, top, K, r, ok, g8, t4, k0);
        } else if (active) {
            warp_product8<KP, S>(a, c, ed, ws, carry, top, K, b0, g8, t4, k0);
        }
        if (active && top) {
            warp_publish<S>(a, c, o, r, ok, t4, lane, t16, K);
            PC_TRACED(tr.done());
        }
        if (active) __syncwarp(); /* carry written before the next group reads it */
        if (warp_smem_w<KP>() && !top) { /* the next group's exp(w), once ws is free */
            __syncthreads();
            if (gn != a.G - 1) warp_stage_w<KP, S>(a.wf + (size_t)gn * KP * KP, ws);
        }
        PC_TRACED(tr.produced(m - cb));
        gi = gn;
    }
}

/* The persistent loop: gangs of items (chain-major, chain order) until none is left.
 * Blocks per SM (BLOCKS) by K: 2 of 6 warps (168 registers, 94 KB of shared memory each) at
 * K = 128, 2 of 4 (255) at 96 < K <= 112, 2 (250-254) or 3 (168) at 64 < K <= 96
 * (warp_pick_kp), 3 (168) at K <= 64, 5 (96) at K <= 32; a lane holds H KP / 4 operands in FP64
 * for the mma (H = 2 rows, 1 with 8-sample items). Fewer warps than fit ran faster: an item's
 * latency on the tree's critical path counts more than the warps in flight
 * (tuning.md#warp-blocks). Dynamic shared memory: warp_smem_bytes<KP, S>(). */
template <int KP, bool KX, int BLOCKS, int S>
static __global__ void __launch_bounds__(warp_threads<S>(), BLOCKS)
    warp_kernel(pc_gpu_args a, int total) {
    const int lane = threadIdx.x & 31;
    /* The block's warps take consecutive tiles of one chain ("gang" of W tiles), so that a
     * group's exp(w) comes from L2 once per block, then from L1 or shared memory
     * (tuning.md#warp-gangs). One barrier per gang and group (K > 16); waits and counters stay
     * per warp. */
    __shared__ int s_item[2];
    extern __shared__ __align__(16) float smem[];
    constexpr int W = warp_nw<S>();
    float *ws = smem;
    float *carry = smem + warp_ws_floats<KP>() + (threadIdx.x >> 5) * warp_own_floats<KP, S>();
    int *srow = reinterpret_cast<int *>(carry + warp_carry_floats<KP, S>());
    /* S-sample tiles: a.tiles * (WARP_TILE / S), taken from the parameters at each use (a
     * register of its own spilled at K = 16). */
    const int warp = threadIdx.x >> 5, gangs = (a.tiles * (WARP_TILE / S) + W - 1) / W;
    if (threadIdx.x == 0) s_item[0] = atomicAdd(a.queue, 1);
    __syncthreads();
    int item = s_item[0];
    for (int it = 1; item < total; it ^= 1) {
        /* The next gang is fetched while this one runs; double-buffered, so a warp still
         * reading the slot of this gang cannot see it overwritten. */
        int next = 0;
        if (threadIdx.x == 0) next = atomicAdd(a.queue, 1);
        const int t = (item % gangs) * W + warp;
        const bool active = t < a.tiles * (WARP_TILE / S);
        if (warp_smem_w<KP>() || active)
            warp_chain<KP, KX, S>(a, __ldg(a.chain_queue + item / gangs), t, lane, active, ws,
                                  carry, srow);
        if (threadIdx.x == 0) s_item[it] = next;
        __syncthreads();
        item = s_item[it];
    }
}

#endif
