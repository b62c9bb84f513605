/* `fuse` for small K (the "tile" strategy): each block scores its own T samples through the
 * whole circuit, layer by layer, with one barrier per layer and no communication between
 * blocks. Samples are independent, so a forward pass is one kernel launch with no dependency
 * polling, and every link of the layer chain costs a barrier and one round of loads instead of
 * a launch or a cross-block wait.
 *
 * Work unit: (group, TW consecutive samples of the block), one warp. Per unit:
 *   1. p[t][k] = sum_v input[v, code(t, v), k] + sum_c rel_c[t][k] (+ root_logw[k] at the root),
 *      summed in FP64 and kept in FP32 in the warp's shared rows es[TW][KP];
 *   2. m[t] = max_k p[t][k] (TW lane groups, shuffles), O[t] = sum_c off_c[t] (FP64);
 *   3. es = exp(p - m) in place (0 past K and where m = -inf);
 *   4. out[t][j] = sum_k es[t][k] exp(w[j, k]) in FP32 registers (lane = (sample lane sg, output
 *      column jl)), then rel_g[t][j] = log out, off_g[t] = O + m.
 * Messages use the engine's slots (cuda_circuit.cuh) in global memory; a block touches only its
 * own samples' rows, and the plan (gpu_plan.c) reuses a slot only in a later layer than its
 * reader, so the barrier after each layer is the only ordering needed. The block's sample
 * codes (x, or C where missing) are staged in shared memory once.
 *
 * Shapes: JW lanes across outputs (JW = smallest power of two >= K, at least 32 / TW) and
 * NJ = 1, or JW = 32 and NJ = 2 for 32 < K <= 64; SG = 32 / JW sample lanes, TS = TW / SG
 * samples per lane, so each lane holds TS x NJ accumulators. */
#include "layers/cuda_circuit.cuh"

#define TILE_THREADS 512
#define TILE_WARPS (TILE_THREADS / 32)
/* Largest K and the most samples per block (T = TW x units per group). */
#define TILE_MAX_K 64
#define TILE_MAX_T 32
/* Shared memory the strategy may take per block (the rest of the SM's 228 KB stays L1). */
#define TILE_SMEM_CAP (160 * 1024)

static __host__ __device__ constexpr int tile_kp(int K) { return (K + 3) & ~3; }
static __host__ __device__ constexpr size_t tile_round16(size_t b) { return (b + 15) & ~(size_t)15; }

/* Shared memory, in this order: the plan (groups [G], vars [V], child_slot [G - 1]), the block's
 * sample codes [T][V] (uint16), then per warp es [TW][KP] floats, O [TW] doubles, m [TW] floats.
 * Every part starts on a 16-byte boundary. */
static __host__ __device__ size_t tile_plan_bytes(int G, int V) {
    return tile_round16((size_t)G * sizeof(pc_gpu_group)) + tile_round16((size_t)V * 4) +
           tile_round16((size_t)G * 4);
}
static __host__ __device__ size_t tile_warp_bytes(int K, int tw) {
    return tile_round16((size_t)tw * (tile_kp(K) * 4 + 8 + 4));
}
static size_t tile_smem(int G, int V, int K, int T, int tw) {
    return tile_plan_bytes(G, V) + tile_round16((size_t)T * V * 2) +
           TILE_WARPS * tile_warp_bytes(K, tw);
}

/* Sources (children's messages and input rows) a lane loads at once in step 1: about 32 loads
 * in flight, so the common group (a few sources) takes one round trip and MNIST's group of 101
 * variables a few. */
template <int EM> static constexpr int tile_src_unroll() { return EM >= 8 ? 4 : EM >= 2 ? 32 / EM : 16; }

/* The plan as staged in shared memory. */
struct tile_plan {
    const pc_gpu_group *groups;
    const int32_t *vars, *child_slot;
};

