/* Fused kernels of GPU EM for K <= 16 (internal; em_kernels.cuh has the row layout).
 *
 * At small K a pass is a chain of tiny steps, ~42 layers up and down for MNIST, and launches
 * dominate: here each direction of a pass is one persistent launch, a wavefront over the
 * items (path, tile) of em_plan.h, one item to one warp. A warp takes items from a ticket
 * counter in dependency order (up: paths in increasing order, children first; down:
 * decreasing, parents first) and waits on the counters of the items it reads: up, the paths
 * of its bottom's children on the same tile; down, its top's parent's. Every item it waits on
 * has a smaller ticket, taken by a warp that is running and waits only on smaller ones still,
 * so the wave always moves. What another item of the same launch wrote is read from L2
 * (__ldcg). Inside a path the warp hands each group's message up (and each q down) in
 * registers, as stored (rounded to T), so the values are those of a group-by-group pass.
 *
 * A tile is iter subtiles of PC_EM_FUSED_ROWS = 16 rows, one after another. Lane 4 g8 + t4
 * holds rows g8 and g8 + 8 of a subtile and four states, slots j = 0..3 standing for
 * pc_em_state(t4, j) = 2 t4, 2 t4 + 1, 8 + 2 t4, 9 + 2 t4 (zero past K): the columns that the
 * FP64 tensor cores' 16 x 8 x 16 tile (base/cuda_dmma.cuh) gives that lane in its two 8-wide
 * n-tiles. The same slots serve as the mma's k slots (a permutation of k that A and B share,
 * so the products are exact FP64 sums), so a message or posterior leaves the tensor cores in
 * the layout the next group multiplies by, and no value moves between lanes.
 *
 * Forward, subtile of group g: e = the scaled product (as pc_em_product), then the messages
 * S = E W_g^T, two 16 x 8 x 16 tiles. Downward: the ratios A of the subtile, U = A W_g on the
 * tensor cores, q = e u into E, the bottom's children's messages into their ratios, and the
 * flows A^T E over the subtile's rows (A and E through the warp's shared memory, transposed)
 * into P[g][tile][j][k], added there over the tile's subtiles in order; the pass's end sums
 * the tiles in order. Every sum has one fixed order, whatever the schedule: the same bits on
 * every run, no floating-point atomics.
 *
 * Why warps, paths and tensor cores (H200, step at K = 16, FP64, batch 512 / 4,096): a block
 * to an item (group, tile), a row to 16 lanes that shuffled each other's values, took 0.548 /
 * 2.217 ms: its items were latency-bound at the 5-6 blocks that fit an SM, and at 4,096 rows
 * the shuffles and the flows' shared-memory sums filled the SMs' load pipes. A warp to an item
 * (group, tile) on the tensor cores: 0.581 / 1.55 ms; walking paths of up to 8 groups: 0.477 /
 * 1.16 (bench/notebook/gpu_em_downward_h200.md, round 7). The engine's warp strategy
 * (fuse_warp/warp.cuh) showed the way: no barrier between an item's warps, chains of groups
 * in one warp, the product on the tensor cores. */
#ifndef PC_LEARN_EM_FUSED_CUH
#define PC_LEARN_EM_FUSED_CUH

#include "base/cuda_convert.cuh"
#include "base/cuda_counter.cuh"
#include "base/cuda_dmma.cuh"
#include "learn/cuda/em_kernels.cuh"
#include "learn/cuda/em_plan.h"

/* The wavefront's state: tickets [2] (forward, downward), then done [paths][tiles], each item's
 * counter (1 once its forward is stored, 2 once its downward is), zeroed before a pass; the
 * plan's paths (em_plan.h) and each group's parent. */
struct pc_em_wave {
    int32_t *ticket, *done;
    const int32_t *path_start, *path_groups, *path_of, *parent;
    int32_t tiles, paths;
};

/* Nanoseconds between polls of a counter. */
#define PC_EM_WAVE_POLL_NS 32
/* Warps of a block of the wavefront kernels. */
#define PC_EM_WAVE_WARPS (PC_EM_THREADS / 32)
/* Doubles a row of the downward's staging in shared memory: 16 states and 2 of padding, so
 * that the transposed fragment loads take the two wavefronts that 256 bytes need, no more. */
#define PC_EM_WAVE_LD 18

/* Dynamic shared memory of pc_em_wave_downward: A and E of a subtile for every warp. */
static inline size_t pc_em_wave_downward_smem(void) {
    return (size_t)PC_EM_WAVE_WARPS * 2 * PC_EM_FUSED_ROWS * PC_EM_WAVE_LD * sizeof(double);
}

