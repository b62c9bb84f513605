/* The message-slot plan of the GPU circuit engine (internal; plain C, so that CI tests it on
 * machines without a GPU).
 *
 * Every sum node group but the root writes its message into a slot of the device's message
 * buffer; the parent group reads it. A slot is reused once its message has been read: the next
 * occupant h records the reader in h.wait and must not write a batch tile before the reader has
 * finished that tile. The persistent kernels honour this with counters, the tile kernel with
 * flags in shared memory, the layered path by running layers in order. A freed slot goes only to a group of a later layer than its reader,
 * so a wait never points into the writer's own layer: the longest chain of waits stays the
 * circuit's layer count instead of running through a layer's groups one after another.
 */
#ifndef PC_LAYERS_GPU_PLAN_H
#define PC_LAYERS_GPU_PLAN_H

#include <stdint.h>

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

/* Where the persistent `fuse` kernel switches from wide to narrow items (cuda_fuse.cu): wide
 * items serve a prefix of the layers, narrow ones the rest. A layer of w groups takes w *
 * wide_items wide or w * narrow_items narrow items, run in waves of `grid` (the resident
 * blocks), a wave costing wide_cost or 1; there are wide items at all only if the first layer
 * (the widest of a tree, as a rule) has at least min_wide of them. Returns the first narrow
 * layer (0 .. L), the one that minimises the sum over layers of ceil(items / grid) * cost; the
 * earliest on a tie. */
int32_t pc_gpu_split_layers(const pc_circuit *circuit, int64_t wide_items, int64_t narrow_items,
                            double wide_cost, int64_t min_wide, int32_t grid);

/* The tile strategy's schedule (cuda_fuse_tile.cu). A block's samples come in per_group slices;
 * slice s of group g is one unit, run by one of `warps` warps, or, where split[g] is set,
 * `parts` units, each a part of the slice's samples (the thin top of a tree, where most warps
 * would idle: parts run side by side and each is shorter, so the tree's path of dependent
 * units is). Units are dealt by list scheduling in time on a model: a slice takes 1 +
 * PC_GPU_TILE_SOURCE_COST x (its children + its variables), a part PC_GPU_TILE_PART_COST of
 * that; a unit is ready once its children's slices and the slice of the group it waits on for
 * its slot (`wait`) are done, all their parts; the warp that frees first takes, of the units
 * ready by then, the one with the longest path of costs to the root (through parents and slot
 * waits), or waits for the next. Warp w runs order[begin[w] .. begin[w + 1]) (begin has warps +
 * 1 entries; order holds PC_GPU_TILE_ENTRY(g, s, split[g], part), begin[warps] of them, at most
 * G per_group parts; the kernel reads g and s without a division) in the order dealt: every unit is dealt after the units it
 * waits on, so the earliest dealt unit not yet run can always run and the block cannot
 * deadlock. Dealt round-robin in evaluation order instead, the warp of the MNIST tree's group
 * of 101 variables (a unit 15-19 times as long as the median) ran every later unit of its
 * share late, and its share ran the tree's critical path (results file 62); this schedule
 * took the tile strategy's batch-512 points 1.13-1.16x faster (file 63). The cost of a source
 * (a child's message or an input row, one load per sample and lane) against a unit's fixed
 * part was 0.10-0.18 on the H200 at K = 16-64. split may be NULL (no group split). */
#define PC_GPU_TILE_SOURCE_COST 0.15
#define PC_GPU_TILE_PART_COST 0.5
#define PC_GPU_TILE_MAX_PARTS 16
#define PC_GPU_TILE_MAX_SLICES 16 /* per_group */
#define PC_GPU_TILE_ENTRY(group, s, split, part)                                                 \
    ((group) << 9 | (s) << 5 | ((split) != 0) << 4 | (part))
#define PC_GPU_TILE_ENTRY_GROUP(e) ((e) >> 9)
#define PC_GPU_TILE_ENTRY_SLICE(e) (((e) >> 5) & 15)
#define PC_GPU_TILE_ENTRY_SPLIT(e) (((e) >> 4) & 1)
#define PC_GPU_TILE_ENTRY_PART(e) ((e) & 15)
pc_status pc_gpu_tile_schedule(const pc_circuit *circuit, const pc_gpu_group *groups,
                               int32_t per_group, int32_t parts, const uint8_t *split,
                               int32_t warps, int32_t *order, int32_t *begin);

/* Marks (split[g] = 1) the groups of the layers whose slices number at most max_slices (layer
 * width x per_group): the thin layers, where the tile schedule splits slices into parts. */
void pc_gpu_tile_thin_layers(const pc_circuit *circuit, int32_t per_group, int32_t max_slices,
                             uint8_t *split);

/* The tile strategy's samples per block for a batch of n on `sms` SMs: the fewest, a power of
 * two from 4, that leave no more blocks than SMs, at most PC_GPU_TILE_MAX_T (beyond, the blocks
 * run in waves). */
