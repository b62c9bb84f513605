/* Token log-probabilities on the GPU: logprob[r] = x[r, y_r] - LSE(x[r, :]), one read of every
 * logit.
 *
 * Mapping. x is [rows, stride]; a row is cut into `chunks` equal pieces and each (row, piece)
 * is one block of LP_THREADS threads (flattened: block = row * chunks + piece). With chunks == 1
 * the block finishes the row itself; otherwise every block writes its piece's (max, sum) to
 * scratch and a second kernel, one warp per row, merges the pieces and picks the target. The
 * host picks `chunks` from the shape with a wave model (choose_chunks): many rows -> one block
 * per row; few rows -> split rows until the H200's 132 SMs x 4 resident blocks are busy, without
 * making pieces so small that block start-up dominates.
 *
 * Per thread, an online (max, sum) in FP32: each step takes 2 vectors (2 x 16 bytes: 8 f32 or
 * 16 bf16 logits), folds their max into the running max once, and adds exp2((x - m) * log2 e)
 * per logit (FADD, FMUL, EX2). The rescale of the old sum costs one EX2 per step. Subtracting
 * before scaling keeps logits near +-FLT_MAX finite (x * log2 e would overflow). Pieces start
 * anywhere (odd vocabularies such as 50257 misalign rows), so each piece runs a scalar head up
 * to 16-byte alignment, the vector body, then a scalar tail.
 *
 * Special values: fmaxf drops NaN, so a per-thread flag records NaN; a +inf max makes the sum
 * NaN, which finish() never looks at because the +inf rule decides the row first.
 */
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "base/cuda_check.cuh"
#include "base/fail.h"
#include "logprob/logprob_internal.h"

#define LP_THREADS 512
#define LP_WARPS (LP_THREADS / 32)
#define LP_UNROLL 2
/* A piece is never cut below this many bytes (about 4 logits per thread). */
#define LP_MIN_PIECE_BYTES 8192
/* Wave model: the cost of starting a block, and of the extra combine kernel, in bytes of reading
 * one resident block would do meanwhile (2 us at 4.3 TB/s over 528 resident blocks ~ 16 KB). */
#define LP_BLOCK_COST_BYTES 8192
#define LP_COMBINE_COST_BYTES 16384
#define LP_COMBINE_THREADS 256
#define LP_LOG2E 1.4426950408889634f
#define LP_LN2 0.6931471805599453f

namespace {

struct Acc {
    float m;  /* running max, natural units; -inf before the first finite logit */
    float s;  /* sum of exp(x - m) */
    int nan;  /* a NaN was seen */
};

__device__ __forceinline__ float shift_of(float m) { return m == -INFINITY ? 0.0f : m; }

/* Folds n logits v[0:n] into a: one rescale of the old sum, one EX2 per logit. */
template <int N>
__device__ __forceinline__ void fold(Acc &a, const float (&v)[N]) {
    float vm = v[0];
    int nan = v[0] != v[0];
#pragma unroll
    for (int i = 1; i < N; i++) {
        vm = fmaxf(vm, v[i]);
        nan |= v[i] != v[i];
    }
    float mn = fmaxf(a.m, vm), sh = shift_of(mn);
    float s = a.s * exp2f((a.m - sh) * LP_LOG2E);
#pragma unroll
    for (int i = 0; i < N; i++) s += exp2f((v[i] - sh) * LP_LOG2E);
    a.m = mn;
    a.s = s;
    a.nan |= nan;
}

__device__ __forceinline__ Acc merge(Acc a, Acc b) {
    float mn = fmaxf(a.m, b.m), sh = shift_of(mn);
    Acc r;
    r.m = mn;
    r.s = a.s * exp2f((a.m - sh) * LP_LOG2E) + b.s * exp2f((b.m - sh) * LP_LOG2E);
    r.nan = a.nan | b.nan;
    return r;
}

__device__ __forceinline__ Acc warp_merge(Acc a) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        Acc b;
        b.m = __shfl_xor_sync(0xffffffffu, a.m, off);
        b.s = __shfl_xor_sync(0xffffffffu, a.s, off);
        b.nan = __shfl_xor_sync(0xffffffffu, a.nan, off);
        a = merge(a, b);
    }
    return a;
}