/* The state of a lane's slot j (0..3): the pairs 2 t4, 2 t4 + 1 and 8 + 2 t4, 9 + 2 t4, which
 * are the columns of the tensor cores' output for lane t4 in the two 8-wide n-tiles. */
static __device__ __forceinline__ int pc_em_state(int t4, int j) {
    return 8 * (j >> 1) + 2 * t4 + (j & 1);
}

/* Two states k0, k0 + 1 (k0 even) of the row at p, loaded or stored (past K: 0, not stored).
 * K even takes one 16- (double) or 8-byte (float) access: then p + k0 is aligned (rows are K
 * elements, buffers 256-byte aligned) and the two are both in or both out. CG: through L2, for
 * what other items of the launch wrote. */
template <bool CG, typename T>
static __device__ __forceinline__ void pc_em_load2(const T *p, int k0, int K, double *v) {
    v[0] = v[1] = 0;
    if ((K & 1) == 0) {
        if (k0 >= K) return;
        if constexpr (sizeof(T) == 8) {
            const double2 *q = reinterpret_cast<const double2 *>(p + k0);
            const double2 x = CG ? __ldcg(q) : q[0];
            v[0] = x.x, v[1] = x.y;
        } else {
            const float2 *q = reinterpret_cast<const float2 *>(p + k0);
            const float2 x = CG ? __ldcg(q) : q[0];
            v[0] = pc_gpu_f2d(x.x), v[1] = pc_gpu_f2d(x.y);
        }
        return;
    }
    if (k0 < K) v[0] = pc_gpu_widen(CG ? __ldcg(p + k0) : p[k0]);
    if (k0 + 1 < K) v[1] = pc_gpu_widen(CG ? __ldcg(p + k0 + 1) : p[k0 + 1]);
}
template <typename T>
static __device__ __forceinline__ void pc_em_store2(T *p, int k0, int K, const double *v) {
    if ((K & 1) == 0) {
        if (k0 >= K) return;
        if constexpr (sizeof(T) == 8) {
            *reinterpret_cast<double2 *>(p + k0) = make_double2(v[0], v[1]);
        } else {
            *reinterpret_cast<float2 *>(p + k0) = make_float2(pc_gpu_d2f(v[0]), pc_gpu_d2f(v[1]));
        }
        return;
    }
    if (k0 < K) p[k0] = pc_gpu_narrow<T>(v[0]);
    if (k0 + 1 < K) p[k0 + 1] = pc_gpu_narrow<T>(v[1]);
}

/* A lane's four states of the row at p (pc_em_state's slots), loaded or stored. */
template <bool CG, typename T>
static __device__ __forceinline__ void pc_em_load_slots(const T *p, int t4, int K,
                                                        double (&v)[4]) {
    pc_em_load2<CG>(p, 2 * t4, K, v);
    pc_em_load2<CG>(p, 8 + 2 * t4, K, v + 2);
}
template <typename T>
static __device__ __forceinline__ void pc_em_store_slots(T *p, int t4, int K,
                                                         const double (&v)[4]) {
    pc_em_store2(p, 2 * t4, K, v);
    pc_em_store2(p, 8 + 2 * t4, K, v + 2);
}

/* The next item's ticket for the whole warp (lane 0 takes it). */
static __device__ __forceinline__ int32_t pc_em_wave_take(int32_t *ticket, int lane) {
    int32_t t = 0;
    if (lane == 0) t = atomicAdd(ticket, 1);
    return __shfl_sync(0xffffffffu, t, 0);
}

/* After an item: every lane's stores, then its counter raised as a release. */
static __device__ __forceinline__ void pc_em_wave_done(const pc_em_wave &w, int32_t path,
                                                       int32_t tile, int lane) {
    __syncwarp();
    if (lane == 0) pc_gpu_release_add(w.done + (int64_t)path * w.tiles + tile, 1);
}

/* The rows of subtile r0 a lane holds (g8 and g8 + 8), whether they exist, and the rows its
 * loads read (r0 for one past n, whose results are not stored). */
struct pc_em_rows2 {
    int64_t r[2];
    bool live[2];
};

static __device__ __forceinline__ pc_em_rows2 pc_em_rows_of(int64_t r0, int64_t n, int g8) {
    pc_em_rows2 x;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int64_t row = r0 + g8 + 8 * h;
        x.live[h] = row < n;
        x.r[h] = x.live[h] ? row : r0;
    }
    return x;
}

