/* What pclearn needs beyond the library's learning calls: the EM state on the chosen device
 * (with the training data attached on a GPU) and the scoring of the learned model with the
 * engine. Errors are the library's: a pc_status and pc_last_error(). */
#ifndef PC_TOOLS_LEARN_DEVICE_H
#define PC_TOOLS_LEARN_DEVICE_H

#include "pc/circuit.h"
#include "pc/data.h"
#include "pc/eval.h"
#include "pc/hclt.h"
#include "pc/learn.h"

/* "cpu" or "cuda" into *device and 1; 0 for anything else. */
int pc_tool_em_device(const char *name, pc_em_device *device);

/* An EM state of model on `device` (FP32 values and messages when f32 is set, GPU only), the
 * GPU's at cuda_device modulo the GPUs present; the training data attached on a GPU, or, when
 * it does not fit there, left on the host (*streamed = 1: each step copies its rows in). */
pc_status pc_tool_em_create(pc_em_device device, int f32, int cuda_device, const pc_hclt *model,
                            const pc_data *train, pc_em **out, int *streamed);

/* The engine's circuit and evaluator for one model, made once for every data set it scores:
 * the fuse backend on the GPU when device is PC_EM_CUDA, else cpu-fuse on all OpenMP threads
 * (within about 1e-6 nats of FP64; pclearn's own FP64 forward pass, pc_learn_loglik, is 2-2.5x
 * slower at K = 16-64 and takes about 19 ms an image at K = 256 on 2 cores). Compiling and
 * preparing a K = 256 model takes 2.5 s on a 2-core CPU, so train and test share one scorer. */
typedef struct pc_tool_scorer {
    pc_circuit *circuit;
    pc_evaluator *evaluator;
    int64_t batch; /* rows per evaluator call */
} pc_tool_scorer;

/* Fills *s; on failure *s holds nothing to release. */
pc_status pc_tool_scorer_init(pc_tool_scorer *s, const pc_hclt *model, pc_em_device device);

/* log p(x) of every row of data into logp [data->count]. */
pc_status pc_tool_scorer_run(const pc_tool_scorer *s, const pc_data *data, double *logp);

/* Frees what *s holds and empties it (safe on an empty one). */
void pc_tool_scorer_release(pc_tool_scorer *s);

#endif
