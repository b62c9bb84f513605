/* `fuse`, the persistent strategy (K above the tile strategy's range, cuda_fuse_tile.cu): the
 * whole circuit in one persistent kernel. A work item is (group, batch tile of BM samples,
 * output tile of BN sum nodes); items are handed out in evaluation order through an atomic
 * counter and each waits for its children's samples, so the tree's many small layers run
 * concurrently instead of one launch each.
 *
 * Two item shapes. Wide items (BM = 64-128 samples, BN = K outputs up to 256) gather each
 * sample's inputs once and reuse them across all K outputs; they serve the layers near the
 * leaves, which have tens of groups. The top of an HCLT is a long thin chain (MNIST: 23 of 42
 * layers hold 2 groups), where wide items would leave most SMs idle on the critical path:
 * there narrow items (16 samples, <= 64 outputs) split each group over up to 16x more blocks.
 * The host picks, per forward pass, the layer from which groups take narrow items, by the
 * waves of items each layer would take either way (pc_gpu_split_layers).
 *
 * Per item: gather inputs and children's messages in FP64, shift by the per-sample max,
 * exponentiate once into shared memory es[K][BM], then the product with exp(w) (streamed
 * through two shared-memory buffers of KC rows), one log per output. 256 threads per block.
 * The product is register-blocked FP32 (TM x TN outputs per thread, fuse_shape), or for the
 * wide items of 64 < K <= 128 below FUSE_LARGE_N samples on the FP64 tensor cores
 * (fuse_mma_shape: exact sums, and a shorter item on the critical path of small batches).
 *
 * Counters. done[g][f] counts the outputs of group g finished for the f-th run of FUSE_FINE
 * samples; a reader waits until it reaches K for each run its samples cover, whatever the
 * writer's item shape. */
#include "base/fail.h"
#include "eval/cuda/cuda_circuit.cuh"

#define FUSE_THREADS 256
#define FUSE_FINE 16

/* Loads N consecutive floats from 16-byte (N % 4 == 0), 8-byte (N % 2 == 0) or 4-byte aligned
 * shared memory. */
template <int N>
static __device__ __forceinline__ void lds(float (&r)[N], const float *p) {
    if constexpr (N % 4 == 0) {
#pragma unroll
        for (int q = 0; q < N / 4; q++) {
            float4 v = reinterpret_cast<const float4 *>(p)[q];
            r[4 * q] = v.x, r[4 * q + 1] = v.y, r[4 * q + 2] = v.z, r[4 * q + 3] = v.w;
        }
    } else if constexpr (N % 2 == 0) {
#pragma unroll
        for (int q = 0; q < N / 2; q++) {
            float2 v = reinterpret_cast<const float2 *>(p)[q];
            r[2 * q] = v.x, r[2 * q + 1] = v.y;
        }
    } else {
#pragma unroll
        for (int q = 0; q < N; q++) r[q] = p[q];
    }
}

/* An item shape with the product on the CUDA cores: BM samples x BN outputs, TM x TN of them
 * per thread, exp(w) in slices of KC rows (two buffers: one is multiplied while the next
 * arrives; each slice costs two barriers, so small items take large slices).
 * A thread's TN outputs are TN / NV runs of NV = min(TN, 4) adjacent columns, the runs BN / (TN /
 * NV) apart: a warp's 32 lanes then read 32 adjacent 16-byte words of an exp(w) row (no bank
 * conflict), where 8 adjacent columns per lane would put two lanes of each quarter-warp on the
 * same banks. es rows are LD floats apart, exp(w) slice rows LDW. */
template <int BM_, int BN_, int TM_, int TN_, int KC_>
struct fuse_shape {
    static constexpr bool MMA = false;
    static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_, KC = KC_;
    static constexpr int LD = BM + 4, LDW = BN;
    static constexpr int NV = TN < 4 ? TN : 4, RUN = BN / (TN / NV);
    /* Column (within the item) of output jj of thread tx. */
    static __device__ __forceinline__ int col(int tx, int jj) {
        return (jj / NV) * RUN + tx * NV + jj % NV;
    }
    static_assert((BM / TM) * (BN / TN) == FUSE_THREADS, "tile does not match the block");
    static_assert(BM % FUSE_FINE == 0, "items cover whole runs of the counters");
    static size_t smem(int K) {
        return (size_t)K * LD * 4 + 2 * (size_t)KC * LDW * 4 + 2 * (size_t)BM * 8;
    }
};

/* An item shape with the product on the FP64 tensor cores (pc_gpu_dmma16): the block's 8 warps
 * in a WM x WN grid, each warp MT x NT tiles of 8 x 8 outputs. The mma's rows and columns are
 * permuted so that a lane's operands lie side by side in shared memory: m-tile mt's row g is
 * sample MT g + mt of the warp's rows, n-tile q NV + v's column c is output 8 NV q + NV c + v
 * of the warp's columns (NV = min(NT, 4)); a lane then loads its MT inputs and NV exp(w) values
 * of one k as one 8- or 16-byte word, and holds 2 NV adjacent outputs per (row, q).
 * LD and LDW are 8 mod 16 floats: the four k rows of a quarter-warp's 16-byte loads (and a
 * half-warp's 8-byte ones) then fall on different banks. */
