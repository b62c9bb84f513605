/* The evaluator handle (internal): shared by the scoring call (eval.c) and the queries
 * (query/query_api.c), which check their arguments and claim the handle the same way. */
#ifndef PC_EVAL_EVALUATOR_H
#define PC_EVAL_EVALUATOR_H

#include <stdatomic.h>
#include <stdint.h>

#include "eval/backend.h"

struct pc_evaluator {
    const pc_circuit *circuit;
    const pc_backend_ops *ops;
    void *state;
    pc_eval_opts opts;
    /* 1 while a call runs: a second thread's call fails instead of sharing the buffers. */
    atomic_int busy;
    const pc_query_ops *query_ops; /* NULL: the backend answers no queries */
    void *query_state;             /* made by the first query */
};

/* Marks the evaluator busy for the calling thread's call; PC_ERR_ARG, naming fn, when another
 * call holds it (or the evaluator is NULL). Every PC_OK is paired with pc_evaluator_release. */
pc_status pc_evaluator_claim(pc_evaluator *e, const char *fn);
void pc_evaluator_release(pc_evaluator *e);

/* The checks in front of every call that reads data: 0 <= n <= max_batch, width == V, x
 * non-NULL when n > 0, observed values < C (PC_ERR_DATA naming the sample and variable). */
pc_status pc_evaluator_check_rows(const pc_evaluator *e, const char *fn, const uint8_t *x,
                                  const uint8_t *missing, int64_t n, int64_t width);

#endif
