/* `fuse` for K <= 128 (the "tile" strategy): each block scores its own T samples through the
 * whole circuit, with no communication between blocks. Samples are independent, so a forward
 * pass is one kernel launch, and every link of the tree's dependency chain costs a flag in
 * shared memory instead of a launch or a wait on another block.
 *
 * Work unit: (group, TW consecutive samples of the block), one warp. The host deals the units
 * to the block's warps (pc_gpu_tile_schedule, gpu_plan.h: list scheduling on a cost model,
 * units on the longest path to the root first); a warp starts a unit once the units it reads
 * (its children's, and the previous reader of its message slot) have raised their flags in
 * shared memory, so warps never wait for unrelated groups of the same layer. In the thin layers
 * at the top of a tree, where most of the block's warps would idle, a slice's samples run as
 * parts of one sample per lane, side by side on several warps, so that each unit on the tree's
 * path is shorter (K = 32 and 64 at batch 512: 1.06-1.09x, results file 92). (Units of whole
 * chains of groups, as in the warp strategy, with each message passed up the chain in
 * registers, were measured at batch 512: K = 16 1.03-1.06x faster, K = 32 0.81x; not kept.)
 * Per unit:
 *   1. p[t][k] = sum_v input[v, code(t, v), k] + sum_c rel_c[t][k] (+ root_logw[k] at the root),
 *      summed in FP64 in registers;
 *   2. m[t] = max_k p[t][k] (shuffles across the sample's lanes); O[t] = sum_c off_c[t] (FP64);
 *   3. es[t][k] = exp(p - m) (0 past K and where m = -inf);
 *   4. out[t][j] = sum_k es[t][k] exp(w[j, k]) in FP32 registers (lane = (sample lane sg, output
 *      column jl)), then rel_g[t][j] = log out, off_g[t] = O + m.
 * Messages use the engine's slots (cuda_circuit.cuh) in global memory; a block touches only its
 * own samples' rows (keeping them in shared memory where they fit gained 1-4 % and was not
 * kept). The plan (groups, variables, child slots) and the block's sample codes (x, or C where
 * missing) are staged in shared memory once. A lane works on the same (sample, state) pairs in
 * the product and in the output, so the max and the exp stay in registers. exp(w) comes in the
 * quads layout (PC_GPU_W_QUADS): a unit's exp(w) column is KM / 4 16-byte loads, a warp's
 * lanes on consecutive bytes (K = 16, batch 512: 0.137 -> 0.099 ms together with the sources'
 * 32-bit offsets; K = 32 0.203 -> 0.157).
 *
 * Shapes: JW lanes across outputs (JW = smallest power of two >= K, at least 32 / TW) and
 * NJ = 1, or JW = 32 and NJ = 2 for 32 < K <= 64, NJ = 4 for 64 < K <= 128; KM = JW NJ >= K is
 * the padded row; SG = 32 / JW sample lanes, TS = TW / SG samples per lane, so each lane holds
 * TS x NJ accumulators. Each shape has a form for K = KM (KX: no column checks, constant row
 * strides), which K = 16, 32, 64 and 128 take: with it, 32-bit sample checks, the root's
 * weights loaded once and the stores predicated instead of branched around, batch 512 ran
 * 1.05-1.08x faster (results file 100). */
#include "base/fail.h"
#include "eval/cuda/cuda_circuit.cuh"

#include <stdlib.h>

#define TILE_THREADS 512
#define TILE_WARPS (TILE_THREADS / 32)
/* Largest K and the most samples per block (T = TW x units per group). */
#define TILE_MAX_K 128
#define TILE_MAX_T PC_GPU_TILE_MAX_T
/* Shared memory the strategy may take per block (the rest of the SM's 228 KB stays L1). */
#define TILE_SMEM_CAP (160 * 1024)
/* Layers of at most this many slices (groups x T / TW) run each slice as parts of one sample
 * per lane, side by side on otherwise idle warps (pc_gpu_tile_schedule). */
