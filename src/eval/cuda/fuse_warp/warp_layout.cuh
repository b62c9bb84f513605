/* The warp strategy's shared-memory layout (warp.cuh): items and gangs, where exp(w) and the
 * carry rows lie (bank-conflict-free strides and swizzles), the block's copy of exp(w). */
#ifndef PC_GPU_WARP_LAYOUT_CUH
#define PC_GPU_WARP_LAYOUT_CUH

#include "eval/cuda/gpu_chains.h"
#include "eval/cuda/gpu_device.cuh"

#define WARP_TILE 16 /* samples per counter (the tiles' run, s->bm) */
/* Samples per item S: 16 (the mma's rows, two per lane: rows g and g + 8), or 8 (one per lane
 * row; the product transposed, exp(w) the mma's A operand), whose operands take half the
 * registers, so that three warps fit a scheduler (pc_gpu_warp_form picks). Warps per block (the
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

/* Whether the gang takes its exp(w) from shared memory (K > 16) or straight from L1 (K <= 16,
 * where the copy and its barrier cost more than they save) (tuning.md#warp-weights-smem). */
template <int KP> static __host__ __device__ constexpr bool warp_smem_w() { return KP > 16; }

/* Row stride of the shared-memory tiles (exp(w) and the carry), in floats, and the column at
 * which k lies. A lane reads its row's k0 .. k0 + KP / 4 - 1 as 16-byte words, and a
 * quarter-warp (8 lanes: rows g and g + 1, t = 0..3) is served at once only if its 8 words lie
 * in 8 different 16-byte bank groups. At K <= 32 rows KP + 4 floats apart do that; at K = 64
 * lanes t and t + 2 would be 128 bytes apart, on the same banks, so there the upper half of a
 * row sits 8 floats further on, in rows of 76 floats (19 words, odd) (tuning.md#warp-banks).
 * Rows of 80 and 112 floats (20 and 28 words, 4 mod 8) need no padding: lane t's words sit 5
 * or 7 t apart, row g + 1's 4 further on; rows of 96 take 100 (25 words, 1 mod 8). */
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
 * instructions per chunk (tuning.md#warp-weights-copy). KP = 96: 16 rows and 3 chunks a step;
 * 80 and 112: 32 rows and 5 or 7 chunks, the last step past row KP skipped; else 1 chunk. */
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
 * next group's during this one's product, leaves less L1 and was slower
 * (tuning.md#warp-weights-smem). */
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

#endif
