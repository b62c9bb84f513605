/* Fused kernels of GPU EM for K <= 16 (internal; em_kernels.cuh has the row layout).
 *
 * At small K a pass is a chain of tiny steps, ~42 layers up and down for MNIST, and launches
 * dominate: here each direction of a pass is one persistent launch, a wavefront over the
 * items (group, tile) of em_plan.h. A block takes items from a ticket counter in dependency
 * order (up: groups in increasing order, children first; down: decreasing, parents first) and
 * waits on the counters of the items it reads: up, its children's on the same tile; down, its
 * parent's. Every item it waits on has a smaller ticket, taken by a block that is running and
 * waits only on smaller ones still, so the wave always moves. A tile is (256 / TW) * iter rows
 * (em_plan.h), a row to a sub-warp of TW lanes (TW = K rounded up to a power of two), lane k
 * holding state k. W_g sits in shared memory as FP64; a lane gets the others' values of its row
 * by shuffles. What another item of the same launch wrote is read from L2 (__ldcg).
 *
 * Forward, row b of group g: e = scaled product (as pc_em_product), then the message
 * s(j) = sum_k W[j][k] e(k) in k order, lane j. Downward: lane j holds a(j) (the ratio in S),
 * lane k holds e(k); u(k) = sum_j a(j) W[j][k] in j order, q = e u into E, children's messages
 * into their ratios, and the flows a(j) e(k) summed over the item's rows in row order per
 * sub-warp, then over the sub-warps in order in shared memory, into P[g][tile][j][k]; the
 * pass's end sums the tiles in order. Every sum has one fixed order, whatever the schedule:
 * the same bits on every run, no floating-point atomics, and the same bits as the layer
 * kernels this replaced.
 *
 * The items are latency-bound: one group on 16 rows (batch 512) is a few dependent round trips
 * to memory (ticket, W_g, the input rows, the counters, the children's messages), and the
 * blocks that fit an SM at once (6 up, 5 down at K = 16) set the pace. Variants that cost
 * occupancy lost more than they saved (bench/notebook/gpu_em_downward_h200.md, round 6):
 * walking paths of single-child groups in one item, handing messages on in shared memory, the
 * input rows' products in a launch of their own, the next ticket taken during the item. */
#ifndef PC_LEARN_EM_FUSED_CUH
#define PC_LEARN_EM_FUSED_CUH

#include "base/cuda_counter.cuh"
#include "learn/cuda/em_kernels.cuh"
#include "learn/cuda/em_plan.h"

/* The wavefront's state: tickets [2] (forward, downward), then done [G][tiles], each item's
 * counter (1 once its forward is stored, 2 once its downward is), zeroed before a pass. */
struct pc_em_wave {
    int32_t *ticket, *done;
    const int32_t *parent; /* [G] */
    int32_t tiles;
};

/* Nanoseconds between polls of a counter. */
#define PC_EM_WAVE_POLL_NS 32

/* The product of group g's inputs at row b, state `lane`. */
template <typename T>
static __device__ __forceinline__ double pc_em_fused_inputs(const pc_em_args &a, int32_t vb,
                                                            int32_t ve, int64_t b, int lane,
                                                            const T *input) {
    double v = 1;
    for (int32_t j = vb; j < ve; j++) {
        const int32_t var = a.vars[j];
        v *= (double)input[((int64_t)var * (a.C + 1) + a.xc[b * a.V + var]) * a.K + lane];
    }
    return v;
}

/* The next item's ticket for the whole block (thread 0 takes it). */
static __device__ __forceinline__ int32_t pc_em_wave_take(int32_t *ticket, int32_t *slot) {
    if (threadIdx.x == 0) *slot = atomicAdd(ticket, 1);
    __syncthreads();
    return *slot;
}

/* After an item: its stores done by every thread, the counter raised as a release; the block's
 * shared memory is free again. */
