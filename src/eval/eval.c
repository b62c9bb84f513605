/* Backend names, the evaluator handle, and the data checks in front of every backend. */
#include <stdlib.h>
#include <string.h>

#include "base/fail.h"
#include "eval/backend.h"
#include "eval/evaluator.h"

static const char *const backend_names[] = {"ref", "cpu", "cpu-fuse", "fuse", "int", "gemm"};
#define PC_NUM_BACKENDS ((int)(sizeof backend_names / sizeof backend_names[0]))

const char *pc_backend_name(pc_backend backend) {
    return (int)backend >= 0 && (int)backend < PC_NUM_BACKENDS ? backend_names[backend] : "unknown";
}

pc_status pc_backend_parse(const char *name, pc_backend *backend) {
    if (!name || !backend) return pc_fail(PC_ERR_ARG, "pc_backend_parse: NULL argument");
    for (int i = 0; i < PC_NUM_BACKENDS; i++)
        if (strcmp(name, backend_names[i]) == 0) {
            *backend = (pc_backend)i;
            return PC_OK;
        }
    return pc_fail(PC_ERR_ARG, "unknown kernel '%s' (ref, cpu, cpu-fuse, fuse, int, gemm)", name);
}

int pc_backend_is_gpu(pc_backend backend) {
    return backend == PC_BACKEND_FUSE || backend == PC_BACKEND_INT || backend == PC_BACKEND_GEMM;
}

static const pc_backend_ops *ops_of(pc_backend backend) {
    switch (backend) {
    case PC_BACKEND_REF: return &pc_backend_ref_ops;
    case PC_BACKEND_CPU: return &pc_backend_cpu_ops;
    case PC_BACKEND_CPU_FUSE: return &pc_backend_cpu_fuse_ops;
    case PC_BACKEND_FUSE: return &pc_backend_fuse_ops;
    case PC_BACKEND_INT: return &pc_backend_int_ops;
    case PC_BACKEND_GEMM: return &pc_backend_gemm_ops;
    }
    return NULL;
}

/* The queries of each backend: FP64 (ref), FP32 (cpu-fuse, cpu), the GPU's (fuse, int, gemm:
 * one FP64 implementation). */
static const pc_query_ops *queries_of(pc_backend backend) {
    switch (backend) {
    case PC_BACKEND_REF: return &pc_query_f64_ops;
    case PC_BACKEND_CPU:
    case PC_BACKEND_CPU_FUSE: return &pc_query_f32_ops;
    case PC_BACKEND_FUSE:
    case PC_BACKEND_INT:
    case PC_BACKEND_GEMM: return &pc_query_gpu_ops;
    }
    return NULL;
}

pc_status pc_evaluator_create(const pc_circuit *circuit, const pc_eval_opts *opts,
                              pc_evaluator **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_evaluator_create: out is NULL");
    *out = NULL;
    if (!circuit || !opts) return pc_fail(PC_ERR_ARG, "pc_evaluator_create: NULL argument");
    const pc_backend_ops *ops = ops_of(opts->backend);
    if (!ops) return pc_fail(PC_ERR_ARG, "pc_evaluator_create: unknown backend %d", (int)opts->backend);
    return pc_evaluator_create_ops(circuit, opts, ops, out);
}

pc_status pc_evaluator_create_ops(const pc_circuit *circuit, const pc_eval_opts *opts,
                                  const pc_backend_ops *ops, pc_evaluator **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_evaluator_create: out is NULL");
    *out = NULL;
    if (!circuit || !opts || !ops) return pc_fail(PC_ERR_ARG, "pc_evaluator_create: NULL argument");
    if (opts->max_batch < 1)
        return pc_fail(PC_ERR_ARG, "pc_evaluator_create: max_batch = %lld (need >= 1)",
                       (long long)opts->max_batch);
    pc_evaluator *e = calloc(1, sizeof *e);
    if (!e) return pc_fail(PC_ERR_NOMEM, "pc_evaluator_create: out of memory");
    pc_status st = ops->create(circuit, opts, &e->state);
    if (st != PC_OK) {
        free(e);
        return st;
    }
    e->circuit = circuit;
    e->ops = ops;
    e->opts = *opts;
    atomic_init(&e->busy, 0);
    e->query_ops = queries_of(opts->backend);
    *out = e;
    return PC_OK;
}

void pc_evaluator_free(pc_evaluator *e) {
    if (!e) return;
    e->ops->destroy(e->state);
    if (e->query_state) e->query_ops->destroy(e->query_state);
    free(e);
}

pc_status pc_evaluator_claim(pc_evaluator *e, const char *fn) {
    if (!e) return pc_fail(PC_ERR_ARG, "%s: evaluator is NULL", fn);
    if (atomic_exchange_explicit(&e->busy, 1, memory_order_acquire))
        return pc_fail(PC_ERR_ARG, "%s: evaluator is in use by another thread", fn);
    return PC_OK;
}

void pc_evaluator_release(pc_evaluator *e) {
    atomic_store_explicit(&e->busy, 0, memory_order_release);
}

pc_status pc_evaluator_check_rows(const pc_evaluator *e, const char *fn, const uint8_t *x,
                                  const uint8_t *missing, int64_t n, int64_t width) {
    const int64_t V = e->circuit->num_vars;
    const int C = e->circuit->num_cats;
    if (n < 0 || n > e->opts.max_batch)
        return pc_fail(PC_ERR_ARG, "%s: n = %lld is outside [0, max_batch = %lld]", fn,
                       (long long)n, (long long)e->opts.max_batch);
    if (width != V)
        return pc_fail(PC_ERR_DATA, "%s: rows of %lld values, but the model has %lld variables",
                       fn, (long long)width, (long long)V);
    if (n == 0) return PC_OK;
    if (!x) return pc_fail(PC_ERR_ARG, "%s: x is NULL", fn);
    /* Values of missing entries are ignored, so only observed ones must be < C. */
    if (C <= 255)
        for (int64_t i = 0; i < n * V; i++)
            if (x[i] >= C && !(missing && missing[i]))
                return pc_fail(PC_ERR_DATA,
                               "%s: sample %lld, variable %lld: value %d is out of range for %d "
                               "categories (0..%d)",
                               fn, (long long)(i / V), (long long)(i % V), x[i], C, C - 1);
    return PC_OK;
}

pc_status pc_evaluate(pc_evaluator *e, const uint8_t *x, const uint8_t *missing, int64_t n,
                      int64_t width, double *logp) {
    pc_status st = pc_evaluator_claim(e, "pc_evaluate");
    if (st != PC_OK) return st;
    st = pc_evaluator_check_rows(e, "pc_evaluate", x, missing, n, width);
    if (st == PC_OK && n > 0 && !logp) st = pc_fail(PC_ERR_ARG, "pc_evaluate: logp is NULL");
    if (st == PC_OK && n > 0) st = e->ops->evaluate(e->state, x, missing, n, logp);
    pc_evaluator_release(e);
    return st;
}

const pc_backend_ops *pc_evaluator_ops(const pc_evaluator *e, void **state) {
    if (state) *state = e ? e->state : NULL;
    return e ? e->ops : NULL;
}

size_t pc_evaluator_peak_device_bytes(const pc_evaluator *e) {
    return e ? e->ops->peak_device_bytes(e->state) : 0;
}