template <int BM_, int BN_, int MT_, int NT_, int KC_>
struct fuse_mma_shape {
    static constexpr bool MMA = true;
    static constexpr int BM = BM_, BN = BN_, MT = MT_, NT = NT_, KC = KC_;
    static constexpr int WN = BN / (8 * NT), WM = BM / (8 * MT);
    static constexpr int NV = NT < 4 ? NT : 4;
    static constexpr int LD = BM + 8, LDW = BN + 8;
    static_assert(WM * WN * 32 == FUSE_THREADS, "tile does not match the block");
    static_assert(BM % FUSE_FINE == 0, "items cover whole runs of the counters");
    static_assert(BN % 8 == 0 && KC % 8 == 0 && MT % 2 == 0 && MT <= 4 && NT % NV == 0,
                  "mma tiling");
    static size_t smem(int K) {
        return (size_t)K * LD * 4 + 2 * (size_t)KC * LDW * 4 + 2 * (size_t)BM * 8;
    }
};

/* Where the narrow items start, for one forward pass: groups [0, groups_a) take wide items,
 * [groups_a, G) narrow ones. Items are numbered wide first, each part (group, tile, j-tile). */
typedef struct fuse_split {
    int32_t groups_a;
    int32_t tiles_a, jtiles_a, tiles_b, jtiles_b;
    int32_t items_a, total;
} fuse_split;

/* Waits until at most N of this thread's cp.async groups are still in flight. */
template <int N>
static __device__ __forceinline__ void fuse_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* Starts copying rows k0 .. k0 + KC - 1, columns j0 .. j0 + BN - 1 of the group's exp(w)
 * ([K][K], row k) into dst[KC][LDW], zeros outside K x K, as 16-byte cp.async copies (no
 * registers, no wait here): K % 4 == 0 (fuse pads its circuit, pc_gpu_create), so the rows
 * are 16-byte aligned. */
template <int KC, int BN, int LDW>
static __device__ __forceinline__ void fuse_load_w(const float *w, int K, int k0, int j0,
                                                   float *dst) {
    for (int v = threadIdx.x; v < KC * BN / 4; v += FUSE_THREADS) {
        const int kk = v / (BN / 4), jl = 4 * (v % (BN / 4)), j = j0 + jl;
        const bool in = k0 + kk < K && j < K;
        const float *src = in ? w + (size_t)(k0 + kk) * K + j : w;
        const unsigned d = (unsigned)__cvta_generic_to_shared(dst + kk * LDW + jl);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
                     "r"(in ? 16 : 0)
                     : "memory");
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Where an item's buffers lie in shared memory: es [K][ld], two exp(w) slices, m and O. */
template <class S>
static __device__ __forceinline__ float *fuse_ws(float *smem, int K) {
    return smem + (size_t)K * S::LD;
}

/* The slices of exp(w) for one item, double-buffered: slice s + 1 is on its way (cp.async)
 * while `body(cur, k0)` multiplies slice s (rows k0 .. k0 + KC - 1, at cur[KC][LDW]). The first
 * slice was started by fuse_run. */
template <class S, class F>
static __device__ __forceinline__ void fuse_slices(const float *w, int K, int j0, float *ws,
                                                   F body) {
    const int slices = (K + S::KC - 1) / S::KC;
    for (int sl = 0; sl < slices; sl++) {
        if (sl + 1 < slices) {
            fuse_load_w<S::KC, S::BN, S::LDW>(w, K, (sl + 1) * S::KC, j0,
                                              ws + ((sl + 1) & 1) * S::KC * S::LDW);
            fuse_async_wait<1>();
        } else {
            fuse_async_wait<0>();
        }
        __syncthreads();
        body(ws + (sl & 1) * S::KC * S::LDW, sl * S::KC);
        __syncthreads();
    }
}

/* The FP32 product of a fuse_shape item and its logs. Threads are (ty, tx) with tx fastest;
 * thread (ty, tx) owns samples ty*TM .. ty*TM+TM-1 and outputs j0 + S::col(tx, 0 .. TN-1). */
template <class S>
static __device__ __forceinline__ void fuse_product_fp32(const pc_gpu_args &a, const float *w,
                                                         int64_t b0, int j0, const float *es,
                                                         float *ws, float *rel) {
    constexpr int TM = S::TM, TN = S::TN;
    const int K = a.K;
    const int tx = threadIdx.x % (S::BN / TN), ty = threadIdx.x / (S::BN / TN);
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int jj = 0; jj < TN; jj++) acc[i][jj] = 0.0f;
    fuse_slices<S>(w, K, j0, ws, [&](const float *cur, int k0) {
        const int kc = K - k0 < S::KC ? K - k0 : S::KC;
#pragma unroll 4
        for (int kk = 0; kk < kc; kk++) {
            float av[TM], wv[TN];
            lds<TM>(av, es + (k0 + kk) * S::LD + ty * TM);
#pragma unroll
            for (int r = 0; r < TN / S::NV; r++) {
                float v[S::NV];
                lds<S::NV>(v, cur + kk * S::LDW + r * S::RUN + tx * S::NV);
#pragma unroll
                for (int q = 0; q < S::NV; q++) wv[r * S::NV + q] = v[q];
            }
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int jj = 0; jj < TN; jj++) acc[i][jj] = fmaf(av[i], wv[jj], acc[i][jj]);
        }
    });
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int64_t b = b0 + ty * TM + i;
        if (b >= a.n) continue;
        float *out = rel + (size_t)b * K;
