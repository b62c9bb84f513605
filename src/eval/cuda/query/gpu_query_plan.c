/* The plan of the GPU queries (gpu_query_plan.h). */
#include "eval/cuda/query/gpu_query_plan.h"

#include "base/fail.h"

pc_status pc_gpu_query_plan(const pc_circuit *c, pc_gpu_query_group *groups, int32_t *var_group,
                            int32_t *var_draw) {
    if (!c || !groups || !var_group || !var_draw)
        return pc_fail(PC_ERR_ARG, "pc_gpu_query_plan: NULL argument");
    int64_t draw = 0;
    /* The CPU draws Z_g and then g's variables, from the root (the last group) down. */
    for (int32_t g = c->num_groups - 1; g >= 0; g--) {
        pc_gpu_query_group *h = &groups[g];
        h->var_begin = c->var_start[g], h->var_end = c->var_start[g + 1];
        h->child_begin = c->child_start[g], h->child_end = c->child_start[g + 1];
        h->parent = c->group_parent[g], h->trans = c->group_trans[g];
        h->draw = (int32_t)draw;
        draw += 1 + (h->var_end - h->var_begin);
        for (int32_t i = h->var_begin; i < h->var_end; i++) {
            var_group[c->group_vars[i]] = g;
            var_draw[c->group_vars[i]] = h->draw + 1 + (i - h->var_begin);
        }
    }
    return PC_OK;
}

int32_t pc_gpu_query_gather_ranges(const pc_circuit *c, int32_t per_range, int32_t *starts) {
    int32_t ranges = 0, in_range = 0;
    starts[0] = 0;
    for (int32_t g = 0; g < c->num_groups; g++) {
        const int32_t vars = c->var_start[g + 1] - c->var_start[g];
        if (in_range > 0 && in_range + vars > per_range) starts[++ranges] = g, in_range = 0;
        in_range += vars;
    }
    starts[++ranges] = c->num_groups;
    return ranges;
}

pc_status pc_gpu_query_shape_for(int32_t K, size_t max_smem, pc_gpu_query_shape *out) {
    int32_t team = 4;
    while (team < K && team < 32) team *= 2;
    /* Whole warps (the block scan and the barriers count on them), as many as fit. */
    const size_t per_team = 2 * (size_t)K * sizeof(double);
    const int32_t warp_teams = 32 / team;
    int32_t teams = PC_GPU_QUERY_THREADS / team;
    while (teams > warp_teams && (size_t)teams * per_team > max_smem) teams -= warp_teams;
    if ((size_t)teams * per_team > max_smem)
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "GPU queries: K = %d needs %zu bytes of shared memory per block, the GPU "
                       "has %zu",
                       K, (size_t)teams * per_team, max_smem);
    out->team = team, out->teams = teams, out->threads = team * teams;
    out->smem = (size_t)teams * per_team;
    return PC_OK;
}

/* Blocks of the tree kernels resident at once on `sms` multiprocessors. */
static int64_t block_slots(int32_t sms) {
    return (int64_t)PC_GPU_QUERY_BLOCKS_PER_SM * (sms > 0 ? sms : 1);
}

int32_t pc_gpu_query_rows_for(int64_t n, int32_t sms, int32_t forced) {
    if (forced > 0) return forced;
    const int64_t slots = block_slots(sms);
    const int64_t rows = (n + slots - 1) / slots;
    return rows < 1 ? 1 : rows > 8 ? 8 : (int32_t)rows;
}

int64_t pc_gpu_query_piece(int64_t n, int64_t chunk, int32_t sms, int64_t forced) {
    if (forced > 0) return forced < chunk ? forced : chunk;
    int64_t most = PC_GPU_QUERY_PIECE_ROWS * block_slots(sms);
    most = most < chunk ? most : chunk;
    const int64_t pieces = n > most ? (n + most - 1) / most : 1;
    return (n + pieces - 1) / pieces;
}

size_t pc_gpu_query_bytes_per_sample(const pc_circuit *c) {
    const size_t G = (size_t)c->num_groups, K = (size_t)c->num_latents, V = (size_t)c->num_vars;
    /* P and msg [G][K] doubles, MPE's argmax [G][K] uint16, z and draw numbers [G] int32, the
     * values' places [V] int32, two staging buffers of x, missing and the output [V] bytes and
     * of log p. */
    return 2 * G * K * sizeof(double) + G * K * sizeof(uint16_t) + 2 * G * sizeof(int32_t) +
           V * sizeof(int32_t) + 2 * (3 * V + sizeof(double));
}

int64_t pc_gpu_query_chunk(size_t per_sample, size_t budget, int64_t max_batch) {
    int64_t chunk = max_batch < PC_GPU_QUERY_CHUNK_MAX ? max_batch : PC_GPU_QUERY_CHUNK_MAX;
    const int64_t fit = (int64_t)(budget / (per_sample > 0 ? per_sample : 1));
    if (chunk > fit) chunk = fit;
    return chunk < 1 ? 1 : chunk;
}

int32_t pc_gpu_query_half(int32_t n) {
    int32_t p = 1;
    while (p < n) p *= 2;
    return p / 2;
}
