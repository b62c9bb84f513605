/* Row-wise LSE on the GPU (pc_lse_rows_cuda): fuse on f32/f16/bf16, int on f32/q10.6.
 *
 * Mapping, chosen on the host from the shape and the SM count (no per-shape compilation):
 *   - at most 4 16-byte vectors per row (N <= 16 f32):   2 threads per row  (rows_group<P, 2>)
 *   - at most 16 vectors (N <= 64 f32):                   8 threads per row  (rows_group<P, 8>)
 *   - at most 256 vectors (N <= 1024 f32):                one warp per row   (rows_group<P, 32>)
 *   - longer rows: a block of 256 threads per (row, segment) (rows_block). Rows are cut into
 *     `segs` segments when they fill less than a fifth of the resident block slots (B = 8,
 *     N = 128256; B = 1, N = 4M; not B = 512, N = 128256); each segment leaves its partial
 *     state in the caller's scratch and rows_combine merges them, one warp per row.
 * Each row is read once: a scalar head up to the first 16-byte boundary, 16-byte vector loads
 * (U of them in flight per thread in rows_group, UB in rows_block), a scalar tail. Inputs larger
 * than L2 are read with evict-first (streaming) loads, so they do not push out what later
 * kernels will read again. States merge as butterflies across threads
 * and warps, so `int` never folds long sequences. */
#include <atomic>
#include <mutex>

#include "base/cuda_check.cuh"
#include "base/fail.h"
#include "lse/lse_cuda.cuh"
#include "pc/lse.h"

using namespace pclse;

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kBlock = 256;     /* threads per block in every row kernel */
constexpr int kMaxDevices = 64; /* per-device caches */

/* ---- policies: how a state is built, merged, shuffled and parked in scratch --------------- */

__device__ __forceinline__ FuseState shfl_xor(FuseState s, int mask, int width) {
    return FuseState{__shfl_xor_sync(kFull, s.m, mask, width), __shfl_xor_sync(kFull, s.o, mask, width),
                     __shfl_xor_sync(kFull, s.s, mask, width)};
}
__device__ __forceinline__ IntState shfl_xor(IntState s, int mask, int width) {
    return IntState{__shfl_xor_sync(kFull, s.m, mask, width), __shfl_xor_sync(kFull, s.q, mask, width),
                    __shfl_xor_sync(kFull, s.nan, mask, width)};
}
__device__ __forceinline__ IntQState shfl_xor(IntQState s, int mask, int width) {
    return IntQState{__shfl_xor_sync(kFull, s.m, mask, width), __shfl_xor_sync(kFull, s.q, mask, width)};
}

/* fuse with input T; U vectors of 16 bytes are loaded before they are used (UB in rows_block:
 * long rows that may not fill the GPU, where more loads in flight per thread hide latency). */
template <class T, int U_, int UB_>
struct FuseP {
    using In = T;
    using Val = float;
    using State = FuseState;
    static constexpr int VE = 16 / sizeof(T), U = U_, UB = UB_;
    static constexpr bool kTable = false;
    __device__ static State init() { return fuse_init(); }
    template <int N>
    __device__ static void add(State &st, const Val *v, const int32_t *) { fuse_add<N>(st, v); }
    __device__ static State merge(State a, State b, const int32_t *) { return fuse_merge(a, b); }
    __device__ static float final(State st) { return fuse_final(st); }
    __device__ static Val scalar(T x) { return to_float(x); }
    __device__ static uint2 pack(State st) { return make_uint2(__float_as_uint(st.m), __float_as_uint(st.s)); }
    __device__ static State unpack(uint2 u) {
        float m = __uint_as_float(u.x);
        return FuseState{m, fuse_offset(m), __uint_as_float(u.y)};
    }
};