#pragma unroll
        for (int jj = 0; jj < TN; jj++) {
            const int j = j0 + S::col(tx, jj);
            if (j < K) out[j] = pc_gpu_log(acc[i][jj]);
        }
    }
}

/* The FP64 tensor-core product of a fuse_mma_shape item and its logs: exact sums of the FP32
 * operands' products, one FP32 log per output. Lane 4 g + t of warp (wm, wn) gives the mma
 * the inputs of samples r0 + mt (r0 = 8 MT wm + MT g) and the exp(w) of outputs c0 + 8 NV q + v
 * (c0 = 8 NT wn + NV g) at k = k0 + kk + 4 j + t, for k-steps kk of 8 and slots j = 0, 1;
 * m-tiles 2 p and 2 p + 1 are the rows g and g + 8 of one 16 x 8 x 8 mma (pc_gpu_dmma16,
 * which runs at twice the rate of the 8 x 8 x 4 shape; its 16 x 8 x 16 form would hold twice
 * the operands in registers). */
template <class S>
static __device__ __forceinline__ void fuse_product_mma(const pc_gpu_args &a, const float *w,
                                                        int64_t b0, int j0, const float *es,
                                                        float *ws, float *rel) {
    constexpr int MT = S::MT, NT = S::NT, NV = S::NV, SL = 2;
    const int K = a.K, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g8 = lane >> 2, t4 = lane & 3;
    const int r0 = 8 * MT * (warp / S::WN) + MT * g8, c0 = 8 * NT * (warp % S::WN) + NV * g8;
    double acc[MT][NT][2];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int jj = 0; jj < NT; jj++) acc[i][jj][0] = acc[i][jj][1] = 0.0;
    fuse_slices<S>(w, K, j0, ws, [&](const float *cur, int k0) {
#pragma unroll
        for (int kk = 0; kk < S::KC; kk += 4 * SL) {
            double ad[MT][SL], wd[NT][SL];
#pragma unroll
            for (int j = 0; j < SL; j++) {
                const int kl = kk + 4 * j + t4;
                /* es rows past K are not written: their k takes 0 (exp(w) there is 0 too). */
                float av[MT], wv[NT];
                if (k0 + kl < K) {
                    lds<MT>(av, es + (k0 + kl) * S::LD + r0);
                } else {
#pragma unroll
                    for (int i = 0; i < MT; i++) av[i] = 0.0f;
                }
#pragma unroll
                for (int q = 0; q < NT / NV; q++) {
                    float v[NV];
                    lds<NV>(v, cur + kl * S::LDW + c0 + 8 * NV * q);
#pragma unroll
                    for (int i = 0; i < NV; i++) wv[NV * q + i] = v[i];
                }
#pragma unroll
                for (int i = 0; i < MT; i++) ad[i][j] = pc_gpu_f2d(av[i]);
#pragma unroll
                for (int jj = 0; jj < NT; jj++) wd[jj][j] = pc_gpu_f2d(wv[jj]);
            }
#pragma unroll
            for (int p = 0; p < MT; p += 2)
#pragma unroll
                for (int jj = 0; jj < NT; jj++)
                    pc_gpu_dmma16<SL>(acc[p][jj], acc[p + 1][jj], ad[p], ad[p + 1], wd[jj]);
        }
    });
    /* acc[mt][NV q + v][h] is sample r0 + mt, output c0' + 8 NV q + NV (2 t + h) + v, where c0'
     * is c0 with g -> 0: 2 NV adjacent outputs per (mt, q). */
    const int cb = j0 + 8 * NT * (warp % S::WN) + 2 * NV * t4;
#pragma unroll
    for (int i = 0; i < MT; i++) {
        const int64_t b = b0 + r0 + i;
        if (b >= a.n) continue;
        float *out = rel + (size_t)b * K;
#pragma unroll
        for (int q = 0; q < NT / NV; q++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int v = 0; v < NV; v++) {
                    const int j = cb + 8 * NV * q + NV * h + v;
                    if (j < K) out[j] = pc_gpu_log(pc_gpu_d2f(acc[i][NV * q + v][h]));
                }
    }
}

/* One item, its first exp(w) slice already on its way (fuse_run): phase A into es[K][LD],
 * then the shape's product and logs, and the offsets O + m. */
