/* `fuse`, the persistent strategy (K above the tile strategy's range, cuda_fuse_tile.cu): the
 * whole circuit in one persistent kernel. A work item is (group, batch tile of BM
 * samples, output tile of BN sum nodes); items are handed out in evaluation order through an
 * atomic counter and each waits for its children's tiles (pc_gpu_wait), so the tree's many
 * small layers run concurrently instead of one launch each.
 *
 * Per item: gather inputs and children's messages in FP64, shift by the per-sample max,
 * exponentiate once into shared memory es[K][BM], then a register-blocked FP32 product with
 * exp(w) (TM x TN outputs per thread, W streamed through shared memory in KC-row slices), one
 * log per output. 256 threads per block. */
#include "layers/cuda_circuit.cuh"

#define FUSE_THREADS 256
#define FUSE_KC 32

/* Loads N consecutive floats from 16-byte (N % 4 == 0) or 8-byte aligned shared memory. */
template <int N>
static __device__ __forceinline__ void lds(float (&r)[N], const float *p) {
    if constexpr (N % 4 == 0) {
#pragma unroll
        for (int q = 0; q < N / 4; q++) {
            float4 v = reinterpret_cast<const float4 *>(p)[q];
            r[4 * q] = v.x, r[4 * q + 1] = v.y, r[4 * q + 2] = v.z, r[4 * q + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int q = 0; q < N / 2; q++) {
            float2 v = reinterpret_cast<const float2 *>(p)[q];
            r[2 * q] = v.x, r[2 * q + 1] = v.y;
        }
    }
}

template <int BM, int BN>
static size_t fuse_smem(int K) {
    return (size_t)K * pc_gpu_ld(BM) * 4 + (size_t)FUSE_KC * BN * 4 + 2 * (size_t)BM * 8;
}

/* One item. Threads are (ty, tx) with tx fastest; thread (ty, tx) owns samples
 * ty*TM .. ty*TM+TM-1 and outputs j0 + tx*TN .. +TN-1. */
template <int BM, int BN, int TM, int TN>
static __device__ void fuse_item(const pc_gpu_args &a, int gi, const pc_gpu_group &g, int t,
                                 int jt, float *smem) {
    static_assert((BM / TM) * (BN / TN) == FUSE_THREADS, "tile does not match the block");
    const int K = a.K, ld = pc_gpu_ld(BM);
    float *es = smem;
    float *ws = es + (size_t)K * ld;
    double *m = reinterpret_cast<double *>(ws + FUSE_KC * BN);
    double *o = m + BM;
    const int64_t b0 = (int64_t)t * BM;
    const bool root = g.slot < 0;
    pc_gpu_phase_a(a, g, b0, BM, root, false, es, m, o);
    if (root) {
        pc_gpu_root_out(a, b0, BM, es, m, o);
        return;
    }
    const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
    const int j0 = jt * BN;
    const float *w = a.wexp + (size_t)gi * K * K;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int jj = 0; jj < TN; jj++) acc[i][jj] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += FUSE_KC) {
        const int kc = K - k0 < FUSE_KC ? K - k0 : FUSE_KC;
        for (int i = threadIdx.x; i < FUSE_KC * BN; i += FUSE_THREADS) {
            const int kk = i / BN, j = j0 + (i - kk * BN);
            ws[i] = (kk < kc && j < K) ? __ldg(w + (size_t)(k0 + kk) * K + j) : 0.0f;
        }
        __syncthreads();
#pragma unroll 4
        for (int kk = 0; kk < kc; kk++) {
            float av[TM], wv[TN];
            lds<TM>(av, es + (k0 + kk) * ld + ty * TM);
            lds<TN>(wv, ws + kk * BN + tx * TN);
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int jj = 0; jj < TN; jj++) acc[i][jj] = fmaf(av[i], wv[jj], acc[i][jj]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int64_t b = b0 + ty * TM + i;
        if (b >= a.n) continue;
        float *out = a.rel + ((size_t)g.slot * a.chunk + b) * K;
#pragma unroll
        for (int jj = 0; jj < TN; jj++) {
            const int j = j0 + tx * TN + jj;
            if (j < K) out[j] = pc_gpu_log(acc[i][jj]);
        }
    }
    if (jt == 0) {
        for (int bl = threadIdx.x; bl < BM; bl += FUSE_THREADS) {
            const int64_t b = b0 + bl;
            if (b < a.n)
                a.off[(size_t)g.slot * a.chunk + b] = m[bl] == -INFINITY ? -INFINITY : o[bl] + m[bl];
        }
    }
}

/* The persistent loop: items from the queue until none is left. */
template <int BM, int BN, int TM, int TN>
static __device__ __forceinline__ void fuse_loop(const pc_gpu_args &a) {
    extern __shared__ float4 smem4[];
    float *smem = reinterpret_cast<float *>(smem4);
    __shared__ int s_item;
    const int total = a.G * a.tiles * a.jtiles;
    for (;;) {
        if (threadIdx.x == 0) s_item = atomicAdd(a.queue, 1);
        __syncthreads();
        const int item = s_item;
        if (item >= total) return;
        const int jt = item % a.jtiles, rest = item / a.jtiles;
        const int t = rest % a.tiles, gi = rest / a.tiles;
        const pc_gpu_group g = a.groups[gi];
        if (g.slot < 0 && jt > 0) { /* the root has one output: its other j-tiles are empty */
            __syncthreads();
            continue;
        }
        if (threadIdx.x == 0) pc_gpu_wait(a, g, t, a.jtiles);
        __syncthreads();
        fuse_item<BM, BN, TM, TN>(a, gi, g, t, jt, smem);
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0 && g.slot >= 0) atomicAdd(a.done + (size_t)gi * a.tiles + t, 1);
    }
}

