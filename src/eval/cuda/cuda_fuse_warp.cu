/* `fuse`, the warp strategy (K <= 128): one persistent kernel whose work item is (chain of
 * groups, 16 or 8 samples) for one warp, all K outputs, with the product on the FP64 tensor
 * cores.
 *
 * Why one warp per item: the block-wide items of the persistent strategy (cuda_fuse.cu) spend
 * much of their time in barriers and dependent loads between phases, with 24-32 warps per SM.
 * A warp item needs no barrier: the warp gathers its samples' inputs into registers, takes the
 * max and the exp there, multiplies on the tensor cores and writes the logs, while the SM's
 * other warps run other items. Items are handed out in chain order through an atomic counter
 * and wait on their children's counters, as in the persistent strategy (gpu_plan.h: slots of
 * their own, measured faster than slots reused between chains).
 *
 * Why chains: most groups of an HCLT have one child group (387 of the 549 sum groups of the
 * MNIST model), so the tree is mostly paths. A chain (gpu_plan.h) is such a path; the warp
 * runs it bottom to top and hands each group's message to the next in shared memory, so only
 * the chain's bottom waits on counters and loads messages from L2, and only its top writes
 * one and raises a counter (the shipped MNIST model: 229 chains of at most 4 groups, or 179
 * of at most 8, instead of 550 items per tile). Above the bottom a group works in the linear
 * domain (warp_link): the group below hands on its product before the log, and the group
 * multiplies its inputs in, pre-exponentiated, so neither the log of the group below nor this
 * group's exp is taken (K = 64, batch 4096: 1.344 -> 1.197 ms; K = 32 0.526 -> 0.492; K = 16
 * level). Chains of at most 8 groups instead of 4 win where many items hide each other's
 * latency (K <= 32, and larger batches above: pc_gpu_warp_chains, results file 183). Running
 * a chain, without waits, in the block that finished the last of its children (leaf chains
 * from the queue) was 1.11-1.27x slower at batch 4096 (three barriers and a serial atomic per
 * chain and block).
 *
 * Why staged input rows: a group's input row per sample is three dependent loads (variable,
 * pixel code, row), one group and variable after another, on the tree's critical path. An
 * item looks up its chain's rows in one round of loads before it waits for its children
 * (warp_stage_rows, windows of 32 variables), so a group's inputs cost one round of loads
 * instead of three dependent ones per variable (K = 16, batch 4096: 0.321 -> 0.250 ms with
 * the acquire/release counters and 5 blocks per SM; K = 32 1.09x; per-phase traces in the
 * results, files 61-62). The bottom then sums its inputs before the wait too, and its
 * children's messages after it (K = 16 1.07-1.16x).
 *
 * The product out[b, j] = sum_k e[b, k] exp(w[j, k]) runs as mma.m16n8k16.f64: FP64 products
 * and sums of the FP64 operands, so it is exact to far below FP32 (only e at a chain's bottom,
 * from an FP32 exp, exp(w) and the linear inputs in FP32, the FP32 product handed up a chain
 * and the FP32 log at its top round). A 3xTF32 product on the FP32 tensor cores was measured
 * first: they sum with truncation, a bias of about 1e-7 per output that added up to 3e-5 nats
 * over a chain of 300 groups (against 2e-6 for the FP32 paths), so it was dropped; in the
 * 8-sample items at K = 128 it also ran 0.83-0.94x as fast as this product (results file 179:
 * the TF32 mma has 4.9 times the FP64 rate, so three of them at most 1.6 times, before the
 * operand splits). The
 * 16 x 8 x 16 shape replaced 8 x 8 x 4 (mma.m8n8k4), which the H200 runs at half the FP64
 * tensor cores' rate (33 against 66 TFLOP/s, bench/gpu_dmma_rate.cu): batch 4,096 K = 64
 * 1.21x (1.028 -> 0.848 ms), K = 32 1.09x, K = 16 1.05x.
 *
 * Register layout (lane = 4 g + t, g = 0..7, t = 0..3): the mma's 16 rows are samples b0 + g
 * and b0 + 8 + g; the lane holds k = t KP / 4 .. (t + 1) KP / 4 - 1 of both rows, so the
 * mma's k slot j of lane t in k-step s stands for k = t KP / 4 + 4 s + j (a permutation of k,
 * the same for A and B, so the sum is unchanged), and every lane loads its inputs and exp(w)
 * as 16-byte words. Outputs come back as (row g or g + 8, columns 2t and 2t + 1 of each 8-wide
 * n-tile).
 *
 * 8-sample items (pc_gpu_warp_form picks them at K = 128, and at 32 < K <= 112 for batches of up
 * to 8 or 12 samples per SM). At K = 128 a 16-sample item's operands took 128 of a
 * lane's 255 registers, two warps per scheduler, and each warp's gathers, logs and barriers
 * hid only behind the other's product (the tensor cores 42 % busy over a pass, results file
 * 154). With 8 samples a lane holds one sample's 32 operands (64 registers), and two blocks of
 * six warps (168 registers) put three warps on each scheduler. The product runs transposed,
 * out^T = exp(w) ed^T: exp(w) is the mma's A operand (16 outputs x 16 k, 8 conversions per
 * mma against 4), ed its B, and outputs come back as (output 16 m + g or + 8, samples 2t and
 * 2t + 1). The product loop alone (bench/gpu_dmma_rate.cu, file 169) takes 89 cycles per mma
 * for one warp on its scheduler (106 with 16 samples), 73 per scheduler with two warps, 82
 * with three. In the kernel at K = 128 against 16-sample items: 1.22x at 1,024 samples, 1.10x
 * at 2,048, 1.04x at 4,096 (2.645 -> 2.552 ms), 1.03x at 8,192 (file 170). At K = 96 and 112
 * they ran 1.13-1.14x faster at 1,024 but 0.86-0.94x at 4,096-8,192: there more items hide
 * each other's latency only while the gangs fill the GPU a few times (pc_gpu_warp_form). */
#include "base/fail.h"
#include "eval/cuda/cuda_circuit.cuh"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#define WARP_TILE 16 /* samples per counter (the tiles' run, s->bm) */
/* Samples per item S: 16 (the mma's rows, two per lane: rows g and g + 8), or 8 (one per lane
 * row; the product transposed, exp(w) the mma's A operand), whose operands take half the
 * registers, so that three warps fit a scheduler (warp_eight picks). Warps per block (the
 * gang): 4, or 6 with 8-sample items (two blocks per SM). */
template <int S> static __host__ __device__ constexpr int warp_nw() { return S == 8 ? 6 : 4; }
template <int S> static __host__ __device__ constexpr int warp_threads() {
    return 32 * warp_nw<S>();
}
/* A chain's variables whose input rows an item stages at once (its links' fit: the plan). */
#define WARP_STAGE_VARS PC_GPU_CHAIN_WINDOW_VARS
/* Sources whose loads a gather issues together: the bottom's children and variables (at
 * K <= 32; one at K = 64, warp_bottom), a link's variables (32 floats in flight per lane). */
#define WARP_BOTTOM_U 2
#define WARP_LINK_U (KP <= 32 ? 2 : 1)

/* Four floats at p[k .. k + 3] (0 where k >= K). K % 4 == 0 (fuse pads its circuit,
 * pc_gpu_create), so p + k is 16-byte aligned and the four are all in or all out. CG: read
 * through L2 (messages written during this kernel by other SMs); else through the read-only
 * path. */
template <bool CG>
static __device__ __forceinline__ void warp_load4(const float *p, int k, int K, float (&v)[4]) {
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (k < K) {
        const float4 *q = reinterpret_cast<const float4 *>(p + k);
        x = CG ? __ldcg(q) : __ldg(q);
    }
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
}

