/* The GPU engine's tuning: every measured cut point of its strategy choices in one table per
 * GPU architecture (internal; plain C, so that the choices are tested without a GPU).
 *
 * The engine picks a table from the device's compute capability when an evaluator is created
 * (pc_gpu_tuning_for) and passes it to every choice (gpu_choice.h, the tile schedule, the chain
 * plans, the persistent kernel's split). A field's comment names the measurement that chose it
 * by its anchor in docs/tuning.md, which gives the numbers, the shapes and why; the shapes the
 * kernels are compiled for (rows of 16 ... 128, blocks per SM, samples per item) are not here:
 * they are the kernels' own and documented beside them.
 *
 * Sample counts are per SM (n > per_sm x SMs), so that a table carries over between GPUs of
 * one architecture with different SM counts (H100 and H200: 132 SMs; H100 PCIe: 114). */
#ifndef PC_GPU_TUNING_H
#define PC_GPU_TUNING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pc_gpu_tuning {
    const char *name; /* "sm_90", "default" */

    /* fuse's states: 112 < K < 128 runs as 128, the tile kernel's full row (tuning.md#pad-128):
     * K above this and below 128 is padded to 128. */
    int32_t pad_128_above;

    /* fuse's strategy at K <= 64: warp once a tile block would hold more than this many
     * samples (tuning.md#warp-over-tile). */
    int32_t warp_over_tile_t_k32; /* K <= 32 */
    int32_t warp_over_tile_t_k64; /* 32 < K <= 64 */
    /* 64 < K <= this: warp at every batch (tuning.md#warp-above-64). */
    int32_t warp_always_max_k;
    /* Above that (K <= 128): warp from more than this many samples per SM
     * (tuning.md#warp-k128). */
    int32_t warp_k128_per_sm;

    /* fuse's tile strategy at 112 < K <= 128 where warp does not run (tuning.md#tile-k128):
     * tile for n up to this many waves of full blocks (PC_GPU_TILE_MAX_T samples) per SM, above
     * this many samples per SM, and not strictly between the two per-SM counts of the gap. */
    int32_t tile_k128_max_waves;
    int32_t tile_k128_min_per_sm;
    int32_t tile_k128_gap_lo_per_sm, tile_k128_gap_hi_per_sm;
    /* The tile strategy's samples per block: the fewest (a power of two from 4) that leave at
     * most this many blocks per SM (tuning.md#tile-samples). */
    int32_t tile_blocks_per_sm;
    /* Layers of at most this many slices run each slice as parts on otherwise idle warps
     * (tuning.md#tile-thin-layers). */
    int32_t tile_thin_slices;
    /* The schedules' cost model: a group costs 1 + source_cost x (its children + variables),
     * a part of a split slice part_cost of that (tuning.md#tile-schedule). */
    double source_cost;
    double part_cost;
    /* Shared memory the tile strategy may take per block, bytes: the rest of the SM's stays L1
     * (tuning.md#tile-smem). */
    int32_t tile_smem_cap;

    /* The warp strategy's item forms (tuning.md#warp-form): 8-sample items at K above
     * eight_above_k always, and up to eight_per_sm (64 < K) or eight_per_sm_64 (32 < K <= 64)
     * samples per SM; the 3-block form at 64 < K <= 96 above three_per_sm. */
    int32_t warp_eight_above_k;
    int32_t warp_eight_per_sm;
    int32_t warp_eight_per_sm_64;
    int32_t warp_three_per_sm;
    /* Its chain plans: chains of at most chain_short or chain_long groups; long ones at
     * K <= chain_long_max_k always, above from more than chain_long_per_sm samples per SM
     * (tuning.md#warp-chains). */
    int32_t chain_short, chain_long;
    int32_t chain_long_max_k;
    int32_t chain_long_per_sm;
    /* Its queue hands chains out by path from this many waves of gangs over the resident
     * blocks (tuning.md#warp-queue). */
    int32_t warp_path_waves;

    /* The persistent strategy: its large configuration from this many samples
     * (tuning.md#persistent-large); a wide item's speed over the narrow items doing its work,
     * at K <= 128 and above (tuning.md#persistent-gain); the share of the resident blocks the
     * first layer's wide items must fill for wide items to be used, at K <= 64 and above
     * (tuning.md#persistent-min-fill). */
    int32_t persistent_large_n;
    double persistent_gain_k128, persistent_gain_wide;
    double persistent_min_fill_k64, persistent_min_fill_wide;
} pc_gpu_tuning;

/* The tables: sm_90 (H100, H200; measured on an H200) and the default for every other GPU. */
extern const pc_gpu_tuning pc_gpu_tuning_sm90;
extern const pc_gpu_tuning pc_gpu_tuning_default;

/* The table for a device of compute capability major.minor. */
const pc_gpu_tuning *pc_gpu_tuning_for(int major, int minor);

#ifdef __cplusplus
}
#endif

#endif