#ifndef TILE_THIN_SLICES
#define TILE_THIN_SLICES (TILE_WARPS / 2)
#endif

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
 * case of test_cuda_eval with 0 hazards, but that order was 0.97-0.98x at K = 64 (results
 * files 96-98). */
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
 * ts parts, split only where ts is at least 4 (K = 16 at four samples per slice, two per lane,
 * ran 0.98x split, and 1.04x at eight). The host's schedule and the kernel's mbarrier counts
 * both take it from here. */
static __host__ __device__ constexpr int tile_parts_of(int ts) { return ts >= 4 ? ts : 1; }

/* Sources (children's messages and input rows) a lane loads at once in step 1: the common group
 * (a few sources) takes one round trip, MNIST's group of 101 variables a few more. Four rather
 * than eight for the smallest lanes: the MNIST tree averages 2.4 sources per group, and the
 * empty slots of a round of eight cost more than the rare second round (K = 16, batch 512:
 * 0.140 against 0.143 ms). Two at NJ = 4, although its 16 FP64 sums per lane then spill 40
 * bytes at K = 128: one source per round (no spills) ran 1.28x slower at K = 128 and 1.02-1.06x
 * at K = 96, its rounds of loads in a row (the MNIST tree's group of 101 variables took 211,000
 * cycles in one unit), and four 1.03-1.15x slower than two (results files 112-113). */
template <int EM, int NJ> static constexpr int tile_src_unroll() {
    return NJ == 4 || (EM >= 8 && NJ == 1) ? 2 : 4; /* NJ = 1 also holds exp(w) in registers */
}

/* Variables a lane loads at once in a long run of them (MNIST's group of 101): 32 loads in
 * flight where a lane holds 4 elements per source (K = 32: 8 variables, 1.04-1.05x faster at
 * batches 512-4,096); not at 2 (K = 16, batch 512: 8 or 16 variables 0.95x or 0.92x slower),
 * nor at 8 (K = 64, where U already is 32 / 8). */
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
 * lane's samples are at constant offsets) where a lane holds one column (K <= 32: 1.02x at
 * batches 512 and 1,024); by sample ([T][V]) at K > 32, where by variable ran 0.96-0.97x
 * (results file 102). */
template <int NJ>
static __device__ __forceinline__ int tile_code_at(int t, int v, int T, int V) {
    return NJ == 1 ? v * T + t : t * V + v;
}

/* m[s] = the max of m[s] over the JW lanes of a sample group, for each of the lane's TS
 * samples. With SCATTER and TS > 1 the first log2(TS) levels halve the values a lane holds
 * (each lane passes on the half its partner keeps: TS - 1 shuffles, not TS per level), the rest
 * reduce one value, and TS shuffles bring every sample's max back: 10 shuffles and 6 max at
 * TS = 4, JW = 32, where a butterfly per sample takes 20 and 20 (K = 32, batch 512-1,024:
 * 1.01-1.02x; K = 64, two columns per lane, 0.94-0.95x, so it keeps the butterflies; results
 * file 101). */
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
 * a byte flag with sleeps took 46 polls, 185 instructions, per unit (K = 32, batch 512). */
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
        for (int c = g.child_begin; c < g.child_end; c++)
            tile_wait(plan, children[c], sub);
        if (g.wait >= 0) tile_wait(plan, g.wait, sub);
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
    }
}

typedef void (*tile_fn)(pc_gpu_args, int, const int32_t *);

/* Samples per unit: as many as the block has up to 16 for K <= 16, else 4 (so that a lane
 * holds at most 8 elements of the product and 8 accumulators); more samples per unit spread
 * its fixed costs (plan lookups, the max, the exp(w) loads) over more outputs. */
static int tile_tw(int K, int T) { return K > 16 ? 4 : T < 16 ? (T < 8 ? 4 : 8) : 16; }

/* JW: the smallest power of two >= K, at least 4 and 32 / tw (SG = 32 / JW <= TW), at most
 * 32 (K > 32 takes NJ = 2). */
