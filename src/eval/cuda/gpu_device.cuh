/* Device code shared by the GPU engine's kernels (internal; included by the strategies' .cu).
 *
 * Phase A of a block-wide item (persistent fuse, int, gemm): for a tile of bm samples of one
 * group, the gather of its inputs and children's messages p(b, k) into es[K][ld] in shared
 * memory, the per-sample max m(b) and offset O(b), and the shift (and exp) by m; the root's
 * output; FP32 <-> FP64 conversions. The FP64 tensor-core tile is base/cuda_dmma.cuh's, the
 * counters between items of the persistent kernels base/cuda_counter.cuh's. The message format
 * is gpu_engine.cuh's. */
#ifndef PC_GPU_DEVICE_CUH
#define PC_GPU_DEVICE_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "base/cuda_convert.cuh"
#include "base/cuda_counter.cuh"
#include "base/cuda_dmma.cuh"
#include "eval/cuda/gpu_engine.cuh"
#include "eval/cuda/gpu_log.h"

/* Elements (sample, k) each thread gathers at once in phase A: their loads are independent, so
 * issuing them together hides memory latency (one element at a time leaves every load of a
 * chain variable id -> pixel value -> input row waiting on the previous one). */
#define PC_GPU_GATHER 4
/* Largest block of the kernels that call phase A (its max reduction uses one float each), and
 * the static shared memory that takes, which the dynamic part must leave room for. */
#define PC_GPU_MAX_THREADS 256
#define PC_GPU_STATIC_SMEM (PC_GPU_MAX_THREADS * 4 + 64)

/* O(b) = sum of the children's offsets. Messages are written during the persistent kernels by
 * other blocks: they are read through L2 (ld.cg), never from a possibly stale L1 line. */
static __device__ __forceinline__ double pc_gpu_offset(const pc_gpu_args &a,
                                                       const pc_gpu_group &g, int64_t b) {
    double o = 0.0;
#pragma unroll 4
    for (int i = g.child_begin; i < g.child_end; i++) {
        int slot = __ldg(a.child_slot + i);
        o += __ldcg(a.off + (size_t)slot * a.chunk + b);
    }
    return o;
}

/* Shared-memory layout of the first phase of every sum kernel, for a tile of bm samples:
 * es[k * ld + b] (float, [K][ld]) and per-sample m (double) and O (double). */
static __host__ __device__ __forceinline__ int pc_gpu_ld(int bm) { return bm + 4; }

/* Visits the elements i = start, start + step, ... of a grid of rows of `cols` (i = row * cols +
 * col) with an add and a compare per element instead of a division. */
struct pc_gpu_walk {
    int row, col, drow, dcol, cols;
    __device__ pc_gpu_walk(int start, int step, int cols_)
        : row(start / cols_), col(start % cols_), drow(step / cols_), dcol(step % cols_),
          cols(cols_) {}
    __device__ __forceinline__ void next() {
        row += drow, col += dcol;
        if (col >= cols) col -= cols, row++;
    }
};

/* Phase A's gather, any K: es[k * ld + b] = p(b, k) (+ root_logw[k] at the root; -inf for the
 * nb <= b < bm past the batch, whose loads read sample b0), PC_GPU_GATHER elements (b, k) per
 * thread at a time, k fastest so the loads of input rows and messages coalesce. */
static __device__ __forceinline__ void pc_gpu_gather1(const pc_gpu_args &a, const pc_gpu_group &g,
                                                      int64_t b0, int bm, int nb, int ld,
                                                      bool root, float *es) {
    const int K = a.K, nt = blockDim.x, count = bm * K;
    const size_t V = (size_t)a.V;
    pc_gpu_walk at(threadIdx.x, nt, K);
    for (int base = threadIdx.x; base < count; base += nt * PC_GPU_GATHER) {
        int r[PC_GPU_GATHER], bl[PC_GPU_GATHER], k[PC_GPU_GATHER];
        double p[PC_GPU_GATHER];
#pragma unroll
        for (int u = 0; u < PC_GPU_GATHER; u++) {
            r[u] = at.row, k[u] = at.col, bl[u] = at.row < nb ? at.row : 0, p[u] = 0.0;
            at.next();
        }
        for (int vi = g.var_begin; vi < g.var_end; vi++) {
            const int v = __ldg(a.vars + vi);
            const float *rows = a.input + (size_t)v * (a.C + 1) * K;
            const uint8_t *xv = a.x + (size_t)b0 * V + v;
            const uint8_t *mv = a.missing ? a.missing + (size_t)b0 * V + v : NULL;
            int code[PC_GPU_GATHER];
#pragma unroll
            for (int u = 0; u < PC_GPU_GATHER; u++)
                code[u] = (mv && __ldg(mv + bl[u] * V)) ? a.C : __ldg(xv + bl[u] * V);
#pragma unroll
            for (int u = 0; u < PC_GPU_GATHER; u++)
                p[u] += (double)__ldg(rows + code[u] * K + k[u]);
        }
        for (int ci = g.child_begin; ci < g.child_end; ci++) {
            const float *rel =
                a.rel + ((size_t)__ldg(a.child_slot + ci) * a.chunk + (size_t)b0) * K;
#pragma unroll
            for (int u = 0; u < PC_GPU_GATHER; u++) p[u] += (double)__ldcg(rel + bl[u] * K + k[u]);
        }
#pragma unroll
        for (int u = 0; u < PC_GPU_GATHER; u++) {
            if (r[u] >= bm) continue;
            if (root) p[u] += __ldg(a.root_logw + k[u]);
            es[k[u] * ld + r[u]] = r[u] < nb ? (float)p[u] : -INFINITY;
        }
    }
}

