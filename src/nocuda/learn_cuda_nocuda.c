/* GPU EM (src/learn/cuda/em_gpu.h) in a build without CUDA (PC_CUDA=OFF): creation fails, so
 * no other call is ever reached with a state. Not compiled when CUDA is on. */
#include "base/fail.h"
#include "learn/cuda/em_gpu.h"

pc_status pc_em_gpu_create(const pc_hclt *model, const pc_em_opts *opts, pc_em_gpu **out) {
    (void)model, (void)opts;
    *out = NULL;
    return pc_fail(PC_ERR_UNSUPPORTED,
                   "EM on the GPU: this build of pcinfer has no CUDA support (PC_CUDA=OFF)");
}
void pc_em_gpu_free(pc_em_gpu *g) { (void)g; }
pc_status pc_em_gpu_attach(pc_em_gpu *g, const pc_data *data) {
    (void)g, (void)data;
    return PC_ERR_UNSUPPORTED;
}
int pc_em_gpu_is_attached(const pc_em_gpu *g, const pc_data *data) {
    (void)g, (void)data;
    return 0;
}
pc_status pc_em_gpu_accumulate(pc_em_gpu *g, const pc_data *data, const int64_t *rows,
                               int64_t lo, int64_t hi, double scale, double *logp) {
    (void)g, (void)data, (void)rows, (void)lo, (void)hi, (void)scale, (void)logp;
    return PC_ERR_UNSUPPORTED;
}
pc_status pc_em_gpu_counts(pc_em_gpu *g, int64_t *root, int64_t *trans, int64_t *input,
                           int to_device) {
    (void)g, (void)root, (void)trans, (void)input, (void)to_device;
    return PC_ERR_UNSUPPORTED;
}
pc_status pc_em_gpu_clear_counts(pc_em_gpu *g) {
    (void)g;
    return PC_ERR_UNSUPPORTED;
}
pc_status pc_em_gpu_update(pc_em_gpu *g, double inv_scale, double step, double pseudocount) {
    (void)g, (void)inv_scale, (void)step, (void)pseudocount;
    return PC_ERR_UNSUPPORTED;
}
pc_status pc_em_gpu_export(const pc_em_gpu *g, pc_hclt *model) {
    (void)g, (void)model;
    return PC_ERR_UNSUPPORTED;
}
pc_status pc_em_gpu_time_pass(pc_em_gpu *g, int reps, double *ms) {
    (void)g, (void)reps, (void)ms;
    return PC_ERR_UNSUPPORTED;
}
