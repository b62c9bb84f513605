/* The tuning table for every GPU without a table of its own (docs/tuning.md#default).
 *
 * No other architecture has been measured. The default starts from the sm_90 values on
 * purpose: every threshold that counts samples is per SM, so it scales with the GPU, and the K
 * cut points follow the kernels' compiled row lengths (16, 32, 64, 80, 96, 112, 128), which
 * are the same on every GPU. What may differ elsewhere is the balance the measurements found
 * between the FP64 tensor cores (the warp strategy, the persistent mma items), FP32 FMAs (tile)
 * and the shared memory per SM; a new architecture gets its own table once measured. */
#include "eval/cuda/tuning/gpu_tuning.h"

const pc_gpu_tuning pc_gpu_tuning_default = {
    .name = "default",
    .pad_128_above = 112,
    .warp_over_tile_t_k32 = 8,
    .warp_over_tile_t_k64 = 4,
    .warp_always_max_k = 112,
    .warp_k128_per_sm = 4,
    .tile_k128_max_waves = 2,
    .tile_k128_min_per_sm = 1,
    .tile_k128_gap_lo_per_sm = 4,
    .tile_k128_gap_hi_per_sm = 5,
    .tile_blocks_per_sm = 1,
    .tile_thin_slices = 8,
    .source_cost = 0.15,
    .part_cost = 0.5,
    .tile_smem_cap = 160 * 1024,
    .warp_eight_above_k = 112,
    .warp_eight_per_sm = 12,
    .warp_eight_per_sm_64 = 8,
    .warp_three_per_sm = 20,
    .chain_short = 4,
    .chain_long = 8,
    .chain_long_max_k = 32,
    .chain_long_per_sm = 24,
    .warp_path_waves = 18,
    .persistent_large_n = 2048,
    .persistent_gain_k128 = 2.0,
    .persistent_gain_wide = 4.0,
    .persistent_min_fill_k64 = 1.0,
    .persistent_min_fill_wide = 0.0,
};
