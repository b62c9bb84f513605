/* The plan of the GPU queries (internal; plain C, so that it is tested without a GPU): the
 * groups as the kernels read them, each variable's group, the draw numbers of the samplers,
 * the gather's ranges, the kernels' launch shape and the samples per pass (the chunk).
 *
 * Launch shape. The passes over the tree (gather, upward, downward) run in one kernel per
 * chunk with one block per `rows` samples: the block walks the layers in order with a barrier
 * between layers, so no pass waits on another block and no layer costs a launch. Inside a
 * block a "team" of `team` lanes (4, 8, 16 or 32: the power of two >= K, at most a warp) takes
 * one (group, sample) item at a time, lane k holding the states k, k + team, ...; the block's
 * `teams` teams share a layer's items. Each team has 2 K doubles of shared memory (the item's
 * K-vectors that every lane reads). */
#ifndef PC_GPU_QUERY_PLAN_H
#define PC_GPU_QUERY_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "pc/circuit.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One group as the query kernels read it (evaluation order). */
typedef struct pc_gpu_query_group {
    int32_t var_begin, var_end;     /* into the circuit's group_vars */
    int32_t child_begin, child_end; /* into its group_children */
    int32_t parent;                 /* -1 for the root */
    int32_t trans;                  /* row of trans_logw for msg_g, -1 for the root */
    int32_t draw;                   /* the CPU's draw number of Z_g when every variable is
                                       missing: sum over g' > g of 1 + |vars(g')| */
} pc_gpu_query_group;

/* groups [G], var_group [V] (the group holding each variable) and var_draw [V] (the CPU's draw
 * number of X_v when every variable is missing: its group's draw + 1 + its place among the
 * group's variables) of circuit c. */
pc_status pc_gpu_query_plan(const pc_circuit *c, pc_gpu_query_group *groups, int32_t *var_group,
                            int32_t *var_draw);

/* The gather's work units: the groups cut into contiguous ranges [starts[r], starts[r + 1]),
 * each closed before the group that would take it past `per_range` variables (so a range
 * holds at most per_range variables, or one group of more). starts has room for G + 1
 * entries; returns the number of ranges (>= 1 for G >= 1). */
int32_t pc_gpu_query_gather_ranges(const pc_circuit *c, int32_t per_range, int32_t *starts);

/* The launch shape of the tree kernels. */
typedef struct pc_gpu_query_shape {
    int32_t team;    /* lanes per item */
    int32_t teams;   /* teams per block */
    int32_t threads; /* team * teams */
    size_t smem;     /* dynamic shared memory per block, bytes */
} pc_gpu_query_shape;

/* Threads per block the shape aims at; fewer only where shared memory runs out. The tree
 * kernels keep to 64 registers a thread, so that four such blocks share an SM (a batch of 512
 * in blocks of one sample fits an H200's 132 SMs at once). */
#define PC_GPU_QUERY_THREADS 256
#define PC_GPU_QUERY_BLOCKS_PER_SM 4

/* The shape for K states on a device allowing max_smem bytes of shared memory per block
 * (whole warps of teams): PC_ERR_UNSUPPORTED (naming K) when even one warp does not fit. */
pc_status pc_gpu_query_shape_for(int32_t K, size_t max_smem, pc_gpu_query_shape *out);

/* Samples per block for a pass of n samples on `sms` multiprocessors: the fewest (up to 8)
 * that put every block on the GPU at once (PC_GPU_QUERY_BLOCKS_PER_SM per SM), so that the
 * thin layers near the root keep more teams busy in place of blocks waiting for a second
 * wave. `forced` > 0 overrides the choice (benchmarks). */
int32_t pc_gpu_query_rows_for(int64_t n, int32_t sms, int32_t forced);

/* Rows per piece of an MPE or sampling call of n rows (pieces of at most `chunk`): the host
 * stages piece i + 1 while the device runs piece i, so a call of several pieces overlaps its
 * copies with its kernels. A piece is at most PC_GPU_QUERY_PIECE_ROWS samples per block over
 * every block slot (2112 rows on an H200's 132 SMs), the call cut into equal pieces. H200,
 * shipped model, MPE through the API (gpu_query_pieces): 4096 rows 2.03 ms in one piece, 1.67 in
 * two, 1.71 in four; 16384 rows 10.6 ms in one, 5.8 in four, 5.5 in eight, 6.2 in sixteen;
 * conditional sampling the same way (4096: 3.66 -> 3.03 ms; 16384: 15.0 -> 10.5). Fewer rows
 * per piece pay a pass's latency once more per piece than they hide. `forced` > 0 overrides
 * the choice (benchmarks), within chunk. */
#define PC_GPU_QUERY_PIECE_ROWS 4
int64_t pc_gpu_query_piece(int64_t n, int64_t chunk, int32_t sms, int64_t forced);

/* Device bytes per sample of a pass (node values, MPE's argmax, latent states, the samplers'
 * draw numbers, staging) and the chunk: the most samples, up to max_batch and
 * PC_GPU_QUERY_CHUNK_MAX, whose buffers fit `budget` bytes (at least 1). */
#define PC_GPU_QUERY_CHUNK_MAX 16384
size_t pc_gpu_query_bytes_per_sample(const pc_circuit *c);
int64_t pc_gpu_query_chunk(size_t per_sample, size_t budget, int64_t max_batch);

/* The step a search over n sorted values starts with: half the power of two >= n (0 for
 * n = 1), so that the steps sum to at most n - 1 (pc_gpu_query_search). */
int32_t pc_gpu_query_half(int32_t n);

#ifdef __cplusplus
}
#endif

#endif
