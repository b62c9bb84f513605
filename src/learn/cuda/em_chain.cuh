/* Chains of narrow layers on GPU EM's GEMM path, 16 < K <= 64 (internal; em_plan.h names the
 * buffers, the chains and their strands).
 *
 * On the GEMM path a layer up is a product kernel and a GEMM for the messages, a layer down a
 * GEMM and a posterior kernel. The MNIST tree's top 23 layers hold two groups each, so those
 * launches carry a few rows of work and wait on dependent round trips to memory. Here a block
 * walks one strand of a chain (its groups connected by parent-child edges, children first up,
 * parents first down) for 8 rows, a row to a warp, lane l holding states l and l + 32 (KPL = 1
 * or 2), W_g in shared memory as FP64. Every group gives a thread the same rows and states, so
 * what a group leaves for the next in the strand (messages up, ratios down, the offsets) is
 * read back by the thread that wrote it.
 *
 * The math and the roundings are the layers' (pc_em_product, the GEMMs, pc_em_posterior): e is
 * stored in T before the message reads it, s(j) = sum_k W[j][k] e(k) and u(k) = sum_j a(j)
 * W[j][k] are rounded to T as the GEMMs' results are; only their order of summation differs
 * from cuBLAS's (k and j in order, in FP64). The flows of these groups come from the pass's one
 * flow GEMM (em_plan.h), which reads e in E and a in S as the layers leave them. */
#ifndef PC_LEARN_EM_CHAIN_CUH
#define PC_LEARN_EM_CHAIN_CUH

#include "base/cuda_convert.cuh"
#include "learn/cuda/em_kernels.cuh"
#include "learn/cuda/em_plan.h"

/* W_g into shared memory: w[j * K + k] = W_g[j][k], or its transpose (w[k * K + j]). */
template <typename T>
static __device__ __forceinline__ void pc_em_chain_load_w(const T *W, int32_t g, int K,
                                                          bool transpose, double *w) {
    for (int i = threadIdx.x; i < K * K; i += PC_EM_THREADS)
        w[transpose ? (i % K) * K + i / K : i] = pc_gpu_widen(W[(int64_t)g * K * K + i]);
}

/* Forward: grid (tiles, the chain's strands from s0), each block its strand's groups in order
 * (none is the root); dynamic shared memory K * K doubles. */
template <typename T, int KPL>
__global__ void __launch_bounds__(PC_EM_THREADS)
    pc_em_step_chain_forward(pc_em_args a, int64_t n, int32_t s0, const T *input, T *E, T *S,
                             const T *W) {
    extern __shared__ double wt[]; /* wt[k * K + j] = W_g[j][k] */
    const int K = a.K, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int warps = PC_EM_THREADS / 32;
    const int64_t ch = a.chunk;
    const int32_t s = s0 + blockIdx.y, i0 = a.strand_start[s], i1 = a.strand_start[s + 1];
    for (int32_t i = i0; i < i1; i++) {
        const int32_t g = a.strand_groups[i];
        if (i > i0) __syncthreads(); /* the last group's W is read no more */
        pc_em_chain_load_w(W, g, K, true, wt);
        __syncthreads();
        const int32_t vb = a.var_start[g], ve = a.var_start[g + 1];
        const int32_t cb = a.child_start[g], ce = a.child_start[g + 1];
        const int64_t b = (int64_t)blockIdx.x * warps + warp;
        if (b >= n) continue; /* warp-uniform: a warp is one row */
        const int64_t at = ((int64_t)g * ch + b) * K;
        double v[KPL], m = 0;
#pragma unroll
        for (int q = 0; q < KPL; q++) {
            const int k = lane + 32 * q;
            v[q] = 0;
            if (k >= K) continue;
            v[q] = 1;
            for (int32_t j = vb; j < ve; j++) {
                const int32_t var = a.vars[j], c = a.xc[b * a.V + var];
                v[q] *= pc_gpu_widen(input[((int64_t)var * (a.C + 1) + c) * K + k]);
            }
            for (int32_t j = cb; j < ce; j++)
                v[q] *= pc_gpu_widen(S[((int64_t)a.children[j] * ch + b) * K + k]);
            m = fmax(m, v[q]);
        }
        m = pc_em_max(m, 32);
        double inv1, inv2;
        const int ex = pc_em_scale(m, &inv1, &inv2);
        double e[KPL];
#pragma unroll
        for (int q = 0; q < KPL; q++) {
            const int k = lane + 32 * q;
            e[q] = pc_gpu_round<T>(v[q] * inv1 * inv2); /* as E stores it */
            if (k < K) E[at + k] = pc_gpu_narrow<T>(e[q]);
        }
        if (lane == 0) {
            int32_t off = ex;
            for (int32_t j = cb; j < ce; j++) off += a.off[(int64_t)a.children[j] * ch + b];
            a.off[(int64_t)g * ch + b] = off;
        }
        double msg[KPL] = {};
#pragma unroll
        for (int q = 0; q < KPL; q++)
            for (int src = 0; src < 32; src++) {
                const int k = 32 * q + src;
                const double ek = __shfl_sync(0xffffffffu, e[q], src);
                if (k >= K) break; /* warp-uniform */
#pragma unroll
                for (int r = 0; r < KPL; r++)
                    if (lane + 32 * r < K) msg[r] += wt[k * K + lane + 32 * r] * ek;
            }
#pragma unroll
        for (int r = 0; r < KPL; r++)
            if (lane + 32 * r < K) S[at + lane + 32 * r] = pc_gpu_narrow<T>(msg[r]);
    }
}

