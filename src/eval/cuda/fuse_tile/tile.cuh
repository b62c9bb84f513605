/* `fuse`, the tile strategy (K <= 128): each block scores its own T = 4-32 samples through the
 * whole circuit, with no communication between blocks. Samples are independent, so a forward
 * pass is one kernel launch, and every link of the tree's dependency chain costs a flag in
 * shared memory instead of a launch or a wait on another block.
 *
 * Work unit: (group, TW consecutive samples of the block), one warp of the block's 16. The host
 * deals the units to the warps (gpu_tile_schedule.h: list scheduling on a cost model, units on
 * the longest path to the root first); a warp starts a unit once the units it reads (its
 * children's, and the previous reader of its message slot) have raised their flags (mbarriers
 * in shared memory), so warps never wait for unrelated groups of the same layer. In the thin
 * layers at the top of a tree, where most of the block's warps would idle, a slice's samples
 * run as parts of one sample per lane, side by side on several warps, so that each unit on the
 * tree's path is shorter.
 *
 * Per unit, lane (sample lane sg, column jl) holds TS samples x NJ columns:
 *   1. p[t][k] = sum_v input[v, code(t, v), k] + sum_c rel_c[t][k] (+ root_logw[k] at the root),
 *      summed in FP64 in registers;
 *   2. m[t] = max_k p[t][k] (shuffles across the sample's lanes); O[t] = sum_c off_c[t] (FP64);
 *   3. es[t][k] = exp(p - m) (0 past K and where m = -inf), per warp in shared memory;
 *   4. out[t][j] = sum_k es[t][k] exp(w[j, k]) in FP32 registers, then rel_g[t][j] = log out,
 *      off_g[t] = O + m.
 * Messages use the engine's slots in global memory; a block touches only its own samples'
 * rows. The plan (groups, variables, child slots) and the block's sample codes (x, or C where
 * missing) are staged in shared memory once. A lane works on the same (sample, state) pairs in
 * the product and in the output, so the max and the exp stay in registers. exp(w) comes in the
 * quads layout (PC_GPU_W_QUADS): a unit's exp(w) column is KM / 4 16-byte loads, a warp's lanes
 * on consecutive bytes.
 *
 * Shapes: JW lanes across outputs (JW = smallest power of two >= K, at least 32 / TW) and
 * NJ = 1, or JW = 32 and NJ = 2 for 32 < K <= 64, NJ = 4 for 64 < K <= 128; KM = JW NJ >= K is
 * the padded row; SG = 32 / JW sample lanes, TS = TW / SG samples per lane, so each lane holds
 * TS x NJ accumulators. Each shape has a form for K = KM (KX: no column checks, constant row
 * strides), which K = 16, 32, 64 and 128 take; rows of 64 have only that form (fuse runs
 * 32 < K < 64 as 64). */
#ifndef PC_GPU_TILE_CUH
#define PC_GPU_TILE_CUH

#include "eval/cuda/gpu_engine.cuh"

struct pc_tile;

/* The strategy's parts, for fuse's choice (fuse/fuse.cu) and its forced form: whether it takes
 * the circuit (K and the shared memory its codes need), its kernels' limits set once
 * (PC_ERR_UNSUPPORTED with a message where it does not take the circuit), its weights and
 * schedules (counted, uploaded, released), one forward pass queued. */
int pc_tile_fits(const pc_gpu_tuning *t, const pc_circuit *circuit);
pc_status pc_tile_configure(const pc_gpu_state *s, pc_tile **out);
size_t pc_tile_bytes(const pc_gpu_state *s);
pc_status pc_tile_upload(pc_gpu_state *s, pc_tile *p);
pc_status pc_tile_enqueue(const pc_gpu_state *s, const pc_tile *p, const pc_gpu_args *a,
                          cudaStream_t stream);
void pc_tile_release(pc_gpu_state *s, pc_tile *p);

extern const pc_gpu_impl pc_gpu_tile_impl;

#endif
