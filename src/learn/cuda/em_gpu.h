/* GPU EM (internal): the state behind a pc_em created with PC_EM_CUDA, called by learn_em.c.
 * Every call runs on the device chosen at creation (made current around the call, the caller's
 * restored) and on the state's own stream; every call is synchronous unless it says otherwise.
 * In a build without CUDA, create returns PC_ERR_UNSUPPORTED (src/nocuda). */
#ifndef PC_LEARN_EM_GPU_H
#define PC_LEARN_EM_GPU_H

#include <stdint.h>

#include "pc/data.h"
#include "pc/hclt.h"
#include "pc/learn.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pc_em_gpu pc_em_gpu;

/* Uploads the model's parameters and sizes the buffers (opts: precision, chunk, device). */
pc_status pc_em_gpu_create(const pc_hclt *model, const pc_em_opts *opts, pc_em_gpu **out);
void pc_em_gpu_free(pc_em_gpu *g);

/* Keeps a device copy of data (checked first: values < C where observed); NULL drops it. */
pc_status pc_em_gpu_attach(pc_em_gpu *g, const pc_data *data);
/* 1 when data is the pc_data attached, unchanged in shape and pointers (values, mask). */
int pc_em_gpu_is_attached(const pc_em_gpu *g, const pc_data *data);

/* Adds the fixed-point counts (scale: counts times scale) of rows rows[lo .. hi) (rows NULL:
 * lo .. hi - 1) of data to the state's counts; writes log p(x) of each row to logp [hi - lo].
 * Rows and values are checked by the caller. Passes of up to the chunk's rows; the rows come
 * from the attached copy when data is attached, else through pinned staging buffers. */
pc_status pc_em_gpu_accumulate(pc_em_gpu *g, const pc_data *data, const int64_t *rows,
                               int64_t lo, int64_t hi, double scale, double *logp);

/* The counts as host arrays: root [K], trans [T][K][K] (in the state's group order), input
 * [V][C][K]; to_device = 0 copies them out, 1 copies the host arrays in. */
pc_status pc_em_gpu_counts(pc_em_gpu *g, int64_t *root, int64_t *trans, int64_t *input,
                           int to_device);
pc_status pc_em_gpu_clear_counts(pc_em_gpu *g);

/* The M-step from the counts (counts times inv_scale), which it clears; asynchronous. */
pc_status pc_em_gpu_update(pc_em_gpu *g, double inv_scale, double step, double pseudocount);

/* The parameters as natural logs into model (shape and structure checked by the caller). */
pc_status pc_em_gpu_export(const pc_em_gpu *g, pc_hclt *model);

/* For benchmarks: the pass of the last accumulate (its n rows, its data) as CUDA graphs, each
 * replayed reps times between CUDA events after one untimed replay: medians in milliseconds
 * of the gather and forward (ms[0]), those and the downward step (ms[1]), the whole pass with
 * the flows (ms[2]). Clears the counts the replays added. */
pc_status pc_em_gpu_time_pass(pc_em_gpu *g, int reps, double *ms);

#ifdef __cplusplus
}
#endif

#endif