template <class S, int QUADS>
static __device__ void fuse_item(const pc_gpu_args &a, int gi, const pc_gpu_group &g, int t,
                                 int jt, float *smem) {
    constexpr int BM = S::BM;
    const int K = a.K;
    float *es = smem;
    float *ws = fuse_ws<S>(smem, K);
    double *m = reinterpret_cast<double *>(ws + 2 * S::KC * S::LDW);
    double *o = m + BM;
    const int64_t b0 = (int64_t)t * BM;
    const bool root = g.slot < 0;
    pc_gpu_phase_a<QUADS>(a, g, b0, BM, S::LD, root, false, es, m, o);
    if (root) {
        pc_gpu_root_out(a, b0, BM, S::LD, es, m, o);
        return;
    }
    const float *w = a.wexp + (size_t)gi * K * K;
    float *rel = a.rel + (size_t)g.slot * a.chunk * K;
    if constexpr (S::MMA) fuse_product_mma<S>(a, w, b0, jt * S::BN, es, ws, rel);
    else fuse_product_fp32<S>(a, w, b0, jt * S::BN, es, ws, rel);
    if (jt == 0) {
        for (int bl = threadIdx.x; bl < BM; bl += FUSE_THREADS) {
            const int64_t b = b0 + bl;
            if (b < a.n)
                a.off[(size_t)g.slot * a.chunk + b] = m[bl] == -INFINITY ? -INFINITY : o[bl] + m[bl];
        }
    }
}

/* Thread f < runs waits until group q has finished all K outputs of counter run f0 + f (an
 * acquire, which the block's barrier after the waits extends to every thread, in place of a
 * fence by each of them: K = 128, 256 1.00-1.03x). */
static __device__ __forceinline__ void fuse_wait_runs(const pc_gpu_args &a, int q, int f0,
                                                      int runs) {
    if ((int)threadIdx.x < runs)
        pc_gpu_acquire_count<32>(a.done + (size_t)q * a.tiles + f0 + threadIdx.x, a.K);
}

/* Item `item` of a part of the queue whose groups start at g_begin, with `tiles` sample tiles
 * and `jtiles` output tiles per group: waits for its inputs, computes, publishes. */
template <class S, int QUADS>
static __device__ __forceinline__ void fuse_run(const pc_gpu_args &a, int item, int g_begin,
                                                int tiles, int jtiles, float *smem) {
    const int jt = item % jtiles, rest = item / jtiles;
    const int t = rest % tiles, gi = g_begin + rest / tiles;
    const pc_gpu_group g = a.groups[gi];
    if (g.slot < 0 && jt > 0) return; /* the root has one output: its other j-tiles are empty */
    /* exp(w) does not depend on the children: its first slice travels during the wait. */
    if (g.slot >= 0)
        fuse_load_w<S::KC, S::BN, S::LDW>(a.wexp + (size_t)gi * a.K * a.K, a.K, 0, jt * S::BN,
                                          fuse_ws<S>(smem, a.K));
    const int f0 = t * (S::BM / FUSE_FINE);
    const int runs = min(S::BM / FUSE_FINE, a.tiles - f0);
    for (int i = g.child_begin; i < g.child_end; i++)
        fuse_wait_runs(a, __ldg(a.children + i), f0, runs);
    if (g.wait >= 0) fuse_wait_runs(a, g.wait, f0, runs);
    __syncthreads();
    fuse_item<S, QUADS>(a, gi, g, t, jt, smem);
    /* Publish: the barrier orders every thread's stores before the counting threads'
     * releases (no fence by each thread). */
    __syncthreads();
    if (g.slot >= 0 && (int)threadIdx.x < runs)
        pc_gpu_release_add(a.done + (size_t)gi * a.tiles + f0 + threadIdx.x,
                           min(S::BN, a.K - jt * S::BN));
}

/* The persistent loop: items from the queue until none is left. */
template <class A, class B, int QUADS>
static __device__ __forceinline__ void fuse_loop(const pc_gpu_args &a, const fuse_split &sp) {
    extern __shared__ float4 smem4[];
    float *smem = reinterpret_cast<float *>(smem4);
    __shared__ int s_item;
    for (;;) {
        if (threadIdx.x == 0) s_item = atomicAdd(a.queue, 1);
        __syncthreads();
        const int item = s_item;
        if (item >= sp.total) return;
        if (item < sp.items_a) fuse_run<A, QUADS>(a, item, 0, sp.tiles_a, sp.jtiles_a, smem);
        else fuse_run<B, QUADS>(a, item - sp.items_a, sp.groups_a, sp.tiles_b, sp.jtiles_b, smem);
        __syncthreads();
    }
}

/* The persistent kernel, BLOCKS resident per SM (fuse_pick says how many and why). The
 * gather takes 4 quads per thread at a time (pc_gpu_phase_a), 2 at four blocks per SM, whose
 * 64 registers the other two would spill (measured on the H200, K = 128, batch 4096: 3.89
 * against 4.19 ms; 2 quads at two or three blocks per SM lost 4-7 % at K = 128 and 256). */
template <class A, class B, int BLOCKS>
static __global__ void __launch_bounds__(FUSE_THREADS, BLOCKS)
    fuse_kernel(pc_gpu_args a, fuse_split sp) {
    fuse_loop<A, B, BLOCKS >= 4 ? 2 : 4>(a, sp);
}

