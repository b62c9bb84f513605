/* pclearn's EM state per device and its scoring (learn_device.h). */
#include "learn_device.h"

#include <string.h>

/* Rows per evaluator call, as pcinfer's: the GPU engine streams larger calls in chunks anyway;
 * the CPU kernels' buffers grow with the batch. */
#define PC_TOOL_SCORE_GPU_BATCH 16384
#define PC_TOOL_SCORE_CPU_BATCH 1024

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

pc_status pc_tool_scorer_init(pc_tool_scorer *s, const pc_hclt *model, pc_em_device device) {
    const int gpu = device == PC_EM_CUDA;
    *s = (pc_tool_scorer){.batch = gpu ? PC_TOOL_SCORE_GPU_BATCH : PC_TOOL_SCORE_CPU_BATCH};
    const pc_eval_opts opts = {gpu ? PC_BACKEND_FUSE : PC_BACKEND_CPU_FUSE, s->batch, 0};
    pc_status st = pc_circuit_compile(model, &s->circuit);
    if (st == PC_OK) st = pc_evaluator_create(s->circuit, &opts, &s->evaluator);
    if (st != PC_OK) pc_tool_scorer_release(s);
    return st;
}

pc_status pc_tool_scorer_run(const pc_tool_scorer *s, const pc_data *data, double *logp) {
    const int64_t V = data->width;
    pc_status st = PC_OK;
    for (int64_t i = 0; i < data->count && st == PC_OK; i += s->batch) {
        const int64_t n = data->count - i < s->batch ? data->count - i : s->batch;
        st = pc_evaluate(s->evaluator, data->values + i * V,
                         data->missing ? data->missing + i * V : NULL, n, V, logp + i);
    }
    return st;
}

void pc_tool_scorer_release(pc_tool_scorer *s) {
    pc_evaluator_free(s->evaluator);
    pc_circuit_free(s->circuit);
    *s = (pc_tool_scorer){0};
}
