/* Queries on an evaluator (pc/query.h): conditionals, MPE, samples. Each takes rows in calls of
 * at most the evaluator's max_batch, without the GIL; sampling passes the first row's index,
 * so a split run draws the rows of one call. */
#include "core.h"

#include "pc/query.h"

/* Rows [at, at + nb) of the call; returns the library's status. */
typedef pc_status (*chunk_fn)(pc_evaluator *e, const void *ctx, int64_t at, int64_t nb);

static PyObject *run_chunks(pcpy_evaluator *self, int64_t n, chunk_fn fn, const void *ctx) {
    if (pcpy_evaluator_acquire(self) != 0) return NULL;
    pc_status st = PC_OK;
    int64_t at = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; at < n; at += self->max_batch) {
        const int64_t nb = n - at < self->max_batch ? n - at : self->max_batch;
        st = fn(self->evaluator, ctx, at, nb);
        if (st != PC_OK) break;
    }
    Py_END_ALLOW_THREADS
    pcpy_evaluator_release(self);
    if (st == PC_OK) Py_RETURN_NONE;
    if (n > self->max_batch)
        return pcpy_raise_msg(st, "rows %lld.. of x: %s", (long long)at, pc_last_error());
    return pcpy_raise(st);
}

/* What every query reads and writes, as pointers to the first row. */
typedef struct query_args {
    const uint8_t *x, *missing;
    int64_t width, cats;
    void *out;      /* probs (double or float), completed, or samples */
    double *logp;   /* NULL or [n] */
    int out_f32;    /* conditionals: probs as float */
    uint64_t seed;
    int64_t first;  /* sampling: index of row 0 */
} query_args;

static const uint8_t *row_of(const uint8_t *p, const query_args *q, int64_t at) {
    return p ? p + at * q->width : NULL;
}

static double *logp_at(const query_args *q, int64_t at) { return q->logp ? q->logp + at : NULL; }

static pc_status conditionals_chunk(pc_evaluator *e, const void *ctx, int64_t at, int64_t nb) {
    const query_args *q = ctx;
    const int64_t cell = at * q->width * q->cats;
    if (q->out_f32)
        return pc_conditionals_f32(e, row_of(q->x, q, at), row_of(q->missing, q, at), nb,
                                   q->width, q->cats, (float *)q->out + cell, logp_at(q, at));
    return pc_conditionals(e, row_of(q->x, q, at), row_of(q->missing, q, at), nb, q->width,
                           q->cats, (double *)q->out + cell, logp_at(q, at));
}

static pc_status mpe_chunk(pc_evaluator *e, const void *ctx, int64_t at, int64_t nb) {
    const query_args *q = ctx;
    return pc_mpe(e, row_of(q->x, q, at), row_of(q->missing, q, at), nb, q->width,
                  (uint8_t *)q->out + at * q->width, logp_at(q, at));
}

static pc_status sample_chunk(pc_evaluator *e, const void *ctx, int64_t at, int64_t nb) {
    const query_args *q = ctx;
    uint8_t *out = (uint8_t *)q->out + at * q->width;
    if (!q->x) return pc_sample(e, nb, q->width, q->seed, q->first + at, out);
    return pc_sample_conditional(e, row_of(q->x, q, at), row_of(q->missing, q, at), nb, q->width,
                                 q->seed, q->first + at, out);
}

/* The optional logp output: None, or float64 [n]. */
static int get_logp(PyObject *obj, int64_t n, pcpy_rows *logp) {
    logp->held = 0;
    return obj == Py_None ? 0 : pcpy_get_flat(obj, "logp", PCPY_F64, 1, n, logp);
}

/* conditionals(evaluator, x, missing, probs, logp, f32): probs float64 [n, V, C], or
 * float32 when f32 is true. */
static PyObject *conditionals(PyObject *mod, PyObject *args) {
    (void)mod;
    pcpy_evaluator *self;
    PyObject *x_obj, *missing_obj, *probs_obj, *logp_obj;
    int f32 = 0;
    if (!PyArg_ParseTuple(args, "O!OOOOp:conditionals", &pcpy_evaluator_type, &self, &x_obj,
                          &missing_obj, &probs_obj, &logp_obj, &f32))
        return NULL;
    pcpy_rows x, missing, probs, logp;
    if (pcpy_get_evidence(x_obj, missing_obj, &x, &missing) != 0) return NULL;
    const int64_t cats = self->model->circuit->num_cats;
    const int64_t cells = x.rows * x.cols * cats;
    PyObject *result = NULL;
    probs.held = 0;
    if (pcpy_get_flat(probs_obj, "probs", f32 ? PCPY_F32 : PCPY_F64, 1, cells, &probs) != 0 ||
        get_logp(logp_obj, x.rows, &logp) != 0)
        goto done;
    const query_args q = {x.view.buf, missing.held ? missing.view.buf : NULL, x.cols, cats,
                          probs.view.buf, logp.held ? logp.view.buf : NULL, f32, 0, 0};
    result = run_chunks(self, x.rows, conditionals_chunk, &q);
    pcpy_release(&logp);
done:
    pcpy_release(&probs);
    pcpy_release(&x);
    pcpy_release(&missing);
    return result;
}

