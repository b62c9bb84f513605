/* The GPU queries in a build without CUDA: a GPU evaluator cannot be made there, so these only
 * say so. Not compiled when CUDA is on (src/eval/cuda/query defines them then). */
#include "base/fail.h"
#include "eval/backend.h"
#include "eval/cuda/query/gpu_query.h"

static pc_status no_cuda(void) {
    return pc_fail(PC_ERR_UNSUPPORTED, "GPU queries need CUDA, and this build has none "
                                       "(PC_CUDA=OFF)");
}

static pc_status no_create(const void *backend_state, const pc_circuit *circuit,
                           const pc_eval_opts *opts, void **state) {
    (void)backend_state, (void)circuit, (void)opts, (void)state;
    return no_cuda();
}

static pc_status no_conditionals(void *state, const uint8_t *x, const uint8_t *missing,
                                 int64_t n, double *probs64, float *probs32, double *logp) {
    (void)state, (void)x, (void)missing, (void)n, (void)probs64, (void)probs32, (void)logp;
    return no_cuda();
}

static pc_status no_mpe(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                        uint8_t *completed, double *logp) {
    (void)state, (void)x, (void)missing, (void)n, (void)completed, (void)logp;
    return no_cuda();
}

static pc_status no_sample(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                           uint64_t seed, int64_t first, uint8_t *samples) {
    (void)state, (void)x, (void)missing, (void)n, (void)seed, (void)first, (void)samples;
    return no_cuda();
}

static void no_destroy(void *state) { (void)state; }

const pc_query_ops pc_query_gpu_ops = {.create = NULL, .conditionals = no_conditionals,
                                       .mpe = no_mpe, .sample = no_sample,
                                       .destroy = no_destroy, .create_with = no_create};