/* The same for K % 4 == 0, four adjacent k of a sample per 16-byte load: a thread has Q such
 * quads (4 Q elements) in flight at a time, so an item of bm x K elements waits on Q times
 * fewer load round trips than with pc_gpu_gather1's four elements. Quads are numbered with
 * 4 adjacent k-quads of 8 adjacent samples per 32 threads: the 4 lanes of a sample read 64
 * contiguous bytes (whole sectors), and their stores to es fall on few banks at once. */
template <int Q>
static __device__ __forceinline__ void pc_gpu_gather4(const pc_gpu_args &a, const pc_gpu_group &g,
                                                      int64_t b0, int bm, int nb, int ld,
                                                      bool root, float *es) {
    const int K = a.K, K4 = K / 4, nt = blockDim.x;
    const int K4P = (K4 + 3) & ~3, count = bm * K4P; /* quads, k-quads padded to 4 */
    const size_t V = (size_t)a.V;
    /* Quad i is sample (i / 4) % bm, k-quad 4 ((i / 4) / bm) + i % 4; i % 4 is the thread's
     * own (nt % 4 == 0), and i / 4 advances by nt / 4 per quad, walked without divisions. */
    pc_gpu_walk at(threadIdx.x >> 2, nt >> 2, bm);
    for (int base = threadIdx.x; base < count; base += nt * Q) {
        int r[Q], bl[Q], k[Q];
        bool in[Q];
        double p[Q][4];
#pragma unroll
        for (int u = 0; u < Q; u++) {
            r[u] = at.col;
            k[u] = 4 * ((at.row << 2) + (threadIdx.x & 3));
            in[u] = base + u * nt < count && k[u] < K;
            at.next();
            bl[u] = r[u] < nb ? r[u] : 0;
            if (!in[u]) k[u] = 0;
#pragma unroll
            for (int c = 0; c < 4; c++) p[u][c] = 0.0;
        }
        for (int vi = g.var_begin; vi < g.var_end; vi++) {
            const int v = __ldg(a.vars + vi);
            const float *rows = a.input + (size_t)v * (a.C + 1) * K;
            const uint8_t *xv = a.x + (size_t)b0 * V + v;
            const uint8_t *mv = a.missing ? a.missing + (size_t)b0 * V + v : NULL;
            int code[Q];
#pragma unroll
            for (int u = 0; u < Q; u++)
                code[u] = (mv && __ldg(mv + bl[u] * V)) ? a.C : __ldg(xv + bl[u] * V);
#pragma unroll
            for (int u = 0; u < Q; u++) {
                const float4 w = __ldg(reinterpret_cast<const float4 *>(rows + code[u] * K + k[u]));
                p[u][0] += (double)w.x, p[u][1] += (double)w.y;
                p[u][2] += (double)w.z, p[u][3] += (double)w.w;
            }
        }
        for (int ci = g.child_begin; ci < g.child_end; ci++) {
            const float *rel =
                a.rel + ((size_t)__ldg(a.child_slot + ci) * a.chunk + (size_t)b0) * K;
#pragma unroll
            for (int u = 0; u < Q; u++) {
                const float4 q = __ldcg(reinterpret_cast<const float4 *>(rel + bl[u] * K + k[u]));
                p[u][0] += (double)q.x, p[u][1] += (double)q.y;
                p[u][2] += (double)q.z, p[u][3] += (double)q.w;
            }
        }
#pragma unroll
        for (int u = 0; u < Q; u++) {
            if (!in[u]) continue;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                double x = p[u][c];
                if (root) x += __ldg(a.root_logw + k[u] + c);
                es[(k[u] + c) * ld + r[u]] = r[u] < nb ? (float)x : -INFINITY;
            }
        }
    }
}

