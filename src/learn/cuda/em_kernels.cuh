/* The kernels of GPU EM (internal; em_plan.h names the buffers and the steps of a pass).
 *
 * Rows. The product and posterior kernels give every (group, sample) row of K values to `tw`
 * lanes of one warp (tw = K rounded up to a power of two when K < 32, else 32), lane l holding
 * k = l, l + tw, ... in registers (KPL = values per lane, a template argument). Max and sum
 * over k are butterfly shuffles within the tw lanes: every lane adds the same two values in
 * either order, so all lanes hold the same bits, the same on every run. Every lane of a warp
 * takes part in every shuffle: rows past the end compute on row 0's values and store nothing.
 *
 * Precision. T (float or double) is what the buffers hold; products, scales, posteriors and
 * ratios are computed in double, so FP32 holds only values in [0, 1], scaled by exact powers of
 * two, and never the product of many factors.
 *
 * Counts are 64-bit fixed point (learn_em.c: scale 2^(62 - bits(n)) for a step over n rows);
 * integer addition is associative, so the integer atomics of the input flows give the same
 * sum in any order. No floating-point atomics anywhere. */
#ifndef PC_LEARN_EM_KERNELS_CUH
#define PC_LEARN_EM_KERNELS_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "base/cuda_convert.cuh"
#include "learn/cuda/em_plan.h"

#define PC_EM_THREADS PC_EM_ROW_THREADS
/* Rows per segment of the input flows (each thread sums one (variable, state) over one
 * segment): the largest power of two in [16, 128] that still gives the grid
 * PC_EM_SEG_THREADS threads, V K n / rows of them. A thread walks its segment one dependent
 * step after another, so short passes need short segments: at K = 16, n = 512 segments of 128
 * made 50,176 threads and took 78 us of a 0.87 ms step (ncu, H200); at K = 128, n = 4,096 the
 * grid has 3.2 M threads with 128 and the kernel reads its 3.3 GB of posteriors at the memory's
 * pace. */
#define PC_EM_SEG_THREADS (1 << 20)
static inline int64_t pc_em_input_seg(int64_t n, int32_t V, int32_t K) {
    int64_t rows = 128;
    while (rows > 16 && (int64_t)V * K * ((n + rows - 1) / rows) < PC_EM_SEG_THREADS) rows /= 2;
    return rows;
}
#define PC_EM_LN2 0.693147180559945309417232121458176568

/* What the row kernels read, by value: the circuit's CSR arrays on the device, the sizes. */
struct pc_em_args {
    const int32_t *var_start, *vars;     /* [G + 1], [V] */
    const int32_t *child_start, *children; /* [G + 1], [G - 1] */
    const int32_t *var_group;            /* [V] */
    const int32_t *strand_start, *strand_groups; /* the plan's chains (em_plan.h) */
    const double *root_w;                /* [K] */
    const uint16_t *xc;                  /* [chunk][V] value, or C for a missing one */
    const uint16_t *xct;                 /* [V][chunk] the same, transposed */
    int32_t *off;                        /* [G][chunk] base-2 exponents of the scales */
    double *logp;                        /* [chunk] */
    int64_t chunk;
    int32_t V, C, K, G, tw;
};