/* A forward pass of at least this many samples takes the large configuration. */
#define FUSE_LARGE_N 2048

/* Item shapes by K (rounded up to bn) and batch: wide items take BN >= K outputs up to K = 256,
 * so the gather runs once per sample tile; narrow items take 16 samples and <= 64 outputs. The
 * split between them (fuse_split_for) takes two numbers per shape, measured on the MNIST tree
 * with bench/gpu_fuse_split_device.sh (which overrides the first with FUSE_WIDE_GAIN):
 *   gain:     how much faster a wide item does its work than narrow items do the same (it
 *             gathers each sample once for all outputs and loads fewer shared-memory words per
 *             FMA): 4 for the tiles of K > 128, 2 below;
 *   min_fill: the share of the resident blocks the first (widest) layer's wide items must
 *             occupy for wide items to be used at all. At K <= 64 a wide item is mostly gather
 *             latency: with less than one wave of them even at the leaves, each wide layer
 *             waits on that latency where narrow items of several layers overlap (K = 64,
 *             batch 512: 0.54 ms all narrow, 0.98 with the layers of 50-87 groups wide). */
typedef void (*fuse_fn)(pc_gpu_args, fuse_split);
typedef struct fuse_config {
    fuse_fn fn;
    int bm_a, bn_a, bn_b;
    size_t smem;
    double gain, min_fill;
} fuse_config;

template <class A, class B, int BLOCKS>
static fuse_config fuse_make(int K, double gain, double min_fill) {
    const size_t sa = A::smem(K), sb = B::smem(K);
#ifdef FUSE_WIDE_GAIN
    gain = FUSE_WIDE_GAIN;
#endif
    return fuse_config{fuse_kernel<A, B, BLOCKS>, A::BM, A::BN, B::BN, sa > sb ? sa : sb, gain,
                       min_fill};
}

/* The configuration for K below (large = false) or from FUSE_LARGE_N samples. Measured on the
 * H200 (MNIST tree, ms):
 *   K = 128, batch 512: wide items of 32 samples with the FP64 tensor-core product 0.894, of 64
 *            samples 0.963, FP32 items of 64 samples 1.129 (shorter items, shorter critical
 *            path); batch 4096: FP32 items of 64 samples at four blocks per SM 4.18, at three
 *            4.22, of 32 samples 4.99, the mma items of 32 samples 5.75 (two blocks per SM
 *            for their FP64 accumulators hide less of the gather); with the mma at its full
 *            rate (16 x 8 x 8), mma items of 64 samples x 128 outputs 4.74 against 3.83
 *            (batch 2,048: 2.44 against 2.04);
 *   K = 256: wide items of 32 samples 1.897 / 12.48 at batch 512 / 4096, of 64 samples
 *            2.199 / 11.56 (more items for the critical path against half the exp(w) reads
 *            per sample); mma items of 64 samples x 128 outputs (two per group and sample
 *            tile, each with its own gather and exp) 13.75 against 11.29 at 4096, 7.22
 *            against 6.23 at 2,048, and at batch 512 2.09 against 1.87.
 * Blocks per SM: more warps cover more of the gather's and the waits' latency, fewer registers
 * spill more: three (80 registers) up to K = 64 and four (64 registers, more spills) at large
 * batches, where the bottom layers' many items keep every block busy (K = 64, batch 4096: 1.96
 * against 2.13 ms); two for the mma items and the tiles of K = 256 (128 registers). */
static fuse_config fuse_pick(int K, bool large) {
    typedef fuse_shape<128, 16, 4, 2, 16> w16;
    typedef fuse_shape<16, 16, 1, 1, 64> n16;
    typedef fuse_shape<128, 32, 4, 4, 16> w32;
    typedef fuse_shape<16, 32, 2, 1, 64> n32;
    typedef fuse_shape<128, 64, 8, 4, 16> w64;
    typedef fuse_shape<16, 64, 2, 2, 64> n64;
    typedef fuse_shape<64, 128, 4, 8, 16> w128;
    typedef fuse_mma_shape<32, 128, 2, 4, 16> w128s;
    typedef fuse_shape<64, 256, 8, 8, 16> w256;
    typedef fuse_shape<32, 256, 4, 8, 16> w256s;
    if (K <= 16)
        return large ? fuse_make<w16, n16, 4>(K, 2.0, 1.0) : fuse_make<w16, n16, 3>(K, 2.0, 1.0);
    if (K <= 32)
        return large ? fuse_make<w32, n32, 4>(K, 2.0, 1.0) : fuse_make<w32, n32, 3>(K, 2.0, 1.0);
    if (K <= 64)
        return large ? fuse_make<w64, n64, 4>(K, 2.0, 1.0) : fuse_make<w64, n64, 3>(K, 2.0, 1.0);
    if (K <= 128)
        return large ? fuse_make<w128, n64, 4>(K, 2.0, 0.0) : fuse_make<w128s, n64, 2>(K, 2.0, 0.0);
    return large ? fuse_make<w256, n64, 2>(K, 4.0, 0.0) : fuse_make<w256s, n64, 2>(K, 4.0, 0.0);
}

