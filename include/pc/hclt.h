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
#include "pc/file.h"
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

/* The most memory a model may take, parameters as double plus the structure arrays (16 GiB).
 * pc_hclt_create refuses more; the readers refuse a file that claims more before they
 * allocate anything, naming the sizes it claims. */
#define PC_HCLT_MAX_BYTES ((int64_t)1 << 34)

/* CPU seconds pc_hclt_load_isolated allows for a file's structure (attributes and dataset
 * headers: milliseconds for a real model) before any data is read; the data then gets as much
 * again plus one second per 50 MB of model. */
#define PC_HCLT_HEADER_SECONDS 2.0

/* Reads and validates a model file in this process: float32 or float64 datasets, any HDF5
 * filter. Every size is checked (in int64, against the bytes the file holds, against
 * PC_HCLT_MAX_BYTES) before anything is allocated, and data outside the file (external links
 * or storage, virtual datasets) is refused. libhdf5 itself can still crash or hang on some
 * malformed files: use this for files you trust (your own output), pc_hclt_load_isolated for
 * any other. On error *out is NULL and the message names the file and the field. */
PC_API pc_status pc_hclt_load(const char *path, pc_hclt **out);

/* Limits of pc_hclt_load_isolated; NULL or 0 fields take the defaults. */
typedef struct pc_hclt_load_opts {
    int64_t max_bytes;  /* largest model accepted, at most (and by default) PC_HCLT_MAX_BYTES */
    double max_seconds; /* CPU seconds for the file's structure (default PC_HCLT_HEADER_SECONDS) */
} pc_hclt_load_opts;

/* pc_hclt_load for files that may be hostile: the file is parsed by a separate program,
 * pcinfer-hclt-reader (installed in libexec/pcinfer), under an address-space limit of the model
 * size plus 512 MiB and a CPU-time limit, and the model comes back over a pipe, is checked
 * against max_bytes before it is allocated here and validated. Whatever the file holds, the
 * call returns: a crash, a loop or a runaway allocation inside libhdf5 becomes PC_ERR_FORMAT
 * with "PATH: not a valid model file (...)"; a file HDF5 reads gets the messages of
 * pc_hclt_load. Wall time is bounded by three times the CPU limits. No signal reaches the
 * caller and no descriptor leaks into the reader; safe to call from several threads at once
 * and from multi-threaded programs (the reader is started with posix_spawn, not fork).
 * PC_ERR_UNSUPPORTED when the reader program cannot be found (docs/format.md: where it is
 * looked for). */
PC_API pc_status pc_hclt_load_isolated(const char *path, const pc_hclt_load_opts *opts,
                                       pc_hclt **out);

/* Validates, then writes the model (shuffle + deflate) through a pc_file_writer (pc/file.h):
 * a temporary file in the target's folder, synced, then renamed to path. A failed write, a
 * full disk included, leaves no file behind and never a partial one; a non-regular target
 * (device, FIFO, link) is refused. */
PC_API pc_status pc_hclt_save(const pc_hclt *model, const char *path, pc_hclt_float float_type);

/* The writer's half of pc_hclt_save for a caller that opened the output itself (to check the
 * path before a long computation): validates and appends the file's bytes to w, without
 * committing. `name` starts messages (NULL: "model"). */
PC_API pc_status pc_hclt_write(const pc_hclt *model, pc_hclt_float float_type,
                               pc_file_writer *w, const char *name);

#ifdef __cplusplus
}
#endif

#endif