/* The header's rules, from the row's summary and its target logit (NaN when out of range). */
__device__ __forceinline__ float finish(Acc a, float xt) {
    if (a.nan || xt != xt) return NAN;
    if (a.m == INFINITY) return xt == INFINITY ? NAN : -INFINITY;
    if (a.m == -INFINITY) return NAN;
    if (xt == -INFINITY) return -INFINITY;
    return (xt - a.m) - __log2f(a.s) * LP_LN2;
}

/* Element types: f32 (4 per 16-byte vector) and bf16 as raw uint16 (8 per vector). */
template <typename T> struct Elem;
template <> struct Elem<float> {
    static constexpr int kVec = 4;
    static constexpr uint32_t kNegInf = 0xff800000u; /* a 32-bit word of -inf logits */
    __device__ static float get(const float *p) { return __ldg(p); }
    __device__ static void unpack(uint4 r, float (&v)[4]) {
        v[0] = __uint_as_float(r.x), v[1] = __uint_as_float(r.y);
        v[2] = __uint_as_float(r.z), v[3] = __uint_as_float(r.w);
    }
};
template <> struct Elem<uint16_t> {
    static constexpr int kVec = 8;
    static constexpr uint32_t kNegInf = 0xff80ff80u;
    __device__ static float get(const uint16_t *p) { return __uint_as_float((uint32_t)__ldg(p) << 16); }
    __device__ static void unpack(uint4 r, float (&v)[8]) {
        const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = __uint_as_float(w[i] << 16);
            v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
};

/* Reads the target logit of `row`, or NaN when the target is outside [0, vocab). */
template <typename T>
__device__ __forceinline__ float target_logit(const T *x, int64_t row, int64_t vocab, int64_t stride,
                                              const int64_t *targets) {
    int64_t t = targets[row];
    return t >= 0 && t < vocab ? Elem<T>::get(x + row * stride + t) : NAN;
}

/* One block per (row, piece). chunks == 1: writes out[row]; else writes part[block]. */
template <typename T>
__global__ void __launch_bounds__(LP_THREADS)
logprob_pieces(const T *__restrict__ x, int64_t vocab, int64_t stride, int chunks, int64_t piece,
               const int64_t *__restrict__ targets, float *__restrict__ out,
               float2 *__restrict__ part) {
    constexpr int V = Elem<T>::kVec;
    const int64_t row = blockIdx.x / chunks;
    const int64_t c0 = (int64_t)(blockIdx.x % chunks) * piece;
    const int64_t n = min(piece, vocab - c0);
    const T *p = x + row * stride + c0;

    Acc a = {-INFINITY, 0.0f, 0};
    int64_t head = (int64_t)((16 - ((uintptr_t)p & 15)) & 15) / (int64_t)sizeof(T);
    head = min(head, max(n, (int64_t)0));
    const int64_t nvec = (n - head) / V;
    const uint4 *body = reinterpret_cast<const uint4 *>(p + head);
    for (int64_t i = head + nvec * V + threadIdx.x; i < n; i += LP_THREADS) {
        float v[1] = {Elem<T>::get(p + i)};
        fold(a, v);
    }
    if (threadIdx.x < head) {
        float v[1] = {Elem<T>::get(p + threadIdx.x)};
        fold(a, v);
    }
    for (int64_t i = threadIdx.x; i < nvec; i += LP_UNROLL * LP_THREADS) {
        float v[LP_UNROLL * V];
        uint4 r[LP_UNROLL];
#pragma unroll
        for (int u = 0; u < LP_UNROLL; u++) {
            const int64_t j = i + u * LP_THREADS;
            constexpr uint32_t z = Elem<T>::kNegInf; /* past the end: -inf adds nothing */
            r[u] = j < nvec ? __ldg(body + j) : make_uint4(z, z, z, z);
        }
#pragma unroll
        for (int u = 0; u < LP_UNROLL; u++) {
            float w[V];
            Elem<T>::unpack(r[u], w);
#pragma unroll
            for (int k = 0; k < V; k++) v[u * V + k] = w[k];
        }
        fold(a, v);
    }

    __shared__ Acc warp_acc[LP_WARPS];
    a = warp_merge(a);
    if ((threadIdx.x & 31) == 0) warp_acc[threadIdx.x >> 5] = a;
    __syncthreads();
    if (threadIdx.x >= 32) return;
    a = threadIdx.x < LP_WARPS ? warp_acc[threadIdx.x] : Acc{-INFINITY, 0.0f, 0};
    a = warp_merge(a);
    if (threadIdx.x != 0) return;
    if (chunks == 1) out[row] = finish(a, target_logit(x, row, vocab, stride, targets));
    else part[blockIdx.x] = make_float2(a.nan ? NAN : a.m, a.s);
}

/* One warp per row: merges the row's `chunks` pieces, then picks the target. */
template <typename T>
__global__ void __launch_bounds__(LP_COMBINE_THREADS)
logprob_combine(const T *__restrict__ x, int64_t rows, int64_t vocab, int64_t stride, int chunks,
                const int64_t *__restrict__ targets, const float2 *__restrict__ part,
                float *__restrict__ out) {
    const int64_t row = (int64_t)blockIdx.x * (LP_COMBINE_THREADS / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    Acc a = {-INFINITY, 0.0f, 0};
    for (int c = lane; c < chunks; c += 32) {
        float2 q = part[row * chunks + c];
        Acc b = {q.x != q.x ? -INFINITY : q.x, q.y, q.x != q.x};
        a = merge(a, b);
    }
    a = warp_merge(a);
    if (lane == 0) out[row] = finish(a, target_logit(x, row, vocab, stride, targets));
}

/* Resident blocks of logprob_pieces on the current device (SMs x blocks per SM), cached. */
pc_status resident_blocks(int *blocks) {
    static std::atomic<int> cache[64];
    pc_status st = PC_OK;
    int dev = 0, sms = 0, per_sm = 0;
    PC_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev >= 64)
        return pc_fail(PC_ERR_UNSUPPORTED, "logprob: device %d: at most 64 GPUs are supported", dev);
    *blocks = cache[dev].load(std::memory_order_relaxed);
    if (*blocks > 0) return PC_OK;
    PC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    PC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, logprob_pieces<float>,
                                                                LP_THREADS, 0));
    if (sms <= 0 || per_sm <= 0)
        return pc_fail(PC_ERR_CUDA, "logprob: the GPU reports %d SMs, %d blocks per SM", sms,
                       per_sm);
    *blocks = sms * per_sm;
    cache[dev].store(*blocks, std::memory_order_relaxed);