/* int on f32: chunks of 8 values (two vectors) enter the state as one tree. */
struct IntP {
    using In = float;
    using Val = float;
    using State = IntState;
    static constexpr int VE = 4, U = 2, UB = 2;
    static constexpr bool kTable = true;
    __device__ static State init() { return int_init(); }
    template <int N>
    __device__ static void add(State &st, const Val *v, const int32_t *t) { int_add<N>(st, v, t); }
    __device__ static State merge(State a, State b, const int32_t *t) { return int_merge(a, b, t); }
    __device__ static float final(State st) { return int_final(st); }
    __device__ static Val scalar(float x) { return x; }
    /* NaN travels as a NaN maximum. */
    __device__ static uint2 pack(State st) {
        return make_uint2(__float_as_uint(st.nan ? NAN : st.m), (uint32_t)st.q);
    }
    __device__ static State unpack(uint2 u) {
        float m = __uint_as_float(u.x);
        int nan = m != m;
        return IntState{nan ? -INFINITY : m, (int32_t)u.y, nan};
    }
};

/* int on q10.6: chunks of 16 values (two vectors). */
struct IntQP {
    using In = int16_t;
    using Val = int32_t;
    using State = IntQState;
    static constexpr int VE = 8, U = 2, UB = 2;
    static constexpr bool kTable = true;
    __device__ static State init() { return intq_init(); }
    template <int N>
    __device__ static void add(State &st, const Val *v, const int32_t *t) { intq_add<N>(st, v, t); }
    __device__ static State merge(State a, State b, const int32_t *t) { return intq_merge(a, b, t); }
    __device__ static float final(State st) { return intq_final(st); }
    __device__ static Val scalar(int16_t x) { return x; }
    __device__ static uint2 pack(State st) { return make_uint2((uint32_t)st.m, (uint32_t)st.q); }
    __device__ static State unpack(uint2 u) { return IntQState{(int32_t)u.x, (int32_t)u.y}; }
};

/* ---- one row's elements ------------------------------------------------------------------- */

/* Row layout: `head` scalars up to the first 16-byte boundary, then `nvec` 16-byte vectors,
 * then the scalar tail. */
template <class In>
__device__ __forceinline__ void row_layout(const In *row, int64_t cols, int64_t *head, int64_t *nvec) {
    int64_t h = (int64_t)((16 - ((uintptr_t)row & 15)) & 15) / (int64_t)sizeof(In);
    h = h < cols ? h : cols;
    *head = h;
    *nvec = (cols - h) / (int64_t)(16 / sizeof(In));
}

/* One 16-byte vector: through the read-only cache, or evict-first when `stream`. */
__device__ __forceinline__ uint4 load_vec(const uint4 *p, bool stream) { return stream ? __ldcs(p) : __ldg(p); }

/* Vectors c, c + nt, ... below v1, U at a time; what is left, with U / 2, U / 4, ..., 1 in flight
 * (at most once each), so that a segment's last vectors are not read one by one. */
template <class P, int U>
__device__ __forceinline__ void row_vectors(typename P::State &st, const uint4 *vec, int64_t c, int64_t v1,
                                            bool stream, int nt, const int32_t *table) {
    using In = typename P::In;
    using Val = typename P::Val;
    constexpr int VE = P::VE;
    for (; c + (int64_t)(U - 1) * nt < v1; c += (int64_t)U * nt) {
        uint4 u[U];
#pragma unroll
        for (int k = 0; k < U; k++) u[k] = load_vec(vec + c + (int64_t)k * nt, stream);
        Val v[U * VE];
#pragma unroll
        for (int k = 0; k < U; k++) unpack(u[k], v + k * VE, (const In *)nullptr);
        P::template add<U * VE>(st, v, table);
    }
    if constexpr (U > 1) row_vectors<P, U / 2>(st, vec, c, v1, stream, nt, table);
}

/* Thread `tid` of `nt` adds vectors [v0, v1) of the row (and the head and tail scalars when
 * `scalars`) to its state, U vectors in flight. Vectors c, c + nt, ...: consecutive threads read
 * consecutive 16 bytes. */
template <class P, int U>
__device__ __forceinline__ void row_range(typename P::State &st, const typename P::In *row, int64_t cols,
                                          int64_t head, int64_t nvec, int64_t v0, int64_t v1, bool scalars,
                                          bool stream, int tid, int nt, const int32_t *table) {
    using Val = typename P::Val;
    constexpr int VE = P::VE;
    if (scalars) {
        for (int64_t i = tid; i < head; i += nt) {
            Val v[1] = {P::scalar(row[i])};
            P::template add<1>(st, v, table);
        }
        for (int64_t i = head + nvec * VE + tid; i < cols; i += nt) {
            Val v[1] = {P::scalar(row[i])};
            P::template add<1>(st, v, table);
        }
    }
    row_vectors<P, U>(st, reinterpret_cast<const uint4 *>(row + head), v0 + tid, v1, stream, nt, table);
}