/* v *= the product of group g's inputs at the lane's rows and slots. */
static __device__ __forceinline__ void pc_em_times_inputs(const pc_em_args &a, int32_t g,
                                                          const pc_em_rows2 &rw, int t4,
                                                          const double *input, double (&v)[2][4]) {
    for (int32_t i = a.var_start[g]; i < a.var_start[g + 1]; i++) {
        const int32_t var = a.vars[i];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t x = a.xc[rw.r[h] * a.V + var];
            double in[4];
            pc_em_load_slots<false>(input + ((int64_t)var * (a.C + 1) + x) * a.K, t4, a.K, in);
#pragma unroll
            for (int j = 0; j < 4; j++) v[h][j] *= in[j];
        }
    }
}

/* The forward of path `path` over tile `tile` by one warp, a subtile at a time, its groups
 * bottom to top: the bottom waits for its children's items and multiplies their messages in
 * from L2, every other group the message of the group below, in registers. The root (a path of
 * its own) writes log p(x) instead of messages. */
template <typename T>
static __device__ __forceinline__ void pc_em_wave_forward_item(const pc_em_args &a,
                                                               const pc_em_wave &w, int64_t n,
                                                               int32_t iter, int32_t path,
                                                               int32_t tile, const double *input,
                                                               T *E, T *S, const double *W,
                                                               int lane) {
    const int K = a.K, g8 = lane >> 2, t4 = lane & 3;
    const int64_t ch = a.chunk;
    const int32_t pb = w.path_start[path], pe = w.path_start[path + 1];
    for (int s = 0; s < iter; s++) {
        const int64_t r0 = ((int64_t)tile * iter + s) * PC_EM_FUSED_ROWS;
        if (r0 >= n) break; /* warp-uniform */
        const pc_em_rows2 rw = pc_em_rows_of(r0, n, g8);
        double msg[2][4] = {}; /* the group below's message, the lane's rows and slots */
        int32_t off_below[2] = {0, 0};
        for (int32_t m = pb; m < pe; m++) {
            const int32_t g = w.path_groups[m];
            const bool root = g == a.G - 1;
            /* B of S = E W^T, n-tile nt: B[k][j] = W_g[8 nt + g8][k], the lane's k slots */
            double wb[2][4] = {};
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
                if (!root && 8 * nt + g8 < K)
                    pc_em_load_slots<false>(W + ((int64_t)g * K + 8 * nt + g8) * K, t4, K,
                                            wb[nt]);
            double v[2][4];
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int j = 0; j < 4; j++) v[h][j] = pc_em_state(t4, j) < K ? 1.0 : 0.0;
            pc_em_times_inputs(a, g, rw, t4, input, v);
            int32_t off[2];
            if (m == pb) {
                const int32_t cb = a.child_start[g], ce = a.child_start[g + 1];
                if (s == 0) {
                    const int one = 1;
                    for (int32_t i = cb + lane; i < ce; i += 32)
                        pc_gpu_acquire_count<PC_EM_WAVE_POLL_NS>(
                            w.done + (int64_t)w.path_of[a.children[i]] * w.tiles + tile, one);
                    __syncwarp();
                }
                off[0] = off[1] = 0;
                for (int32_t i = cb; i < ce; i++) {
                    const int32_t c = a.children[i];
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        double mc[4];
                        pc_em_load_slots<true>(S + (c * ch + rw.r[h]) * K, t4, K, mc);
#pragma unroll
                        for (int j = 0; j < 4; j++) v[h][j] *= mc[j];
                        off[h] += __ldcg(a.off + c * ch + rw.r[h]);
                    }
                }
            } else {
#pragma unroll
                for (int h = 0; h < 2; h++) {
#pragma unroll
                    for (int j = 0; j < 4; j++) v[h][j] *= msg[h][j];
                    off[h] = off_below[h];
                }
            }
            double e[2][4];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                double mx = fmax(fmax(v[h][0], v[h][1]), fmax(v[h][2], v[h][3]));
                mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, 1)); /* the row's lanes agree */
                mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                double inv1, inv2;
                off[h] += pc_em_scale(mx, &inv1, &inv2);
