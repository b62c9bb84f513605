/* pcinfer._core.Evaluator: one pc_evaluator (pc/eval.h) on a model. */
#include "core.h"

static PyObject *evaluator_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    (void)kwds;
    pcpy_model *model = NULL;
    int backend = 0, threads = 0;
    long long max_batch = 0;
    if (!PyArg_ParseTuple(args, "O!iLi:Evaluator", &pcpy_model_type, &model, &backend,
                          &max_batch, &threads))
        return NULL;
    const pc_eval_opts opts = {(pc_backend)backend, (int64_t)max_batch, threads};
    pc_evaluator *evaluator = NULL;
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = pc_evaluator_create(model->circuit, &opts, &evaluator);
    Py_END_ALLOW_THREADS
    if (st != PC_OK) return pcpy_raise(st);
    pcpy_evaluator *self = (pcpy_evaluator *)type->tp_alloc(type, 0);
    if (!self) {
        pc_evaluator_free(evaluator);
        return NULL;
    }
    Py_INCREF(model);
    self->model = model;
    self->evaluator = evaluator;
    self->max_batch = (int64_t)max_batch;
    return (PyObject *)self;
}

static void evaluator_dealloc(pcpy_evaluator *self) {
    pc_evaluator_free(self->evaluator);
    Py_XDECREF(self->model);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

int pcpy_evaluator_acquire(pcpy_evaluator *self) {
    if (self->busy) {
        pcpy_raise_msg(PC_ERR_ARG, "evaluator is in use by another thread");
        return -1;
    }
    self->busy = 1;
    return 0;
}

void pcpy_evaluator_release(pcpy_evaluator *self) { self->busy = 0; }

int pcpy_get_evidence(PyObject *x_obj, PyObject *missing_obj,
                      pcpy_rows *x, pcpy_rows *missing) {
    missing->held = 0;
    /* The width is the library's to check (every call takes it): only the shapes of x and
     * missing against each other are checked here. */
    if (pcpy_get_matrix(x_obj, "x", PCPY_U8, 0, x) != 0) return -1;
    if (missing_obj == Py_None) return 0;
    if (pcpy_get_matrix(missing_obj, "missing", PCPY_U8, 0, missing) != 0) {
        pcpy_release(x);
        return -1;
    }
    if (missing->rows != x->rows || missing->cols != x->cols) {
        pcpy_raise_msg(PC_ERR_DATA, "missing is [%lld, %lld] but x is [%lld, %lld]",
                       (long long)missing->rows, (long long)missing->cols, (long long)x->rows,
                       (long long)x->cols);
        pcpy_release(x);
        pcpy_release(missing);
        return -1;
    }
    return 0;
}

/* Scores rows [0, n) in calls of at most max_batch rows; *failed_at is the first row of the
 * call that failed. */
static pc_status evaluate_all(pcpy_evaluator *self, const uint8_t *x, const uint8_t *missing,
                              int64_t n, int64_t width, double *logp, int64_t *failed_at) {
    pc_status st = PC_OK;
    for (int64_t i = 0; i < n && st == PC_OK; i += self->max_batch) {
        const int64_t nb = n - i < self->max_batch ? n - i : self->max_batch;
        const size_t at = (size_t)(i * width);
        *failed_at = i;
        st = pc_evaluate(self->evaluator, x + at, missing ? missing + at : NULL, nb, width,
                         logp + i);
    }
    return st;
}

/* evaluate(x, missing, logp): x, missing (or None) C-contiguous uint8 [n, V]; logp float64
 * [n], written. Rows go to the library max_batch at a time, without the GIL. */
static PyObject *evaluator_evaluate(pcpy_evaluator *self, PyObject *args) {
    PyObject *x_obj, *missing_obj, *logp_obj;
    if (!PyArg_ParseTuple(args, "OOO:evaluate", &x_obj, &missing_obj, &logp_obj)) return NULL;
    pcpy_rows x, missing, logp;
    if (pcpy_get_evidence(x_obj, missing_obj, &x, &missing) != 0) return NULL;
    if (pcpy_get_flat(logp_obj, "logp", PCPY_F64, 1, x.rows, &logp) != 0) {
        pcpy_release(&x);
        pcpy_release(&missing);
        return NULL;
    }
    PyObject *result = NULL;
    if (pcpy_evaluator_acquire(self) == 0) {
        int64_t failed_at = 0;
        pc_status st;
        Py_BEGIN_ALLOW_THREADS
        st = evaluate_all(self, x.view.buf, missing.held ? missing.view.buf : NULL, x.rows,
                          x.cols, logp.view.buf, &failed_at);
        Py_END_ALLOW_THREADS
        pcpy_evaluator_release(self);
        if (st == PC_OK) {
            result = Py_None;
            Py_INCREF(result);
        } else if (x.rows > self->max_batch) {
            /* The library numbers samples within its call. */
            pcpy_raise_msg(st, "rows %lld.. of x: %s", (long long)failed_at, pc_last_error());
        } else {
            pcpy_raise(st);
        }
    }
    pcpy_release(&x);
    pcpy_release(&missing);
    pcpy_release(&logp);
    return result;
}

static PyObject *evaluator_peak_device_bytes(pcpy_evaluator *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromSize_t(pc_evaluator_peak_device_bytes(self->evaluator));
}

static PyObject *get_max_batch(pcpy_evaluator *self, void *c) {
    (void)c;
    return PyLong_FromLongLong(self->max_batch);
}

static PyGetSetDef evaluator_getset[] = {
    {"max_batch", (getter)get_max_batch, NULL, "most rows per library call", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef evaluator_methods[] = {
    {"evaluate", (PyCFunction)evaluator_evaluate, METH_VARARGS,
     "evaluate(x, missing, logp): log p(x) of every row into logp"},
    {"peak_device_bytes", (PyCFunction)evaluator_peak_device_bytes, METH_NOARGS,
     "peak_device_bytes() -> bytes of GPU memory held at most (0 on the CPU)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pcpy_evaluator_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcinfer._core.Evaluator",
    .tp_basicsize = sizeof(pcpy_evaluator),
    .tp_dealloc = (destructor)evaluator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Evaluator(model, backend, max_batch, threads): one pc_evaluator on a model.",
    .tp_methods = evaluator_methods,
    .tp_getset = evaluator_getset,
    .tp_new = evaluator_new,
};