static __device__ __forceinline__ void pc_em_wave_done(const pc_em_wave &w, int32_t g,
                                                       int32_t tile) {
    __syncthreads();
    if (threadIdx.x == 0) pc_gpu_release_add(w.done + (int64_t)g * w.tiles + tile, 1);
}

/* The forward of group g over tile `tile` by the whole block, once its children's items are
 * done; wt: K * K doubles of shared memory. The root (alone in its layer) writes log p(x)
 * instead of a message. */
template <typename T, int TW>
static __device__ __forceinline__ void pc_em_fused_forward_group(const pc_em_args &a,
                                                                 const pc_em_wave &w, int64_t n,
                                                                 int32_t iter, int32_t g,
                                                                 int32_t tile, const T *input,
                                                                 T *E, T *S, const T *W,
                                                                 double *wt) {
    /* wt[k * K + j] = W_g[j][k] */
    const int K = a.K, lane = threadIdx.x % TW, sub = threadIdx.x / TW;
    const int subs = PC_EM_THREADS / TW;
    const bool root = g == a.G - 1;
    const int64_t ch = a.chunk;
    const int32_t vb = a.var_start[g], ve = a.var_start[g + 1];
    const int32_t cb = a.child_start[g], ce = a.child_start[g + 1];
    if (!root)
        for (int i = threadIdx.x; i < K * K; i += PC_EM_THREADS)
            wt[(i % K) * K + i / K] = (double)W[(int64_t)g * K * K + i];
    /* the first row's inputs need no child: loaded while thread 0 waits for the children */
    const int64_t first = (int64_t)tile * iter * subs + sub;
    const double in_first = lane < K ? pc_em_fused_inputs(a, vb, ve, first < n ? first : 0,
                                                          lane, input)
                                     : 0.0;
    const int one = 1;
    if (threadIdx.x == 0)
        for (int32_t j = cb; j < ce; j++)
            pc_gpu_acquire_count<PC_EM_WAVE_POLL_NS>(
                w.done + (int64_t)a.children[j] * w.tiles + tile, one);
    __syncthreads();
    for (int it = 0; it < iter; it++) {
        const int64_t row = ((int64_t)tile * iter + it) * subs + sub;
        const bool live = row < n;
        const int64_t b = live ? row : 0;
        double v = 0;
        if (lane < K) {
            v = it == 0 ? in_first : pc_em_fused_inputs(a, vb, ve, b, lane, input);
            for (int32_t j = cb; j < ce; j++)
                v *= (double)__ldcg(S + ((int64_t)a.children[j] * ch + b) * K + lane);
        }
        const double m = pc_em_max(v, TW);
        int ex = 0;
        double e = 0;
        if (m > 0 && isfinite(m)) {
            frexp(m, &ex);
            e = (double)(T)(v * ldexp(1.0, -ex / 2) * ldexp(1.0, -ex - (-ex / 2)));
        }
        if (live && lane < K) E[((int64_t)g * ch + b) * K + lane] = (T)e;
        int32_t off = ex;
        if (lane == 0)
            for (int32_t j = cb; j < ce; j++)
                off += __ldcg(a.off + (int64_t)a.children[j] * ch + b);
        if (live && lane == 0) a.off[(int64_t)g * ch + b] = off;
        if (root) { /* block-uniform: every lane of the block takes this branch or none */
            const double z = pc_em_sum(lane < K ? a.root_w[lane] * e : 0.0, TW);
            if (live && lane == 0) a.logp[b] = z > 0 ? (double)off * PC_EM_LN2 + log(z) : -INFINITY;
            continue;
        }
        double s = 0;
#pragma unroll
        for (int k = 0; k < TW; k++) {
            const double ek = __shfl_sync(0xffffffffu, e, k, TW);
            if (k < K && lane < K) s += wt[k * K + lane] * ek;
        }
        if (live && lane < K) S[((int64_t)g * ch + b) * K + lane] = (T)s;
    }
}

