/* fuse's choices per forward pass (gpu_choice.h). */
#include "eval/cuda/gpu_choice.h"

int32_t pc_gpu_fuse_states(const pc_gpu_tuning *t, int32_t K) {
    if (K > 32 && K < 64) return 64;
    if (K > t->pad_128_above && K < 128) return 128;
    return (K + 3) & ~3;
}

int32_t pc_gpu_tile_samples(const pc_gpu_tuning *t, int64_t n, int32_t sms) {
    const int64_t blocks = (int64_t)t->tile_blocks_per_sm * sms;
    int32_t T = 4;
    while (T < PC_GPU_TILE_MAX_T && (n + T - 1) / T > blocks) T *= 2;
    return T;
}

int pc_gpu_fuse_warp_k(int32_t K) { return K >= 1 && K <= PC_GPU_WARP_MAX_K; }

int pc_gpu_fuse_takes_warp(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms) {
    if (!pc_gpu_fuse_warp_k(K)) return 0;
    if (K <= 64)
        return pc_gpu_tile_samples(t, n, sms) >
               (K <= 32 ? t->warp_over_tile_t_k32 : t->warp_over_tile_t_k64);
    if (K <= t->warp_always_max_k) return 1;
    return n > (int64_t)t->warp_k128_per_sm * sms;
}

int pc_gpu_fuse_takes_tile(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms) {
    if (K <= 64) return 1;
    if (K <= t->warp_always_max_k || K > 128) return 0;
    return n <= (int64_t)t->tile_k128_max_waves * PC_GPU_TILE_MAX_T * sms &&
           n > (int64_t)t->tile_k128_min_per_sm * sms &&
           !(n > (int64_t)t->tile_k128_gap_lo_per_sm * sms &&
             n < (int64_t)t->tile_k128_gap_hi_per_sm * sms);
}

int pc_gpu_warp_form(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms) {
    if (K > t->warp_eight_above_k) return PC_GPU_WARP_EIGHT;
    if (K > 32 &&
        n <= (int64_t)(K > 64 ? t->warp_eight_per_sm : t->warp_eight_per_sm_64) * sms)
        return PC_GPU_WARP_EIGHT;
    if (K > 64 && K <= 96 && n > (int64_t)t->warp_three_per_sm * sms) return PC_GPU_WARP_THREE;
    return PC_GPU_WARP_TWO;
}

int pc_gpu_warp_chains(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms) {
    return K <= t->chain_long_max_k || n > (int64_t)t->chain_long_per_sm * sms
               ? PC_GPU_CHAINS_LONG
               : PC_GPU_CHAINS_SHORT;
}

int pc_gpu_warp_queue_by_path(const pc_gpu_tuning *t, int64_t gangs, int32_t grid) {
    return gangs >= (int64_t)t->warp_path_waves * grid;
}

int pc_gpu_persistent_large(const pc_gpu_tuning *t, int64_t n) {
    return n >= t->persistent_large_n;
}
