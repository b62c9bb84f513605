/* The message-slot plan of the GPU circuit engine (internal; plain C, so that CI tests it on
 * machines without a GPU).
 *
 * Every sum node group but the root writes its message into a slot of the device's message
 * buffer ([slots][chunk] offsets, [slots][chunk][K] relative messages); the parent group reads
 * it. A slot is reused once its message has been read: the next occupant h records the reader
 * in h.wait and must not write a batch tile before the reader has finished that tile. The
 * persistent kernels honour this with counters, the tile kernel with flags in shared memory,
 * the layered path by running layers in order. A freed slot goes only to a group of a later
 * layer than its reader, so a wait never points into the writer's own layer: the longest chain
 * of waits stays the circuit's layer count instead of running through a layer's groups one
 * after another. */
#ifndef PC_GPU_PLAN_H
#define PC_GPU_PLAN_H

#include <stdint.h>

#include "eval/cuda/tuning/gpu_tuning.h"
#include "pc/circuit.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One group as the kernels see it (evaluation order). */
typedef struct pc_gpu_group {
    int32_t var_begin, var_end;     /* into vars */
    int32_t child_begin, child_end; /* into children / child_slot */
    int32_t slot;                   /* slot of msg_g; -1 for the root */
    int32_t wait;                   /* group that must finish a tile before g writes it, or -1 */
} pc_gpu_group;

/* Fills groups[0 .. G) (G = circuit->num_groups) in evaluation order and the number of slots
 * used (>= 1). Slots are handed out oldest-freed first, so the recorded reader has most likely
 * finished long before. */
pc_status pc_gpu_plan(const pc_circuit *circuit, pc_gpu_group *groups, int32_t *num_slots);

/* A group's cost in the schedules' model (the tile schedule, the order of the warp strategy's
 * chains): 1 + t->source_cost per source, a child's message or an input row. */
double pc_gpu_group_cost(const pc_gpu_tuning *t, int32_t sources);

/* Where the persistent `fuse` kernel switches from wide to narrow items (fuse_persistent/):
 * wide items serve a prefix of the layers, narrow ones the rest. A layer of w groups takes w *
 * wide_items wide or w * narrow_items narrow items, run in waves of `grid` (the resident
 * blocks), a wave costing wide_cost or 1; there are wide items at all only if the first layer
 * (the widest of a tree, as a rule) has at least min_wide of them. Returns the first narrow
 * layer (0 .. L), the one that minimises the sum over layers of ceil(items / grid) * cost; the
 * earliest on a tie. */
int32_t pc_gpu_split_layers(const pc_circuit *circuit, int64_t wide_items, int64_t narrow_items,
                            double wide_cost, int64_t min_wide, int32_t grid);

#ifdef __cplusplus
}
#endif

#endif