/* Lanes wait (one child each) until every child chain of a chain's bottom g has finished the
 * item's 16-sample tile t; then their writes are visible to the whole warp. (Chains have slots of
 * their own, so no chain waits on the reader of a slot's previous message.) */
static __device__ __forceinline__ void warp_wait(const pc_gpu_args &a, const pc_gpu_group &g,
                                                 int t, int lane) {
    /* An acquire, no fence (1-3 % over one); relaxed polls before it rather than acquire
     * polls, which dropped the SM's L1 on every poll (K = 16-64, batches 1,024-4,096:
     * 1.00-1.02x). */
    for (int i = g.child_begin + lane; i < g.child_end; i += 32)
        pc_gpu_acquire_count<100>(a.done + (size_t)__ldg(a.chain_child + i) * a.tiles + t, a.K);
    __syncwarp();
}

/* Whether the gang takes its exp(w) from shared memory (K > 16: measured on the H200, K = 64,
 * batch 4096: 1.31 against 1.41 ms through L1; K = 32 1.01-1.03x) or straight from L1
 * (K <= 16, where the copy and its barrier cost more than they save: 0.97-0.99x). */
template <int KP> static __host__ __device__ constexpr bool warp_smem_w() { return KP > 16; }

/* Row stride of the shared-memory tiles (exp(w) and the carry), in floats, and the column at
 * which k lies. A lane reads its row's k0 .. k0 + KP / 4 - 1 as 16-byte words, and a
 * quarter-warp (8 lanes: rows g and g + 1, t = 0..3) is served at once only if its 8 words lie
 * in 8 different 16-byte bank groups. At K <= 32 rows KP + 4 floats apart do that; at K = 64
 * lanes t and t + 2 were 128 bytes apart, on the same banks (twice the wavefronts, file 139),
 * so there the upper half of a row sits 8 floats further on, in rows of 76 floats (19 words,
 * odd): with the staging inlined and the chain tops' log for y >= 0, K = 64 1.03-1.05x at
 * 1,152-8,192 samples (results file 140; each of the three alone 1.00-1.02x). (Strides of
 * KP + 8 with a per-lane order of the quads were measured before: level at K = 64, 1.07-1.08x
 * slower at K = 32, the extra registers spilling.) Rows of 80 and 112 floats (20 and 28 words,
 * 4 mod 8) need no padding: lane t's words sit 5 or 7 t apart, row g + 1's 4 further on;
 * rows of 96 take 100 (25 words, 1 mod 8). */
template <int KP> static __host__ __device__ constexpr int warp_ld() {
    return KP == 128 || KP == 112 || KP == 80 ? KP : KP == 64 ? 76 : KP + 4;
}
template <int KP> static __host__ __device__ constexpr int warp_col(int k) {
    return k + (KP == 64 && k >= KP / 2 ? 8 : 0);
}
/* Where (row, k) lies, in floats. At K = 128 without padding (a block's shared memory must hold
 * two blocks): the 16-byte words of each 32-float quarter of a row XOR-swizzled by the
 * quarter and the row's parity, so that a quarter-warp's 8 words (rows g, g + 1, quarters
 * t = 0..3) fall in 8 different bank groups. */
template <int KP> static __host__ __device__ constexpr int warp_at(int row, int k) {
    return KP == 128 ? row * 128 + (k ^ ((((k >> 5) << 1 | (row & 1)) & 7) << 2))
                     : row * warp_ld<KP>() + warp_col<KP>(k);
}
/* The same for k = k0 + off, a lane's k0 (its first column) and off < KP / 4: at K <= 64 as
 * warp_at(row, k0) + off, which the compiler folds across a lane's words. */
template <int KP> static __host__ __device__ constexpr int warp_at(int row, int k0, int off) {
    return KP == 128 ? warp_at<KP>(row, k0 + off) : warp_at<KP>(row, k0) + off;
}

/* Where (row, k) of a warp's carry lies: as warp_at, but with 8-sample items at K = 128 the
 * 16-byte words of rows 2 r and 2 r + 1 also XOR-swizzled by r, so that the transposed
 * product's scalar stores (lane 4 g + t: row 2 t or 2 t + 1, column 16 m + g or + 8) fall on
 * 32 banks while the link's 16-byte reads (rows g and g + 1 of a quarter-warp) keep theirs. */
template <int KP, int S> static __host__ __device__ constexpr int warp_carry_at(int row, int k) {
    return warp_at<KP>(row, k) ^ (KP == 128 && S == 8 ? (row >> 1 & 3) << 3 : 0);
}
template <int KP, int S>
static __host__ __device__ constexpr int warp_carry_at(int row, int k0, int off) {
    return KP == 128 ? warp_carry_at<KP, S>(row, k0 + off) : warp_at<KP>(row, k0) + off;
}

static __host__ __device__ constexpr int warp_gcd(int a, int b) {
    return b == 0 ? a : warp_gcd(b, a % b);
}

/* The block copies one group's exp(w) ([KP][KP], 16-byte aligned) into ws[KP][warp_ld] with
 * cp.async; the caller waits for it before reading. The block covers R rows of 16-byte chunks
 * in a step (R = the fewest whole rows that are a multiple of its threads' chunks), CB chunks
 * per thread; a thread keeps its chunks' columns and row parities, so their addresses move by
 * R rows a step, where computing each chunk's row, column and swizzle took about 20
 * instructions per chunk (at K = 128, 32 chunks per thread and group: 17 % of the kernel's
 * instructions, results file 150). KP = 96: 16 rows and 3 chunks a step; 80 and 112: 32 rows
 * and 5 or 7 chunks, the last step past row KP skipped; else 1 chunk. */
template <int KP, int S>
static __device__ __forceinline__ void warp_stage_w(const float *w, float *ws) {
    if constexpr (warp_smem_w<KP>()) {
        constexpr int CPR = KP / 4;                              /* chunks per row */
        constexpr int NT = warp_threads<S>();
        constexpr int R = NT / warp_gcd(NT, CPR); /* rows per step */
        constexpr int CB = R * CPR / NT;          /* chunks per thread a step */
        static_assert(R % 2 == 0, "exp(w)'s copy: an even number of rows per step");
        int row0[CB];
        unsigned d[CB];
        const float *s[CB];
#pragma unroll
        for (int i = 0; i < CB; i++) {
            const int at = threadIdx.x + i * NT, c = 4 * (at % CPR);
            row0[i] = at / CPR;
            d[i] = (unsigned)__cvta_generic_to_shared(ws + warp_at<KP>(row0[i], c));
            s[i] = w + (size_t)row0[i] * KP + c;
        }
#pragma unroll
        for (int j = 0; j < (KP + R - 1) / R; j++)
#pragma unroll
            for (int i = 0; i < CB; i++)
                if (KP % R == 0 || row0[i] + j * R < KP)
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                                     d[i] + (unsigned)(j * R * warp_ld<KP>() * sizeof(float))),
                                 "l"(s[i] + (size_t)j * R * KP)
                                 : "memory");
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Shared memory of a block, in floats: the gang's exp(w) (K > 16); per warp the message a
 * chain's group hands to the next, [S rows][warp_ld], and the input rows of its chain's
 * variables, [WARP_STAGE_VARS][S samples] (int). One exp(w) buffer: a second one, to copy the
 * next group's during this one's product, was measured slower (K = 64, batch 4096: 1.40
 * against 1.34 ms; the extra 17 KB per block leave less L1). */
template <int KP> static __host__ __device__ constexpr int warp_ws_floats() {
    return warp_smem_w<KP>() ? KP * warp_ld<KP>() : 0;
}
template <int KP, int S> static __host__ __device__ constexpr int warp_carry_floats() {
    return S * warp_ld<KP>();
}
template <int KP, int S> static __host__ __device__ constexpr int warp_own_floats() {
    return warp_carry_floats<KP, S>() + WARP_STAGE_VARS * S;
}
template <int KP, int S> static constexpr size_t warp_smem_bytes() {
    return (warp_ws_floats<KP>() + warp_nw<S>() * warp_own_floats<KP, S>()) * sizeof(float);
}