/* ---- kernels ------------------------------------------------------------------------------ */

/* G threads per row (G = 2, 8 or 32), 32 / G rows per warp, grid-stride over rows. x is
 * [rows, stride], out is [rows]. The loop is warp-uniform so the shuffles see every lane. */
template <class P, int G>
__global__ void __launch_bounds__(kBlock) rows_group(const typename P::In *x, int64_t rows, int64_t cols,
                                                    int64_t stride, float *out, const int32_t *d_table) {
    __shared__ int32_t s_table[P::kTable ? PC_INT_TABLE_LEN : 1];
    const int32_t *table = nullptr;
    if (P::kTable) {
        load_table(s_table, d_table);
        table = s_table;
    }
    constexpr int kRowsPerWarp = 32 / G;
    const int lane = threadIdx.x % G, sub = (threadIdx.x % 32) / G;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int64_t nwarps = (int64_t)gridDim.x * blockDim.x / 32;
    for (int64_t r0 = warp * kRowsPerWarp; r0 < rows; r0 += nwarps * kRowsPerWarp) {
        const int64_t row = r0 + sub;
        typename P::State st = P::init();
        if (row < rows) {
            const typename P::In *p = x + row * stride;
            int64_t head, nvec;
            row_layout(p, cols, &head, &nvec);
            row_range<P, P::U>(st, p, cols, head, nvec, 0, nvec, true, false, lane, G, table);
        }
#pragma unroll
        for (int off = G / 2; off > 0; off /= 2) st = P::merge(st, shfl_xor(st, off, G), table);
        if (row < rows && lane == 0) out[row] = P::final(st);
    }
}

/* One block per (row, segment) item, grid-stride over items = rows * segs. With segs == 1 the
 * block writes out[row]; otherwise partial[item] (merged by rows_combine). `stream`: evict-first
 * loads. */
template <class P>
__global__ void __launch_bounds__(kBlock) rows_block(const typename P::In *x, int64_t rows, int64_t cols,
                                                    int64_t stride, int segs, bool stream, float *out,
                                                    uint2 *partial, const int32_t *d_table) {
    __shared__ int32_t s_table[P::kTable ? PC_INT_TABLE_LEN : 1];
    __shared__ typename P::State s_warp[kBlock / 32];
    const int32_t *table = nullptr;
    if (P::kTable) {
        load_table(s_table, d_table);
        table = s_table;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t items = rows * segs;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int64_t row = item / segs;
        const int seg = (int)(item % segs);
        const typename P::In *p = x + row * stride;
        int64_t head, nvec;
        row_layout(p, cols, &head, &nvec);
        typename P::State st = P::init();
        row_range<P, P::UB>(st, p, cols, head, nvec, nvec * seg / segs, nvec * (seg + 1) / segs, seg == 0,
                            stream, threadIdx.x, kBlock, table);
#pragma unroll
        for (int off = 16; off > 0; off /= 2) st = P::merge(st, shfl_xor(st, off, 32), table);
        if (lane == 0) s_warp[warp] = st;
        __syncthreads();
        if (warp == 0) {
            st = lane < kBlock / 32 ? s_warp[lane] : P::init();
#pragma unroll
            for (int off = 16; off > 0; off /= 2) st = P::merge(st, shfl_xor(st, off, 32), table);
            if (lane == 0) {
                if (segs == 1)
                    out[row] = P::final(st);
                else
                    partial[item] = P::pack(st);
            }
        }
        __syncthreads();
    }
}

/* Second step of split rows: one warp per row merges its `segs` partial states (partial is
 * [rows, segs]); each lane folds at most ceil(segs / 32) of them, then a butterfly. */