template <int BM, int BN, int TM, int TN>
static __global__ void __launch_bounds__(FUSE_THREADS) fuse_kernel(pc_gpu_args a) {
    fuse_loop<BM, BN, TM, TN>(a);
}

/* The 8 x 8 tile (BN = 256) would take 141 registers, one block per SM; capped at 128 (a few
 * spilled words) two blocks per SM hide each other's gather latency, as with BN = 128. */
template <int BM, int BN, int TM, int TN>
static __global__ void __launch_bounds__(FUSE_THREADS, 2) fuse_kernel_2(pc_gpu_args a) {
    fuse_loop<BM, BN, TM, TN>(a);
}

typedef void (*fuse_fn)(pc_gpu_args);

/* Tile shapes by K: outputs per block BN >= K up to K = 256 (one j-tile, so the gather of
 * phase A runs once per batch tile; with two j-tiles every tile's gather ran twice), BM
 * samples. BN = 256 takes TM x TN = 8 x 8 accumulators per thread. */
static fuse_fn fuse_pick(int bn) {
    switch (bn) {
    case 16: return fuse_kernel<128, 16, 4, 2>;
    case 32: return fuse_kernel<128, 32, 4, 4>;
    case 64: return fuse_kernel<128, 64, 8, 4>;
    case 128: return fuse_kernel<64, 128, 4, 8>;
    default: return fuse_kernel_2<64, 256, 8, 8>;
    }
}

static pc_status fuse_configure(pc_gpu_state *s) {
    pc_status st = PC_OK;
    int max_smem = 0, per_sm = 0;
    const int K = s->K;
    if (K <= 16) s->bm = 128, s->bn = 16, s->smem = fuse_smem<128, 16>(K);
    else if (K <= 32) s->bm = 128, s->bn = 32, s->smem = fuse_smem<128, 32>(K);
    else if (K <= 64) s->bm = 128, s->bn = 64, s->smem = fuse_smem<128, 64>(K);
    else if (K <= 128) s->bm = 64, s->bn = 128, s->smem = fuse_smem<64, 128>(K);
    else s->bm = 64, s->bn = 256, s->smem = fuse_smem<64, 256>(K);
    PC_GPU_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    if (s->smem + PC_GPU_STATIC_SMEM > (size_t)max_smem)
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "backend 'fuse': K = %d needs %zu bytes of shared memory per block, the "
                       "GPU has %d", K, s->smem, max_smem);
    {
        fuse_fn fn = fuse_pick(s->bn);
        PC_GPU_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)s->smem));
        PC_GPU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, FUSE_THREADS,
                                                                   s->smem));
        s->grid = s->sms * (per_sm > 0 ? per_sm : 1);
    }
fail:
    return st;
}

static pc_status fuse_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    pc_status st = PC_OK;
    const int total = a->G * a->tiles * a->jtiles;
    const int grid = total < s->grid ? total : s->grid;
    if ((st = pc_gpu_reset_counters(a, stream))) return st;
    fuse_pick(s->bn)<<<grid, FUSE_THREADS, s->smem, stream>>>(*a);
    PC_GPU_CHECK(cudaGetLastError());
fail:
    return st;
}

extern "C" const pc_gpu_impl pc_gpu_fuse_persistent_impl = {
    PC_BACKEND_FUSE, "persistent",     NULL,             fuse_configure, pc_gpu_upload_wexp,
    fuse_enqueue,    NULL,             NULL,             NULL};

/* fuse's own choice per forward pass: the tile strategy (no waits between blocks) for K <= 32,
 * and for K <= 64 up to 16 samples per SM; else the persistent kernel, whose output tiles split
 * each group's K x K product across blocks. Measured on the H200 (MNIST tree, K = 64): tile
 * 0.72 ms against 1.76 at batch 512, 3.81 against 3.04 at batch 4096. */
static int use_tile(const pc_gpu_state *s, int64_t n) {
    return s->tile_ok && (s->K <= 32 || n <= 16 * (int64_t)s->sms);
}

static const char *choose_strategy(const pc_gpu_state *s, int64_t n) {
    return use_tile(s, n) ? "tile" : "persistent";
}

/* The persistent kernel's tiles and buffers, plus the tile kernels' limits where they fit. */
static pc_status choose_configure(pc_gpu_state *s) {
    pc_status st = fuse_configure(s);
    if (st == PC_OK && pc_gpu_fuse_tile_fits(s->circuit)) {
        if ((st = pc_gpu_fuse_tile_prepare(s))) return st;
        s->tile_ok = 1;
    }
    return st;
}

static pc_status choose_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    return use_tile(s, a->n) ? pc_gpu_fuse_tile_enqueue(s, a, stream) : fuse_enqueue(s, a, stream);
}

static const pc_gpu_impl fuse_choose_impl = {
    PC_BACKEND_FUSE, NULL,             choose_strategy,  choose_configure, pc_gpu_upload_wexp,
    choose_enqueue,  NULL,             NULL,             NULL};

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