#define PC_GPU_TILE_MAX_T 32
int32_t pc_gpu_tile_samples(int64_t n, int32_t sms);

/* The states per latent with which fuse runs a circuit of K (pc_gpu_create adds states of zero
 * probability, which leave every log p(x) as it is): K rounded up to a multiple of 4, so that
 * its kernels load rows 16 bytes at a time (other K took scalar paths: K = 66 and 70 1.3-1.5x,
 * K = 254 1.5-1.8x slower, results file 161); at 32 < K < 64 and 112 < K < 128 the tile
 * kernel's row, 64 or 128, whose form for a full row (constant strides, no column checks) ran
 * K = 64 at batch 512 in 0.223 ms against 0.261-0.265 for K = 40-56, and K = 128 in 0.603
 * against 0.693 for K = 120 (file 165), while the warp strategy pads its rows to 64 or 128
 * anyway: K = 36-60 as 64 and 116-124 as 128 were 1.11-1.21x faster at batches 256-512,
 * 1.00-1.11x at 1,024 and 0.98-1.05x at 4,096 (file 166). */
int32_t pc_gpu_fuse_states(int32_t K);

/* The warp strategy's largest K (its kernel's rows are padded to 16, 32 or 64, above 64 to a
 * multiple of 16), and whether fuse considers that strategy at K: 1 <= K <=
 * PC_GPU_WARP_MAX_K. */
#define PC_GPU_WARP_MAX_K 128
int pc_gpu_fuse_warp_k(int32_t K);

/* fuse's choice of its warp strategy at such a K: warp (1) at K <= 64 once a tile block would
 * hold more than 8 samples (K <= 32) or 4 (32 < K <= 64); at 112 < K <= 128 (which fuse runs as
 * 128, pc_gpu_fuse_states) once it would hold more than 4 (n > 4 sms: the warp strategy's
 * 8-sample items 1.13-1.38x faster than the tile and persistent kernels at 529-1,056 samples,
 * 0.93x at 512, file 171); at 64 < K <= 112 (rows of 80, 96, 112) at every n: with 8-sample
 * items at small batches (file 173) warp ran faster than the persistent kernel at every batch
 * of 16-330 samples (K = 72: 1.35-1.53x; K = 88 and 96: 1.24-1.44x; K = 100 and 112:
 * 1.05-1.27x), and the tile kernel was 1.7x slower there (file 163). A tile block's time grows
 * with its samples, so the tile strategy's time is a staircase in n while the warp strategy's
 * grows smoothly (the measurements are in cuda_fuse.cu). */
int pc_gpu_fuse_takes_warp(int32_t K, int64_t n, int32_t sms);

/* fuse's choice between its tile and persistent strategies (where it does not take warp): tile
 * (1) at K <= 64, and at K = 128 (four full output columns per lane) up to two waves of blocks
 * of PC_GPU_TILE_MAX_T samples (it won at batches 256-8,192 and lost at 16,384, four waves;
 * fuse takes the warp strategy from 4 samples per SM where it can), but not where its few
 * blocks leave most SMs idle: n <= sms (blocks of 4 samples on at most a quarter of the SMs; at
 * 64 samples 0.51 against the persistent kernel's 0.44 ms) and 4 sms < n < 5 sms (blocks of 8
 * on under 5/8 of them; at 529 0.95 against 0.82, level at 660, results file 155); likewise at
 * 112 < K < 128, which fuse runs as 128 (pc_gpu_fuse_states); never above 128 (the tile
 * kernel's limit) nor at 64 < K <= 112, where the tile kernel multiplies rows padded to 128 and
 * the warp strategy has rows of 80, 96 or 112 (at K = 96 1.37x faster than tile at 396 samples,
 * file 163, at K = 100 and 112 1.07-1.12x at 396-528, file 164; the measurements are in
 * cuda_fuse.cu). */
int pc_gpu_fuse_takes_tile(int32_t K, int64_t n, int32_t sms);

/* The warp strategy's item forms (cuda_fuse_warp.cu): 16-sample items with the kernel's usual
 * blocks per SM (TWO), the same with 3 blocks at 64 < K <= 96 (THREE), 8-sample items, whose
 * operands take half the registers (EIGHT). */
enum { PC_GPU_WARP_TWO, PC_GPU_WARP_THREE, PC_GPU_WARP_EIGHT, PC_GPU_WARP_FORMS };
#define PC_GPU_WARP_EIGHT_PER_SM 12    /* 8-sample items up to this many samples per SM ... */
#define PC_GPU_WARP_EIGHT_PER_SM_64 8  /* ... and this many at 32 < K <= 64 */
#define PC_GPU_WARP_THREE_PER_SM 20    /* the 3-block form above this many */