fail:
    return st;
}

/* Pieces per row that minimise the modelled time: waves of resident blocks times the bytes one
 * block reads plus its start-up cost, plus the combine kernel when rows are split. */
int choose_chunks(int64_t rows, int64_t vocab, size_t esize, int slots) {
    int64_t max_chunks = ((int64_t)vocab * (int64_t)esize + LP_MIN_PIECE_BYTES - 1) / LP_MIN_PIECE_BYTES;
    if (max_chunks < 1) max_chunks = 1;
    if (max_chunks > 1024) max_chunks = 1024;
    int best = 1;
    double best_cost = 0.0;
    for (int64_t c = 1; c <= max_chunks; c++) {
        int64_t waves = (rows * c + slots - 1) / slots;
        double piece_bytes = (double)((vocab + c - 1) / c) * (double)esize;
        double cost = (double)waves * (piece_bytes + LP_BLOCK_COST_BYTES) + (c > 1 ? LP_COMBINE_COST_BYTES : 0);
        if (c == 1 || cost < best_cost) best = (int)c, best_cost = cost;
        if (rows * c >= 64LL * slots) break; /* already many waves: splitting more only adds cost */
    }
    return best;
}

template <typename T>
pc_status launch(const T *x, int64_t rows, int64_t vocab, int64_t stride, const int64_t *targets,
                 float *out, float2 *part, int chunks, cudaStream_t stream) {
    /* Pieces are a multiple of 8 logits so that consecutive pieces of a row keep the row's
     * alignment pattern; only the row start and the piece ends need scalar code. */
    int64_t piece = (vocab + chunks - 1) / chunks;
    piece = (piece + 7) / 8 * 8;
    chunks = (int)((vocab + piece - 1) / piece);
    pc_status st = PC_OK;
    logprob_pieces<T><<<(unsigned)(rows * chunks), LP_THREADS, 0, stream>>>(x, vocab, stride, chunks, piece,
                                                                            targets, out, part);
    PC_CUDA_CHECK(cudaGetLastError());
    if (chunks > 1) {
        const int per_block = LP_COMBINE_THREADS / 32;
        logprob_combine<T><<<(unsigned)((rows + per_block - 1) / per_block), LP_COMBINE_THREADS, 0, stream>>>(
            x, rows, vocab, stride, chunks, targets, part, out);
        PC_CUDA_CHECK(cudaGetLastError());
    }
fail:
    return st;
}

} /* namespace */