static pc_status fuse_configure(pc_gpu_state *s) {
    pc_status st = PC_OK;
    int max_smem = 0, per_sm = 0;
    const fuse_config c[2] = {fuse_pick(s->K, false), fuse_pick(s->K, true)};
    /* The counters run over FUSE_FINE samples; bn is the wide items' output tile. */
    s->bm = FUSE_FINE, s->bn = c[0].bn_a;
    s->smem = c[0].smem > c[1].smem ? c[0].smem : c[1].smem;
    PC_GPU_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    if (s->smem + PC_GPU_STATIC_SMEM > (size_t)max_smem)
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "backend 'fuse': K = %d needs %zu bytes of shared memory per block, the "
                       "GPU has %d", s->K, s->smem, max_smem);
    for (int large = 0; large < 2; large++) {
        const fuse_config *c1 = &c[large];
        PC_GPU_CHECK(cudaFuncSetAttribute(c1->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)c1->smem));
        PC_GPU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, c1->fn, FUSE_THREADS,
                                                                   c1->smem));
        *(large ? &s->grid_large : &s->grid) = s->sms * (per_sm > 0 ? per_sm : 1);
    }
fail:
    return st;
}

/* The split for n samples (gpu_plan.h): a wide item does the work of (BM_A min(BN_A, K)) /
 * (BM_B min(BN_B, K)) narrow ones, c->gain times faster. Fails when the items would overflow
 * the queue's 32-bit counter. */
static pc_status fuse_split_for(const pc_gpu_state *s, const fuse_config *c, int64_t n,
                                int grid, fuse_split *out) {
    const pc_circuit *cir = s->circuit;
    fuse_split sp;
    sp.tiles_a = (int32_t)((n + c->bm_a - 1) / c->bm_a);
    sp.jtiles_a = (s->K + c->bn_a - 1) / c->bn_a;
    sp.tiles_b = (int32_t)((n + FUSE_FINE - 1) / FUSE_FINE);
    sp.jtiles_b = (s->K + c->bn_b - 1) / c->bn_b;
    const double work = (double)c->bm_a * (c->bn_a < s->K ? c->bn_a : s->K) /
                        ((double)FUSE_FINE * (c->bn_b < s->K ? c->bn_b : s->K));
    const int32_t l = pc_gpu_split_layers(cir, (int64_t)sp.tiles_a * sp.jtiles_a,
                                          (int64_t)sp.tiles_b * sp.jtiles_b,
                                          work / c->gain,
                                          (int64_t)ceil(c->min_fill * grid), grid);
    sp.groups_a = cir->layer_start[l];
    const int64_t items_a = (int64_t)sp.groups_a * sp.tiles_a * sp.jtiles_a;
    const int64_t total = items_a + (int64_t)(s->G - sp.groups_a) * sp.tiles_b * sp.jtiles_b;
    if (total > INT32_MAX)
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "backend 'fuse': %d groups at K = %d make %lld work items for %lld "
                       "samples, more than the queue counts (2^31 - 1)", s->G, s->K,
                       (long long)total, (long long)n);
    sp.items_a = (int32_t)items_a, sp.total = (int32_t)total;
    *out = sp;
    return PC_OK;
}

static pc_status fuse_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    pc_status st = PC_OK;
    const bool large = a->n >= FUSE_LARGE_N;
    const fuse_config c = fuse_pick(s->K, large);
    const int resident = large ? s->grid_large : s->grid;
    fuse_split sp;
    if ((st = fuse_split_for(s, &c, a->n, resident, &sp))) return st;
    const int grid = sp.total < resident ? sp.total : resident;
    if ((st = pc_gpu_reset_counters(a, stream))) return st;
    c.fn<<<grid, FUSE_THREADS, c.smem, stream>>>(*a, sp);
    PC_GPU_CHECK(cudaGetLastError());
fail:
    return st;
}

extern "C" const pc_gpu_impl pc_gpu_fuse_persistent_impl = {
    PC_BACKEND_FUSE, "persistent",     NULL,             fuse_configure, pc_gpu_upload_wexp,
    fuse_enqueue,    NULL,             NULL,             NULL};