static __device__ __forceinline__ double pc_em_max(double v, int tw) {
    for (int o = tw / 2; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static __device__ __forceinline__ double pc_em_sum(double v, int tw) {
    for (int o = tw / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The scale of a row whose largest value is m: returns ex with m 2^-ex in [0.5, 1), and 2^-ex
 * as two factors (so that a scale of 2^1074 does not overflow); 0 and factors 0 when m is 0 or
 * not finite (the row stays 0). */
static __device__ __forceinline__ int pc_em_scale(double m, double *inv1, double *inv2) {
    int ex = 0;
    *inv1 = *inv2 = 0;
    if (m > 0 && isfinite(m)) {
        frexp(m, &ex);
        *inv1 = ldexp(1.0, -ex / 2);
        *inv2 = ldexp(1.0, -ex - (-ex / 2));
    }
    return ex;
}

/* The row of this thread: r = (group - g0) * n + b, and whether it exists. */
struct pc_em_row {
    int32_t g;
    int64_t b;
    bool live;
};

static __device__ __forceinline__ pc_em_row pc_em_row_of(int64_t n, int32_t g0, int32_t g1,
                                                          int tw) {
    const int64_t r = (int64_t)blockIdx.x * (blockDim.x / tw) + threadIdx.x / tw;
    const bool live = r < (int64_t)(g1 - g0) * n;
    const int64_t rr = live ? r : 0;
    return {(int32_t)(g0 + rr / n), rr % n, live};
}

/* Forward products of groups [g0, g1): P_g(b, k) = prod_v input[v][x_bv][k] *
 * prod_c s_c(b, k), scaled so that max_k is in [0.5, 1): e_g = P_g 2^-ex (two factors, so
 * that a scale of 2^1074 does not overflow), off_g = ex + sum_c off_c. A row whose max is 0
 * (probability 0) stays 0. The root (g = G - 1) also writes log p(x) = off ln 2 +
 * log sum_k w_k e_k, -inf for probability 0. Grid: one block per 256 / tw rows. */
template <typename T, int KPL>
__global__ void __launch_bounds__(PC_EM_THREADS)
    pc_em_product(pc_em_args a, int64_t n, int32_t g0, int32_t g1, const T *input, T *E,
                  const T *S) {
    const int tw = a.tw, lane = threadIdx.x % tw, K = a.K;
    const pc_em_row row = pc_em_row_of(n, g0, g1, tw);
    const int32_t g = row.g;
    const int64_t b = row.b, ch = a.chunk;
    const int32_t vb = a.var_start[g], ve = a.var_start[g + 1];
    const int32_t cb = a.child_start[g], ce = a.child_start[g + 1];
    double p[KPL];
    double m = 0;
#pragma unroll
    for (int i = 0; i < KPL; i++) {
        const int k = lane + i * tw;
        double v = k < K ? 1.0 : 0.0;
        if (k < K) {
            for (int32_t j = vb; j < ve; j++) {
                const int32_t var = a.vars[j];
                const int64_t x = a.xc[b * a.V + var];
                v *= pc_gpu_widen(input[((int64_t)var * (a.C + 1) + x) * K + k]);
            }
            for (int32_t j = cb; j < ce; j++)
                v *= pc_gpu_widen(S[((int64_t)a.children[j] * ch + b) * K + k]);
        }
        p[i] = v;
        m = fmax(m, v);
    }
    m = pc_em_max(m, tw);
    double inv1, inv2;
    const int ex = pc_em_scale(m, &inv1, &inv2);
    const bool root = g == a.G - 1;
    double z = 0;
#pragma unroll
    for (int i = 0; i < KPL; i++) {
        const int k = lane + i * tw;
        const T e = pc_gpu_narrow<T>(p[i] * inv1 * inv2);
        if (k < K) {
            if (row.live) E[((int64_t)g * ch + b) * K + k] = e;
            if (root) z += a.root_w[k] * pc_gpu_widen(e);
        }
    }
    z = pc_em_sum(z, tw); /* every lane shuffles: the rows of one warp may differ in `root` */
    if (!row.live || lane != 0) return;
    int32_t off = ex;
    for (int32_t j = cb; j < ce; j++) off += a.off[(int64_t)a.children[j] * ch + b];
    a.off[(int64_t)g * ch + b] = off;
    if (root) a.logp[b] = z > 0 ? (double)off * PC_EM_LN2 + log(z) : -INFINITY;
}

/* Posteriors of groups [g0, g1) into Q: the root's q(k) = w_k e_k / sum_j w_j e_j (0 when the
 * sum is 0), any other group's q = e u with u its row of U; then every child c's message in S
 * becomes a_c = q / s_c (0 where s_c = 0, which makes q = 0 there too). Q is U on the GEMM
 * path (q over u, E keeps e for the flows' GEMM) and E for the fused path's root (which has no
 * U); each thread reads its elements before it writes them. */
template <typename T, int KPL>
__global__ void __launch_bounds__(PC_EM_THREADS)
    pc_em_posterior(pc_em_args a, int64_t n, int32_t g0, int32_t g1, const T *E, T *S,
                    const T *U, T *Q) {
    const int tw = a.tw, lane = threadIdx.x % tw, K = a.K;
    const pc_em_row row = pc_em_row_of(n, g0, g1, tw);
    const int32_t g = row.g;
    const int64_t b = row.b, ch = a.chunk, at = ((int64_t)g * ch + b) * K;
    const bool root = g == a.G - 1;
    double q[KPL];
    double z = 0;
#pragma unroll
    for (int i = 0; i < KPL; i++) {
        const int k = lane + i * tw;
        q[i] = 0;
        if (k >= K) continue;
        if (root) {
            q[i] = a.root_w[k] * pc_gpu_widen(E[at + k]);
            z += q[i];
        } else {
            q[i] = pc_gpu_widen(E[at + k]) * pc_gpu_widen(U[at + k]);
        }
    }
    z = pc_em_sum(z, tw); /* every lane shuffles, as in pc_em_product */
    if (root) {
#pragma unroll
        for (int i = 0; i < KPL; i++) q[i] = z > 0 ? q[i] / z : 0.0;
    }
    if (!row.live) return;
    const int32_t cb = a.child_start[g], ce = a.child_start[g + 1];
#pragma unroll
    for (int i = 0; i < KPL; i++) {
        const int k = lane + i * tw;
        if (k >= K) continue;
        Q[at + k] = pc_gpu_narrow<T>(q[i]);
        for (int32_t j = cb; j < ce; j++) {
            T *s = S + ((int64_t)a.children[j] * ch + b) * K + k;
            const double sv = pc_gpu_widen(*s);
            *s = pc_gpu_narrow<T>(sv > 0 ? q[i] / sv : 0.0);
        }
    }
}

/* Rows [0, n) of the source (rows[i], or i when rows is NULL) gathered as codes: xc[i][v] =
 * x[v], or C where the value is missing; xct = the transpose [V][chunk]. Block (32, 8), one
 * 32 x 32 tile of (row, variable) through shared memory, so both writes are coalesced. */
static __global__ void pc_em_gather(pc_em_args a, int64_t n, const uint8_t *values,
                                    const uint8_t *missing, const int64_t *rows, uint16_t *xc,
                                    uint16_t *xct) {
    __shared__ uint16_t tile[32][33];
    const int64_t i0 = (int64_t)blockIdx.x * 32;
    const int32_t v0 = blockIdx.y * 32;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int r = ty; r < 32; r += 8) {
        const int64_t i = i0 + r;
        const int32_t v = v0 + tx;
        if (i < n && v < a.V) {
            const int64_t src = (rows ? rows[i] : i) * a.V + v;
            const uint16_t code = missing && missing[src] ? (uint16_t)a.C : values[src];
            tile[r][tx] = code;
            xc[i * a.V + v] = code;
        }
    }
    __syncthreads();
    for (int r = ty; r < 32; r += 8) {
        const int32_t v = v0 + r;
        const int64_t i = i0 + tx;
        if (i < n && v < a.V) xct[(int64_t)v * a.chunk + i] = tile[tx][r];
    }
}

/* A count in fixed point: value * scale rounded (value >= 0). */
static __device__ __forceinline__ unsigned long long pc_em_fixed(double value, double scale) {
    return (unsigned long long)(long long)(value * scale + 0.5);
}

/* Input flows: thread (v, segment of seg_rows = pc_em_input_seg rows, k) adds q_g(b, k) (g = v's group, Q the posteriors) over the
 * segment's rows to n_in[v][x_bv][k], one atomic per run of equal values (MNIST's background
 * makes long runs). Missing values count nowhere. */
template <typename T>
__global__ void __launch_bounds__(PC_EM_THREADS)
    pc_em_input_flows(pc_em_args a, int64_t n, int64_t seg_rows, const T *Q,
                      unsigned long long *n_in, const double *scale_ptr) {
    const int64_t segs = (n + seg_rows - 1) / seg_rows;
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)a.V * segs * a.K) return;
    const int32_t k = (int32_t)(idx % a.K);
    const int64_t rest = idx / a.K, seg = rest % segs;
    const int32_t v = (int32_t)(rest / segs);
    const double scale = *scale_ptr;
    const T *q = Q + (int64_t)a.var_group[v] * a.chunk * a.K + k;
    const uint16_t *code = a.xct + (int64_t)v * a.chunk;
    unsigned long long *out = n_in + (int64_t)v * a.C * a.K + k;
    const int64_t end = (seg + 1) * seg_rows < n ? (seg + 1) * seg_rows : n;
    int32_t cur = -1;
    double acc = 0;
    for (int64_t b = seg * seg_rows; b < end; b++) {
        const int32_t c = code[b];
        if (c == a.C) continue;
        if (c != cur) {
            if (cur >= 0) atomicAdd(out + (int64_t)cur * a.K, pc_em_fixed(acc, scale));
            cur = c;
            acc = 0;
        }
        acc += pc_gpu_widen(q[b * a.K]);
    }
    if (cur >= 0) atomicAdd(out + (int64_t)cur * a.K, pc_em_fixed(acc, scale));
}

/* Root flows: block k sums q_root(b, k) over the rows (thread t takes b = t, t + 256, ...,
 * then a fixed tree in shared memory) and adds it to n_root[k]. */
template <typename T>
__global__ void __launch_bounds__(PC_EM_THREADS)
    pc_em_root_flows(pc_em_args a, int64_t n, const T *Q, long long *n_root,
                     const double *scale_ptr) {
    __shared__ double part[PC_EM_THREADS];
    const int k = blockIdx.x;
    const T *q = Q + (int64_t)(a.G - 1) * a.chunk * a.K + k;
    double s = 0;
    for (int64_t b = threadIdx.x; b < n; b += PC_EM_THREADS) s += pc_gpu_widen(q[b * a.K]);
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = PC_EM_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) n_root[k] += (long long)pc_em_fixed(part[0], *scale_ptr);
}