/* The input rows of a chain's variables for an item's samples (S: 16 or 8), a window of 32
 * variables at a time in the warp's shared memory. */
struct warp_rows {
    int *srow;  /* [WARP_STAGE_VARS][S]: variable w0 + i, sample s at [i][s] */
    int vb, nv; /* the chain's variables: chain_vars[vb .. vb + nv) */
    int nb;     /* the bottom's: the first nb of them */
    int b0;     /* the item's first sample */
    int w0;     /* the window: variables w0 .. w0 + WARP_STAGE_VARS - 1 */
};

/* The sample that an item's rows past n read: b0 (16-sample items start below n), or for
 * 8-sample items, whose second half of a tile may lie past n, the last. */
template <int S> static __device__ __forceinline__ int warp_fallback(int b0, int n) {
    return S == 16 || b0 < n ? b0 : n - 1;
}

/* Stages the window at r.w0: srow[i][s] = v (C + 1) + x[b0 + s][v] for variable v = w0 + i (C
 * where missing; samples past n read warp_fallback's), lane i for variable w0 + i. One round of
 * loads (variable, pixels) per 32 variables, where walking the groups' variables took three
 * dependent loads (variable, pixel, row) per variable, on the tree's critical path (the MNIST
 * tree's largest group has 101 variables: the image's border, constant pixels). */
template <int S>
static __device__ __forceinline__ void warp_stage(const int32_t *vars, const uint8_t *x,
                                                  const uint8_t *missing, int n, int V, int C,
                                                  int i, int nv, int b0, int *srow) {
    if (i < nv) {
        const int v = __ldg(vars + i), base = v * (C + 1);
        int row[S];
#pragma unroll
        for (int s = 0; s < S; s++) {
            const size_t at = (size_t)(b0 + s < n ? b0 + s : warp_fallback<S>(b0, n)) * V + v;
            row[s] = base + (missing && __ldg(missing + at) ? C : __ldg(x + at));
        }
        int4 *d = reinterpret_cast<int4 *>(srow);
#pragma unroll
        for (int q = 0; q < S / 4; q++)
            d[q] = make_int4(row[4 * q], row[4 * q + 1], row[4 * q + 2], row[4 * q + 3]);
    }
    __syncwarp();
}

template <int S>
static __device__ __forceinline__ void warp_stage_rows(const pc_gpu_args &a, const warp_rows &r,
                                                       int lane) {
    const int i = lane < WARP_STAGE_VARS ? r.w0 + lane : r.nv;
    int *srow = r.srow + lane * S;
    /* Inlined at every K: at K = 64 a call kept the item's registers from spilling before
     * the chain bottom's gather took both rows together (1.286 against 1.183 ms at batch 4096
     * then); since, inlined spills 12 bytes against 24 as a call (file 140). */
    warp_stage<S>(a.chain_vars + r.vb, a.x, a.missing, a.n, a.V, a.C, i, r.nv, r.b0, srow);
}

/* Moves the window so that it holds variables i .. min(i + u, e) - 1, if it does not
 * (warp-uniform). */
template <int S>
static __device__ __forceinline__ void warp_window(const pc_gpu_args &a, warp_rows &r, int i,
                                                   int u, int e, int lane) {
    if (i < r.w0 || min(i + u, e) > r.w0 + WARP_STAGE_VARS) {
        __syncwarp(); /* every lane is done with the old window */
        r.w0 = i;
        warp_stage_rows<S>(a, r, lane);
    }
}

/* A chain's links take one window (the chain plan keeps their variables to it), staged once
 * the bottom is done with its variables; one variable per lane. */
static_assert(WARP_STAGE_VARS <= 32, "a window takes one variable per lane");

/* The staged input row of variable i (in the window) for the item's sample s. */
template <int S>
static __device__ __forceinline__ size_t warp_row(const warp_rows &r, int i, int s) {
    return (size_t)r.srow[(i - r.w0) * S + s];
}

/* The chain's bottom, in the log domain: p[row][k] = the sum of its inputs (the chain's first
 * nb variables, rows staged) and its children's messages (from their slots, in L2), in FP64,
 * both rows together; the inputs first, then the wait for the children (item t), then the
 * children; the sources U at a time, whose loads all travel before the first sum; m = max per
 * row over the row's four lanes; ed = exp(p - m) (0 past K, past n and where m = -inf) for the
 * product; o = the children's offsets + m. At K = 64 the two rows' FP64 sums take 64
 * registers, so the sources go one at a time there (U = 1): each source's loads are then one
 * round trip for both rows. (Rows one after the other, two sources per round, as before the
 * sixteenth round, took twice the round trips after the wait and spilled 80 bytes against 24:
 * K = 64 at batches 1,152-8,192 1.08-1.20x slower, results file 136.) */
