/* Hidden Chow-Liu Tree models: the in-memory form of HCLT_FORMAT v1 (docs/format.md) and its
 * HDF5 reader and writer.
 *
 * A pc_hclt is plain data: the loader, the learner and tests fill it; the compiler
 * (pc/circuit.h) turns it into layers. Parameters are held in double whatever the file stores.
 */
#ifndef PC_HCLT_H
#define PC_HCLT_H

#include <stdint.h>

#include "pc/export.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A model is plain data without locks: several threads may read one at once, but none may
 * read it while another changes or frees it. */
typedef struct pc_hclt {
    int32_t num_vars;    /* V >= 1 */
    int32_t num_cats;    /* C >= 2 */
    int32_t num_latents; /* K >= 1 */
    int32_t num_trans;   /* T >= 0: rows of trans_logw */
    int32_t *parent;      /* [V]; -1 for the one root */
    int32_t *trans_index; /* [V]; row of trans_logw for the edge parent(v) -> v, or -1 when v
                             shares its parent's latent; -1 for the root */
    double *root_logw;    /* [K]       log p(Z_root = k) */
    double *trans_logw;   /* [T, K, K] trans_logw[t, j, k] = log p(Z_v = k | Z_parent(v) = j) */
    double *input_logp;   /* [V, K, C] log p(X_v = c | latent of v = k) */
} pc_hclt;

/* Float type the writer stores parameters as. */
typedef enum pc_hclt_float { PC_HCLT_F32 = 0, PC_HCLT_F64 = 1 } pc_hclt_float;

/* Allocates a model with every array sized for (V, C, K, T), parents and trans_index set to -1
 * and parameters to 0. Free with pc_hclt_free. */
PC_API pc_status pc_hclt_create(int32_t num_vars, int32_t num_cats, int32_t num_latents,
                                int32_t num_trans, pc_hclt **out);
PC_API void pc_hclt_free(pc_hclt *model);

/* Checks every rule of HCLT_FORMAT v1 (tree shape, trans_index a permutation, no NaN or +inf,
 * every distribution normalised within 1e-3). `name` (a file name, or NULL) starts the message,
 * e.g. "model.h5: /params/input_logp[12, 3, :] sums to 1.7, not 1". */
PC_API pc_status pc_hclt_validate(const pc_hclt *model, const char *name);

/* Reads and validates a model file; float32 or float64 datasets, any HDF5 filter. On error
 * *out is NULL and the message names the file and the field. */
PC_API pc_status pc_hclt_load(const char *path, pc_hclt **out);

/* Validates, then writes the model with shuffle + deflate to "<path>.tmp-<pid>" and renames it
 * to path, so a failed write leaves no file behind and never a partial one. */
PC_API pc_status pc_hclt_save(const pc_hclt *model, const char *path, pc_hclt_float float_type);

#ifdef __cplusplus
}
#endif

#endif