template <class P>
__global__ void __launch_bounds__(kBlock) rows_combine(const uint2 *partial, int64_t rows, int segs, float *out,
                                                      const int32_t *d_table) {
    __shared__ int32_t s_table[P::kTable ? PC_INT_TABLE_LEN : 1];
    const int32_t *table = nullptr;
    if (P::kTable) {
        load_table(s_table, d_table);
        table = s_table;
    }
    const int lane = threadIdx.x % 32;
    const int64_t nwarps = (int64_t)gridDim.x * blockDim.x / 32;
    for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += nwarps) {
        typename P::State st = P::init();
        for (int j = lane; j < segs; j += 32) st = P::merge(st, P::unpack(partial[row * segs + j]), table);
#pragma unroll
        for (int off = 16; off > 0; off /= 2) st = P::merge(st, shfl_xor(st, off, 32), table);
        if (lane == 0) out[row] = P::final(st);
    }
}

/* ---- host: plan and launch ---------------------------------------------------------------- */

struct Plan {
    int group;       /* 2, 8, 32 threads per row; 0: block per (row, segment) */
    int segs;        /* segments per row (block mapping) */
    int64_t grid;    /* blocks launched */
    size_t scratch;  /* bytes of partial states */
    bool stream;     /* evict-first loads (block mapping) */
};

/* The per-device caches below are filled by whichever thread asks first; threads that race
 * all write the same value, so relaxed atomics make the race harmless (0: not read yet). */

/* Blocks of rows_block<P> resident per SM, measured once per device. */
template <class P>
pc_status block_slots(int *slots) {
    static std::atomic<int> cache[kMaxDevices];
    pc_status st = PC_OK;
    int dev = 0, sms = 0, bps = 0;
    PC_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < kMaxDevices && (*slots = cache[dev].load(std::memory_order_relaxed)) > 0) return PC_OK;
    st = pc_lse_cuda_sm_count(&sms);
    if (st != PC_OK) return st;
    PC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, rows_block<P>, kBlock, 0));
    *slots = sms * (bps > 0 ? bps : 1);
    if (dev < kMaxDevices) cache[dev].store(*slots, std::memory_order_relaxed);
fail:
    return st;
}

/* Bytes of L2 on the current device, read once per device. */
pc_status l2_bytes(int64_t *bytes) {
    static std::atomic<int> cache[kMaxDevices];
    pc_status st = PC_OK;
    int dev = 0, l2 = 0;
    PC_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < kMaxDevices && (l2 = cache[dev].load(std::memory_order_relaxed)) > 0) {
        *bytes = l2;
        return PC_OK;
    }
    PC_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    *bytes = l2;
    if (dev < kMaxDevices) cache[dev].store(l2, std::memory_order_relaxed);
fail:
    return st;
}

template <class P>
pc_status plan_rows(int64_t rows, int64_t cols, Plan *plan) {
    pc_status st = PC_OK;
    int slots = 0;
    int64_t l2 = 0;
    const int64_t nvec = cols / P::VE; /* within one vector of every row's layout */
    plan->segs = 1;
    plan->scratch = 0;
    plan->stream = false;
    plan->group = nvec <= 4 ? 2 : nvec <= 16 ? 8 : nvec <= 256 ? 32 : 0;
    st = block_slots<P>(&slots);
    if (st != PC_OK) return st;
    if (plan->group) {
        /* Enough blocks to fill the GPU several times; more rows loop inside the blocks (which
         * keeps the per-block table copy of int cheap for B = 1M, N = 16). */
        const int64_t rows_per_block = kBlock / plan->group;
        const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
        plan->grid = blocks < (int64_t)slots * 4 ? blocks : (int64_t)slots * 4;
        return PC_OK;
    }
    /* Block mapping: a block per row while the rows fill at least a fifth of the resident block
     * slots (1056 on an H200): 512 rows of 128256 f32 read in 63.8 us as 512 blocks, 66.4 us cut
     * in 2 with the combine launch, 256 rows 37.5 against 38.1 us. Fewer rows keep too few loads
     * in flight (192 rows: 33.7 us whole, 31.8 us cut in 5; 128 rows: 29.8 against 24.7 cut in
     * 8), so each is cut into up to slots / rows segments of at least 2 vectors per thread. */
    if (rows > 0 && rows * 5 < slots) {
        int64_t segs = slots / rows, most = nvec / (2 * kBlock);
        segs = segs < most ? segs : most;
        plan->segs = segs > 1 ? (int)segs : 1;
    }
    const int64_t items = rows * plan->segs;
    plan->grid = items < (int64_t)slots * 8 ? items : (int64_t)slots * 8;
    if (plan->segs > 1) plan->scratch = (size_t)items * sizeof(uint2);
    /* Evict-first loads for inputs twice the L2 or more: nothing of them would stay for a later
     * kernel anyway (autograd's backward reads x again; an input that fits should stay). */
    st = l2_bytes(&l2);
    if (st != PC_OK) return st;
    plan->stream = rows * cols * (int64_t)sizeof(typename P::In) >= 2 * l2;
    return PC_OK;
}