extern "C" pc_status pc_logprob_rows_cuda(pc_lse_kernel kernel, pc_dtype dtype, const void *d_logits,
                                          int64_t rows, int64_t vocab, int64_t stride,
                                          const int64_t *d_targets, float *d_out, void *d_scratch,
                                          size_t *scratch_bytes, pc_stream stream) {
    if (kernel != PC_LSE_FUSE)
        return pc_fail(PC_ERR_ARG, "logprob: kernel %s is not offered on the GPU (fuse is)",
                       pc_lse_kernel_name(kernel));
    if (!scratch_bytes) return pc_fail(PC_ERR_ARG, "logprob: scratch_bytes is NULL");
    pc_status st = pc_logprob_check_args(dtype, d_logits, rows, vocab, stride, d_targets, d_out);
    if (st != PC_OK) return st;
    if (rows > ((int64_t)1 << 31) - 1)
        return pc_fail(PC_ERR_ARG, "logprob: rows = %lld exceeds the grid limit 2^31 - 1", (long long)rows);
    size_t esize = pc_dtype_size(dtype);
    int chunks = 1;
    if (rows > 0) {
        int slots = 0;
        if ((st = resident_blocks(&slots))) return st;
        chunks = choose_chunks(rows, vocab, esize, slots);
        if (rows * chunks > ((int64_t)1 << 31) - 1) chunks = 1;
    }
    size_t need = chunks > 1 ? (size_t)rows * (size_t)chunks * sizeof(float2) : 16;
    if (!d_scratch) {
        *scratch_bytes = need;
        return PC_OK;
    }
    if (*scratch_bytes < need)
        return pc_fail(PC_ERR_ARG, "logprob: scratch holds %zu bytes, the shape needs %zu", *scratch_bytes, need);
    if (rows == 0) return PC_OK;
    cudaStream_t s = (cudaStream_t)stream;
    float2 *part = (float2 *)d_scratch;
    if (dtype == PC_F32)
        return launch((const float *)d_logits, rows, vocab, stride, d_targets, d_out, part, chunks, s);
    return launch((const uint16_t *)d_logits, rows, vocab, stride, d_targets, d_out, part, chunks, s);
}