/* Phase A: for the bm <= 128 samples from b0, computes O(b), m(b) = max_k p(b, k) (+ root_logw[k]
 * at the root) and leaves es[k * ld + b] = exp(p(b, k) + w_root - m(b)) (0 for samples past n;
 * ld >= bm, pc_gpu_ld(bm) unless the caller's reads want another bank pattern), or
 * with `shifted` the difference p(b, k) - m(b) itself (-inf past n).
 * p (inputs plus children's relative messages, a few terms of a few nats each) is summed in
 * FP64 and kept in FP32: it is near 0, so its rounding (<= 1e-6 nats) is what FP32 costs; the
 * large part of every node value, O(b) + m(b), stays in FP64. Any m near the maximum works
 * since O + m is carried exactly. Called by all threads of a block of <= PC_GPU_MAX_THREADS
 * (a multiple of 4); ends with a barrier. */
template <int QUADS>
static __device__ void pc_gpu_phase_a(const pc_gpu_args &a, const pc_gpu_group &g, int64_t b0,
                                      int bm, int ld, bool root, bool shifted, float *es,
                                      double *m, double *o) {
    __shared__ float part[PC_GPU_MAX_THREADS];
    const int K = a.K, nt = blockDim.x;
    const int count = bm * K;
    const int nb = a.n - b0 < bm ? (int)(a.n - b0) : bm; /* samples in range, >= 1 */
    /* 0. O(b), whose loads then travel with the gather's instead of after it. */
    for (int bl = threadIdx.x; bl < bm; bl += nt)
        o[bl] = bl < nb ? pc_gpu_offset(a, g, b0 + bl) : 0.0;
    /* 1. es[k][b] = p(b, k): with QUADS > 0, 16-byte loads, QUADS per thread at a time, where
     *    K allows and a thread has more than one quad (tuning.md#gather-quads). The int kernel
     *    does without (QUADS = 0): there the quads' registers cost more than they save. */
    bool quads = false;
    if constexpr (QUADS > 0) {
        quads = K % 4 == 0 && bm * K > 4 * nt;
        if (quads) pc_gpu_gather4<QUADS>(a, g, b0, bm, nb, ld, root, es);
    }
    if (!quads) pc_gpu_gather1(a, g, b0, bm, nb, ld, root, es);
    __syncthreads();
    /* 2. m(b): q = nt / bm threads per sample take every q-th k, then one thread per sample
     *    combines them. */
    const int q = nt / bm;
    if (threadIdx.x < q * bm) {
        const int bl = threadIdx.x % bm;
        float mx = -INFINITY;
        for (int kk = threadIdx.x / bm; kk < K; kk += q) mx = fmaxf(mx, es[kk * ld + bl]);
        part[threadIdx.x] = mx;
    }
    __syncthreads();
    for (int bl = threadIdx.x; bl < bm; bl += nt) {
        float mx = part[bl];
        for (int j = 1; j < q; j++) mx = fmaxf(mx, part[j * bm + bl]);
        m[bl] = (double)mx;
    }
    __syncthreads();
    /* 3. es -= m, exponentiated unless `shifted` (b fastest: conflict-free shared memory). */
    pc_gpu_walk e(threadIdx.x, nt, bm);
    for (int i = threadIdx.x; i < count; i += nt, e.next()) {
        const float mb = (float)m[e.col], v = es[e.row * ld + e.col];
        float x;
        if (mb == -INFINITY) x = shifted ? -INFINITY : 0.0f;
        else x = shifted ? v - mb : __expf(v - mb);
        es[e.row * ld + e.col] = x;
    }
    __syncthreads();
}

/* The root's output: log p(x_b) = O + m + log sum_k es[k * ld + b], summed in FP64. */
static __device__ void pc_gpu_root_out(const pc_gpu_args &a, int64_t b0, int bm, int ld,
                                       const float *es, const double *m, const double *o) {
    for (int bl = threadIdx.x; bl < bm; bl += blockDim.x) {
        int64_t b = b0 + bl;
        if (b >= a.n) continue;
        double sum = 0.0;
        for (int k = 0; k < a.K; k++) sum += (double)es[k * ld + bl];
        a.logp[b] = m[bl] == -INFINITY ? -INFINITY : o[bl] + m[bl] + log(sum);
    }
}

#endif