template <int KP, bool KX, int S>
static __device__ __forceinline__ void warp_bottom(const pc_gpu_args &a, const pc_gpu_group &g,
                                                   int t, warp_rows &wr,
                                                   const int (&rr)[S / 8],
                                                   const bool (&ok)[S / 8], int g8, int k0,
                                                   int lane, bool active,
                                                   double (&ed)[S / 8][KP / 4],
                                                   double (&o)[S / 8]) {
    constexpr int NQ = KP / 16, U = KP <= 32 ? WARP_BOTTOM_U : 1, H = S / 8;
    const int K = KX ? KP : a.K, nc = active ? g.child_end - g.child_begin : 0;
    const int nb = active ? wr.nb : 0; /* the bottom's variables: 0 .. nb - 1 */
    /* A long run of variables (MNIST's group of 101): its last nwide, UWB at a time, 32 floats
     * in flight per lane (K = 16: 4 variables against U = 2); the rest U at a time. */
    constexpr int UWB = 32 / (H * NQ * 4) > U ? 32 / (H * NQ * 4) : U;
    const int nwide = UWB > U && nb >= 2 * UWB ? nb / UWB * UWB : 0;
    double p[H][NQ][4], oh[H];
#pragma unroll
    for (int h = 0; h < H; h++) {
        oh[h] = 0.0;
#pragma unroll
        for (int q = 0; q < NQ; q++)
#pragma unroll
            for (int i = 0; i < 4; i++) p[h][q][i] = 0.0;
    }
    /* Variables i0 .. i0 + N - 1 (those below i_end), their loads together. */
    const auto add_vars = [&](auto unroll, int i0, int i_end) {
        constexpr int N = decltype(unroll)::value;
        float v[N][H][NQ][4];
        warp_window<S>(a, wr, i0, N, i_end, lane);
#pragma unroll
        for (int u = 0; u < N; u++)
#pragma unroll
            for (int h = 0; h < H; h++) {
                const bool here = i0 + u < i_end;
                const size_t row = here ? warp_row<S>(wr, i0 + u, g8 + 8 * h) : 0;
#pragma unroll
                for (int q = 0; q < NQ; q++) {
                    if (here)
                        warp_load4<false>(a.input + row * K, k0 + 4 * q, K, v[u][h][q]);
                    else
#pragma unroll
                        for (int i = 0; i < 4; i++) v[u][h][q][i] = 0.0f;
                }
            }
#pragma unroll
        for (int u = 0; u < N; u++)
#pragma unroll
            for (int h = 0; h < H; h++)
#pragma unroll
                for (int q = 0; q < NQ; q++)
#pragma unroll
                    for (int i = 0; i < 4; i++) p[h][q][i] += pc_gpu_f2d(v[u][h][q][i]);
    };
    /* The inputs depend on nothing: their loads overlap the children's wait. */
    if constexpr (UWB > U)
        for (int i0 = nb - nwide; i0 < nb; i0 += UWB)
            add_vars(std::integral_constant<int, UWB>(), i0, nb);
    for (int i0 = 0; i0 < nb - nwide; i0 += U)
        add_vars(std::integral_constant<int, U>(), i0, nb - nwide);
    if (active) warp_wait(a, g, t, lane);
    for (int c0 = 0; c0 < nc; c0 += U) {
        float v[U][H][NQ][4];
        double od[U][H];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const bool here = c0 + u < nc;
            const size_t slot = here ? (size_t)__ldg(a.chain_child + g.child_begin + c0 + u) : 0;
#pragma unroll
            for (int h = 0; h < H; h++) {
                const size_t at = slot * a.chunk + rr[h];
#pragma unroll
                for (int q = 0; q < NQ; q++) {
                    if (here)
                        warp_load4<true>(a.rel + at * K, k0 + 4 * q, K, v[u][h][q]);
                    else
#pragma unroll
                        for (int i = 0; i < 4; i++) v[u][h][q][i] = 0.0f;
                }
                od[u][h] = here ? __ldcg(a.off + at) : 0.0;
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int h = 0; h < H; h++) {
                oh[h] += od[u][h];
#pragma unroll
                for (int q = 0; q < NQ; q++)
#pragma unroll
                    for (int i = 0; i < 4; i++) p[h][q][i] += pc_gpu_f2d(v[u][h][q][i]);
            }
    }
#pragma unroll
    for (int h = 0; h < H; h++) {
        float e[NQ][4], x = -INFINITY;
#pragma unroll
        for (int q = 0; q < NQ; q++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                e[q][i] = ok[h] && k0 + 4 * q + i < K ? pc_gpu_d2f(p[h][q][i]) : -INFINITY;
                x = fmaxf(x, e[q][i]);
            }
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
#pragma unroll
        for (int q = 0; q < NQ; q++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                ed[h][4 * q + i] = x == -INFINITY ? 0.0 : pc_gpu_f2d(__expf(e[q][i] - x));
        o[h] = x == -INFINITY ? -INFINITY : oh[h] + pc_gpu_f2d(x);
    }
}

/* A group above the chain's bottom, in the linear domain: the group below left its product
 * acc = sum_k ed[k] exp(w[j, k]) in carry (FP32, 0 or at least 2^-126), and the inputs come
 * pre-exponentiated, lin[v][c][k] = exp(input - mx[v][c]) (FP32, 0 or at least 2^-126). So
 * p[k] = acc[k] prod_v lin[v][x_v][k] exactly in FP64 (at most PC_GPU_CHAIN_LINK_VARS + 1
 * factors: no underflow), o += sum_v mx[v][x_v], and the row is scaled by the power of two
 * 2^-e that brings its max into [1, 2) (exact; o += e ln 2). The log of the group below and
 * this group's exp are gone: the value is the same as the log domain's to FP64 rounding. The
 * variables (the chain's vi0 .. vi1 - 1, in the window) go U at a time, their loads together. */
template <int KP, int S>
static __device__ __forceinline__ void warp_link(const pc_gpu_args &a, const warp_rows &wr,
                                                 int vi0, int vi1, int g8, int k0, bool active,
                                                 const float *carry,
                                                 double (&ed)[S / 8][KP / 4],
                                                 double (&o)[S / 8]) {
    constexpr int NQ = KP / 16, U = WARP_LINK_U, H = S / 8;
#pragma unroll
    for (int h = 0; h < H; h++) {
#pragma unroll
        for (int q = 0; q < NQ; q++) {
            float4 c = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (active)
                c = *reinterpret_cast<const float4 *>(carry +
                                                     warp_carry_at<KP, S>(g8 + 8 * h, k0, 4 * q));
            ed[h][4 * q] = pc_gpu_f2d(c.x), ed[h][4 * q + 1] = pc_gpu_f2d(c.y);
            ed[h][4 * q + 2] = pc_gpu_f2d(c.z), ed[h][4 * q + 3] = pc_gpu_f2d(c.w);
        }
    }
    const int nv = active ? vi1 - vi0 : 0;
    for (int s0 = 0; s0 < nv; s0 += U) {
        float4 l[U][H][NQ];
        double mx[U][H];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int h = 0; h < H; h++) {
                if (s0 + u < nv) {
                    const size_t row = warp_row<S>(wr, vi0 + s0 + u, g8 + 8 * h);
                    const float4 *lin = reinterpret_cast<const float4 *>(a.in_lin + row * KP + k0);
#pragma unroll
                    for (int q = 0; q < NQ; q++) l[u][h][q] = __ldg(lin + q);
                    mx[u][h] = __ldg(a.in_max + row);
                } else { /* past the last variable: a factor of 1 */
#pragma unroll
                    for (int q = 0; q < NQ; q++) l[u][h][q] = make_float4(1.0f, 1.0f, 1.0f, 1.0f);
                    mx[u][h] = 0.0;
                }
            }
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int h = 0; h < H; h++) {
                o[h] += mx[u][h];
#pragma unroll
                for (int q = 0; q < NQ; q++) {
                    ed[h][4 * q] *= pc_gpu_f2d(l[u][h][q].x);
                    ed[h][4 * q + 1] *= pc_gpu_f2d(l[u][h][q].y);
                    ed[h][4 * q + 2] *= pc_gpu_f2d(l[u][h][q].z);
                    ed[h][4 * q + 3] *= pc_gpu_f2d(l[u][h][q].w);
                }
            }
    }
#pragma unroll
    for (int h = 0; h < H; h++) {
        /* The row's largest exponent: p >= 0, so the high words order as the values. */
        int hi = 0;
#pragma unroll
        for (int i = 0; i < KP / 4; i++) hi = max(hi, __double2hiint(ed[h][i]));
        hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, 1));
        hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, 2));
        const int e = hi == 0 ? 0 : (hi >> 20) - 1023; /* a row of zeros stays as it is */
        const double scale = __hiloint2double((1023 - e) << 20, 0);
#pragma unroll
        for (int i = 0; i < KP / 4; i++) ed[h][i] *= scale;
        o[h] += (double)e * 0.6931471805599453;
    }
}

/* The log of a chain top's output, a sum of products of non-negative finite numbers. At K = 64
 * straight from the FP64 sum (integer operations instead of an FP64 -> FP32 conversion, which
 * shares its pipe with the mma): 1.02x at batches 2,048-8,192; at K = 16 and 32 0.99-1.00x,
 * so they keep the conversion (results file 144). */
template <int KP> static __device__ __forceinline__ float warp_top_log(double y) {
    if constexpr (KP == 64)
        return pc_gpu_log_nonneg_d(y);
    else
        return pc_gpu_log_nonneg(pc_gpu_d2f(y));
}

/* One item: chain c, samples S t .. S t + S - 1 (S: 16 or 8), all K outputs of
 * each group, by one warp. Every warp of the block calls it for the gang when exp(w) goes
 * through shared memory (the copies and their barriers are the block's); `active` is false
 * for a warp whose tile lies past the batch. `carry` is the warp's [S][warp_ld] buffer in
 * which a group hands its product to the next group of the chain, before the log; `srow` its
 * staged input rows. Counters count 16-sample tiles: an 8-sample item adds K / 2 to its
 * tile's (K is a multiple of 4: fuse pads its circuit), so a tile is done at K as before. */