/* fuse's own choice, per forward pass of n samples:
 *   - the warp strategy (cuda_fuse_warp.cu) for K <= 64 where the tile strategy would put
 *     more than 8 samples in a block at K <= 32, more than 4 at 32 < K <= 64 and at K = 128
 *     (8-sample items; from 4 samples per SM), at 64 < K <= 112 (rows of 80, 96, 112) at
 *     every batch (pc_gpu_fuse_takes_warp): enough warp items to fill the GPU, each without
 *     a barrier;
 *   - else the tile strategy (no waits between blocks) up to K = 64, at K = 128 with blocks
 *     of 4 samples (beyond, where the warp strategy cannot take the circuit, up to two waves
 *     of 32-sample blocks) but not where its blocks leave most SMs idle (n <= SMs,
 *     4 SMs < n < 5 SMs), never at 64 < K <= 112 (pc_gpu_fuse_takes_tile; fuse runs 32 < K <
 *     64 as 64 and 112 < K < 128 as 128, pc_gpu_fuse_states);
 *   - else the persistent kernel.
 * Measured on the H200 (MNIST tree), ms per forward pass at batch 1024 / 2048 / 3072 / 4096
 * (results file 104; the tile strategy's samples per block T = 8 / 16 / 32 / 32):
 *   K = 16: tile 0.104 / 0.151 / 0.279 / 0.285,  warp 0.137 / 0.157 / 0.190 / 0.222;
 *   K = 32: tile 0.185 / 0.353 / 0.647 / 0.646,  warp 0.254 / 0.290 / 0.366 / 0.420;
 *   K = 64: tile 0.375 / 0.747 / 1.444 / 1.464,  warp 0.502 / 0.652 / 0.834 / 1.059;
 *   persistent at K = 64: 0.512 at 512, 1.496 at 4096 (file 103).
 * A tile block's time grows with its T, so the tile strategy's time is a staircase in n (one
 * step per doubling of T past the SMs), while the warp strategy's grows smoothly; at small
 * batches the warp items' latency on the tree's thin top loses. Above K = 64, at batch 256 /
 * 384 / 512 / 768 / 1024 / 1536 / 2048 / 4096 (results file 113; T = 4 / 4 / 4 / 8 / 8 / 16 /
 * 16 / 32, so 64 / 96 / 128 / 96 / 128 / 96 / 128 / 128 blocks on 132 SMs):
 *   K = 96:  tile 0.583 / 0.601 / 0.617 / 1.015 / 1.034 / 1.903 / 1.919 / 3.569,
 *            persistent 0.537 / 0.601 / 0.729 / 0.971 / 1.238 / 1.818 / 1.585 / 2.980;
 *   K = 128: tile 0.503 / 0.517 / 0.532 / 0.944 / 0.955 / 1.851 / 1.879 / 3.697,
 *            persistent 0.593 / 0.724 / 0.869 / 1.194 / 1.531 / 2.243 / 2.024 / 3.822.
 * At K = 96 the tile kernel multiplies padded rows of 128 (its time is about K = 128's), while
 * the persistent kernel's work shrinks with K squared. At K = 128 and 8,192 / 16,384 samples
 * (two and four waves of 32-sample blocks; file 114): tile 7.376 / 14.754, persistent 7.487 /
 * 13.848. At K = 128 and 64 / 128 / 192 / 529 / 576 / 616 / 660 / 768 samples (file 155; T = 4 up
 * to 528, then 8): tile 0.508 / 0.521 / 0.527 / 0.950 / 0.945 / 0.949 / 0.954 / 0.955,
 * persistent 0.441 / 0.507 / 0.542 / 0.816 / 0.860 / 0.917 / 0.961 / 1.078. */

static const char *choose_strategy(const pc_gpu_state *s) {
    return s->last_strategy ? s->last_strategy : s->tile_ok ? "tile" : "persistent";
}

/* The persistent kernel's tiles and buffers, plus the tile and warp kernels' where they fit. */
static pc_status choose_configure(pc_gpu_state *s) {
    pc_status st = fuse_configure(s);
    if (st == PC_OK && pc_gpu_fuse_tile_fits(s->circuit)) { /* K <= 128, shared memory */
        if ((st = pc_gpu_fuse_tile_prepare(s))) return st;
        s->tile_ok = 1;
    }
    if (st == PC_OK && pc_gpu_fuse_warp_k(s->K) && pc_gpu_fuse_warp_takes(s))
        st = pc_gpu_fuse_warp_prepare(s);
    return st;
}

static pc_status choose_upload(pc_gpu_state *s) {
    pc_status st = pc_gpu_upload_wexp(s);
    if (st == PC_OK && s->tile_ok) st = pc_gpu_fuse_tile_upload(s);
    if (st == PC_OK && s->warp_ok) st = pc_gpu_fuse_warp_upload(s);
    return st;
}

static size_t choose_extra_bytes(const pc_gpu_state *s, int64_t chunk) {
    return (s->tile_ok ? pc_gpu_fuse_tile_bytes(s, chunk) : 0) +
           (s->warp_ok ? pc_gpu_fuse_warp_bytes(s, chunk) : 0);
}

static void choose_release(pc_gpu_state *s) {
    pc_gpu_fuse_tile_release(s);
    pc_gpu_fuse_warp_release(s);
}