template <class P>
pc_status run_rows(const void *d_x, int64_t rows, int64_t cols, int64_t stride, float *d_out, void *d_scratch,
                   size_t *scratch_bytes, cudaStream_t stream) {
    pc_status st = PC_OK;
    Plan plan;
    size_t need = 0;
    const int32_t *table = nullptr;
    const typename P::In *x = static_cast<const typename P::In *>(d_x);
    uint2 *partial = static_cast<uint2 *>(d_scratch);
    st = plan_rows<P>(rows, cols, &plan);
    if (st != PC_OK) return st;
    /* Never 0, so that "allocate what it says, then call" always passes real memory. */
    need = plan.scratch > 16 ? plan.scratch : 16;
    if (!d_scratch) {
        *scratch_bytes = need;
        return PC_OK;
    }
    if (*scratch_bytes < need)
        return pc_fail(PC_ERR_ARG, "pc_lse_rows_cuda: scratch of %zu bytes is too small, this shape needs %zu",
                       *scratch_bytes, need);
    if (rows == 0) return PC_OK;
    if (P::kTable) {
        st = pc_lse_cuda_table(&table);
        if (st != PC_OK) return st;
    }
    if (plan.group == 2)
        rows_group<P, 2><<<(unsigned)plan.grid, kBlock, 0, stream>>>(x, rows, cols, stride, d_out, table);
    else if (plan.group == 8)
        rows_group<P, 8><<<(unsigned)plan.grid, kBlock, 0, stream>>>(x, rows, cols, stride, d_out, table);
    else if (plan.group == 32)
        rows_group<P, 32><<<(unsigned)plan.grid, kBlock, 0, stream>>>(x, rows, cols, stride, d_out, table);
    else
        rows_block<P><<<(unsigned)plan.grid, kBlock, 0, stream>>>(x, rows, cols, stride, plan.segs, plan.stream,
                                                                  d_out, partial, table);
    PC_CUDA_CHECK(cudaGetLastError());
    if (plan.group == 0 && plan.segs > 1) {
        const int64_t blocks = (rows + kBlock / 32 - 1) / (kBlock / 32);
        rows_combine<P><<<(unsigned)blocks, kBlock, 0, stream>>>(partial, rows, plan.segs, d_out, table);
        PC_CUDA_CHECK(cudaGetLastError());
    }
fail:
    return st;
}

std::mutex g_table_mutex;
const int32_t *g_tables[kMaxDevices];
std::atomic<int> g_sms[kMaxDevices]; /* as the caches above */

} // namespace

__device__ int32_t g_int_table[PC_INT_TABLE_LEN];

pc_status pc_lse_cuda_table(const int32_t **d_table) {
    pc_status st = PC_OK;
    int dev = 0;
    void *addr = nullptr;
    int32_t host[PC_INT_TABLE_LEN];
    PC_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev >= kMaxDevices)
        return pc_fail(PC_ERR_UNSUPPORTED, "device %d: at most %d GPUs are supported", dev, kMaxDevices);
    {
        std::lock_guard<std::mutex> lock(g_table_mutex);
        if (!g_tables[dev]) {
            pc_int_table_fill(host);
            PC_CUDA_CHECK(cudaMemcpyToSymbol(g_int_table, host, sizeof(host)));
            PC_CUDA_CHECK(cudaGetSymbolAddress(&addr, g_int_table));
            /* A pageable copy may still be in flight when it returns; kernels on other streams
             * must see the whole table. Once per device. */
            PC_CUDA_CHECK(cudaDeviceSynchronize());
            g_tables[dev] = static_cast<const int32_t *>(addr);
        }
        *d_table = g_tables[dev];
    }