template <int TW, int JW, int NJ>
static __device__ void tile_unit(const pc_gpu_args &a, const tile_plan &plan, int gi, int64_t b0,
                                 const uint16_t *codes, float *es, float *mrow, double *orow) {
    constexpr int SG = 32 / JW, TS = TW / SG, EM = TW * JW * NJ / 32, LT = 32 / TW;
    constexpr int KM = JW * NJ, U = tile_src_unroll<EM>();
    static_assert(SG * JW == 32 && TS * SG == TW && LT * TW == 32, "tile shape");
    const int lane = threadIdx.x & 31, K = a.K, KP = tile_kp(K), V = a.V;
    const pc_gpu_group g = plan.groups[gi];
    const bool root = g.slot < 0;
    const int count = TW * K;
    const int jl = lane % JW, sg = lane / JW;
    const float *w = a.wexp + (size_t)gi * K * K;

    /* exp(w) column jl in registers first (K <= 32): independent of the data, so its loads
     * overlap the gather's. */
    float wreg[NJ == 1 ? KM : 1];
    if constexpr (NJ == 1) {
#pragma unroll
        for (int k = 0; k < KM; k++)
            wreg[k] = !root && k < K && jl < K ? __ldg(w + (size_t)k * K + jl) : 0.0f;
    }

    /* 1. product: element i = t K + k of the unit, i = lane + 32 r; lanes < TW also sum the
     *    children's offsets of sample `lane`. Sources s < nch are children, the rest variables. */
    int tt[EM], kk[EM];
    bool ok[EM];
    double p[EM], o = 0.0;
#pragma unroll
    for (int r = 0; r < EM; r++) {
        const int i = lane + 32 * r;
        tt[r] = i < count ? i / K : 0;
        kk[r] = i < count ? i - tt[r] * K : 0;
        ok[r] = i < count && b0 + tt[r] < a.n;
        p[r] = 0.0;
    }
    const bool own_off = lane < TW && b0 + lane < a.n;
    const int nch = g.child_end - g.child_begin, nsrc = nch + g.var_end - g.var_begin;
    for (int s0 = 0; s0 < nsrc; s0 += U) {
        float val[U][EM];
        double ov[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int s = s0 + u;
            ov[u] = 0.0;
            if (s < nch) {
                const size_t slot = (size_t)plan.child_slot[g.child_begin + s];
                /* rows b0 .. b0 + TW - 1 of the slot are contiguous: element i is at i */
                const float *rel = a.rel + (slot * a.chunk + b0) * K;
#pragma unroll
                for (int r = 0; r < EM; r++) val[u][r] = ok[r] ? rel[lane + 32 * r] : 0.0f;
                if (own_off) ov[u] = a.off[slot * a.chunk + b0 + lane];
            } else if (s < nsrc) {
                const int v = plan.vars[g.var_begin + s - nch];
                const float *rows = a.input + (size_t)v * (a.C + 1) * K;
#pragma unroll
                for (int r = 0; r < EM; r++)
                    val[u][r] = ok[r] ? __ldg(rows + (size_t)codes[tt[r] * V + v] * K + kk[r]) : 0.0f;
            } else {
#pragma unroll
                for (int r = 0; r < EM; r++) val[u][r] = 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            o += ov[u];
#pragma unroll
            for (int r = 0; r < EM; r++) p[r] += (double)val[u][r];
        }
    }
#pragma unroll
    for (int r = 0; r < EM; r++) {
        if (lane + 32 * r >= count) continue;
        if (root) p[r] += __ldg(a.root_logw + kk[r]);
        es[tt[r] * KP + kk[r]] = ok[r] ? (float)p[r] : -INFINITY;
    }
    if (lane < TW) orow[lane] = o;
    __syncwarp();

    /* 2. m: LT lanes per sample. */
    {
        const int t = lane / LT, l = lane - t * LT;
        float mx = -INFINITY;
        for (int k = l; k < K; k += LT) mx = fmaxf(mx, es[t * KP + k]);
#pragma unroll
        for (int d = LT / 2; d > 0; d /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
        if (l == 0) mrow[t] = mx;
    }
    __syncwarp();

    /* 3. exp in place; padding columns K .. KP - 1 become 0. */
    for (int i = lane; i < TW * KP; i += 32) {
        const int t = i / KP, k = i - t * KP;
        const float mb = mrow[t];
        es[i] = k < K && mb != -INFINITY ? __expf(es[i] - mb) : 0.0f;
    }
    __syncwarp();

    if (root) { /* log p(x) = O + m + log sum_k es[k], summed in FP64 */
        const int t = lane / LT, l = lane - t * LT;
        double sum = 0.0;
        for (int k = l; k < K; k += LT) sum += (double)es[t * KP + k];
#pragma unroll
        for (int d = LT / 2; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
        if (l == 0 && b0 + t < a.n)
            a.logp[b0 + t] = mrow[t] == -INFINITY ? -INFINITY
                                                  : orow[t] + (double)mrow[t] + log(sum);
        __syncwarp();
        return;
    }

    /* 4. out[t][j] = sum_k es[t][k] wexp[k][j], four k at a time, unrolled up to KM so that
     *    the weight loads of K = 64 (NJ = 2) are issued ahead of their use. */
    float acc[TS][NJ];
#pragma unroll
    for (int s = 0; s < TS; s++)
#pragma unroll
        for (int n = 0; n < NJ; n++) acc[s][n] = 0.0f;
#pragma unroll
    for (int k0 = 0; k0 < KM; k0 += 4) {
        if (k0 >= K) break;
        float wv[4][NJ];
#pragma unroll
        for (int q = 0; q < 4; q++)
#pragma unroll
            for (int n = 0; n < NJ; n++) {
                const int k = k0 + q, j = jl + 32 * n;
                if constexpr (NJ == 1) wv[q][n] = wreg[k];
                else wv[q][n] = k < K && j < K ? __ldg(w + (size_t)k * K + j) : 0.0f;
            }
#pragma unroll
        for (int s = 0; s < TS; s++) {
            const float4 e = *reinterpret_cast<const float4 *>(es + (sg + SG * s) * KP + k0);
#pragma unroll
            for (int n = 0; n < NJ; n++) {
                float v = acc[s][n];
                v = fmaf(e.x, wv[0][n], v);
                v = fmaf(e.y, wv[1][n], v);
                v = fmaf(e.z, wv[2][n], v);
                v = fmaf(e.w, wv[3][n], v);
                acc[s][n] = v;
            }
        }
    }
#pragma unroll
    for (int s = 0; s < TS; s++) {
        const int t = sg + SG * s;
        if (b0 + t >= a.n) continue;
        float *out = a.rel + ((size_t)g.slot * a.chunk + b0 + t) * K;
#pragma unroll
        for (int n = 0; n < NJ; n++) {
            const int j = jl + 32 * n;
            if (j < K) out[j] = pc_gpu_log(acc[s][n]);
        }
    }
    if (lane < TW && b0 + lane < a.n)
        a.off[(size_t)g.slot * a.chunk + b0 + lane] =
            mrow[lane] == -INFINITY ? -INFINITY : orow[lane] + (double)mrow[lane];
    __syncwarp();
}

/* Grid: one block per T samples. */
template <int TW, int JW, int NJ>
static __global__ void __launch_bounds__(TILE_THREADS) tile_kernel(pc_gpu_args a, int T) {
    extern __shared__ float4 smem4[];
    char *base = reinterpret_cast<char *>(smem4);
    const int warp = threadIdx.x / 32, V = a.V, G = a.G, KP = tile_kp(a.K);
    pc_gpu_group *groups = reinterpret_cast<pc_gpu_group *>(base);
    int32_t *vars = reinterpret_cast<int32_t *>(base + tile_round16((size_t)G * sizeof(pc_gpu_group)));
    int32_t *child_slot = reinterpret_cast<int32_t *>(reinterpret_cast<char *>(vars) +
                                                      tile_round16((size_t)V * 4));
    uint16_t *codes = reinterpret_cast<uint16_t *>(base + tile_plan_bytes(G, V));
    char *mine = reinterpret_cast<char *>(codes) + tile_round16((size_t)T * V * 2) +
                 (size_t)warp * tile_warp_bytes(a.K, TW);
    float *es = reinterpret_cast<float *>(mine);
    double *orow = reinterpret_cast<double *>(es + TW * KP);
    float *mrow = reinterpret_cast<float *>(orow + TW);
    const int64_t b0 = (int64_t)blockIdx.x * T;
    {
        const int32_t *src = reinterpret_cast<const int32_t *>(a.groups);
        int32_t *dst = reinterpret_cast<int32_t *>(groups);
        const int words = G * (int)(sizeof(pc_gpu_group) / 4);
        for (int i = threadIdx.x; i < words; i += TILE_THREADS) dst[i] = __ldg(src + i);
        for (int i = threadIdx.x; i < V; i += TILE_THREADS) vars[i] = __ldg(a.vars + i);
        for (int i = threadIdx.x; i < G - 1; i += TILE_THREADS) child_slot[i] = __ldg(a.child_slot + i);
    }
    for (int i = threadIdx.x; i < T * V; i += TILE_THREADS) {
        const int t = i / V, v = i - t * V;
        const int64_t b = b0 + t;
        uint16_t code = 0;
        if (b < a.n) {
            const int64_t at = b * V + v;
            code = a.missing && a.missing[at] ? (uint16_t)a.C : (uint16_t)a.x[at];
        }
        codes[i] = code;
    }
    __syncthreads();
    const tile_plan plan = {groups, vars, child_slot};
    const int per_group = T / TW;
    for (int l = 0; l < a.L; l++) {
        const int gb = __ldg(a.layer_start + l), ge = __ldg(a.layer_start + l + 1);
        const int units = (ge - gb) * per_group;
        for (int u = warp; u < units; u += TILE_WARPS) {
            const int gi = gb + u / per_group, t0 = (u % per_group) * TW;
            tile_unit<TW, JW, NJ>(a, plan, gi, b0 + t0, codes + t0 * V, es, mrow, orow);
        }
        __syncthreads();
    }
}

typedef void (*tile_fn)(pc_gpu_args, int);

/* Samples per block for n: the fewest (at least 4) that leave no more blocks than SMs, at most
 * TILE_MAX_T. */
static int tile_samples(const pc_gpu_state *s, int64_t n) {
    int T = 4;
    while (T < TILE_MAX_T && (n + T - 1) / T > s->sms) T *= 2;
    return T;
}

/* Samples per unit: 8 where the block has them and K <= 16, else 4 (so that a lane holds at
 * most 8 elements of the product and 8 accumulators). */
static int tile_tw(int K, int T) { return K <= 16 && T >= 8 ? 8 : 4; }

/* JW = smallest power of two >= K with SG = 32 / JW <= TW; K > 32 takes NJ = 2. */
static tile_fn tile_pick(int K, int tw) {
    if (tw == 8) {
        if (K <= 4) return tile_kernel<8, 4, 1>;
        if (K <= 8) return tile_kernel<8, 8, 1>;
        return tile_kernel<8, 16, 1>;
    }
    if (K <= 8) return tile_kernel<4, 8, 1>;
    if (K <= 16) return tile_kernel<4, 16, 1>;
    if (K <= 32) return tile_kernel<4, 32, 1>;
    return tile_kernel<4, 32, 2>;
}

/* The most shared memory any launch for this circuit takes (T = TILE_MAX_T, either TW). */
static size_t tile_smem_max(const pc_circuit *c) {
    const size_t a = tile_smem(c->num_groups, c->num_vars, c->num_latents, TILE_MAX_T, 4);
    const size_t b = tile_smem(c->num_groups, c->num_vars, c->num_latents, TILE_MAX_T, 8);
    return a > b ? a : b;
}

static pc_status tile_configure(pc_gpu_state *s) {
    pc_status st = PC_OK;
    int max_smem = 0;
    const size_t smem = tile_smem_max(s->circuit);
    if (!pc_gpu_fuse_tile_fits(s->circuit))
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "fuse tile strategy: takes K <= %d and %d KiB of shared memory per block; "
                       "K = %d, V = %d need %zu bytes", TILE_MAX_K, TILE_SMEM_CAP / 1024, s->K,
                       s->V, smem);
    PC_GPU_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    if (smem > (size_t)max_smem)
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "fuse tile strategy: needs %zu bytes of shared memory per block, the GPU "
                       "has %d", smem, max_smem);
    for (int tw = 4; tw <= 8; tw += 4)
        PC_GPU_CHECK(cudaFuncSetAttribute(tile_pick(s->K, tw),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    /* Chunks are cut at multiples of TILE_MAX_T; there are no counters to size. */
    s->bm = TILE_MAX_T, s->bn = s->K, s->smem = smem;
fail:
    return st;
}

static pc_status tile_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    pc_status st = PC_OK;
    const int T = tile_samples(s, a->n), tw = tile_tw(s->K, T);
    const unsigned grid = (unsigned)((a->n + T - 1) / T);
    const size_t smem = tile_smem(s->G, s->V, s->K, T, tw);
    tile_pick(s->K, tw)<<<grid, TILE_THREADS, smem, stream>>>(*a, T);
    PC_GPU_CHECK(cudaGetLastError());
fail:
    return st;
}

static size_t tile_extra_bytes(const pc_gpu_state *s, int64_t chunk) {
    (void)s, (void)chunk;
    return 0;
}
static pc_status tile_alloc_extra(pc_gpu_state *s) { (void)s; return PC_OK; }
static void tile_free_extra(pc_gpu_state *s) { (void)s; }

extern "C" const pc_gpu_impl pc_gpu_fuse_tile_impl = {
    PC_BACKEND_FUSE,  "tile",           tile_configure,  pc_gpu_upload_wexp,
    tile_enqueue,     tile_extra_bytes, tile_alloc_extra, tile_free_extra};

/* Whether the tile strategy takes this circuit (else fuse runs the persistent kernel). */
extern "C" int pc_gpu_fuse_tile_fits(const pc_circuit *c) {
    return c->num_latents <= TILE_MAX_K && tile_smem_max(c) <= TILE_SMEM_CAP;
}
