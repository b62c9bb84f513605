/* pclearn's EM state per device and its scoring (learn_device.h). */
#include "learn_device.h"

#include <string.h>

#include "pc/circuit.h"
#include "pc/eval.h"

/* Rows per call of the GPU evaluator: the engine streams larger calls in chunks anyway. */
#define PC_TOOL_SCORE_BATCH 16384

int pc_tool_em_device(const char *name, pc_em_device *device) {
    if (name && !strcmp(name, "cpu")) *device = PC_EM_CPU;
    else if (name && !strcmp(name, "cuda")) *device = PC_EM_CUDA;
    else return 0;
    return 1;
}

pc_status pc_tool_em_create(pc_em_device device, int f32, int cuda_device, const pc_hclt *model,
                            const pc_data *train, pc_em **out, int *streamed) {
    const pc_em_opts opts = {.device = device, .f32 = f32, .cuda_device = cuda_device};
    pc_status st = pc_em_create_opts(model, &opts, out);
    *streamed = 0;
    if (st == PC_OK && device == PC_EM_CUDA) {
        st = pc_em_attach_data(*out, train);
        if (st == PC_ERR_DEVICE_MEMORY) { /* too large for the GPU: the rows go in each step */
            *streamed = 1;
            st = PC_OK;
        }
    }
    if (st != PC_OK) {
        pc_em_free(*out);
        *out = NULL;
    }
    return st;
}

pc_status pc_tool_score_rows(const pc_hclt *model, const pc_data *data, int64_t lo, int64_t hi,
                             pc_em_device device, double *logp) {
    const int64_t V = data->width;
    if (device != PC_EM_CUDA) {
        const pc_data part = {.count = hi - lo, .width = data->width,
                              .values = data->values + lo * V,
                              .missing = data->missing ? data->missing + lo * V : NULL};
        return pc_learn_loglik(model, &part, logp);
    }
    pc_circuit *c = NULL;
    pc_evaluator *e = NULL;
    const pc_eval_opts opts = {PC_BACKEND_FUSE, PC_TOOL_SCORE_BATCH, 0};
    pc_status st = pc_circuit_compile(model, &c);
    if (st == PC_OK) st = pc_evaluator_create(c, &opts, &e);
    for (int64_t i = lo; i < hi && st == PC_OK; i += PC_TOOL_SCORE_BATCH) {
        const int64_t n = hi - i < PC_TOOL_SCORE_BATCH ? hi - i : PC_TOOL_SCORE_BATCH;
        st = pc_evaluate(e, data->values + i * V, data->missing ? data->missing + i * V : NULL,
                         n, V, logp + (i - lo));
    }
    pc_evaluator_free(e);
    pc_circuit_free(c);
    return st;
}
