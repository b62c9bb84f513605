/* The tile strategy's kernels (tile.cuh): shared-memory layout, a unit's steps, the flags, and
 * the kernel that stages a block's plan and codes and runs its warps' lists of units. */
#ifndef PC_GPU_TILE_KERNEL_CUH
#define PC_GPU_TILE_KERNEL_CUH

#include "eval/cuda/fuse_tile/tile.cuh"
#include "eval/cuda/fuse_tile/tile_trace.cuh"
#include "eval/cuda/gpu_choice.h"
#include "eval/cuda/gpu_device.cuh"
#include "eval/cuda/gpu_tile_schedule.h"

#define TILE_THREADS 512
#define TILE_WARPS (TILE_THREADS / 32)
/* Largest K and the most samples per block (T = TW x units per group). */
#define TILE_MAX_K 128
#define TILE_MAX_T PC_GPU_TILE_MAX_T

static __host__ __device__ constexpr size_t tile_round16(size_t b) {
    return (b + 15) & ~(size_t)15;
}

/* Shared memory, in this order: the plan (groups [G], vars [V], child_slot and children
 * [G - 1] each: a unit starting reads its children there, not from global memory), one
 * mbarrier (8 bytes) per unit [G][T / TW], the block's sample codes (T V uint16), then per
 * warp es [TW][KM] floats and O [TW] doubles. Every part starts on a 16-byte boundary.
 * compute-sanitizer's racecheck places the mbarriers 0x400 bytes (the block's reserved shared
 * memory) below their address and so reports the plan's staging stores against their
 * initialisation where the plan is larger than that; with the mbarriers first it runs every
 * case of test_cuda_eval with 0 hazards, but slower (tuning.md#tile-smem-order). */
static __host__ __device__ size_t tile_plan_bytes(int G, int V) {
    return tile_round16((size_t)G * sizeof(pc_gpu_group)) + tile_round16((size_t)V * 4) +
           2 * tile_round16((size_t)G * 4);
}
static __host__ __device__ size_t tile_flag_bytes(int G, int T, int tw) {
    return tile_round16((size_t)G * (T / tw) * 8);
}
/* KM (the padded row) of the kernel tile_pick() chooses: the smallest power of two >= K, at
 * least 32 / tw. */
static int tile_km(int K, int tw) {
    int km = 32 / tw;
    while (km < K) km *= 2;
    return km;
}
static __host__ __device__ size_t tile_warp_bytes(int km, int tw) {
    return tile_round16((size_t)tw * (km * 4 + 8));
}
static size_t tile_smem(int G, int V, int K, int T, int tw) {
    return tile_plan_bytes(G, V) + tile_flag_bytes(G, T, tw) + tile_round16((size_t)T * V * 2) +
           TILE_WARPS * tile_warp_bytes(tile_km(K, tw), tw);
}

/* Parts of a split slice whose lanes each hold ts of its samples: one sample per lane each, so
 * ts parts, split only where ts is at least 4 (tuning.md#tile-thin-layers). The host's schedule
 * and the kernel's mbarrier counts both take it from here. */
static __host__ __device__ constexpr int tile_parts_of(int ts) { return ts >= 4 ? ts : 1; }

/* Sources (children's messages and input rows) a lane loads at once in the gather (1.): the
 * common group (a few sources) takes one round trip, MNIST's group of 101 variables a few more.
 * Four rather
 * than eight for the smallest lanes: the MNIST tree averages 2.4 sources per group, and the
 * empty slots of a round of eight cost more than the rare second round. Two at NJ = 4,
 * although its 16 FP64 sums per lane then spill at K = 128: one source per round (no spills)
 * puts its rounds of loads in a row (tuning.md#tile-sources). */
template <int EM, int NJ> static constexpr int tile_src_unroll() {
    return NJ == 4 || (EM >= 8 && NJ == 1) ? 2 : 4; /* NJ = 1 also holds exp(w) in registers */
}

/* Variables a lane loads at once in a long run of them (MNIST's group of 101): 32 loads in
 * flight where a lane holds 4 elements per source (K = 32: 8 variables); not at 2 elements
 * (K = 16), nor at 8 (K = 64, where U already is 32 / 8) (tuning.md#tile-sources). */