/* Transition flows of a pass: n_tr[i] += W[i] F[i] in fixed point, W the FP64 parameters. */
template <typename T>
__global__ void pc_em_trans_flows(int64_t total, const T *F, const double *w, long long *n_tr,
                                  const double *scale_ptr) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) n_tr[i] += (long long)pc_em_fixed(w[i] * pc_gpu_widen(F[i]), *scale_ptr);
}

/* One parameter's M-step: est = (count / scale + prior) / denom, p <- (1 - step) p + step est;
 * p is kept when denom (the distribution's total plus the pseudocount) is 0. */
static __device__ __forceinline__ double pc_em_blend(double p, long long count, double inv_scale,
                                                     double prior, double denom, double step) {
    if (!(denom > 0)) return p;
    const double est = ((double)count * inv_scale + prior) / denom;
    return (1 - step) * p + step * est;
}

/* M-step of one distribution p [size] (entries `stride` apart) from fixed-point counts n (same
 * layout), which it clears: est = (N + alpha / size) / (sum N + alpha), p <- (1 - step) p +
 * step est; p is kept when sum N + alpha is 0. The sum runs in index order, as on the CPU. */
static __device__ void pc_em_update_dist(double *p, long long *n, int64_t size, int64_t stride,
                                         double inv_scale, double step, double pseudocount) {
    double total = 0;
    for (int64_t i = 0; i < size; i++) total += (double)n[i * stride] * inv_scale;
    const double denom = total + pseudocount, prior = pseudocount / (double)size;
    for (int64_t i = 0; i < size; i++) {
        p[i * stride] = pc_em_blend(p[i * stride], n[i * stride], inv_scale, prior, denom, step);
        n[i * stride] = 0;
    }
}

