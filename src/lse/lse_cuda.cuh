/* Device-side pieces shared by the CUDA LSE kernels (lse_cuda_rows.cu, lse_cuda_weighted.cu):
 * the per-thread states of `fuse` and `int`, how one chunk of loaded values enters a state, how
 * two states merge, and how a state becomes the final natural-log value.
 *
 * Every state is a partial LSE over some elements of a row; merging is associative, so threads,
 * warps, blocks and the split-row combine step all use the same merge. Edge cases (NaN, +-inf,
 * finite values near FLT_MAX) are carried inside the states, so every mapping handles them the
 * same way.
 */
#ifndef PC_LSE_CUDA_CUH
#define PC_LSE_CUDA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "lse/lse_int.h"
#include "pc/status.h"

namespace pclse {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/* ---- loading: 16-byte vectors of each input type, converted to float or int -------------- */

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

/* Unpacks one 16-byte vector into VE = 16 / sizeof(T) values. */
__device__ __forceinline__ void unpack(uint4 u, float *v, const float *) {
    v[0] = __uint_as_float(u.x), v[1] = __uint_as_float(u.y);
    v[2] = __uint_as_float(u.z), v[3] = __uint_as_float(u.w);
}
__device__ __forceinline__ void unpack(uint4 u, float *v, const __half *) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&w[i]));
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
}
__device__ __forceinline__ void unpack(uint4 u, float *v, const __nv_bfloat16 *) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&w[i]));
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
}
__device__ __forceinline__ void unpack(uint4 u, int32_t *v, const int16_t *) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[2 * i] = (int16_t)(w[i] & 0xffffu);
        v[2 * i + 1] = (int16_t)(w[i] >> 16);
    }
}

/* ---- fuse: online (max, sum) in base 2 -----------------------------------------------------
 * State: m = the largest element seen (natural units; -inf when none), o = the offset in log2
 * units that s is relative to, s = sum_i 2^(x_i * log2e - o).
 *   |m| <= 2^29 (every ordinary input): o = fl(m * log2e), and each element costs one FFMA and
 *     one EX2: 2^fma(x, log2e, -o). The FFMA sees the exact product x * log2e, so the rounding
 *     of o cancels in the final o + log2(s); it leaves a factor 2^r in s with |r| <= ulp(o)/2
 *     <= 32, far from float's range limits.
 *   |m| > 2^29 ("wide" rows, values up to FLT_MAX): ulp(o) would make 2^r overflow, so o is
 *     +inf as a mark, s is relative to m itself (terms 2^((x - m) log2e), one more FADD) and the
 *     result is m + ln(s).
 *   m = +-inf: o = 0; the result is m (or NaN).
 * err(m, o) = o - m * log2e, exact through an FMA, lets s move between any two offsets. */
struct FuseState {
    float m, o, s;
};

constexpr float kFuseWide = 536870912.0f; /* 2^29 */

__host__ __device__ __forceinline__ float fuse_offset(float m) {
    if (m == -INFINITY || m == INFINITY) return 0.0f;
    return fabsf(m) <= kFuseWide ? m * kLog2e : INFINITY;
}

__host__ __device__ __forceinline__ float fuse_err(float m, float o) {
    return o == INFINITY || m == INFINITY || m == -INFINITY ? 0.0f : -fmaf(m, kLog2e, -o);
}

/* s relative to the offset of (m1, o1) moved to that of (m2, o2), m2 >= m1. A zero sum stays
 * zero (its old offset may be infinite); NaN stays NaN; m2 = +inf sends finite sums to 0. */
__host__ __device__ __forceinline__ float fuse_rescale(float s, float m1, float o1, float m2, float o2) {
    if (s == 0.0f || m1 == m2) return s;
    return s * exp2f((m1 - m2) * kLog2e + (fuse_err(m1, o1) - fuse_err(m2, o2)));
}

__host__ __device__ __forceinline__ FuseState fuse_init() { return FuseState{-INFINITY, 0.0f, 0.0f}; }

