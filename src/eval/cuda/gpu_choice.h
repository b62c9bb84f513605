/* fuse's choices per forward pass: which strategy, which form and which chain plan (internal;
 * plain C, tested on the tables without a GPU). Every cut point comes from the tuning table t
 * (tuning/gpu_tuning.h); n is the pass's samples, sms the GPU's SMs, K fuse's states
 * (pc_gpu_fuse_states).
 *
 * The strategies (fuse/fuse.cu):
 *   tile        a block scores its own T samples through the whole circuit (K <= 128);
 *   warp        one persistent kernel, a warp per (chain of groups, 16 or 8 samples), the
 *               product on the FP64 tensor cores (K <= 128);
 *   persistent  one persistent kernel, a block per (group, samples, outputs) (any K).
 * A tile block's time grows with its samples T, so the tile strategy's time is a staircase in
 * n (a step per doubling of T past the SMs) while the warp strategy's grows smoothly: tile wins
 * while its blocks are small, warp from a few samples per block on, and above K = 64 warp's
 * rows of 80, 96 and 112 beat the tile kernel's rows padded to 128. */
#ifndef PC_GPU_CHOICE_H
#define PC_GPU_CHOICE_H

#include <stdint.h>

#include "eval/cuda/tuning/gpu_tuning.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The states per latent with which fuse runs a circuit of K (pc_gpu_create adds states of zero
 * probability, which leave every log p(x) as it is): K rounded up to a multiple of 4, so that
 * its kernels load rows 16 bytes at a time; 32 < K < 64 as 64, the only row length of 33-64
 * the tile and warp kernels are compiled for (their full-row form, without column checks); and
 * t->pad_128_above < K < 128 as 128, the tile kernel's full row. */
int32_t pc_gpu_fuse_states(const pc_gpu_tuning *t, int32_t K);

/* The tile strategy's largest samples per block (its schedules are made for T = 4, 8, 16,
 * 32), and its samples per block for n: the fewest, a power of two from 4, that leave at most
 * t->tile_blocks_per_sm blocks per SM, at most PC_GPU_TILE_MAX_T (beyond, the blocks run in
 * waves). */
#define PC_GPU_TILE_MAX_T 32
int32_t pc_gpu_tile_samples(const pc_gpu_tuning *t, int64_t n, int32_t sms);

/* The warp strategy's largest K (its kernel's rows are padded to 16, 32 or 64, above 64 to a
 * multiple of 16), and whether fuse considers that strategy at K: 1 <= K <=
 * PC_GPU_WARP_MAX_K. */
#define PC_GPU_WARP_MAX_K 128
int pc_gpu_fuse_warp_k(int32_t K);

/* Whether fuse takes the warp strategy (where it can run the circuit): at K <= 64 once a tile
 * block would hold more than t->warp_over_tile_t_k32 (K <= 32) or _k64 samples; at 64 < K <=
 * t->warp_always_max_k always; above, up to K = 128, from more than t->warp_k128_per_sm samples
 * per SM. */
int pc_gpu_fuse_takes_warp(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms);

/* Whether fuse takes the tile strategy where it does not take warp: always at K <= 64; at
 * t->warp_always_max_k < K <= 128 (four full output columns per lane) up to
 * t->tile_k128_max_waves waves of full blocks, but not where its few blocks leave most SMs idle
 * (n <= t->tile_k128_min_per_sm SMs, and strictly between the gap's two per-SM counts); never
 * at 64 < K <= t->warp_always_max_k (rows padded to 128 against warp's 80-112) nor above 128
 * (the tile kernel's limit). Else the persistent strategy. */
int pc_gpu_fuse_takes_tile(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms);

/* The warp strategy's item forms (fuse_warp/): 16-sample items with the kernel's usual
 * blocks per SM (TWO), the same with 3 blocks at 64 < K <= 96 (THREE), 8-sample items, whose
 * operands take half the registers (EIGHT). */
enum { PC_GPU_WARP_TWO, PC_GPU_WARP_THREE, PC_GPU_WARP_EIGHT, PC_GPU_WARP_FORMS };

/* The form for a pass: EIGHT above t->warp_eight_above_k, and where the gangs fill the GPU only
 * a few times, up to t->warp_eight_per_sm samples per SM at 64 < K and t->warp_eight_per_sm_64
 * at 32 < K <= 64; above, THREE at 64 < K <= 96 (the only rows with a 3-block form) from more
 * than t->warp_three_per_sm, where the gangs fill the resident blocks many times over; else
 * TWO (always at K <= 32). */
int pc_gpu_warp_form(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms);

/* The warp strategy's chain plans (gpu_chains.h): chains of at most t->chain_short groups or
 * t->chain_long. Long chains save a message, a wait and a gather per group they link, but hold
 * a warp longer while the items above wait: long at K <= t->chain_long_max_k, and above from
 * more than t->chain_long_per_sm samples per SM, where many items hide each other's latency. */
enum { PC_GPU_CHAINS_SHORT, PC_GPU_CHAINS_LONG, PC_GPU_CHAIN_PLANS };
int pc_gpu_warp_chains(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms);

/* Whether the warp strategy's queue hands the chains out by path (highest level first) rather
 * than in the plan's order: from t->warp_path_waves waves of `gangs` over the `grid` resident
 * blocks, where keeping every block busy counts more than the tree's critical path. */
int pc_gpu_warp_queue_by_path(const pc_gpu_tuning *t, int64_t gangs, int32_t grid);

/* Whether the persistent strategy takes its large configuration for n samples. */
int pc_gpu_persistent_large(const pc_gpu_tuning *t, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