static int tile_jw(int K, int tw) {
    int jw = 32 / tw < 4 ? 4 : 32 / tw;
    while (jw < K && jw < 32) jw *= 2;
    return jw;
}

/* Parts of a split slice for the kernel tile_pick() chooses (a lane holds tw JW / 32 samples
 * of the slice). */
static int tile_parts(int K, int tw) { return tile_parts_of(tw * tile_jw(K, tw) / 32); }

/* The kernel of shape (TW, JW, NJ) for K: its KX form where K fills the padded row, the only
 * form for rows of 64 (fuse runs 32 < K < 64 as 64, pc_gpu_fuse_states). */
template <int TW, int JW, int NJ> static tile_fn tile_fn_for(int K) {
    if constexpr (JW * NJ == 64)
        return tile_kernel<TW, JW, NJ, true>;
    else
        return K == JW * NJ ? tile_kernel<TW, JW, NJ, true> : tile_kernel<TW, JW, NJ, false>;
}

static tile_fn tile_pick(int K, int tw) {
    const int jw = tile_jw(K, tw);
    if (tw == 16) return jw == 4 ? tile_fn_for<16, 4, 1>(K) : jw == 8 ? tile_fn_for<16, 8, 1>(K)
                                                                      : tile_fn_for<16, 16, 1>(K);
    if (tw == 8) return jw == 4 ? tile_fn_for<8, 4, 1>(K) : jw == 8 ? tile_fn_for<8, 8, 1>(K)
                                                                    : tile_fn_for<8, 16, 1>(K);
    if (jw == 8) return tile_fn_for<4, 8, 1>(K);
    if (jw == 16) return tile_fn_for<4, 16, 1>(K);
    return K <= 32 ? tile_fn_for<4, 32, 1>(K) : K <= 64 ? tile_fn_for<4, 32, 2>(K)
                                                         : tile_fn_for<4, 32, 4>(K);
}

/* The most shared memory any launch for this circuit takes (its codes grow with T). */
static size_t tile_smem_max(const pc_circuit *c) {
    size_t most = 0;
    for (int T = 4; T <= TILE_MAX_T; T *= 2) {
        const size_t b = tile_smem(c->num_groups, c->num_vars, c->num_latents, T,
                                   tile_tw(c->num_latents, T));
        most = b > most ? b : most;
    }
    return most;
}

/* Checks the circuit and sets the kernels' shared-memory limit; leaves the state's tiles alone
 * (fuse's choosing strategy keeps the persistent kernel's). */