/* Downward: grid as the forward's, each block its strand's groups in reverse order (parents
 * first): u = a W rounded to T, q = e u into U, every child's message in S into its ratio
 * q / s (0 where s = 0); dynamic shared memory K * K doubles. */
template <typename T, int KPL>
__global__ void __launch_bounds__(PC_EM_THREADS)
    pc_em_step_chain_downward(pc_em_args a, int64_t n, int32_t s0, const T *E, T *S, T *U,
                              const T *W) {
    extern __shared__ double w[]; /* w[j * K + k] = W_g[j][k] */
    const int K = a.K, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int warps = PC_EM_THREADS / 32;
    const int64_t ch = a.chunk;
    const int32_t s = s0 + blockIdx.y, i0 = a.strand_start[s], i1 = a.strand_start[s + 1];
    for (int32_t i = i1 - 1; i >= i0; i--) {
        const int32_t g = a.strand_groups[i];
        if (i < i1 - 1) __syncthreads(); /* the last group's W is read no more */
        pc_em_chain_load_w(W, g, K, false, w);
        __syncthreads();
        const int32_t cb = a.child_start[g], ce = a.child_start[g + 1];
        const int64_t row = (int64_t)blockIdx.x * warps + warp;
        if (row >= n) continue; /* warp-uniform: a warp is one row */
        const int64_t at = ((int64_t)g * ch + row) * K;
        double ratio[KPL], u[KPL] = {};
#pragma unroll
        for (int q = 0; q < KPL; q++) {
            const int k = lane + 32 * q;
            ratio[q] = k < K ? pc_gpu_widen(S[at + k]) : 0.0;
        }
#pragma unroll
        for (int q = 0; q < KPL; q++)
            for (int src = 0; src < 32; src++) {
                const int j = 32 * q + src;
                const double aj = __shfl_sync(0xffffffffu, ratio[q], src);
                if (j >= K) break; /* warp-uniform */
#pragma unroll
                for (int r = 0; r < KPL; r++)
                    if (lane + 32 * r < K) u[r] += aj * w[j * K + lane + 32 * r];
            }
#pragma unroll
        for (int r = 0; r < KPL; r++) {
            const int k = lane + 32 * r;
            if (k >= K) continue;
            const double qk = pc_gpu_widen(E[at + k]) * pc_gpu_round<T>(u[r]);
            U[at + k] = pc_gpu_narrow<T>(qk);
            for (int32_t j = cb; j < ce; j++) {
                T *sc = S + ((int64_t)a.children[j] * ch + row) * K + k;
                const double sv = pc_gpu_widen(*sc);
                *sc = pc_gpu_narrow<T>(sv > 0 ? qk / sv : 0.0);
            }
        }
    }
}

#endif