template <int KP, bool KX, int S>
static __device__ void warp_chain(const pc_gpu_args &a, int c, int t, int lane, bool active,
                                  float *ws, float *carry, int *srow) {
    constexpr int NT = KP / 8; /* 8-wide n-tiles of outputs */
    /* n-tiles per pass of the product: two independent mma chains in flight (with the
     * 8 x 8 x 4 shape four chains against two won 1.01-1.04x at K = 32 and 64; with the
     * 16 x 8 x 16 shape four against two are level, 0.98-1.02x at batches 512-4,096; at
     * K = 128 1.00-1.01x, results file 150). */
    constexpr int NP = 2, H = S / 8;
    const int g8 = lane >> 2, t4 = lane & 3, K = KX ? KP : a.K, k0 = t4 * (KP / 4);
    const int cb = __ldg(a.chain_begin + c), ce = __ldg(a.chain_begin + c + 1);
    /* Rows as int (n is an int32): fewer registers for the state kept through a chain. */
    const int b0 = t * S, t16 = t * S / WARP_TILE;
    int r[H], rr[H]; /* the lane's samples; the rows it reads */
    bool ok[H];
#pragma unroll
    for (int h = 0; h < H; h++)
        r[h] = b0 + g8 + 8 * h, ok[h] = r[h] < a.n,
        rr[h] = ok[h] ? r[h] : warp_fallback<S>(b0, a.n);
    warp_rows wr;
    wr.srow = srow, wr.vb = __ldg(a.chain_vb + cb), wr.b0 = b0, wr.w0 = 0;
    wr.nv = __ldg(a.chain_vb + ce) - wr.vb, wr.nb = __ldg(a.chain_vb + cb + 1) - wr.vb;
    int gi = __ldg(a.chain_groups + cb);
    const pc_gpu_group g = a.groups[gi]; /* the bottom's children */
    if (warp_smem_w<KP>() && gi != a.G - 1) warp_stage_w<KP, S>(a.wf + (size_t)gi * KP * KP, ws);
    if (active) warp_stage_rows<S>(a, wr, lane); /* warp_bottom waits for the children */
    double o[H]; /* the rows' offsets: msg = o + log(ed exp(w)^T) */
#pragma unroll
    for (int h = 0; h < H; h++) o[h] = 0.0;

    for (int m = cb, vi0 = 0; m < ce; m++) {
        const bool root = gi == a.G - 1, top = m + 1 == ce;
        const int vi1 = __ldg(a.chain_vb + m + 1) - wr.vb; /* its variables: vi0 .. vi1 - 1 */
        /* exp(w) from L1 (K <= 16): this group's loads travel with the gather's. */
        float4 wreg[warp_smem_w<KP>() ? 1 : NT][KP / 16];
        if constexpr (!warp_smem_w<KP>()) {
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const float4 *w4 = reinterpret_cast<const float4 *>(
                    a.wf + ((size_t)gi * KP + 8 * n + g8) * KP + k0);
#pragma unroll
                for (int s4 = 0; s4 < KP / 16; s4++)
                    wreg[n][s4] = active && !root ? __ldg(w4 + s4) : make_float4(0, 0, 0, 0);
            }
        }
        /* 1.-3. The product's operand ed (FP64, max 1 or in [1, 2) per row) and o. */
        double ed[H][KP / 4];
        if (m == cb) {
            warp_bottom<KP, KX, S>(a, g, t16, wr, rr, ok, g8, k0, lane, active, ed, o);
            if (active && !top) warp_window<S>(a, wr, wr.nb, wr.nv - wr.nb, wr.nv, lane);
        } else {
            warp_link<KP, S>(a, wr, vi0, vi1, g8, k0, active, carry, ed, o);
        }
        __syncwarp(); /* every lane has read carry before the product overwrites it */
        vi0 = vi1;

        if (root) { /* log p(x) = o + log sum_k ed[k] exp(root_logw[k]), in FP64 */
#pragma unroll
            for (int h = 0; h < H; h++) {
                double sum = 0.0;
#pragma unroll
                for (int i = 0; i < KP / 4; i++) sum += ed[h][i] * __ldg(a.root_wexp + k0 + i);
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                if (t4 == 0 && ok[h]) a.logp[r[h]] = o[h] + log(sum);
            }
            return;
        }
        /* The gang's exp(w) of this group has arrived (every warp of the block gets here: the
         * chain, so whether a group is the root, is the gang's). */
        const int gn = top ? gi : __ldg(a.chain_groups + m + 1);
        if (warp_smem_w<KP>()) {
            asm volatile("cp.async.wait_all;\n" ::: "memory");
            __syncthreads();
        }
        if constexpr (S == 16) {
            if (active) {
                /* 4.-5. Per n-tile of 8 outputs: acc = ed exp(w)^T in FP64 on the tensor cores (the
                 *    lane's exp(w)[8 n + g][k0 .. k0 + KP / 4) as 16-byte words), at (row g or
                 *    g + 8, j = 8 n + 2 t and + 1): to carry as it is, or, at the chain's top, its
                 *    log to the chain's slot with off = o. */
                float *out[H];
#pragma unroll
                for (int h = 0; h < H; h++) out[h] = a.rel + ((size_t)c * a.chunk + r[h]) * K;
                /* Unrolled at every K: at K = 64 the loop stayed rolled while the item spilled
                 * (unrolled twice 1.00-1.04x, results file 126); since the item's spills went
                 * (steps 136, 140), fully unrolled it spills none and ran 1.02x (file 142). At
                 * K = 128 rolled or unrolled twice: 0.99-1.01x (file 150). */
#pragma unroll
                for (int n0 = 0; n0 < NT; n0 += NP) {
                    double acc[NP][2][2];
#pragma unroll
                    for (int np = 0; np < NP; np++)
                        acc[np][0][0] = acc[np][0][1] = acc[np][1][0] = acc[np][1][1] = 0.0;
#pragma unroll
                    for (int s4 = 0; s4 < KP / 16; s4++) {
                        double wv[NP][4];
#pragma unroll
                        for (int np = 0; np < NP; np++) {
                            float4 w;
                            if constexpr (warp_smem_w<KP>())
                                w = *reinterpret_cast<const float4 *>(
                                    ws + warp_at<KP>(8 * (n0 + np) + g8, k0, 4 * s4));
                            else
                                w = wreg[n0 + np][s4];
                            wv[np][0] = pc_gpu_f2d(w.x), wv[np][1] = pc_gpu_f2d(w.y);
                            wv[np][2] = pc_gpu_f2d(w.z), wv[np][3] = pc_gpu_f2d(w.w);
                        }
#pragma unroll
                        for (int np = 0; np < NP; np++)
                            pc_gpu_dmma16<4>(acc[np][0], acc[np][1], &ed[0][4 * s4],
                                             &ed[H - 1][4 * s4], wv[np]);
                    }
#pragma unroll
                    for (int np = 0; np < NP; np++) {
                        const int j = 8 * (n0 + np) + 2 * t4;
#pragma unroll
                        for (int h = 0; h < H; h++) {
                            if (!top) {
                                *reinterpret_cast<float2 *>(
                                    carry + warp_carry_at<KP, S>(g8 + 8 * h, j)) =
                                    make_float2(pc_gpu_d2f(acc[np][h][0]),
                                                pc_gpu_d2f(acc[np][h][1]));
                                continue;
                            }
                            const float v0 = warp_top_log<KP>(acc[np][h][0]);
                            const float v1 = warp_top_log<KP>(acc[np][h][1]);
                            if (ok[h] && j < K) out[h][j] = v0;
                            if (ok[h] && j + 1 < K) out[h][j + 1] = v1;
                        }
                    }
                }
            }
        } else if (active) {
            /* 4.-5. Transposed, per m-tile of 16 outputs: acc^T = exp(w) ed^T in FP64 on the
             *    tensor cores, exp(w) the A operand (the lane's exp(w)[16 m + g and + 8][k0 ..
             *    k0 + KP / 4) as 16-byte words: twice the conversions per output of the
             *    16-sample form), ed the B operand; out at (j = 16 m + g or + 8, samples 2 t
             *    and 2 t + 1): to carry as it is, or, at the chain's top, its log to the slot. */
            constexpr int NM = KP / 16, NPM = NM % 2 == 0 ? 2 : 1;
            const int sc = b0 + 2 * t4; /* the samples of the lane's outputs: sc, sc + 1 */
            float *out[2] = {a.rel + ((size_t)c * a.chunk + sc) * K,
                             a.rel + ((size_t)c * a.chunk + sc + 1) * K};
            const bool okc[2] = {sc < a.n, sc + 1 < a.n};
#pragma unroll
            for (int m0 = 0; m0 < NM; m0 += NPM) {
                double acc[NPM][2][2];
#pragma unroll
                for (int np = 0; np < NPM; np++)
                    acc[np][0][0] = acc[np][0][1] = acc[np][1][0] = acc[np][1][1] = 0.0;
#pragma unroll
                for (int s4 = 0; s4 < KP / 16; s4++) {
                    double wa[NPM][2][4];
#pragma unroll
                    for (int np = 0; np < NPM; np++)
#pragma unroll
                        for (int h = 0; h < 2; h++) {
                            const float4 w = *reinterpret_cast<const float4 *>(
                                ws + warp_at<KP>(16 * (m0 + np) + 8 * h + g8, k0, 4 * s4));
                            wa[np][h][0] = pc_gpu_f2d(w.x), wa[np][h][1] = pc_gpu_f2d(w.y);
                            wa[np][h][2] = pc_gpu_f2d(w.z), wa[np][h][3] = pc_gpu_f2d(w.w);
                        }
#pragma unroll
                    for (int np = 0; np < NPM; np++)
                        pc_gpu_dmma16<4>(acc[np][0], acc[np][1], wa[np][0], wa[np][1],
                                         &ed[0][4 * s4]);
                }
#pragma unroll
                for (int np = 0; np < NPM; np++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int j = 16 * (m0 + np) + 8 * h + g8;
#pragma unroll
                        for (int cc = 0; cc < 2; cc++) {
                            if (!top)
                                carry[warp_carry_at<KP, S>(2 * t4 + cc, j)] =
                                    pc_gpu_d2f(acc[np][h][cc]);
                            else if (okc[cc] && j < K)
                                out[cc][j] = warp_top_log<KP>(acc[np][h][cc]);
                        }
                    }
            }
        }
        if (active && top) {
#pragma unroll
            for (int h = 0; h < H; h++)
                if (ok[h] && t4 == 0) a.off[(size_t)c * a.chunk + r[h]] = o[h];
            /* Publish: every lane's stores, then one release of the counter. */
            __syncwarp();
            if (lane == 0)
                pc_gpu_release_add(a.done + (size_t)c * a.tiles + t16, K * S / WARP_TILE);
        }
        if (active) __syncwarp(); /* carry written before the next group reads it */
        if (warp_smem_w<KP>() && !top) { /* the next group's exp(w), once ws is free */
            __syncthreads();
            if (gn != a.G - 1) warp_stage_w<KP, S>(a.wf + (size_t)gn * KP * KP, ws);
        }
        gi = gn;
    }
}