#pragma unroll
                for (int j = 0; j < 4; j++)
                    e[h][j] = inv1 > 0 ? pc_gpu_round<T>(v[h][j] * inv1 * inv2) : 0.0;
                if (rw.live[h]) pc_em_store_slots(E + (g * ch + rw.r[h]) * K, t4, K, e[h]);
                if (rw.live[h] && t4 == h) a.off[g * ch + rw.r[h]] = off[h];
            }
            if (root) { /* warp-uniform */
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    double z = 0;
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const int k = pc_em_state(t4, j);
                        z += k < K ? a.root_w[k] * e[h][j] : 0.0;
                    }
                    z += __shfl_xor_sync(0xffffffffu, z, 1);
                    z += __shfl_xor_sync(0xffffffffu, z, 2);
                    if (rw.live[h] && t4 == h)
                        a.logp[rw.r[h]] = z > 0 ? (double)off[h] * PC_EM_LN2 + log(z) : -INFINITY;
                }
                continue;
            }
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                double d0[2] = {0, 0}, d1[2] = {0, 0};
                pc_gpu_dmma16<4>(d0, d1, e[0], e[1], wb[nt]);
                msg[0][2 * nt] = d0[0], msg[0][2 * nt + 1] = d0[1];
                msg[1][2 * nt] = d1[0], msg[1][2 * nt + 1] = d1[1];
            }
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (rw.live[h]) pc_em_store_slots(S + (g * ch + rw.r[h]) * K, t4, K, msg[h]);
                off_below[h] = off[h];
                /* the next group multiplies by the message as stored */
#pragma unroll
                for (int j = 0; j < 4; j++) msg[h][j] = pc_gpu_round<T>(msg[h][j]);
            }
        }
    }
}

/* The forward wavefront: items (path, tile) in increasing order of path, a warp each; grid:
 * the blocks that fit the GPU at once (more would only wait). */
template <typename T>
__global__ void __launch_bounds__(PC_EM_THREADS)
    pc_em_wave_forward(pc_em_args a, pc_em_wave w, int64_t n, int32_t iter,
                       const double *input, T *E, T *S, const double *W) {
    const int lane = threadIdx.x & 31;
    const int32_t items = w.paths * w.tiles;
    for (;;) {
        const int32_t t = pc_em_wave_take(w.ticket, lane);
        if (t >= items) return; /* warp-uniform */
        const int32_t path = t / w.tiles, tile = t % w.tiles;
        pc_em_wave_forward_item<T>(a, w, n, iter, path, tile, input, E, S, W, lane);
        pc_em_wave_done(w, path, tile, lane);
    }
}

/* The downward of non-root path `path` over tile `tile` by one warp, a subtile at a time, its
 * groups top to bottom: the top's ratios come from L2 (its parent's item wrote them), every
 * other group's from the q of the group above, in registers; the bottom writes its children's.
 * Each group's flows over the subtile go to P[g][tile] (added to it after the first subtile,
 * by the lane that stored it). sh: the warp's A and E of a subtile, [16][PC_EM_WAVE_LD] doubles
 * each. P is [G - 1][tiles][K][K]. */
template <typename T>
static __device__ __forceinline__ void pc_em_wave_downward_item(const pc_em_args &a,
                                                                const pc_em_wave &w, int64_t n,
                                                                int32_t iter, int32_t path,
                                                                int32_t tile, T *E, T *S,
                                                                const double *W, double *P,
                                                                double *sh, int lane) {
    const int K = a.K, g8 = lane >> 2, t4 = lane & 3;
    const int64_t ch = a.chunk;
    const int32_t pb = w.path_start[path], pe = w.path_start[path + 1];
    double *sa = sh, *se = sh + PC_EM_FUSED_ROWS * PC_EM_WAVE_LD;
    /* the top's ratios: the root's posteriors wrote them in the launch before */
    const int32_t parent = w.parent[w.path_groups[pe - 1]];
    const int two = 2;
    if (lane == 0 && parent != a.G - 1)
        pc_gpu_acquire_count<PC_EM_WAVE_POLL_NS>(
            w.done + (int64_t)w.path_of[parent] * w.tiles + tile, two);
    __syncwarp();
    for (int s = 0; s < iter; s++) {
        const int64_t r0 = ((int64_t)tile * iter + s) * PC_EM_FUSED_ROWS;
        if (r0 >= n) break; /* warp-uniform */
        const pc_em_rows2 rw = pc_em_rows_of(r0, n, g8);
        double q[2][4] = {}; /* the group above's posteriors */
        for (int32_t m = pe - 1; m >= pb; m--) {
            const int32_t g = w.path_groups[m];
            /* B of U = A W, n-tile nt: B[j][k] = W_g[j][8 nt + g8], the lane's j slots */
            double wb[2][4];
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int k = 8 * nt + g8, jj = pc_em_state(t4, j);
                    wb[nt][j] = k < K && jj < K ? W[((int64_t)g * K + jj) * K + k] : 0.0;
                }
            double ar[2][4], eo[2][4]; /* the ratios a, the forward's e */
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int64_t at = (g * ch + rw.r[h]) * K;
                pc_em_load_slots<false>(E + at, t4, K, eo[h]);
                if (m == pe - 1) {
                    pc_em_load_slots<true>(S + at, t4, K, ar[h]);
                } else {
                    double sv[4];
                    pc_em_load_slots<false>(S + at, t4, K, sv);
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        ar[h][j] = sv[j] > 0 ? pc_gpu_round<T>(q[h][j] / sv[j]) : 0.0;
                }
                if (!rw.live[h]) /* past n: no flows */
#pragma unroll
                    for (int j = 0; j < 4; j++) ar[h][j] = 0;
                const int b = g8 + 8 * h;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    sa[b * PC_EM_WAVE_LD + pc_em_state(t4, j)] = ar[h][j];
                    se[b * PC_EM_WAVE_LD + pc_em_state(t4, j)] = eo[h][j];
                }
            }
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                double u[2][2] = {};
                pc_gpu_dmma16<4>(u[0], u[1], ar[0], ar[1], wb[nt]);
