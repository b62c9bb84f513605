/* What pclearn needs beyond the library's learning calls: the EM state on the chosen device
 * (with the training data attached on a GPU) and the scoring of a data set, on the GPU with
 * the engine's fuse backend (pclearn's own FP64 forward pass takes minutes at K >= 128 on a
 * CPU), else with pc_learn_loglik. Errors are the library's: a pc_status and pc_last_error(). */
#ifndef PC_TOOLS_LEARN_DEVICE_H
#define PC_TOOLS_LEARN_DEVICE_H

#include "pc/data.h"
#include "pc/hclt.h"
#include "pc/learn.h"

/* "cpu" or "cuda" into *device and 1; 0 for anything else. */
int pc_tool_em_device(const char *name, pc_em_device *device);

/* An EM state of model on `device` (FP32 values and messages when f32 is set, GPU only), the
 * GPU's at cuda_device modulo the GPUs present; the training data attached on a GPU, or, when
 * it does not fit there, left on the host (*streamed = 1: each step copies its rows in). */
pc_status pc_tool_em_create(pc_em_device device, int f32, int cuda_device, const pc_hclt *model,
                            const pc_data *train, pc_em **out, int *streamed);

/* log p(x) of rows [lo, hi) of data into logp [hi - lo]: on the GPU (fuse backend) when
 * device is PC_EM_CUDA, else pclearn's FP64 forward pass on the CPU. */
pc_status pc_tool_score_rows(const pc_hclt *model, const pc_data *data, int64_t lo, int64_t hi,
                             pc_em_device device, double *logp);

#endif
