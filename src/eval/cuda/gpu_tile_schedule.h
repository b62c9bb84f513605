/* The fuse tile strategy's schedule of units on a block's warps (fuse_tile/; internal, plain C).
 *
 * A block's T samples come in per_group slices; slice s of group g is one unit, run by one of
 * `warps` warps, or, where split[g] is set, `parts` units, each a part of the slice's samples
 * (the thin top of a tree, where most warps would idle: parts run side by side and each is
 * shorter, so the tree's path of dependent units is). Units are dealt by list scheduling in
 * time on a cost model: a slice takes pc_gpu_group_cost(its children + its variables), a part
 * t->part_cost of that; a unit is ready once its children's slices and the slice of the group
 * it waits on for its slot (`wait`) are done, all their parts; the warp that frees first takes,
 * of the units ready by then, the one with the longest path of costs to the root (through
 * parents and slot waits), or waits for the next. Dealt that way rather than round-robin, the
 * warp that runs a long unit (MNIST's group of 101 variables, 15-19 times the median) does not
 * also hold up the tree's critical path with every later unit of its share.
 *
 * Warp w runs order[begin[w] .. begin[w + 1]) in the order dealt (begin has warps + 1 entries;
 * order holds PC_GPU_TILE_ENTRY(g, s, split[g], part), begin[warps] of them, at most G
 * per_group parts): every unit is dealt after the units it waits on, so the earliest dealt unit
 * not yet run can always run and the block cannot deadlock. split may be NULL (none split). */
#ifndef PC_GPU_TILE_SCHEDULE_H
#define PC_GPU_TILE_SCHEDULE_H

#include <stdint.h>

#include "eval/cuda/gpu_plan.h"
#include "eval/cuda/tuning/gpu_tuning.h"
#include "pc/circuit.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An entry packs (group, slice, split, part) in one int32, so that the kernel reads them
 * without a division: 4 bits each for the part and the slice, the group above bit 9. */
#define PC_GPU_TILE_MAX_PARTS 16
#define PC_GPU_TILE_MAX_SLICES 16 /* per_group */
#define PC_GPU_TILE_ENTRY(group, s, split, part)                                                 \
    ((group) << 9 | (s) << 5 | ((split) != 0) << 4 | (part))
#define PC_GPU_TILE_ENTRY_GROUP(e) ((e) >> 9)
#define PC_GPU_TILE_ENTRY_SLICE(e) (((e) >> 5) & 15)
#define PC_GPU_TILE_ENTRY_SPLIT(e) (((e) >> 4) & 1)
#define PC_GPU_TILE_ENTRY_PART(e) ((e) & 15)

pc_status pc_gpu_tile_schedule(const pc_circuit *circuit, const pc_gpu_group *groups,
                               const pc_gpu_tuning *t, int32_t per_group, int32_t parts,
                               const uint8_t *split, int32_t warps, int32_t *order,
                               int32_t *begin);

/* Marks (split[g] = 1) the groups of the layers whose slices number at most max_slices (layer
 * width x per_group): the thin layers, where the tile schedule splits slices into parts. */
void pc_gpu_tile_thin_layers(const pc_circuit *circuit, int32_t per_group, int32_t max_slices,
                             uint8_t *split);

#ifdef __cplusplus
}
#endif

#endif