/* Parameters after the counts, and their copies in the compute type (copy NULL: the
 * parameters are the copy). Root: one thread. Transitions: a warp per row (g, j) of
 * [G - 1][K][K]. Inputs [V][C + 1][K] over c < C (counts [V][C][K]): see pc_em_update_input. */
struct pc_em_update_args {
    double inv_scale, step, pseudocount;
    int32_t V, C, K;
    int64_t trans_rows;
};

static __global__ void pc_em_update_root(pc_em_update_args u, double *root, long long *n) {
    pc_em_update_dist(root, n, u.K, 1, u.inv_scale, u.step, u.pseudocount);
}

/* Transitions, a warp per row: lanes take k = lane, lane + 32, ..., so every load and store
 * is coalesced. A thread per row walked its K counts at a stride of K (uncoalesced) three
 * times: 388 us of a 15.8 ms step at K = 128 (70,272 rows of 128, ncu, H200). The row's total
 * is summed exactly in int64, as pc_em_update_input's are (any order, the same bits), and
 * converted once. */
template <typename T>
__global__ void __launch_bounds__(PC_EM_THREADS)
    pc_em_update_trans(pc_em_update_args u, double *w, T *copy, long long *n) {
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (row >= u.trans_rows) return; /* warp-uniform: a warp's lanes share the row */
    double *p = w + row * u.K;
    long long *nr = n + row * u.K;
    long long sum = 0;
    for (int32_t k = lane; k < u.K; k += 32) sum += nr[k];
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const double denom = (double)sum * u.inv_scale + u.pseudocount;
    const double prior = u.pseudocount / (double)u.K;
    for (int32_t k = lane; k < u.K; k += 32) {
        p[k] = pc_em_blend(p[k], nr[k], u.inv_scale, prior, denom, u.step);
        nr[k] = 0;
        if (copy) copy[row * u.K + k] = pc_gpu_narrow<T>(p[k]);
    }
}