/* Between tile and warp, pc_gpu_fuse_takes_warp (gpu_plan.h): warp once a tile block would
 * hold more than 8 samples at K <= 32 (from 1,057 samples on 132 SMs), more than 4 at
 * 32 < K <= 64 (from 529). Measured with the warp kernel's full-rate mma (results file 123),
 * tile against warp: T = 8 (768-1,024 samples) tile 1.14-1.30x faster at K = 16-64; T = 16
 * (1,152-2,048) warp 1.00-1.08x faster at K = 16, 1.29-1.66x at K = 32 and 64. Since the K = 64
 * chain bottom gathers both rows together (file 136), warp is 1.05-1.16x faster at T = 8 for
 * K = 40-64, tile 1.42-1.52x at T = 4 (file 138). (With the half-rate mma K <= 16 switched at
 * 2,113: batch 2,048, T = 16, tile 0.151 against warp 0.157 ms.) Above K = 64 (rows padded to
 * 128; file 147), ms at batch 512 / 1,024 / 2,048 / 4,096 / 8,192:
 *   K = 128: tile 0.574 / 0.963 / 1.85 / 3.48 / 6.97,  warp 1.08 / 1.10 / 1.52 / 2.71 / 5.35;
 *   K = 96:  tile 0.667 / 1.12, persistent 1.58 / 2.98 / 5.50 (2,048-8,192),
 *            warp 0.832 / 0.980 / 1.37 / 2.51 / 4.99;
 * and around the switches at K = 72, 80, 96, 112, 128 (file 149): warp overtakes the
 * persistent kernel between 768 and 1,024 samples (K = 96 at 768: warp 0.876, persistent
 * 0.892; at 1,024 0.975 and 1.127), the tile kernel's K = 128 form at 1,057 (tile 0.984 at
 * 1,056, 1.78 at 1,057 with 16 samples per block; warp 1.10-1.11); at K = 72 it is 1.04-1.36x
 * faster than the persistent kernel at 1,024-4,096 and 0.97x at 8,192. So warp from n > 6 sms
 * at 72 <= K < 128 and from n > 8 sms at K = 128. (Since the warp strategy's 8-sample items
 * at K = 128, file 171: warp 0.679 / 0.682 / 0.696 / 0.734 / 0.866 ms at 529 / 600 / 660 /
 * 768 / 1,024 samples against the best of tile and persistent 0.797 / 0.870 / 0.937 / 0.962
 * / 0.978, and 0.658 against tile's 0.613 at 512: warp from n > 4 sms, where a tile block
 * would hold more than 4 samples, as at 32 < K <= 64; and with 8-sample items at small
 * batches, file 173, warp at every batch at 64 < K <= 112, 1.05-1.53x faster than the
 * persistent kernel at 16-330 samples.) With these rules fuse ran within 1 % of the fastest
 * strategy at all 60 points of file 149 but K = 72 at 8,192 (3 %), K = 96 at 768
 * (2 %) and K = 128 at 529 (tile, 17 %; persistent since file 155). At 64 < K < 72, where the
 * padded rows cost most against the persistent kernel's K x K products, warp was still
 * faster from n > 6 sms (file 155, K = 66 / 68 / 70 at 1,024: 1.06 / 1.06 / 1.04x, 1,536:
 * 1.28-1.30x, 2,048: 1.00-1.01x, 4,096: 1.06 / 1.03 / 1.10x, 8,192: 0.99 / 0.95 / 1.03x), so
 * the rule covers them too (K = 66 and 70 then took the scalar paths; fuse now runs them as
 * K = 68 and 72, pc_gpu_create). Where the tile strategy cannot take the circuit at
 * K <= 64, the warp strategy takes every batch (at 512 it ran 1.1-2.7x faster than the
 * persistent kernel, file 103). */
static pc_status choose_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    if (s->warp_ok &&
        ((!s->tile_ok && s->K <= 64) || pc_gpu_fuse_takes_warp(s->K, a->n, s->sms))) {
        s->last_strategy = "warp";
        return pc_gpu_fuse_warp_enqueue(s, a, stream);
    }
    const int tile = s->tile_ok && pc_gpu_fuse_takes_tile(s->K, a->n, s->sms);
    s->last_strategy = tile ? "tile" : "persistent";
    return tile ? pc_gpu_fuse_tile_enqueue(s, a, stream) : fuse_enqueue(s, a, stream);
}

static const pc_gpu_impl fuse_choose_impl = {
    PC_BACKEND_FUSE, NULL,           choose_strategy,    choose_configure,
    choose_upload,   choose_enqueue, choose_extra_bytes, NULL,
    choose_release};

static pc_status fuse_create(const pc_circuit *c, const pc_eval_opts *o, void **state) {
    return pc_gpu_create(&fuse_choose_impl, c, o, state);
}

static pc_status fuse_tile_create(const pc_circuit *c, const pc_eval_opts *o, void **state) {
    return pc_gpu_create(&pc_gpu_fuse_tile_impl, c, o, state);
}

static pc_status fuse_persistent_create(const pc_circuit *c, const pc_eval_opts *o, void **state) {
    return pc_gpu_create(&pc_gpu_fuse_persistent_impl, c, o, state);
}

extern "C" const pc_backend_ops pc_backend_fuse_ops = {fuse_create, pc_gpu_evaluate,
                                                       pc_gpu_peak_bytes, pc_gpu_destroy};
extern "C" const pc_backend_ops pc_backend_fuse_tile_ops = {
    fuse_tile_create, pc_gpu_evaluate, pc_gpu_peak_bytes, pc_gpu_destroy};
extern "C" const pc_backend_ops pc_backend_fuse_persistent_ops = {
    fuse_persistent_create, pc_gpu_evaluate, pc_gpu_peak_bytes, pc_gpu_destroy};