/* The forward wavefront: items (g, tile) in increasing order of g; grid: the blocks that fit
 * the GPU at once (more would only wait); dynamic shared memory K * K doubles. */
template <typename T, int TW>
__global__ void __launch_bounds__(PC_EM_THREADS)
    pc_em_wave_forward(pc_em_args a, pc_em_wave w, int64_t n, int32_t iter, const T *input, T *E,
                       T *S, const T *W) {
    extern __shared__ double wt[];
    __shared__ int32_t slot;
    const int32_t items = a.G * w.tiles;
    for (;;) {
        const int32_t t = pc_em_wave_take(w.ticket, &slot);
        if (t >= items) return; /* block-uniform */
        const int32_t g = t / w.tiles, tile = t % w.tiles;
        pc_em_fused_forward_group<T, TW>(a, w, n, iter, g, tile, input, E, S, W, wt);
        pc_em_wave_done(w, g, tile);
    }
}

/* W_g's entries per thread of a block (K <= PC_EM_FUSED_MAX_K): the downward kernel loads them
 * into registers first and stores them to shared memory only after row 0's loads are issued, so
 * that the two round trips to memory overlap (with one row per sub-warp, as at batch 512, a
 * block's life is a few such round trips). */
#define PC_EM_FUSED_W_REGS (PC_EM_FUSED_MAX_K * PC_EM_FUSED_MAX_K / PC_EM_THREADS)

/* Dynamic shared memory of pc_em_wave_downward: W_g and every sub-warp's flows. */
static inline size_t pc_em_fused_downward_smem(int K, int TW) {
    return (size_t)K * K * (1 + PC_EM_THREADS / TW) * sizeof(double);
}

/* The downward of non-root group g over tile `tile` by the whole block; sh holds
 * pc_em_fused_downward_smem bytes: W_g, then each sub-warp's flows [subs][K][K]. Lane k of a
 * sub-warp owns the entries [j][k] of its slice, so the rows add into shared memory without
 * barriers; held in registers instead (TW doubles a lane) the kernel took 114 registers at TW =
 * 16, two blocks per SM, and the layer's blocks ran in three waves where the forward's run in
 * one. The block's threads then sum the slices over the sub-warps in order, an entry each. P is
 * [G - 1][tiles][K][K]. Bounded to 48 registers, 5 blocks per SM (H200: 4 blocks at 55 registers
 * were 1-3 % slower at K = 16). */