/* The persistent loop: gangs of items (chain-major, chain order) until none is left.
 * Blocks per SM (BLOCKS) by K: 2 of 6 warps (168 registers, 94 KB of shared memory each) at
 * K = 128, 2 of 4 (255) at 96 < K <= 112, 2 (250-254) or 3 (168) at 64 < K <= 96
 * (warp_pick_kp), 3 (168) at K <= 64, 5 (96) at K <= 32; a lane holds H KP / 4 operands in FP64
 * for the mma (H = 2 rows, 1 with 8-sample items).
 * Fewer warps than fit ran faster (H200, measured with the linear links: K = 64 at
 * 1,024-2,048 samples 1.14-1.16x with 3 blocks instead of 4, 1.00x at 4,096; K = 16
 * 1.06-1.15x with 6 instead of 8, and with the staged rows 1.07-1.10x with 5 instead of 6;
 * K = 32 level or slower with 3 or 4): an item's latency on the tree's critical path counts
 * more than the warps in flight. Dynamic shared memory: warp_smem_bytes<KP, S>(). */
template <int KP, bool KX, int BLOCKS, int S>
static __global__ void __launch_bounds__(warp_threads<S>(), BLOCKS)
    warp_kernel(pc_gpu_args a, int total) {
    const int lane = threadIdx.x & 31;
    /* The block's warps take consecutive tiles of one chain ("gang" of W tiles), so that a
     * group's exp(w) comes from L2 once per block, then from L1 or shared memory (measured:
     * K = 16, batch 4096, 0.356 against 0.389 ms with every warp on its own item; 8-warp gangs
     * were slower). One barrier per gang and group (K > 16); waits and counters stay per
     * warp. */
    __shared__ int s_item[2];
    extern __shared__ __align__(16) float smem[];
    constexpr int W = warp_nw<S>();
    float *ws = smem;
    float *carry = smem + warp_ws_floats<KP>() + (threadIdx.x >> 5) * warp_own_floats<KP, S>();
    int *srow = reinterpret_cast<int *>(carry + warp_carry_floats<KP, S>());
    /* S-sample tiles: a.tiles * (WARP_TILE / S), taken from the parameters at each use (a
     * register of its own spilled at K = 16). */
    const int warp = threadIdx.x >> 5, gangs = (a.tiles * (WARP_TILE / S) + W - 1) / W;
    if (threadIdx.x == 0) s_item[0] = atomicAdd(a.queue, 1);
    __syncthreads();
    int item = s_item[0];
    for (int it = 1; item < total; it ^= 1) {
        /* The next gang is fetched while this one runs; double-buffered, so a warp still
         * reading the slot of this gang cannot see it overwritten. */
        int next = 0;
        if (threadIdx.x == 0) next = atomicAdd(a.queue, 1);
        const int t = (item % gangs) * W + warp;
        const bool active = t < a.tiles * (WARP_TILE / S);
        if (warp_smem_w<KP>() || active)
            warp_chain<KP, KX, S>(a, __ldg(a.chain_queue + item / gangs), t, lane, active, ws,
                                  carry, srow);
        if (threadIdx.x == 0) s_item[it] = next;
        __syncthreads();
        item = s_item[it];
    }
}

typedef void (*warp_fn)(pc_gpu_args, int);

/* The kernel for K and a form, and how it is launched: threads per block, samples per item,
 * dynamic shared memory. */
struct warp_launch {
    warp_fn fn;
    int threads, samples;
    size_t smem;
};
template <int KP, int S> static warp_launch warp_launch_of(warp_fn fn) {
    return {fn, warp_threads<S>(), S, warp_smem_bytes<KP, S>()};
}

/* The kernel for K: rows padded to 16, 32, 64, then to a multiple of 16 (64 < K <= 128 with
 * rows of 128 at K = 128 and batch 4,096 1.29x faster than the tile strategy, at K = 96 1.19x
 * faster than the persistent one, results file 147; rows of 96 at 64 < K <= 96 1.66-1.71x
 * faster than rows of 128 at batches 1,024-8,192, file 162; rows of 80 at K <= 80 1.22-1.37x
 * faster than rows of 96, rows of 112 at 96 < K <= 112 1.34-1.39x faster than rows of 128, file
 * 164); at K = 64 its KX form (no column checks, constant row strides: batches 2,048-4,096
 * 1.02-1.03x, results file 104; fuse runs 32 < K < 64 as 64); not at K = 16, where that form's
 * loads spill 200 bytes (0.70-0.80x), nor at 32 (0.97-1.03x). Blocks per SM as in warp_kernel's
 * notes; at KP = 80 and 96 THREE has 3 blocks (168 registers, 8 and 48 bytes of spills) instead
 * of 2 (250 and 254, none). EIGHT at KP >= 64 (168 registers; 0-100 bytes of spills), and only
 * it at KP = 128; other forms fall back to TWO. pc_gpu_warp_form (gpu_plan.c) picks the form. */
