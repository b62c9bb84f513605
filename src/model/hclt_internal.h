/* Inside the model module: the size rule every reader and pc_hclt_create share, and the HDF5
 * reader without the process isolation of pc_hclt_load_isolated (the helper program and the
 * fuzz targets call it directly). */
#ifndef PC_MODEL_HCLT_INTERNAL_H
#define PC_MODEL_HCLT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pc/hclt.h"

#define PC_HCLT_FORMAT_NAME "pcinfer-hclt"
#define PC_HCLT_VERSION 1

/* Bytes a model of these sizes takes in memory: parameters 8 (K + T K K + V K C) plus the
 * structure 8 V; INT64_MAX when that does not fit in int64 (or a size is negative). */
int64_t pc_hclt_model_bytes(int64_t V, int64_t C, int64_t K, int64_t T);

/* PC_OK when a model of these sizes fits in max_bytes; else `status` with a message that
 * starts with `name` and says what the sizes claim, e.g.
 * "m.h5: num_vars = 784, num_cats = 256, num_latents = 32768, 1 transition rows need
 *  8 GiB ...; at most 4 GiB are accepted". */
pc_status pc_hclt_check_size(int64_t V, int64_t C, int64_t K, int64_t T, int64_t max_bytes,
                             const char *name, pc_status status);

/* Called by pc_hclt_read once the sizes are known and checked against the file, before the
 * model is allocated and its data read; a status other than PC_OK stops the read. */
typedef struct pc_hclt_read_hook {
    pc_status (*sizes)(void *ctx, int32_t V, int32_t C, int32_t K, int32_t T);
    void *ctx;
} pc_hclt_read_hook;

/* Reads the model in the HDF5 file at `path` (or in image[0, image_len) when image is not
 * NULL; `path` then only names it in messages) without pc_hclt_validate: shapes, types and
 * sizes are checked, values are not. A model above max_bytes is refused before anything is
 * allocated. hook may be NULL. Malformed files can still crash or hang inside libhdf5: only
 * the reader program of pc_hclt_load_isolated, the fuzz targets and pc_hclt_load (trusted
 * files) use this in their own process. */
pc_status pc_hclt_read(const char *path, const void *image, size_t image_len, int64_t max_bytes,
                       const pc_hclt_read_hook *hook, pc_hclt **out);

#endif