template <int EM> static constexpr int tile_wide_unroll() { return EM == 4 ? 32 / EM : 1; }

/* The plan as staged in shared memory, and the units' flags: one mbarrier per unit, which
 * completes its only phase when the unit's warp arrives. */
struct tile_plan {
    const pc_gpu_group *groups;
    const int32_t *vars, *child_slot, *children;
    uint32_t ready; /* shared-memory address of the mbarriers [G][per_group] */
    int per_group, T; /* slices per group, samples per block */
};

/* Where sample t's code of variable v lies in the block's codes: by variable ([V][T], so that a
 * lane's samples are at constant offsets) where a lane holds one column (K <= 32); by sample
 * ([T][V]) at K > 32, where by variable was slower (tuning.md#tile-codes). */
template <int NJ>
static __device__ __forceinline__ int tile_code_at(int t, int v, int T, int V) {
    return NJ == 1 ? v * T + t : t * V + v;
}

/* m[s] = the max of m[s] over the JW lanes of a sample group, for each of the lane's TS
 * samples. With SCATTER and TS > 1 the first log2(TS) levels halve the values a lane holds
 * (each lane passes on the half its partner keeps: TS - 1 shuffles, not TS per level), the rest
 * reduce one value, and TS shuffles bring every sample's max back: 10 shuffles and 6 max at
 * TS = 4, JW = 32, where a butterfly per sample takes 20 and 20. K = 64 (two columns per lane)
 * keeps the butterflies, which were faster there (tuning.md#tile-max). */
template <int TS, int JW, bool SCATTER>
static __device__ __forceinline__ void tile_warp_max(float (&m)[TS], int jl) {
    if constexpr (!SCATTER || TS == 1 || TS > JW) {
#pragma unroll
        for (int s = 0; s < TS; s++)
#pragma unroll
            for (int d = JW / 2; d > 0; d /= 2)
                m[s] = fmaxf(m[s], __shfl_xor_sync(0xffffffffu, m[s], d));
    } else {
        float v[TS];
#pragma unroll
        for (int s = 0; s < TS; s++) v[s] = m[s];
        /* after the level of distance d, a lane with (jl & d) keeps the upper half */
#pragma unroll
        for (int c = TS, d = JW / 2; c > 1; c /= 2, d /= 2) {
            const bool up = jl & d;
#pragma unroll
            for (int i = 0; i < c / 2; i++) {
                const float keep = up ? v[i + c / 2] : v[i], send = up ? v[i] : v[i + c / 2];
                v[i] = fmaxf(keep, __shfl_xor_sync(0xffffffffu, send, d));
            }
        }
#pragma unroll
        for (int d = JW / (2 * TS); d > 0; d /= 2)
            v[0] = fmaxf(v[0], __shfl_xor_sync(0xffffffffu, v[0], d));
        /* sample s's max is at the lanes whose bits JW / 2 ... JW / TS spell s */
        const int group = (threadIdx.x & 31) & ~(JW - 1);
#pragma unroll
        for (int s = 0; s < TS; s++)
            m[s] = __shfl_sync(0xffffffffu, v[0], group | (s * (JW / TS)));
    }
}

/* *p = v where ok, as one predicated store (the compiler would branch around it). */
static __device__ __forceinline__ void tile_store_if(bool ok, float *p, float v) {
    asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %2, 0;\n\t@q st.global.f32 [%0], %1;\n\t}"
                 ::"l"(p), "f"(v), "r"((unsigned)ok)
                 : "memory");
}

/* One unit: group gi's samples b0 .. b0 + TW - 1, by one warp (codes: the block's codes from
 * sample b0; es and orow: the warp's own rows), in the steps of tile.cuh. One function: split
 * into inlined steps, ptxas allocated its registers differently (tuning.md#args). */