/* mpe(evaluator, x, missing, completed, logp): completed uint8 [n, V], written. */
static PyObject *mpe(PyObject *mod, PyObject *args) {
    (void)mod;
    pcpy_evaluator *self;
    PyObject *x_obj, *missing_obj, *out_obj, *logp_obj;
    if (!PyArg_ParseTuple(args, "O!OOOO:mpe", &pcpy_evaluator_type, &self, &x_obj, &missing_obj,
                          &out_obj, &logp_obj))
        return NULL;
    pcpy_rows x, missing, out, logp;
    if (pcpy_get_evidence(x_obj, missing_obj, &x, &missing) != 0) return NULL;
    PyObject *result = NULL;
    out.held = 0;
    if (pcpy_get_flat(out_obj, "completed", PCPY_U8, 1, x.rows * x.cols, &out) != 0 ||
        get_logp(logp_obj, x.rows, &logp) != 0)
        goto done;
    const query_args q = {x.view.buf, missing.held ? missing.view.buf : NULL, x.cols, 0,
                          out.view.buf, logp.held ? logp.view.buf : NULL, 0, 0, 0};
    result = run_chunks(self, x.rows, mpe_chunk, &q);
    pcpy_release(&logp);
done:
    pcpy_release(&out);
    pcpy_release(&x);
    pcpy_release(&missing);
    return result;
}

/* sample(evaluator, samples, seed, first): samples uint8 [n, V], written with rows first ..
 * first + n - 1 of the seed's streams. */
static PyObject *sample(PyObject *mod, PyObject *args) {
    (void)mod;
    pcpy_evaluator *self;
    PyObject *out_obj;
    unsigned long long seed;
    long long first;
    if (!PyArg_ParseTuple(args, "O!OKL:sample", &pcpy_evaluator_type, &self, &out_obj, &seed,
                          &first))
        return NULL;
    pcpy_rows out;
    if (pcpy_get_matrix(out_obj, "samples", PCPY_U8, 1, &out) != 0) return NULL;
    const query_args q = {NULL, NULL, out.cols, 0, out.view.buf, NULL, 0, seed, first};
    PyObject *result = run_chunks(self, out.rows, sample_chunk, &q);
    pcpy_release(&out);
    return result;
}

/* sample_conditional(evaluator, x, missing, samples, seed, first): one sample of the missing
 * entries per row of x; samples uint8 [n, V], written. */
static PyObject *sample_conditional(PyObject *mod, PyObject *args) {
    (void)mod;
    pcpy_evaluator *self;
    PyObject *x_obj, *missing_obj, *out_obj;
    unsigned long long seed;
    long long first;
    if (!PyArg_ParseTuple(args, "O!OOOKL:sample_conditional", &pcpy_evaluator_type, &self,
                          &x_obj, &missing_obj, &out_obj, &seed, &first))
        return NULL;
    pcpy_rows x, missing, out;
    if (pcpy_get_evidence(x_obj, missing_obj, &x, &missing) != 0) return NULL;
    PyObject *result = NULL;
    if (pcpy_get_flat(out_obj, "samples", PCPY_U8, 1, x.rows * x.cols, &out) == 0) {
        const query_args q = {x.view.buf, missing.held ? missing.view.buf : NULL, x.cols, 0,
                              out.view.buf, NULL, 0, seed, first};
        result = run_chunks(self, x.rows, sample_chunk, &q);
        pcpy_release(&out);
    }
    pcpy_release(&x);
    pcpy_release(&missing);
    return result;
}

PyMethodDef pcpy_query_methods[] = {
    {"conditionals", conditionals, METH_VARARGS,
     "conditionals(evaluator, x, missing, probs, logp, f32)"},
    {"mpe", mpe, METH_VARARGS, "mpe(evaluator, x, missing, completed, logp)"},
    {"sample", sample, METH_VARARGS, "sample(evaluator, samples, seed, first)"},
    {"sample_conditional", sample_conditional, METH_VARARGS,
     "sample_conditional(evaluator, x, missing, samples, seed, first)"},
    {NULL, NULL, 0, NULL},
};
