/* The public queries (pc/query.h): argument checks, the evaluator's busy claim, the query
 * state made on the first query, then the backend's query ops. */
#include <stdint.h>

#include "base/fail.h"
#include "eval/evaluator.h"
#include "pc/query.h"

/* Claims the evaluator and checks that its backend answers queries. */
static pc_status begin(pc_evaluator *e, const char *fn) {
    pc_status st = pc_evaluator_claim(e, fn);
    if (st != PC_OK) return st;
    if (!e->query_ops) {
        pc_evaluator_release(e);
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "%s: backend '%s' does not answer queries yet (ref, cpu-fuse and cpu do)",
                       fn, pc_backend_name(e->opts.backend));
    }
    return PC_OK;
}

/* Makes the query state on the first query, then releases nothing: the caller still holds the
 * claim. */
static pc_status query_state(pc_evaluator *e) {
    if (e->query_state) return PC_OK;
    if (e->query_ops->create_with)
        return e->query_ops->create_with(e->state, e->circuit, &e->opts, &e->query_state);
    return e->query_ops->create(e->circuit, &e->opts, &e->query_state);
}

/* Ends a call: releases the claim and passes the status through. */
static pc_status end(pc_evaluator *e, pc_status st) {
    pc_evaluator_release(e);
    return st;
}

/* Whether the byte ranges [a, a + n) and [b, b + n) overlap (NULL never does). */
static int overlaps(const uint8_t *a, const uint8_t *b, size_t n) {
    if (!a || !b || n == 0) return 0;
    const uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa < pb + n && pb < pa + n;
}

/* uint8 outputs: the model's values must fit, and the output must be x itself or apart from
 * x and missing. */
static pc_status check_values_out(const pc_evaluator *e, const char *fn, const uint8_t *out,
                                  const uint8_t *x, const uint8_t *missing, int64_t n) {
    const int32_t C = e->circuit->num_cats;
    const size_t bytes = (size_t)n * (size_t)e->circuit->num_vars;
    if (C > 256)
        return pc_fail(PC_ERR_UNSUPPORTED, "%s: the model has %d categories; uint8 outputs "
                       "hold at most 256", fn, C);
    if (n > 0 && !out) return pc_fail(PC_ERR_ARG, "%s: the output array is NULL", fn);
    if ((out != x && overlaps(out, x, bytes)) || overlaps(out, missing, bytes))
        return pc_fail(PC_ERR_ARG, "%s: the output overlaps x or missing (it may be x itself)",
                       fn);
    return PC_OK;
}

static pc_status check_first(const char *fn, int64_t n, int64_t first) {
    if (first < 0 || first > INT64_MAX - n)
        return pc_fail(PC_ERR_ARG, "%s: first = %lld must be >= 0 with first + n <= 2^63 - 1",
                       fn, (long long)first);
    return PC_OK;
}

static pc_status conditionals(pc_evaluator *e, const char *fn, const uint8_t *x,
                              const uint8_t *missing, int64_t n, int64_t width,
                              int64_t num_cats, double *probs64, float *probs32,
                              double *logp) {
    pc_status st = begin(e, fn);
    if (st != PC_OK) return st;
    st = pc_evaluator_check_rows(e, fn, x, missing, n, width);
    if (st != PC_OK) return end(e, st);
    if (num_cats != e->circuit->num_cats)
        return end(e, pc_fail(PC_ERR_ARG, "%s: probs has %lld categories per variable, the "
                              "model %d", fn, (long long)num_cats, e->circuit->num_cats));
    if (n == 0) return end(e, PC_OK);
    if (!probs64 && !probs32) return end(e, pc_fail(PC_ERR_ARG, "%s: probs is NULL", fn));
    st = query_state(e);
    if (st == PC_OK)
        st = e->query_ops->conditionals(e->query_state, x, missing, n, probs64, probs32, logp);
    return end(e, st);
}

pc_status pc_conditionals(pc_evaluator *e, const uint8_t *x, const uint8_t *missing, int64_t n,
                          int64_t width, int64_t num_cats, double *probs, double *logp) {
    return conditionals(e, "pc_conditionals", x, missing, n, width, num_cats, probs, NULL, logp);
}

pc_status pc_conditionals_f32(pc_evaluator *e, const uint8_t *x, const uint8_t *missing,
                              int64_t n, int64_t width, int64_t num_cats, float *probs,
                              double *logp) {
    return conditionals(e, "pc_conditionals_f32", x, missing, n, width, num_cats, NULL, probs,
                        logp);
}

pc_status pc_mpe(pc_evaluator *e, const uint8_t *x, const uint8_t *missing, int64_t n,
                 int64_t width, uint8_t *completed, double *logp) {
    pc_status st = begin(e, "pc_mpe");
    if (st != PC_OK) return st;
    st = pc_evaluator_check_rows(e, "pc_mpe", x, missing, n, width);
    if (st == PC_OK) st = check_values_out(e, "pc_mpe", completed, x, missing, n);
    if (st == PC_OK && n > 0) st = query_state(e);
    if (st == PC_OK && n > 0)
        st = e->query_ops->mpe(e->query_state, x, missing, n, completed, logp);
    return end(e, st);
}

pc_status pc_sample(pc_evaluator *e, int64_t n, int64_t width, uint64_t seed, int64_t first,
                    uint8_t *samples) {
    pc_status st = begin(e, "pc_sample");
    if (st != PC_OK) return st;
    const int64_t V = e->circuit->num_vars;
    if (n < 0 || n > e->opts.max_batch)
        return end(e, pc_fail(PC_ERR_ARG, "pc_sample: n = %lld is outside [0, max_batch = %lld]",
                              (long long)n, (long long)e->opts.max_batch));
    if (width != V)
        return end(e, pc_fail(PC_ERR_ARG, "pc_sample: rows of %lld values, but the model has "
                              "%lld variables", (long long)width, (long long)V));
    st = check_first("pc_sample", n, first);
    if (st == PC_OK) st = check_values_out(e, "pc_sample", samples, NULL, NULL, n);
    if (st == PC_OK && n > 0) st = query_state(e);
    if (st == PC_OK && n > 0)
        st = e->query_ops->sample(e->query_state, NULL, NULL, n, seed, first, samples);
    return end(e, st);
}

pc_status pc_sample_conditional(pc_evaluator *e, const uint8_t *x, const uint8_t *missing,
                                int64_t n, int64_t width, uint64_t seed, int64_t first,
                                uint8_t *samples) {
    const char *fn = "pc_sample_conditional";
    pc_status st = begin(e, fn);
    if (st != PC_OK) return st;
    st = pc_evaluator_check_rows(e, fn, x, missing, n, width);
    if (st == PC_OK) st = check_first(fn, n, first);
    if (st == PC_OK) st = check_values_out(e, fn, samples, x, missing, n);
    if (st == PC_OK && n > 0) st = query_state(e);
    if (st == PC_OK && n > 0)
        st = e->query_ops->sample(e->query_state, x, missing, n, seed, first, samples);
    return end(e, st);
}