template <int KP> static warp_launch warp_pick_kp(int form) {
    if constexpr (KP == 128) {
        return warp_launch_of<KP, 8>(warp_kernel<KP, false, 2, 8>);
    } else {
        if constexpr (KP >= 64) {
            if (form == PC_GPU_WARP_EIGHT)
                return warp_launch_of<KP, 8>(warp_kernel<KP, false, 2, 8>);
        }
        if constexpr (KP == 64)
            return warp_launch_of<KP, 16>(warp_kernel<KP, true, 3, 16>);
        else if constexpr (KP == 80 || KP == 96)
            return warp_launch_of<KP, 16>(form == PC_GPU_WARP_THREE
                                              ? warp_kernel<KP, false, 3, 16>
                                              : warp_kernel<KP, false, 2, 16>);
        else
            return warp_launch_of<KP, 16>(warp_kernel<KP, false, KP >= 112 ? 2 : 5, 16>);
    }
}

static warp_launch warp_pick(int K, int form) {
    return K <= 16    ? warp_pick_kp<16>(form)
           : K <= 32  ? warp_pick_kp<32>(form)
           : K <= 64  ? warp_pick_kp<64>(form)
           : K <= 80  ? warp_pick_kp<80>(form)
           : K <= 96  ? warp_pick_kp<96>(form)
           : K <= 112 ? warp_pick_kp<112>(form)
                      : warp_pick_kp<128>(form);
}

/* Whether the input rows (V (C + 1), staged as int32) fit the warp strategy. */
extern "C" int pc_gpu_fuse_warp_takes(const pc_gpu_state *s) {
    return (int64_t)s->V * (s->C + 1) <= INT32_MAX;
}

/* The warp kernel's shared memory and resident grid of each form, into s->grid_warp (the tiles
 * and counters are the caller's: 16-sample runs, as the persistent strategy's); sets warp_ok,
 * so that the slot plan adds the chains. */
extern "C" pc_status pc_gpu_fuse_warp_prepare(pc_gpu_state *s) {
    pc_status st = PC_OK;
    int per_sm = 0;
    if (s->K > PC_GPU_WARP_MAX_K)
        return pc_fail(PC_ERR_UNSUPPORTED, "fuse warp strategy: takes K <= %d, not K = %d",
                       PC_GPU_WARP_MAX_K, s->K);
    if (!pc_gpu_fuse_warp_takes(s))
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "fuse warp strategy: %d variables of %d values make more input rows "
                       "than an int32 counts", s->V, s->C + 1);
    for (int form = 0; form < PC_GPU_WARP_FORMS; form++) {
        const warp_launch l = warp_pick(s->K, form);
        PC_GPU_CHECK(cudaFuncSetAttribute(l.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)l.smem));
        PC_GPU_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, l.fn, l.threads, l.smem));
        s->grid_warp[form] = s->sms * (per_sm > 0 ? per_sm : 1);
    }
    s->warp_ok = 1;
fail:
    return st;
}

static pc_status warp_configure(pc_gpu_state *s) {
    s->bm = WARP_TILE, s->bn = s->K, s->smem = 0;
    return pc_gpu_fuse_warp_prepare(s);
}

/* Chain plan p (s->chains[p], planned with the slots) into s->d_chains[p], with the variables
 * in chain order (vb, vars), so that an item finds all of its chain's in one range, and the two
 * queue orders (warp_queue_by_path picks one): the plan's, then by path. */
static pc_status warp_upload_chains(pc_gpu_state *s, int p) {
    pc_status st = PC_OK;
    const pc_gpu_chains *ch = &s->chains[p];
    pc_gpu_chain_dev *d = &s->d_chains[p];
    const pc_circuit *c = s->circuit;
    const size_t nb = sizeof(int32_t) * ((size_t)ch->num_chains + 1);
    const size_t nq = sizeof(int32_t) * 2 * (size_t)ch->num_chains;
    const size_t ng = sizeof(int32_t) * (size_t)s->G, nv = sizeof(int32_t) * (size_t)s->V;
    int32_t *vb = (int32_t *)malloc(ng + sizeof(int32_t)), *vars = (int32_t *)malloc(nv);
    int32_t *queue = (int32_t *)malloc(nq);
    if (!vb || !vars || !queue) {
        st = pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for the chains' variables");
        goto fail;
    }
    vb[0] = 0;
    for (int32_t m = 0; m < s->G; m++) {
        const int32_t g = ch->groups[m], n = c->var_start[g + 1] - c->var_start[g];
        memcpy(vars + vb[m], c->group_vars + c->var_start[g], sizeof(int32_t) * (size_t)n);
        vb[m + 1] = vb[m] + n;
    }
    for (int32_t i = 0; i < ch->num_chains; i++)
        queue[i] = i, queue[ch->num_chains + i] = ch->by_path[i];
    if ((st = pc_gpu_alloc(s, (void **)&d->begin, nb, "chains"))) goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&d->groups, ng, "chain groups"))) goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&d->child, ng, "chain children"))) goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&d->vb, ng + sizeof(int32_t), "chain variables")))
        goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&d->vars, nv, "chain variables"))) goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&d->queue, nq, "chain queue orders"))) goto fail;
    PC_GPU_CHECK(cudaMemcpy(d->begin, ch->begin, nb, cudaMemcpyHostToDevice));
    PC_GPU_CHECK(cudaMemcpy(d->groups, ch->groups, ng, cudaMemcpyHostToDevice));
    if (s->G > 1)
        PC_GPU_CHECK(cudaMemcpy(d->child, ch->child_chain, ng - sizeof(int32_t),
                                cudaMemcpyHostToDevice));
    PC_GPU_CHECK(cudaMemcpy(d->vb, vb, ng + sizeof(int32_t), cudaMemcpyHostToDevice));
    PC_GPU_CHECK(cudaMemcpy(d->vars, vars, nv, cudaMemcpyHostToDevice));
    PC_GPU_CHECK(cudaMemcpy(d->queue, queue, nq, cudaMemcpyHostToDevice));
fail:
    free(vb), free(vars), free(queue);
    return st;
}

static size_t warp_chain_bytes(const pc_gpu_state *s, int p) {
    return sizeof(int32_t) *
           (3 * (size_t)s->chains[p].num_chains + 1 + 3 * (size_t)s->G + 1 + (size_t)s->V);
}

/* The inputs in the linear form of warp_link (rows [V][C + 1], row C the marginal; KP floats
 * each, 16-byte aligned) and exp(root_logw), computed in FP64 from the model's FP64 values;
 * values below FLT_MIN become 0, as the FP32 exp of the log domain would flush them. */
static size_t warp_in_rows(const pc_gpu_state *s) { return (size_t)s->V * ((size_t)s->C + 1); }
static size_t warp_in_bytes(const pc_gpu_state *s) {
    const size_t KP = (size_t)pc_gpu_kp(s->K, PC_GPU_W_ROWS);
    return warp_in_rows(s) * (KP * sizeof(float) + sizeof(double)) + KP * sizeof(double);
}