/* The warp strategy's form for a pass of n samples at K (fuse's states: pc_gpu_fuse_states)
 * on sms SMs: 8-sample items at K > 112 (file 170: 1.03-1.22x faster than 16-sample items at
 * K = 128 and 1,024-8,192 samples), and where the gangs fill the GPU only a few times, up to
 * PC_GPU_WARP_EIGHT_PER_SM samples per SM at 64 < K <= 112 and PC_GPU_WARP_EIGHT_PER_SM_64 at
 * 32 < K <= 64 (file 173: 1.18-1.33x at 256-512 samples, 1.07-1.20x at 768-1,024; at 1,536
 * 1.02-1.05x above K = 64 and 0.93x at 64, at 2,048 0.90-1.01x, at 4,096 0.75-0.94x); above,
 * at 64 < K <= 96 the 3-block form from PC_GPU_WARP_THREE_PER_SM (2,640 on 132 SMs: 1.03-1.13x
 * at 3,072-8,192, files 162-163), where the gangs fill the resident blocks many times over;
 * else TWO (always at K <= 32). */
int pc_gpu_warp_form(int32_t K, int64_t n, int32_t sms);

/* The most variables of a group above a chain's bottom: the warp strategy multiplies such a
 * group's inputs into the message from below in FP64, one factor per variable, each 0 or at
 * least 2^-126, so at most 8 factors keep every nonzero product above FP64's 2^-1022. */
#define PC_GPU_CHAIN_LINK_VARS 7
/* The variables of a chain's links together: a warp item stages their input rows at once, one
 * variable per lane. */
#define PC_GPU_CHAIN_WINDOW_VARS 32

/* Chains for the fuse warp strategy (cuda_fuse_warp.cu). A chain is a path of groups up the
 * tree in which every group above the first has exactly one child group, the one below it, and
 * at most PC_GPU_CHAIN_LINK_VARS variables: a warp item takes a chain for its samples and hands
 * each group's product to the next group in shared memory, with no slot, no counter and no
 * wait in between. Only a chain's top writes a message, into slot `chain index` (slots are not
 * reused, so no chain waits on a reader), and only a chain's first group (its bottom) reads
 * messages of other chains: its children, each the top of a chain listed earlier, so a work
 * queue in chain order never hands out an item before the items it waits on. Chains come in
 * the order in which they could start if every group took one step (a chain starts when the
 * chains it reads have finished), so that an item seldom waits long for its children while
 * the chains it waits on run; chains that could start at the same step come by their longest
 * path of costs to the root, as the tile schedule counts them (MNIST's 101-variable group,
 * at the bottom of the deepest path, first among the leaves). by_path is the other order a
 * queue can take: highest level first, the chains on the deep paths that hold up the root
 * before the shallow ones that fill in while those wait (the warp strategy takes it for large
 * batches, cuda_fuse_warp.cu). */
typedef struct pc_gpu_chains {
    int32_t num_chains;
    int32_t *begin;       /* [num_chains + 1] ranges of `groups` */
    int32_t *groups;      /* [G] each chain's groups, bottom (first evaluated) to top */
    int32_t *child_chain; /* [G - 1] the chain, so the slot, of each entry of group_children */
    int32_t *by_path;     /* [num_chains] the chains by their longest path of costs to the root,
                             longest first (ties in chain order): a second queue order */
} pc_gpu_chains;

/* The warp strategy's two chain plans, and which one a pass of n samples at K (fuse's states)
 * on sms SMs takes. Long chains save a message, a wait and a gather per group they link, but
 * hold a warp longer while the items above wait: measured on the H200 (MNIST tree, results
 * file 183), chains of at most 8 groups against 4 ran 1.04-1.15x faster at K = 16 and 32 and
 * 1,024-8,192 samples, and at 64 <= K <= 128 1.03-1.07x from 4,096 samples, 0.98-1.03x at
 * 2,048-3,072 and 0.92-0.95x at 1,024. (Chains of 6 or 16 were best at a few points, by up
 * to 6 %.) */
#define PC_GPU_CHAIN_SHORT 4
#define PC_GPU_CHAIN_LONG 8
#define PC_GPU_CHAIN_LONG_PER_SM 24 /* samples per SM above which K > 32 takes long chains */
enum { PC_GPU_CHAINS_SHORT, PC_GPU_CHAINS_LONG, PC_GPU_CHAIN_PLANS };
int pc_gpu_warp_chains(int32_t K, int64_t n, int32_t sms);

/* Fills *chains (arrays allocated here; release with pc_gpu_chains_free), each chain at most
 * max_len groups long, with at most max_link_vars variables in its groups above the bottom
 * together (the warp strategy stages their input rows at once, PC_GPU_CHAIN_WINDOW_VARS). */
pc_status pc_gpu_chain_plan(const pc_circuit *circuit, int32_t max_len, int32_t max_link_vars,
                           pc_gpu_chains *chains);
void pc_gpu_chains_free(pc_gpu_chains *chains);

#ifdef __cplusplus
}
#endif

#endif
