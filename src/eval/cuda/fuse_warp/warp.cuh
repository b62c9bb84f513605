/* `fuse`, the warp strategy (K <= 128): one persistent kernel whose work item is (chain of
 * groups, 16 or 8 samples) for one warp, all K outputs, with the product on the FP64 tensor
 * cores.
 *
 * Why one warp per item: the block-wide items of the persistent strategy spend much of their
 * time in barriers and dependent loads between phases. A warp item needs no barrier: the warp
 * gathers its samples' inputs into registers, takes the max and the exp there, multiplies on
 * the tensor cores and writes the logs, while the SM's other warps run other items. Items are
 * handed out in chain order through an atomic counter and wait on their children's counters,
 * as in the persistent strategy (each chain has a slot of its own: no slot waits).
 *
 * Why chains: most groups of an HCLT have one child group (387 of the 549 sum groups of the
 * MNIST model), so the tree is mostly paths. A chain (gpu_chains.h) is such a path; the warp
 * runs it bottom to top and hands each group's message to the next in shared memory, so only
 * the chain's bottom waits on counters and loads messages from L2, and only its top writes
 * one and raises a counter (the shipped MNIST model: 229 chains of at most 4 groups, or 179 of
 * at most 8, instead of 550 items per tile). Above the bottom a group works in the linear
 * domain (warp_link): the group below hands on its product before the log, and the group
 * multiplies its inputs in, pre-exponentiated, so neither the log of the group below nor this
 * group's exp is taken.
 *
 * Why staged input rows: a group's input row per sample is three dependent loads (variable,
 * pixel code, row), one group and variable after another, on the tree's critical path. An
 * item looks up its chain's rows in one round of loads before it waits for its children
 * (warp_stage_rows, windows of 32 variables), so a group's inputs cost one round of loads
 * instead of three dependent ones per variable. The bottom then sums its inputs before the
 * wait too, and its children's messages after it.
 *
 * The product out[b, j] = sum_k e[b, k] exp(w[j, k]) runs as mma.m16n8k16.f64: FP64 products
 * and sums of the FP64 operands, so it is exact to far below FP32 (only e at a chain's bottom,
 * from an FP32 exp, exp(w) and the linear inputs in FP32, the FP32 product handed up a chain
 * and the FP32 log at its top round). The FP32 tensor cores (3xTF32) sum with truncation, a
 * bias that adds up over a chain of hundreds of groups (tuning.md#warp-fp64-mma).
 *
 * Register layout (lane = 4 g + t, g = 0..7, t = 0..3): the mma's 16 rows are samples b0 + g
 * and b0 + 8 + g; the lane holds k = t KP / 4 .. (t + 1) KP / 4 - 1 of both rows, so the
 * mma's k slot j of lane t in k-step s stands for k = t KP / 4 + 4 s + j (a permutation of k,
 * the same for A and B, so the sum is unchanged), and every lane loads its inputs and exp(w)
 * as 16-byte words. Outputs come back as (row g or g + 8, columns 2t and 2t + 1 of each 8-wide
 * n-tile).
 *
 * 8-sample items (pc_gpu_warp_form picks them at K = 128, and at 32 < K <= 112 for small
 * batches). At K = 128 a 16-sample item's operands take 128 of a lane's 255 registers, two
 * warps per scheduler, whose gathers, logs and barriers hide only behind each other's product.
 * With 8 samples a lane holds one sample's 32 operands (64 registers), and two blocks of six
 * warps (168 registers) put three warps on each scheduler. The product runs transposed,
 * out^T = exp(w) ed^T: exp(w) is the mma's A operand (16 outputs x 16 k, 8 conversions per mma
 * against 4), ed its B, and outputs come back as (output 16 m + g or + 8, samples 2t and
 * 2t + 1) (tuning.md#warp-form). */
#ifndef PC_GPU_WARP_CUH
#define PC_GPU_WARP_CUH

#include "eval/cuda/gpu_engine.cuh"

struct pc_warp;

/* The strategy's parts, for fuse's choice (fuse/fuse.cu) and its forced form: whether it takes
 * the circuit (K <= PC_GPU_WARP_MAX_K and input rows an int32 counts), its kernels' grids
 * (PC_ERR_UNSUPPORTED with a message where it does not take the circuit), its chain plans
 * (their slots raise s->num_slots), its weights, inputs and chains (counted, uploaded,
 * released), one forward pass queued. */
int pc_warp_takes(const pc_gpu_state *s);
pc_status pc_warp_configure(const pc_gpu_state *s, pc_warp **out);
pc_status pc_warp_plan(pc_gpu_state *s, pc_warp *p);
size_t pc_warp_bytes(const pc_gpu_state *s, const pc_warp *p);
pc_status pc_warp_upload(pc_gpu_state *s, pc_warp *p);
pc_status pc_warp_enqueue(const pc_gpu_state *s, pc_warp *p, const pc_gpu_args *a,
                          cudaStream_t stream);
void pc_warp_release(pc_gpu_state *s, pc_warp *p);

extern const pc_gpu_impl pc_gpu_warp_impl;

#endif