fail:
    return st;
}

pc_status pc_lse_cuda_sm_count(int *sms) {
    pc_status st = PC_OK;
    int dev = 0;
    PC_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < kMaxDevices && (*sms = g_sms[dev].load(std::memory_order_relaxed)) > 0) return PC_OK;
    PC_CUDA_CHECK(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev));
    if (dev < kMaxDevices) g_sms[dev].store(*sms, std::memory_order_relaxed);
fail:
    return st;
}

extern "C" pc_status pc_lse_rows_cuda(pc_lse_kernel kernel, pc_dtype dtype, const void *d_x, int64_t rows,
                                      int64_t cols, int64_t stride, float *d_out, void *d_scratch,
                                      size_t *scratch_bytes, pc_stream stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (!scratch_bytes) return pc_fail(PC_ERR_ARG, "pc_lse_rows_cuda: scratch_bytes is NULL");
    if (rows < 0) return pc_fail(PC_ERR_ARG, "pc_lse_rows_cuda: rows = %lld is negative", (long long)rows);
    if (cols < 0) return pc_fail(PC_ERR_ARG, "pc_lse_rows_cuda: cols = %lld is negative", (long long)cols);
    if (stride < cols)
        return pc_fail(PC_ERR_ARG, "pc_lse_rows_cuda: stride = %lld is less than cols = %lld", (long long)stride,
                       (long long)cols);
    const bool fuse_ok = kernel == PC_LSE_FUSE && (dtype == PC_F32 || dtype == PC_F16 || dtype == PC_BF16);
    const bool int_ok = kernel == PC_LSE_INT && (dtype == PC_F32 || dtype == PC_Q10_6);
    if (!fuse_ok && !int_ok)
        return pc_fail(PC_ERR_ARG, "pc_lse_rows_cuda: kernel %s with dtype %s is not offered on the GPU "
                                   "(fuse: f32, f16, bf16; int: f32, q10.6)",
                       pc_lse_kernel_name(kernel), pc_dtype_name(dtype));
    if (d_scratch) {
        if (rows > 0 && !d_out) return pc_fail(PC_ERR_ARG, "pc_lse_rows_cuda: d_out is NULL");
        if (rows > 0 && cols > 0 && !d_x) return pc_fail(PC_ERR_ARG, "pc_lse_rows_cuda: d_x is NULL");
        if ((uintptr_t)d_x % pc_dtype_size(dtype) != 0)
            return pc_fail(PC_ERR_ARG, "pc_lse_rows_cuda: d_x is not aligned to its %zu-byte elements",
                           pc_dtype_size(dtype));
    }
    /* rows_block with 8 loads in flight (f32; 4 of f16's): H200, 192 x 128256 f32 33.1 -> 28.3 us,
     * 256 rows 36.8 -> 33.9, 1 x 4M 16.2 -> 12.7, f16 512 x 128256 38.3 -> 35.7; 512 x 128256 f32
     * 63.0 -> 62.4 (with the streaming loads); within 0.4 us elsewhere. */
    if (kernel == PC_LSE_FUSE && dtype == PC_F32)
        return run_rows<FuseP<float, 4, 8>>(d_x, rows, cols, stride, d_out, d_scratch, scratch_bytes, s);
    if (kernel == PC_LSE_FUSE && dtype == PC_F16)
        return run_rows<FuseP<__half, 2, 4>>(d_x, rows, cols, stride, d_out, d_scratch, scratch_bytes, s);
    if (kernel == PC_LSE_FUSE)
        return run_rows<FuseP<__nv_bfloat16, 2, 4>>(d_x, rows, cols, stride, d_out, d_scratch, scratch_bytes, s);
    if (dtype == PC_F32) return run_rows<IntP>(d_x, rows, cols, stride, d_out, d_scratch, scratch_bytes, s);
    return run_rows<IntQP>(d_x, rows, cols, stride, d_out, d_scratch, scratch_bytes, s);
}