static pc_status warp_upload_inputs(pc_gpu_state *s) {
    pc_status st = PC_OK;
    const pc_circuit *c = s->circuit;
    const int K = s->K, KP = pc_gpu_kp(K, PC_GPU_W_ROWS), C = s->C;
    const size_t rows = warp_in_rows(s);
    float *lin = (float *)calloc(rows * KP, sizeof(float));
    double *mx = (double *)malloc(rows * sizeof(double));
    double *in = (double *)malloc(K * sizeof(double)), *rw = (double *)calloc(KP, sizeof(double));
    if (!lin || !mx || !in || !rw) {
        st = pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for %zu input rows", rows);
        goto fail;
    }
    for (size_t row = 0; row < rows; row++) {
        const int v = (int)(row / (C + 1)), x = (int)(row % (C + 1));
        double m = -INFINITY;
        for (int k = 0; k < K; k++) {
            const double *p = c->input_logp + ((size_t)v * K + k) * C;
            if (x < C) {
                in[k] = p[x];
            } else { /* the marginal: LSE over the values */
                double pm = -INFINITY, sum = 0.0;
                for (int y = 0; y < C; y++) pm = p[y] > pm ? p[y] : pm;
                for (int y = 0; y < C && pm != -INFINITY; y++) sum += exp(p[y] - pm);
                in[k] = pm == -INFINITY ? -INFINITY : pm + log(sum);
            }
            m = in[k] > m ? in[k] : m;
        }
        mx[row] = m;
        for (int k = 0; k < K && m != -INFINITY; k++) {
            const double e = exp(in[k] - m);
            lin[row * KP + k] = e < FLT_MIN ? 0.0f : (float)e;
        }
    }
    for (int k = 0; k < K; k++) rw[k] = exp(c->root_logw[k]);
    if ((st = pc_gpu_alloc(s, (void **)&s->d_in_lin, rows * KP * sizeof(float), "linear inputs")))
        goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_in_max, rows * sizeof(double), "input maxima")))
        goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_root_wexp, KP * sizeof(double), "exp(root_logw)")))
        goto fail;
    PC_GPU_CHECK(cudaMemcpy(s->d_in_lin, lin, rows * KP * sizeof(float), cudaMemcpyHostToDevice));
    PC_GPU_CHECK(cudaMemcpy(s->d_in_max, mx, rows * sizeof(double), cudaMemcpyHostToDevice));
    PC_GPU_CHECK(cudaMemcpy(s->d_root_wexp, rw, KP * sizeof(double), cudaMemcpyHostToDevice));
fail:
    free(lin), free(mx), free(in), free(rw);
    return st;
}

/* exp(trans_logw) per group (PC_GPU_W_ROWS), the inputs' linear form, and the chain plans. */
extern "C" pc_status pc_gpu_fuse_warp_upload(pc_gpu_state *s) {
    pc_status st = pc_gpu_upload_padded_w(s, PC_GPU_W_ROWS, &s->d_wf);
    if (st == PC_OK) st = warp_upload_inputs(s);
    for (int p = 0; p < PC_GPU_CHAIN_PLANS && st == PC_OK; p++) st = warp_upload_chains(s, p);
    return st;
}

/* The chains' slots are the common message buffer's (plan_slots counts them). */
extern "C" size_t pc_gpu_fuse_warp_bytes(const pc_gpu_state *s, int64_t chunk) {
    (void)chunk;
    size_t bytes = pc_gpu_padded_w_bytes(s, PC_GPU_W_ROWS) + warp_in_bytes(s);
    for (int p = 0; p < PC_GPU_CHAIN_PLANS; p++) bytes += warp_chain_bytes(s, p);
    return bytes;
}

extern "C" void pc_gpu_fuse_warp_release(pc_gpu_state *s) {
    const size_t KP = (size_t)pc_gpu_kp(s->K, PC_GPU_W_ROWS), rows = warp_in_rows(s);
    pc_gpu_release(s, s->d_wf, pc_gpu_padded_w_bytes(s, PC_GPU_W_ROWS));
    pc_gpu_release(s, s->d_in_lin, rows * KP * sizeof(float));
    pc_gpu_release(s, s->d_in_max, rows * sizeof(double));
    pc_gpu_release(s, s->d_root_wexp, KP * sizeof(double));
    for (int p = 0; p < PC_GPU_CHAIN_PLANS; p++) {
        pc_gpu_chain_dev *d = &s->d_chains[p];
        const size_t chains = (size_t)s->chains[p].num_chains;
        pc_gpu_release(s, d->begin, sizeof(int32_t) * (chains + 1));
        pc_gpu_release(s, d->groups, sizeof(int32_t) * (size_t)s->G);
        pc_gpu_release(s, d->child, sizeof(int32_t) * (size_t)s->G);
        pc_gpu_release(s, d->vb, sizeof(int32_t) * ((size_t)s->G + 1));
        pc_gpu_release(s, d->vars, sizeof(int32_t) * (size_t)s->V);
        pc_gpu_release(s, d->queue, sizeof(int32_t) * 2 * chains);
        *d = (pc_gpu_chain_dev){};
    }
    s->d_wf = s->d_in_lin = NULL, s->d_in_max = s->d_root_wexp = NULL;
}

/* Which order the queue hands the chains out in: the plan's (by the step each can start at)
 * while the gangs fill the resident blocks fewer than WARP_PATH_WAVES times, where the tree's
 * critical path sets the time; by path (highest level first) above, where keeping every block
 * busy does. Measured on the H200 (MNIST tree, 229 chains, 5 blocks per SM at K <= 32, 3 at
 * K = 64; results file 82), by path against the plan's order:
 *   11 waves (batch 2,048 at K <= 32)     0.87-0.88x
 *   16.7 waves (3,072 at K <= 32)         0.96-0.97x
 *   18.5 waves (2,048 at K = 64)          1.02x
 *   22-37 waves (4,096; 3,072 at K = 64)  1.05-1.09x
 *   33-148 waves (6,144 to 16,384)        1.00-1.08x */
#define WARP_PATH_WAVES 18
static bool warp_queue_by_path(int64_t gangs, int grid) {
    return gangs >= (int64_t)WARP_PATH_WAVES * grid;
}

extern "C" pc_status pc_gpu_fuse_warp_enqueue(pc_gpu_state *s, const pc_gpu_args *a,
                                              cudaStream_t stream) {
    pc_status st = PC_OK;
    const int form = pc_gpu_warp_form(s->K, a->n, s->sms);
    const int plan = pc_gpu_warp_chains(s->K, a->n, s->sms);
    const int32_t chains = s->chains[plan].num_chains;
    const pc_gpu_chain_dev *d = &s->d_chains[plan];
    const warp_launch l = warp_pick(s->K, form);
    const int64_t tiles = (int64_t)a->tiles * (WARP_TILE / l.samples), nw = l.threads / 32;
    const int64_t total = (int64_t)chains * ((tiles + nw - 1) / nw);
    if (total > INT32_MAX)
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "fuse warp strategy: %d chains make %lld work gangs for %d samples, more "
                       "than the queue counts (2^31 - 1)", chains, (long long)total, a->n);
    const int resident = s->grid_warp[form];
    const int grid = total < resident ? (int)total : resident;
    pc_gpu_args b = *a;
    b.chain_begin = d->begin, b.chain_groups = d->groups, b.chain_child = d->child;
    b.chain_vb = d->vb, b.chain_vars = d->vars;
    b.chain_queue = d->queue + (warp_queue_by_path(total, grid) ? chains : 0);
    if ((st = pc_gpu_reset_counters(a, stream))) return st;
    l.fn<<<grid, l.threads, l.smem, stream>>>(b, (int)total);
    PC_GPU_CHECK(cudaGetLastError());
fail:
    return st;
}

extern "C" const pc_gpu_impl pc_gpu_fuse_warp_impl = {
    PC_BACKEND_FUSE,          "warp",                 NULL, warp_configure, pc_gpu_fuse_warp_upload,
    pc_gpu_fuse_warp_enqueue, pc_gpu_fuse_warp_bytes, NULL, pc_gpu_fuse_warp_release};

static pc_status fuse_warp_create(const pc_circuit *c, const pc_eval_opts *o, void **state) {
    return pc_gpu_create(&pc_gpu_fuse_warp_impl, c, o, state);
}

extern "C" const pc_backend_ops pc_backend_fuse_warp_ops = {
    fuse_warp_create, pc_gpu_evaluate, pc_gpu_peak_bytes, pc_gpu_destroy};
