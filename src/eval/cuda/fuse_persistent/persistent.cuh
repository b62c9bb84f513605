/* `fuse`, the persistent strategy (any K; fuse's choice above the tile and warp strategies'
 * range and where theirs lose): the whole circuit in one persistent kernel of 256-thread
 * blocks. A work item is (group, batch tile of BM samples, output tile of BN sum nodes); items
 * are handed out in evaluation order through an atomic counter and each waits for its
 * children's samples, so the tree's many small layers run concurrently instead of one launch
 * each.
 *
 * Two item shapes. Wide items (BM = 32-128 samples, BN = K outputs up to 256) gather each
 * sample's inputs once and reuse them across all K outputs; they serve the layers near the
 * leaves, which have tens of groups. The top of an HCLT is a long thin chain (MNIST: 23 of 42
 * layers hold 2 groups), where wide items would leave most SMs idle on the critical path:
 * there narrow items (16 samples, <= 64 outputs) split each group over up to 16x more blocks.
 * The host picks, per forward pass, the layer from which groups take narrow items, by the
 * waves of items each layer would take either way (pc_gpu_split_layers).
 *
 * Per item: gather inputs and children's messages in FP64, shift by the per-sample max,
 * exponentiate once into shared memory es[K][BM] (pc_gpu_phase_a), then the product with
 * exp(w) ([K][K] per group, streamed through two shared-memory buffers of KC rows), one log per
 * output. The product is register-blocked FP32 (TM x TN outputs per thread), or for the wide
 * items of 64 < K <= 128 in small batches on the FP64 tensor cores (exact sums, and a shorter
 * item on the critical path).
 *
 * Counters. done[g][f] counts the outputs of group g finished for the f-th run of
 * PC_PERSISTENT_TILE samples; a reader waits until it reaches K for each run its samples cover,
 * whatever the writer's item shape. */
#ifndef PC_GPU_PERSISTENT_CUH
#define PC_GPU_PERSISTENT_CUH

#include "eval/cuda/gpu_engine.cuh"

/* Samples per counter run (s->bm). */
#define PC_PERSISTENT_TILE 16

struct pc_persistent;

/* The strategy's parts, for fuse's choice (fuse/fuse.cu) and its forced form: the kernels'
 * configurations for K (PC_ERR_UNSUPPORTED where the shared memory does not suffice), its
 * weights (counted, uploaded, released), one forward pass queued. */
pc_status pc_persistent_configure(const pc_gpu_state *s, pc_persistent **out);
size_t pc_persistent_bytes(const pc_gpu_state *s);
pc_status pc_persistent_upload(pc_gpu_state *s, pc_persistent *p);
pc_status pc_persistent_enqueue(const pc_gpu_state *s, const pc_persistent *p,
                                const pc_gpu_args *a, cudaStream_t stream);
void pc_persistent_release(pc_gpu_state *s, pc_persistent *p);

extern const pc_gpu_impl pc_gpu_persistent_impl;

#endif