/* Inputs: a block per (variable v, tile of tk = min(K, 32) states), grid (V, K / tk), threads
 * (tk states) x (256 / tk slices of the categories). A thread per (v, k) over all C = 256
 * categories, as the root and transitions are updated, had 12,544 threads at K = 16 walking
 * three loops of 256 dependent steps; this form took the K = 16 batch-512 step from 0.935 to
 * 0.719 ms (FP64) and from 1.062 to 0.774 ms (FP32) on an H200. Each (v, k)'s total is summed
 * exactly in int64 (n * scale < 2^62 bounds it, so any order gives the same bits) and converted
 * once, where the CPU sums the converted counts in index order: the two differ in the last bit
 * of a total at most. */
template <typename T>
__global__ void __launch_bounds__(PC_EM_THREADS)
    pc_em_update_input(pc_em_update_args u, double *in, T *copy, long long *n) {
    __shared__ long long part[PC_EM_THREADS];
    const int tk = blockDim.x, slices = blockDim.y;
    const int64_t v = blockIdx.x, k = (int64_t)blockIdx.y * tk + threadIdx.x;
    const bool live = k < u.K;
    long long *nv = n + v * u.C * u.K + k;
    long long sum = 0;
    if (live)
        for (int64_t c = threadIdx.y; c < u.C; c += slices) sum += nv[c * u.K];
    part[threadIdx.y * tk + threadIdx.x] = sum;
    __syncthreads();
    long long total = 0;
    for (int s = 0; s < slices; s++) total += part[s * tk + threadIdx.x];
    if (!live) return;
    const double denom = (double)total * u.inv_scale + u.pseudocount;
    const double prior = u.pseudocount / (double)u.C;
    double *p = in + v * (u.C + 1) * u.K + k;
    for (int64_t c = threadIdx.y; c < u.C; c += slices) {
        p[c * u.K] = pc_em_blend(p[c * u.K], nv[c * u.K], u.inv_scale, prior, denom, u.step);
        nv[c * u.K] = 0;
        if (copy) copy[(v * (u.C + 1) + c) * u.K + k] = pc_gpu_narrow<T>(p[c * u.K]);
    }
}

#endif