/* Pairwise (tree) max and sum of N values (N a power of two): short dependency chains keep the
 * FP32 pipes busy where a serial chain of N FADDs would stall each warp. One template level per
 * tree level, so the arrays stay in registers whatever the unroller decides (a level loop was
 * left rolled in the block kernel and put them in local memory). */
template <int H>
__host__ __device__ __forceinline__ float tree_max(float *v) {
    if constexpr (H <= 1) {
        return v[0];
    } else {
#pragma unroll
        for (int i = 0; i < H / 2; i++) v[i] = fmaxf(v[i], v[i + H / 2]);
        return tree_max<H / 2>(v);
    }
}
template <int H>
__host__ __device__ __forceinline__ float tree_sum(float *v) {
    if constexpr (H <= 1) {
        return v[0];
    } else {
#pragma unroll
        for (int i = 0; i < H / 2; i++) v[i] += v[i + H / 2];
        return tree_sum<H / 2>(v);
    }
}

template <int N>
__host__ __device__ __forceinline__ void fuse_add(FuseState &st, const float *v) {
    float t[N];
#pragma unroll
    for (int i = 0; i < N; i++) t[i] = v[i];
    const float m = fmaxf(st.m, tree_max<N>(t)); /* fmaxf ignores NaN; NaN reaches s through its term */
    if (m != st.m) {
        const float o = fuse_offset(m);
        st.s = fuse_rescale(st.s, st.m, st.o, m, o);
        st.o = o, st.m = m;
    }
    if (st.o != INFINITY) {
#pragma unroll
        for (int i = 0; i < N; i++) t[i] = exp2f(fmaf(v[i], kLog2e, -st.o));
    } else {
#pragma unroll
        for (int i = 0; i < N; i++) t[i] = exp2f((v[i] - st.m) * kLog2e);
    }
    st.s += tree_sum<N>(t);
}

__host__ __device__ __forceinline__ FuseState fuse_merge(FuseState a, FuseState b) {
    const float m = fmaxf(a.m, b.m), o = fuse_offset(m);
    return FuseState{m, o, fuse_rescale(a.s, a.m, a.o, m, o) + fuse_rescale(b.s, b.m, b.o, m, o)};
}

__host__ __device__ __forceinline__ float fuse_final(FuseState st) {
    if (st.s != st.s) return NAN;
    if (st.m == INFINITY || st.m == -INFINITY) return st.m;
    if (st.o == INFINITY) return st.m + log2f(st.s) * kLn2;
    return (st.o + log2f(st.s)) * kLn2;
}

/* ---- int on float input: (float max, Q16.16 LSE relative to it) ----------------------------
 * One read of the data: each thread takes a chunk of 8 values, shifts them by the chunk's own
 * float max, converts to Q16.16 and combines them as a balanced tree (pc_int_lse2). Chunk
 * results (cm, q) fold into the thread's (m, q) by moving both to the larger max: the
 * difference of the two float maxima is converted once (exact when they are equal, clamped at
 * PC_INT_FLOOR when far apart). Threads, warps, blocks and split rows merge the same way, as
 * butterfly trees. NaN is a flag; m carries -inf / +inf. */
struct IntState {
    float m;
    int32_t q;
    int32_t nan;
};

__host__ __device__ __forceinline__ IntState int_init() { return IntState{-INFINITY, PC_INT_FLOOR, 0}; }

/* Balanced tree over v[0:N] (N a power of two), pairing v[i] with v[i + N/2] like pc_int_tree. */
template <int N>
__host__ __device__ __forceinline__ int32_t int_tree(int32_t *v, const int32_t *table) {
    if constexpr (N <= 1) {
        return v[0];
    } else {
#pragma unroll
        for (int i = 0; i < N / 2; i++) v[i] = pc_int_lse2(v[i], v[i + N / 2], table);
        return int_tree<N / 2>(v, table);
    }
}

/* q (relative to max `from`) moved to the larger max `to`, clamped at the floor. */
__host__ __device__ __forceinline__ int32_t int_move(int32_t q, float from, float to) {
    if (from == to) return q;
    int32_t d = pc_int_from_shifted(from - to); /* -inf, NaN (inf - inf) -> floor */
    int32_t r = q + d;
    return r > PC_INT_FLOOR ? r : PC_INT_FLOOR;
}