#pragma unroll
                for (int h = 0; h < 2; h++) /* e from the staging: 44 bytes less spilled (FP32) */
#pragma unroll
                    for (int c = 0; c < 2; c++)
                        q[h][2 * nt + c] =
                            se[(g8 + 8 * h) * PC_EM_WAVE_LD + pc_em_state(t4, 2 * nt + c)] *
                            u[h][c];
            }
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (!rw.live[h]) continue;
                pc_em_store_slots(E + (g * ch + rw.r[h]) * K, t4, K, q[h]);
                if (m > pb) continue; /* the child below takes q in registers */
                for (int32_t i = a.child_start[g]; i < a.child_start[g + 1]; i++) {
                    T *sc = S + ((int64_t)a.children[i] * ch + rw.r[h]) * K;
                    double sv[4], ratio[4];
                    pc_em_load_slots<false>(sc, t4, K, sv);
#pragma unroll
                    for (int j = 0; j < 4; j++) ratio[j] = sv[j] > 0 ? q[h][j] / sv[j] : 0.0;
                    pc_em_store_slots(sc, t4, K, ratio);
                }
            }
            __syncwarp(); /* the staging is written */
            /* F = A^T E over the subtile: A'[j][b] = a(b, j), B'[b][k] = e(b, k), the lane's
             * b slots 4 t4 + i; F[j = g8 + 8 h][k = 8 nt + 2 t4 + c] in fl[nt][h][c] */
            double a0[4], a1[4], fl[2][2][2] = {};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a0[i] = sa[(4 * t4 + i) * PC_EM_WAVE_LD + g8];
                a1[i] = sa[(4 * t4 + i) * PC_EM_WAVE_LD + g8 + 8];
            }
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                double bf[4];
#pragma unroll
                for (int i = 0; i < 4; i++) bf[i] = se[(4 * t4 + i) * PC_EM_WAVE_LD + 8 * nt + g8];
                pc_gpu_dmma16<4>(fl[nt][0], fl[nt][1], a0, a1, bf);
            }
            __syncwarp(); /* the staging is read before the next group writes it */
            double *out = P + ((int64_t)g * w.tiles + tile) * K * K;
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int h = 0; h < 2; h++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        const int j = g8 + 8 * h, k = 8 * nt + 2 * t4 + c;
                        if (j < K && k < K)
                            out[j * K + k] = s == 0 ? fl[nt][h][c] : out[j * K + k] + fl[nt][h][c];
                    }
        }
    }
}

/* The downward wavefront: items (path, tile) of the non-root paths in decreasing order of
 * path, a warp each, after the root's posteriors; grid as the forward's; dynamic shared memory
 * pc_em_wave_downward_smem(). */
template <typename T>
__global__ void __launch_bounds__(PC_EM_THREADS)
    pc_em_wave_downward(pc_em_args a, pc_em_wave w, int64_t n, int32_t iter, T *E, T *S,
                        const double *W, double *P) {
    extern __shared__ double sh[];
    const int lane = threadIdx.x & 31;
    double *mine = sh + (threadIdx.x >> 5) * 2 * PC_EM_FUSED_ROWS * PC_EM_WAVE_LD;
    const int32_t items = (w.paths - 1) * w.tiles;
    for (;;) {
        const int32_t t = pc_em_wave_take(w.ticket + 1, lane);
        if (t >= items) return; /* warp-uniform */
        const int32_t path = w.paths - 2 - t / w.tiles, tile = t % w.tiles;
        pc_em_wave_downward_item<T>(a, w, n, iter, path, tile, E, S, W, P, mine, lane);
        pc_em_wave_done(w, path, tile, lane);
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