template <typename T, int TW>
static __device__ __forceinline__ void pc_em_fused_downward_group(const pc_em_args &a,
                                                                  const pc_em_wave &wave,
                                                                  int64_t n, int32_t iter,
                                                                  int32_t g, int32_t tile, T *E,
                                                                  T *S, const T *W, double *P,
                                                                  double *sh) {
    const int K = a.K, lane = threadIdx.x % TW, sub = threadIdx.x / TW;
    const int subs = PC_EM_THREADS / TW;
    const int64_t ch = a.chunk;
    /* w[j * K + k] = W_g[j][k]; mine[j * K + k]: this sub-warp's sum of a(j) e(k) */
    double *w = sh, *part = sh + K * K, *mine = part + (int64_t)sub * K * K;
    const int32_t cb = a.child_start[g], ce = a.child_start[g + 1];
    double wr[PC_EM_FUSED_W_REGS];
#pragma unroll
    for (int r = 0; r < PC_EM_FUSED_W_REGS; r++) {
        const int i = threadIdx.x + r * PC_EM_THREADS;
        wr[r] = i < K * K ? (double)W[(int64_t)g * K * K + i] : 0.0;
    }
    /* the parent's ratios: the root's come from the launch before */
    const int32_t parent = wave.parent[g];
    const int two = 2;
    if (threadIdx.x == 0 && parent != a.G - 1)
        pc_gpu_acquire_count<PC_EM_WAVE_POLL_NS>(wave.done + (int64_t)parent * wave.tiles + tile,
                                                 two);
    __syncthreads();
    /* row it's ratio and value, loaded one iteration ahead (no other item writes them now) */
    const int64_t first = (int64_t)tile * iter * subs + sub;
    double ratio_next = 0, e_next = 0;
    if (first < n && lane < K) {
        ratio_next = (double)__ldcg(S + ((int64_t)g * ch + first) * K + lane);
        e_next = (double)E[((int64_t)g * ch + first) * K + lane];
    }
#pragma unroll
    for (int r = 0; r < PC_EM_FUSED_W_REGS; r++) {
        const int i = threadIdx.x + r * PC_EM_THREADS;
        if (i < K * K) w[i] = wr[r];
    }
    if (lane < K)
        for (int j = 0; j < K; j++) mine[j * K + lane] = 0;
    __syncthreads();
    for (int it = 0; it < iter; it++) {
        const int64_t row = ((int64_t)tile * iter + it) * subs + sub;
        const bool live = row < n;
        const int64_t at = ((int64_t)g * ch + (live ? row : 0)) * K + lane;
        const bool mine_live = live && lane < K;
        const double ratio = ratio_next, e = e_next;
        if (it + 1 < iter && row + subs < n && lane < K) {
            ratio_next = (double)__ldcg(S + at + subs * K);
            e_next = (double)E[at + subs * K];
        }
        double u = 0;
#pragma unroll
        for (int j = 0; j < TW; j++) {
            const double aj = __shfl_sync(0xffffffffu, ratio, j, TW);
            if (j < K && mine_live) {
                u += aj * w[j * K + lane];
                mine[j * K + lane] += aj * e;
            }
        }
        if (!mine_live) continue;
        const double q = e * u;
        E[at] = (T)q;
        for (int32_t j = cb; j < ce; j++) {
            T *s = S + ((int64_t)a.children[j] * ch + row) * K + lane;
            const double sv = (double)*s;
            *s = (T)(sv > 0 ? q / sv : 0.0);
        }
    }
    __syncthreads();
    double *out = P + ((int64_t)g * wave.tiles + tile) * K * K;
    for (int i = threadIdx.x; i < K * K; i += PC_EM_THREADS) {
        double sum = 0; /* sub-warps in order: a fixed sum */
        for (int s = 0; s < subs; s++) sum += part[(int64_t)s * K * K + i];
        out[i] = sum;
    }
}

/* The downward wavefront: items (g, tile) of the non-root groups in decreasing order of g,
 * after the root's posteriors; grid as the forward's; dynamic shared memory
 * pc_em_fused_downward_smem. */
template <typename T, int TW>
__global__ void __launch_bounds__(PC_EM_THREADS, 5)
    pc_em_wave_downward(pc_em_args a, pc_em_wave w, int64_t n, int32_t iter, T *E, T *S,
                        const T *W, double *P) {
    extern __shared__ double sh[];
    __shared__ int32_t slot;
    const int32_t items = (a.G - 1) * w.tiles;
    for (;;) {
        const int32_t t = pc_em_wave_take(w.ticket + 1, &slot);
        if (t >= items) return; /* block-uniform */
        const int32_t g = a.G - 2 - t / w.tiles, tile = t % w.tiles;
        pc_em_fused_downward_group<T, TW>(a, w, n, iter, g, tile, E, S, W, P, sh);
        pc_em_wave_done(w, g, tile);
    }
}

/* Transition flows of a fused pass: n_tr[i] += W[i] sum_t P[g][t][i] (tiles in order), fixed
 * point, i over [G - 1][K][K]. */
static __global__ void pc_em_fused_trans_flows(int64_t total, int32_t kk, const double *P,
                                               int64_t tiles, const double *w, long long *n_tr,
                                               const double *scale_ptr) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int64_t g = i / kk, at = i % kk;
    double sum = 0;
    for (int64_t t = 0; t < tiles; t++) sum += P[(g * tiles + t) * kk + at];
    n_tr[i] += (long long)pc_em_fixed(w[i] * sum, *scale_ptr);
}

#endif
