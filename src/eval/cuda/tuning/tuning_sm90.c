/* The tuning table for sm_90 (H100, H200), measured on an H200 (132 SMs, MNIST's HCLT and
 * random trees of its shape). Each value's measurement: docs/tuning.md, at the anchor named in
 * gpu_tuning.h beside the field. */
#include "eval/cuda/tuning/gpu_tuning.h"

const pc_gpu_tuning pc_gpu_tuning_sm90 = {
    .name = "sm_90",
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