template <int TW, int JW, int NJ, bool KX>
static __device__ void tile_unit(const pc_gpu_args &a, const tile_plan &plan, int gi, int64_t b0,
                                 const uint16_t *codes, float *es, double *orow) {
    constexpr int SG = 32 / JW, TS = TW / SG, KM = JW * NJ, U = tile_src_unroll<TS * NJ, NJ>();
    static_assert(SG * JW == 32 && TS * SG == TW, "tile shape");
    /* KX: K is the padded row KM, so that every column is in range and the rows' strides are
     * constants (immediate offsets in the loads and stores). */
    const int lane = threadIdx.x & 31, K = KX ? KM : a.K;
    const int jl = lane % JW, sg = lane / JW;
    constexpr int KP = KM < 16 ? 16 : KM; /* pc_gpu_kp: the row length of exp(w) */
    const pc_gpu_group g = plan.groups[gi];
    const bool root = g.slot < 0;
    const float4 *w = reinterpret_cast<const float4 *>(a.wt) + (size_t)gi * KP * KP / 4 +
                      jl; /* quad q of row j = jl + 32 n at w[q KP + 32 n] */
    /* The lane's columns k = jl + 32 n and samples t = sg + SG s: the same (t, k) in the product
     * and (t, j = k) in the output. */
    bool col_ok[NJ], row_ok[TS];
#pragma unroll
    for (int n = 0; n < NJ; n++) col_ok[n] = KX || jl + 32 * n < K;
    /* the unit's samples that exist, in 32 bits (none for a part past the batch's end) */
    const int rows = (int)(a.n - b0 < TW ? a.n - b0 : TW);
#pragma unroll
    for (int s = 0; s < TS; s++) row_ok[s] = sg + SG * s < rows;

    /* exp(w) row j = jl in registers first (K <= 32), as 16-byte quads: independent of the
     * data, so its loads overlap the gather's. */
    float wreg[NJ == 1 ? KM : 1];
    if constexpr (NJ == 1) {
#pragma unroll
        for (int q = 0; q < KM / 4; q++) {
            const float4 v = __ldg(w + q * KP);
            wreg[4 * q] = v.x, wreg[4 * q + 1] = v.y, wreg[4 * q + 2] = v.z, wreg[4 * q + 3] = v.w;
        }
    }

    /* 1. p[s][n] in FP64. Sources i < nch are children, the rest variables; lanes < TW also sum
     *    the children's offsets of sample `lane` into orow. */
    double p[TS][NJ], o = 0.0;
#pragma unroll
    for (int s = 0; s < TS; s++)
#pragma unroll
        for (int n = 0; n < NJ; n++) p[s][n] = 0.0;
    const bool own_off = lane < TW && b0 + lane < a.n;
    const int nch = g.child_end - g.child_begin, nsrc = nch + g.var_end - g.var_begin;
    /* sample t's code of variable v at my_codes[tile_code_at<NJ>(SG s, v, T, V)] */
    const uint16_t *my_codes = codes + tile_code_at<NJ>(sg, 0, plan.T, a.V);
    const int T = plan.T, V = a.V;
    /* The lane's element of slot 0 and of input row 0; a source adds one 32 x 32 -> 64-bit
     * product to them (v (C + 1) + code < 2^32: the block's codes, T V of them, fit in shared
     * memory). */
    const float *rel0 = a.rel + (size_t)(b0 + sg) * K + jl, *in0 = a.input + jl;
    const double *off0 = a.off + b0 + lane;
    const unsigned chunk = (unsigned)a.chunk, Ku = (unsigned)K, chunk_k = chunk * Ku;
    const unsigned C1 = (unsigned)a.C + 1;
    /* A long run of variables (the MNIST tree's group of 101, at the bottom of its deepest
     * path): its last nwide variables UW at a time, up to 32 loads in flight per lane. */
    constexpr int UW = tile_wide_unroll<TS * NJ>();
    const int nvar = g.var_end - g.var_begin;
    const int nwide = UW > U && nvar >= 2 * UW ? nvar / UW * UW : 0, nrest = nsrc - nwide;
    /* the lane's elements of the input rows of the group's variable i (its samples' codes pick
     * the rows) */
    const auto load_var = [&](int i, float (&val)[TS][NJ]) {
        const unsigned v = (unsigned)plan.vars[g.var_begin + i];
#pragma unroll
        for (int s = 0; s < TS; s++) {
            const unsigned code = my_codes[tile_code_at<NJ>(SG * s, (int)v, T, V)];
            const float *row = in0 + (size_t)(v * C1 + code) * Ku;
#pragma unroll
            for (int n = 0; n < NJ; n++)
                val[s][n] = row_ok[s] && col_ok[n] ? __ldg(row + 32 * n) : 0.0f;
        }
    };
    if constexpr (UW > U) for (int i0 = nrest; i0 < nsrc; i0 += UW) {
        float val[UW][TS][NJ];
#pragma unroll
        for (int u = 0; u < UW; u++) load_var(i0 + u - nch, val[u]);
#pragma unroll
        for (int u = 0; u < UW; u++)
#pragma unroll
            for (int s = 0; s < TS; s++)
#pragma unroll
                for (int n = 0; n < NJ; n++) p[s][n] += pc_gpu_f2d(val[u][s][n]);
    }
    for (int i0 = 0; i0 < nrest; i0 += U) {
        float val[U][TS][NJ];
        double ov[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int i = i0 + u;
            ov[u] = 0.0;
            if (i < nch) {
                const unsigned slot = (unsigned)plan.child_slot[g.child_begin + i];
                const float *rel = rel0 + (size_t)slot * chunk_k;
#pragma unroll
                for (int s = 0; s < TS; s++)
#pragma unroll
                    for (int n = 0; n < NJ; n++)
                        val[u][s][n] =
                            row_ok[s] && col_ok[n] ? rel[(size_t)SG * s * K + 32 * n] : 0.0f;
                if (own_off) ov[u] = off0[(size_t)slot * chunk];
            } else if (i < nrest) {
                load_var(i - nch, val[u]);
            } else {
#pragma unroll
                for (int s = 0; s < TS; s++)
#pragma unroll
                    for (int n = 0; n < NJ; n++) val[u][s][n] = 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            o += ov[u];
#pragma unroll
            for (int s = 0; s < TS; s++)
#pragma unroll
                for (int n = 0; n < NJ; n++) p[s][n] += pc_gpu_f2d(val[u][s][n]);
        }
    }
    if (lane < TW) orow[lane] = o;

    /* 2. m[s] = max over the sample's K values: the lane's NJ, then across its JW lanes. 3. e =
     *    exp(p - m), 0 past K and where m = -inf, into es[t][k] for the product. */
    /* the root's log weights, once for all the lane's samples */
    double root_w[NJ];
#pragma unroll
    for (int n = 0; n < NJ; n++)
        root_w[n] = root && col_ok[n] ? __ldg(a.root_logw + jl + 32 * n) : 0.0;
    float pf[TS][NJ], m[TS];
#pragma unroll
    for (int s = 0; s < TS; s++) {
        m[s] = -INFINITY;
#pragma unroll
        for (int n = 0; n < NJ; n++) {
            double v = p[s][n];
            if (root) v += root_w[n];
            pf[s][n] = row_ok[s] && col_ok[n] ? pc_gpu_d2f(v) : -INFINITY;
            m[s] = fmaxf(m[s], pf[s][n]);
        }
    }
    tile_warp_max<TS, JW, NJ == 1>(m, jl);
#pragma unroll
    for (int s = 0; s < TS; s++)
#pragma unroll
        for (int n = 0; n < NJ; n++)
            es[(sg + SG * s) * KM + jl + 32 * n] =
                m[s] == -INFINITY ? 0.0f : __expf(pf[s][n] - m[s]);
    __syncwarp();

    if (root) { /* log p(x) = O + m + log sum_k e[k], summed in FP64 */
#pragma unroll
        for (int s = 0; s < TS; s++) {
            const int t = sg + SG * s;
            double sum = 0.0;
#pragma unroll
            for (int n = 0; n < NJ; n++) sum += (double)es[t * KM + jl + 32 * n];
#pragma unroll
            for (int d = JW / 2; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
            if (jl == 0 && row_ok[s])
                a.logp[b0 + t] = m[s] == -INFINITY ? -INFINITY : orow[t] + (double)m[s] + log(sum);
        }
        __syncwarp();
        return;
    }

    /* 4. out[t][j] = sum_k es[t][k] exp(w)[j][k], four k at a time, unrolled up to KM so that
     *    the weight loads of K > 32 (NJ = 2) are issued ahead of their use. */
    float acc[TS][NJ];
#pragma unroll
    for (int s = 0; s < TS; s++)
#pragma unroll
        for (int n = 0; n < NJ; n++) acc[s][n] = 0.0f;
    /* No early exit at K: es and wreg are 0 past K, and a branch here would stall the warp. */
#pragma unroll
    for (int k0 = 0; k0 < KM; k0 += 4) {
        float wv[4][NJ];
#pragma unroll
        for (int n = 0; n < NJ; n++) {
            if constexpr (NJ == 1) {
#pragma unroll
                for (int q = 0; q < 4; q++) wv[q][n] = wreg[k0 + q];
            } else {
                const float4 v = __ldg(w + (k0 / 4) * KP + 32 * n);
                wv[0][n] = v.x, wv[1][n] = v.y, wv[2][n] = v.z, wv[3][n] = v.w;
            }
        }
#pragma unroll
        for (int s = 0; s < TS; s++) {
            const float4 e = *reinterpret_cast<const float4 *>(es + (sg + SG * s) * KM + k0);
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
    float *out = a.rel + ((size_t)g.slot * a.chunk + b0 + sg) * K + jl;
    double *off = a.off + (size_t)g.slot * a.chunk + b0 + sg;
    /* Every log first, then predicated stores: a branch per store would hold each log behind
     * it. */
    float r[TS][NJ];
#pragma unroll
    for (int s = 0; s < TS; s++)
#pragma unroll
        for (int n = 0; n < NJ; n++) r[s][n] = pc_gpu_log(acc[s][n]);
#pragma unroll
    for (int s = 0; s < TS; s++) {
#pragma unroll
        for (int n = 0; n < NJ; n++)
            tile_store_if(row_ok[s] && col_ok[n], out + (size_t)SG * s * K + 32 * n, r[s][n]);
        const double o = m[s] == -INFINITY ? -INFINITY : orow[sg + SG * s] + (double)m[s];
        if (row_ok[s] && jl == 0) off[SG * s] = o;
    }
    __syncwarp();
}

/* Waits until unit (group, sub) has raised its flag: every lane waits on the unit's mbarrier
 * (an acquire); the hardware suspends a waiting warp until the phase completes, where polling
 * a byte flag with sleeps took tens of polls per unit (tuning.md#tile-flags). */
static __device__ __forceinline__ void tile_wait(const tile_plan &plan, int group, int sub) {
    const uint32_t bar = plan.ready + 8u * (uint32_t)(group * plan.per_group + sub);
    for (uint32_t done = 0; !done;)
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(bar)
                     : "memory");
    __syncwarp();
}

/* Grid: one block per T samples. */
template <int TW, int JW, int NJ, bool KX>
static __global__ void __launch_bounds__(TILE_THREADS)
    tile_kernel(pc_gpu_args a, int T, const int32_t *sched) {
    extern __shared__ float4 smem4[];
    char *base = reinterpret_cast<char *>(smem4);
    /* A split slice's parts: TP samples each, one per sample lane. */
    constexpr int TP = 32 / JW, PARTS = tile_parts_of(TW / TP);
    const int warp = threadIdx.x / 32, V = a.V, G = a.G, KM = JW * NJ;
    const int per_group = T / TW, units = __ldg(sched + TILE_WARPS);
    const int32_t *entries = sched + TILE_WARPS + 1;
    pc_gpu_group *groups = reinterpret_cast<pc_gpu_group *>(base);
    int32_t *vars =
        reinterpret_cast<int32_t *>(base + tile_round16((size_t)G * sizeof(pc_gpu_group)));
    int32_t *child_slot = reinterpret_cast<int32_t *>(reinterpret_cast<char *>(vars) +
                                                      tile_round16((size_t)V * 4));
    int32_t *children = reinterpret_cast<int32_t *>(reinterpret_cast<char *>(child_slot) +
                                                    tile_round16((size_t)G * 4));
    char *bars = base + tile_plan_bytes(G, V);
    const uint32_t ready = (uint32_t)__cvta_generic_to_shared(bars);
    uint16_t *codes = reinterpret_cast<uint16_t *>(bars + tile_flag_bytes(G, T, TW));
    char *mine = reinterpret_cast<char *>(codes) + tile_round16((size_t)T * V * 2) +
                 (size_t)warp * tile_warp_bytes(KM, TW);
    float *es = reinterpret_cast<float *>(mine);
    double *orow = reinterpret_cast<double *>(es + TW * KM);
    const int64_t b0 = (int64_t)blockIdx.x * T;
    {
        const int32_t *src = reinterpret_cast<const int32_t *>(a.groups);
        int32_t *dst = reinterpret_cast<int32_t *>(groups);
        const int words = G * (int)(sizeof(pc_gpu_group) / 4);
        for (int i = threadIdx.x; i < words; i += TILE_THREADS) dst[i] = __ldg(src + i);
        for (int i = threadIdx.x; i < V; i += TILE_THREADS) vars[i] = __ldg(a.vars + i);
        for (int i = threadIdx.x; i < G - 1; i += TILE_THREADS)
            child_slot[i] = __ldg(a.child_slot + i), children[i] = __ldg(a.children + i);
        /* A slice's mbarrier completes when its unit, or each of its parts, has arrived. */
        for (int i = threadIdx.x; i < units; i += TILE_THREADS) {
            const int e = __ldg(entries + i);
            const int slice = PC_GPU_TILE_ENTRY_GROUP(e) * per_group + PC_GPU_TILE_ENTRY_SLICE(e);
            if (PC_GPU_TILE_ENTRY_PART(e) == 0)
                asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ready + 8u * slice),
                             "r"(PC_GPU_TILE_ENTRY_SPLIT(e) ? PARTS : 1)
                             : "memory");
        }
    }
    /* read in the samples' order, stored by variable */
    for (int i = threadIdx.x; i < T * V; i += TILE_THREADS) {
        const int t = i / V, v = i - t * V;
        const int64_t b = b0 + t;
        uint16_t code = 0;
        if (b < a.n) {
            const int64_t at = b * V + v;
            code = a.missing && a.missing[at] ? (uint16_t)a.C : (uint16_t)a.x[at];
        }
        codes[tile_code_at<NJ>(t, v, T, V)] = code;
    }
    __syncthreads();
    const tile_plan plan = {groups, vars, child_slot, children, ready, per_group, T};
    /* The warp's units, as the host dealt them (pc_gpu_tile_schedule: sched = [warps + 1]
     * ranges, then the units): every unit comes after the units it waits on, in an order that
     * all warps' lists follow, so the block cannot deadlock. A unit waits for its children's
     * slices and its wait group's, whole (every part). */
    const int first = __ldg(sched + warp), end = __ldg(sched + warp + 1);
    int next = first < end ? __ldg(entries + first) : 0;
    for (int i = first; i < end; i++) {
        /* the next unit's entry loads while this one runs */
        const int e = next;
        if (i + 1 < end) next = __ldg(entries + i + 1);
        const int gi = PC_GPU_TILE_ENTRY_GROUP(e), sub = PC_GPU_TILE_ENTRY_SLICE(e);
        const int u = gi * per_group + sub;
        const pc_gpu_group g = groups[gi];
        PC_TRACED(const long long c0 = clock64());
        for (int c = g.child_begin; c < g.child_end; c++)
            tile_wait(plan, children[c], sub);
        if (g.wait >= 0) tile_wait(plan, g.wait, sub);
        PC_TRACED(const long long c1 = clock64(), t1 = pc_trace_time());
        int t0 = sub * TW;
        if constexpr (PARTS > 1)
            if (PC_GPU_TILE_ENTRY_SPLIT(e)) {
                t0 += PC_GPU_TILE_ENTRY_PART(e) * TP;
                tile_unit<TP, JW, NJ, KX>(a, plan, gi, b0 + t0,
                                          codes + tile_code_at<NJ>(t0, 0, T, V), es, orow);
            }
        if (PARTS == 1 || !PC_GPU_TILE_ENTRY_SPLIT(e))
            tile_unit<TW, JW, NJ, KX>(a, plan, gi, b0 + t0, codes + tile_code_at<NJ>(t0, 0, T, V),
                                      es, orow);
        __threadfence_block();
        __syncwarp();
        if ((threadIdx.x & 31) == 0) /* a release: the warp's stores come before it */
            asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];"
                         ::"r"(ready + 8u * u)
                         : "memory");
        PC_TRACED(tile_trace_unit(u, PC_GPU_TILE_ENTRY_PART(e), warp, per_group, c0, c1, t1));
    }
}

#endif