extern "C" pc_status pc_gpu_fuse_tile_prepare(pc_gpu_state *s) {
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
    for (int T = 4; T <= TILE_MAX_T; T *= 2)
        PC_GPU_CHECK(cudaFuncSetAttribute(tile_pick(s->K, tile_tw(s->K, T)),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
fail:
    return st;
}

static pc_status tile_configure(pc_gpu_state *s) {
    pc_status st = pc_gpu_fuse_tile_prepare(s);
    /* Chunks are cut at multiples of TILE_MAX_T; there are no counters to size. */
    s->bm = TILE_MAX_T, s->bn = s->K, s->smem = tile_smem_max(s->circuit);
    return st;
}

extern "C" pc_status pc_gpu_fuse_tile_enqueue(pc_gpu_state *s, const pc_gpu_args *a,
                                              cudaStream_t stream) {
    pc_status st = PC_OK;
    const int T = pc_gpu_tile_samples(a->n, s->sms), tw = tile_tw(s->K, T);
    const unsigned grid = (unsigned)((a->n + T - 1) / T);
    const size_t smem = tile_smem(s->G, s->V, s->K, T, tw);
    int ti = 0;
    while ((4 << ti) < T) ti++;
    tile_pick(s->K, tw)<<<grid, TILE_THREADS, smem, stream>>>(
        *a, T, s->d_tile_sched + s->tile_sched_at[ti]);
    PC_GPU_CHECK(cudaGetLastError());
fail:
    return st;
}

static_assert(4 << 3 == TILE_MAX_T, "one schedule per block size 4, 8, 16, 32 (tile_sched_at)");

/* The schedules' int32s: per block size T, warps + 1 ranges and at most (T / tw) G parts
 * units. */
static size_t tile_sched_ints(const pc_gpu_state *s, int ti) {
    const int T = 4 << ti, tw = tile_tw(s->K, T);
    return TILE_WARPS + 1 + (size_t)s->G * (T / tw) * tile_parts(s->K, tw);
}

static size_t tile_sched_bytes(const pc_gpu_state *s) {
    size_t n = 0;
    for (int ti = 0; 4 << ti <= TILE_MAX_T; ti++) n += tile_sched_ints(s, ti);
    return n * sizeof(int32_t);
}

/* The warps' units per block size (gpu_plan.h), one array; the slices of layers that would
 * keep at most TILE_THIN_SLICES of the block's warps busy split into parts. */
static pc_status tile_upload_sched(pc_gpu_state *s) {
    pc_status st = PC_OK;
    const size_t bytes = tile_sched_bytes(s);
    int32_t *h = (int32_t *)malloc(bytes);
    uint8_t *split = (uint8_t *)malloc((size_t)s->G);
    if (!h || !split) {
        free(h), free(split);
        return pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for the tile schedules");
    }
    size_t at = 0;
    for (int ti = 0; 4 << ti <= TILE_MAX_T && st == PC_OK; ti++) {
        const int T = 4 << ti, tw = tile_tw(s->K, T);
        s->tile_sched_at[ti] = at;
        pc_gpu_tile_thin_layers(s->circuit, T / tw, TILE_THIN_SLICES, split);
        st = pc_gpu_tile_schedule(s->circuit, s->h_groups, T / tw, tile_parts(s->K, tw), split,
                                  TILE_WARPS, h + at + TILE_WARPS + 1, h + at);
        at += tile_sched_ints(s, ti);
    }
    free(split);
    if (st == PC_OK) st = pc_gpu_alloc(s, (void **)&s->d_tile_sched, bytes, "tile schedules");
    if (st == PC_OK) PC_GPU_CHECK(cudaMemcpy(s->d_tile_sched, h, bytes, cudaMemcpyHostToDevice));
fail:
    free(h);
    return st;
}

/* exp(w) in the padded quads form (PC_GPU_W_QUADS; the persistent strategy's form is not
 * needed here) and the schedules. */
extern "C" pc_status pc_gpu_fuse_tile_upload(pc_gpu_state *s) {
    pc_status st = pc_gpu_upload_padded_w(s, PC_GPU_W_QUADS, &s->d_wt);
    return st == PC_OK ? tile_upload_sched(s) : st;
}

extern "C" size_t pc_gpu_fuse_tile_bytes(const pc_gpu_state *s, int64_t chunk) {
    (void)chunk;
    return pc_gpu_padded_w_bytes(s, PC_GPU_W_QUADS) + tile_sched_bytes(s);
}

extern "C" void pc_gpu_fuse_tile_release(pc_gpu_state *s) {
    pc_gpu_release(s, s->d_wt, pc_gpu_padded_w_bytes(s, PC_GPU_W_QUADS));
    pc_gpu_release(s, s->d_tile_sched, tile_sched_bytes(s));
    s->d_wt = NULL, s->d_tile_sched = NULL;
}

extern "C" const pc_gpu_impl pc_gpu_fuse_tile_impl = {
    PC_BACKEND_FUSE,          "tile",                 NULL, tile_configure, pc_gpu_fuse_tile_upload,
    pc_gpu_fuse_tile_enqueue, pc_gpu_fuse_tile_bytes, NULL, pc_gpu_fuse_tile_release};

/* Whether the tile strategy takes this circuit (else fuse runs the persistent kernel). */
extern "C" int pc_gpu_fuse_tile_fits(const pc_circuit *c) {
    return c->num_latents <= TILE_MAX_K && tile_smem_max(c) <= TILE_SMEM_CAP;
}
