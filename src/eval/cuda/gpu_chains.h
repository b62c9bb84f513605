/* The chain plans of the fuse warp strategy (fuse_warp/; internal, plain C).
 *
 * A chain is a path of groups up the tree in which every group above the first has exactly
 * one child group, the one below it, and at most PC_GPU_CHAIN_LINK_VARS variables: a warp item
 * takes a chain for its samples and hands each group's product to the next group in shared
 * memory, with no slot, no counter and no wait in between. Only a chain's top writes a
 * message, into slot `chain index` (slots are not reused, so no chain waits on a reader), and
 * only a chain's first group (its bottom) reads messages of other chains: its children, each
 * the top of a chain listed earlier, so a work queue in chain order never hands out an item
 * before the items it waits on.
 *
 * Chains come in the order in which they could start if every group took one step (a chain
 * starts when the chains it reads have finished), so that an item seldom waits long for its
 * children; chains that could start at the same step come by their longest path of costs to
 * the root (pc_gpu_group_cost: MNIST's 101-variable group, at the bottom of the deepest path,
 * first among the leaves). by_path is the other order a queue can take: highest level first,
 * the chains on the deep paths that hold up the root before the shallow ones that fill in while
 * those wait (Hu's rule, optimal for tasks of one step on a tree). */
#ifndef PC_GPU_CHAINS_H
#define PC_GPU_CHAINS_H

#include <stdint.h>

#include "eval/cuda/tuning/gpu_tuning.h"
#include "pc/circuit.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most variables of a group above a chain's bottom: the warp strategy multiplies such a
 * group's inputs into the message from below in FP64, one factor per variable, each 0 or at
 * least 2^-126, so at most 8 factors keep every nonzero product above FP64's 2^-1022. */
#define PC_GPU_CHAIN_LINK_VARS 7
/* The variables of a chain's links together: a warp item stages their input rows at once, one
 * variable per lane. */
#define PC_GPU_CHAIN_WINDOW_VARS 32

typedef struct pc_gpu_chains {
    int32_t num_chains;
    int32_t *begin;       /* [num_chains + 1] ranges of `groups` */
    int32_t *groups;      /* [G] each chain's groups, bottom (first evaluated) to top */
    int32_t *child_chain; /* [G - 1] the chain, so the slot, of each entry of group_children */
    int32_t *by_path;     /* [num_chains] the chains by their longest path of costs to the root,
                             longest first (ties in chain order): a second queue order */
} pc_gpu_chains;

/* Fills *chains (arrays allocated here; release with pc_gpu_chains_free), each chain at most
 * max_len groups long, with at most max_link_vars variables in its groups above the bottom
 * together (the warp strategy stages their input rows at once, PC_GPU_CHAIN_WINDOW_VARS); the
 * order's costs from t. */
pc_status pc_gpu_chain_plan(const pc_circuit *circuit, const pc_gpu_tuning *t, int32_t max_len,
                            int32_t max_link_vars, pc_gpu_chains *chains);
void pc_gpu_chains_free(pc_gpu_chains *chains);

#ifdef __cplusplus
}
#endif

#endif