__host__ __device__ __forceinline__ IntState int_merge(IntState a, IntState b, const int32_t *table) {
    float m = fmaxf(a.m, b.m);
    int32_t qa = int_move(a.q, a.m, m), qb = int_move(b.q, b.m, m);
    return IntState{m, pc_int_lse2(qa, qb, table), a.nan | b.nan};
}

template <int N>
__host__ __device__ __forceinline__ void int_add(IntState &st, const float *v, const int32_t *table) {
    float cm = v[0];
    int32_t nan = 0;
#pragma unroll
    for (int i = 1; i < N; i++) cm = fmaxf(cm, v[i]);
    int32_t q[N];
#pragma unroll
    for (int i = 0; i < N; i++) {
        nan |= v[i] != v[i];
        q[i] = pc_int_from_shifted(v[i] - cm); /* -inf and NaN differences -> floor */
    }
    IntState c{cm, int_tree<N>(q, table), nan};
    st = int_merge(st, c, table);
}

__host__ __device__ __forceinline__ float int_final(IntState st) {
    if (st.nan) return NAN;
    if (st.m == INFINITY || st.m == -INFINITY) return st.m;
    return st.m + (float)((double)st.q * PC_INT_UNIT_NATS);
}

/* ---- int on q10.6 input: exact integer maxima ----------------------------------------------
 * Values are base-2 logs with 6 fraction bits, so moving to Q16.16 is a shift by 10 and moving
 * between maxima is exact. INT16_MIN is -inf and contributes nothing. */
struct IntQState {
    int32_t m; /* INT16_MIN: no finite element yet */
    int32_t q;
};

__host__ __device__ __forceinline__ IntQState intq_init() { return IntQState{INT16_MIN, PC_INT_FLOOR}; }

__host__ __device__ __forceinline__ int32_t intq_move(int32_t q, int32_t from, int32_t to) {
    if (from == to) return q;
    int32_t r = from == INT16_MIN ? PC_INT_FLOOR : q + (from - to) * 1024;
    return r > PC_INT_FLOOR ? r : PC_INT_FLOOR;
}

__host__ __device__ __forceinline__ IntQState intq_merge(IntQState a, IntQState b, const int32_t *table) {
    int32_t m = max(a.m, b.m);
    return IntQState{m, pc_int_lse2(intq_move(a.q, a.m, m), intq_move(b.q, b.m, m), table)};
}

template <int N>
__host__ __device__ __forceinline__ void intq_add(IntQState &st, const int32_t *v, const int32_t *table) {
    int32_t cm = v[0];
#pragma unroll
    for (int i = 1; i < N; i++) cm = max(cm, v[i]);
    int32_t q[N];
#pragma unroll
    for (int i = 0; i < N; i++) q[i] = v[i] == INT16_MIN ? PC_INT_FLOOR : (v[i] - cm) * 1024;
    IntQState c{cm, cm == INT16_MIN ? PC_INT_FLOOR : int_tree<N>(q, table)};
    st = intq_merge(st, c, table);
}

__host__ __device__ __forceinline__ float intq_final(IntQState st) {
    if (st.m == INT16_MIN) return -INFINITY;
    return (float)(((double)st.m * 1024.0 + (double)st.q) * PC_INT_UNIT_NATS);
}

/* Kernels copy the correction table of lse_int.h (filled on the host by pc_int_table_fill and
 * uploaded once per device, see pc_lse_cuda_table) into shared memory, where the data-dependent
 * lookups are cheap. */
__device__ __forceinline__ void load_table(int32_t *s_table, const int32_t *d_table) {
    for (int i = threadIdx.x; i < PC_INT_TABLE_LEN; i += blockDim.x) s_table[i] = d_table[i];
    __syncthreads();
}

} // namespace pclse

/* Host: the correction table on the current device, uploaded on first use (a synchronous copy
 * the first time per device). */
pc_status pc_lse_cuda_table(const int32_t **d_table);

/* Host: the number of SMs of the current device (cached per device). */
pc_status pc_lse_cuda_sm_count(int *sms);

#endif
