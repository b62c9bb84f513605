/* The persistent strategy's kernels (persistent.cuh): item shapes, the exp(w) slices, the
 * FP32 and FP64 tensor-core products, the items and the persistent loop. */
#ifndef PC_GPU_PERSISTENT_KERNEL_CUH
#define PC_GPU_PERSISTENT_KERNEL_CUH

#include "eval/cuda/fuse_persistent/persistent.cuh"
#include "eval/cuda/gpu_device.cuh"

#define FUSE_THREADS 256
#define FUSE_FINE PC_PERSISTENT_TILE

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
 * fence by each of them). */
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
 * 64 registers the other two would spill (tuning.md#persistent-quads). */
template <class A, class B, int BLOCKS>
static __global__ void __launch_bounds__(FUSE_THREADS, BLOCKS)
    fuse_kernel(pc_gpu_args a, fuse_split sp) {
    fuse_loop<A, B, BLOCKS >= 4 ? 2 : 4>(a, sp);
}

#endif
