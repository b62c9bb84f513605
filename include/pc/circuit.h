/* A compiled HCLT: the tree turned into layers of node groups, ready for the evaluators.
 *
 * A "group" is one latent Z_g with its K states: the product node group P_g (K products) and,
 * for every group but the root, the sum node group msg_g that sends it to the parent group.
 *
 *   P_g(k)   = sum_{v in vars(g)} input_logp[v, k, x_v] + sum_{c in children(g)} msg_c(k)
 *   msg_g(j) = LSE_k ( trans_logw[trans(g), j, k] + P_g(k) )                    (g not root)
 *   log p(x) = LSE_k ( root_logw[k] + P_root(k) )
 *
 * vars(g) holds the variable that owns latent g first, then the variables that share it (HCLT
 * leaves built the PyJuice way). Groups are numbered in evaluation order: by height in the tree
 * (leaves of the latent tree first), so layer l is the contiguous range of groups
 * [layer_start[l], layer_start[l + 1]) and every child comes before its parent. The root is the
 * last group. All arrays are owned by the circuit; the struct is read-only for its users.
 */
#ifndef PC_CIRCUIT_H
#define PC_CIRCUIT_H

#include <stdint.h>

#include "pc/export.h"
#include "pc/hclt.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A circuit is read-only once compiled: any number of threads and evaluators may use one at
 * once; it must outlive them all. */
typedef struct pc_circuit {
    int32_t num_vars;    /* V */
    int32_t num_cats;    /* C */
    int32_t num_latents; /* K */
    int32_t num_groups;  /* G = 1 + number of edges with a trans row */
    int32_t num_layers;  /* L */
    int32_t *layer_start;    /* [L + 1] group ranges per layer */
    int32_t *group_parent;   /* [G] parent group, -1 for the root */
    int32_t *group_trans;    /* [G] row of trans_logw for msg_g, -1 for the root */
    int32_t *var_start;      /* [G + 1] CSR offsets into group_vars */
    int32_t *group_vars;     /* [V] variables of each group (owner first) */
    int32_t *child_start;    /* [G + 1] CSR offsets into group_children */
    int32_t *group_children; /* [G - 1] child groups of each group */
    /* Parameters, copied from the model (natural logs, FP64). */
    double *root_logw;  /* [K] */
    double *trans_logw; /* [T, K, K] */
    double *input_logp; /* [V, K, C] */
    int32_t num_trans;  /* T */
} pc_circuit;

/* Compiles a validated model. The circuit keeps its own copy of the parameters; the model may
 * be freed afterwards. */
PC_API pc_status pc_circuit_compile(const pc_hclt *model, pc_circuit **out);
PC_API void pc_circuit_free(pc_circuit *circuit);

/* The same distribution with `num_latents` >= K states per latent: states K and up have zero
 * probability (input_logp, root_logw and trans_logw -inf in every entry that involves them), so
 * every log p(x) is unchanged. The GPU's fuse backend runs a circuit this way where its
 * kernels are faster with more states (rows of a multiple of 4 floats for 16-byte loads). */
PC_API pc_status pc_circuit_pad_latents(const pc_circuit *circuit, int32_t num_latents,
                                        pc_circuit **out);

#ifdef __cplusplus
}
#endif

#endif
