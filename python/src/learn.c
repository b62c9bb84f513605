/* Learning (pc/learn.h): mutual information, Chow-Liu tree, the HCLT with initial
 * parameters, EM steps on the CPU or a GPU, and the row shuffle of pclearn (pc/rng.h), so
 * that a schedule driven from Python makes the same model as the tool for the same seed. */
#include "core.h"

#include <stddef.h>
#include <string.h>

#include <structmember.h>

#include "pc/data.h"
#include "pc/learn.h"
#include "pc/rng.h"

/* A pc_data over a C-contiguous uint8 [n, V] buffer (borrowed: never pc_data_free'd). */
static int borrow_data(PyObject *obj, pcpy_rows *x, pc_data *data) {
    if (pcpy_get_matrix(obj, "x", PCPY_U8, 0, x) != 0) return -1;
    if (x->cols < 1 || x->cols > INT32_MAX) {
        pcpy_raise_msg(PC_ERR_DATA, "x has %lld values per row (need 1..%d)",
                       (long long)x->cols, INT32_MAX);
        pcpy_release(x);
        return -1;
    }
    *data = (pc_data){x->rows, (int32_t)x->cols, x->view.buf, NULL};
    return 0;
}

/* mutual_info(x, num_cats, num_bins, max_rows, seed, mi): mi float64 [V, V], written. */
static PyObject *mutual_info(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x_obj, *mi_obj;
    int num_cats, num_bins;
    long long max_rows;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "OiiLKO:mutual_info", &x_obj, &num_cats, &num_bins, &max_rows,
                          &seed, &mi_obj))
        return NULL;
    pcpy_rows x, mi;
    pc_data data;
    if (borrow_data(x_obj, &x, &data) != 0) return NULL;
    if (pcpy_get_flat(mi_obj, "mi", PCPY_F64, 1, x.cols * x.cols, &mi) != 0) {
        pcpy_release(&x);
        return NULL;
    }
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = pc_learn_mutual_info(&data, num_cats, num_bins, max_rows, seed, mi.view.buf);
    Py_END_ALLOW_THREADS
    pcpy_release(&x);
    pcpy_release(&mi);
    if (st != PC_OK) return pcpy_raise(st);
    Py_RETURN_NONE;
}

/* chow_liu(mi, parent): mi float64 [V, V]; parent int32 [V], written. */
static PyObject *chow_liu(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *mi_obj, *parent_obj;
    if (!PyArg_ParseTuple(args, "OO:chow_liu", &mi_obj, &parent_obj)) return NULL;
    pcpy_rows mi, parent;
    if (pcpy_get_flat(parent_obj, "parent", PCPY_I32, 1, -1, &parent) != 0) return NULL;
    if (parent.rows > INT32_MAX ||
        pcpy_get_flat(mi_obj, "mi", PCPY_F64, 0, parent.rows * parent.rows, &mi) != 0) {
        if (!PyErr_Occurred()) pcpy_raise_msg(PC_ERR_ARG, "parent: too many variables");
        pcpy_release(&parent);
        return NULL;
    }
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = pc_learn_chow_liu((int32_t)parent.rows, mi.view.buf, parent.view.buf);
    Py_END_ALLOW_THREADS
    pcpy_release(&mi);
    pcpy_release(&parent);
    if (st != PC_OK) return pcpy_raise(st);
    Py_RETURN_NONE;
}

/* hclt_init(parent, num_cats, num_latents, x, seed) -> Model: the HCLT over the tree with
 * initial parameters from the data (pc_learn_hclt_create, pc_learn_init_params). */
static PyObject *hclt_init(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *parent_obj, *x_obj;
    int num_cats, num_latents;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "OiiOK:hclt_init", &parent_obj, &num_cats, &num_latents, &x_obj,
                          &seed))
        return NULL;
    pcpy_rows parent, x;
    pc_data data;
    if (borrow_data(x_obj, &x, &data) != 0) return NULL;
    if (pcpy_get_flat(parent_obj, "parent", PCPY_I32, 0, x.cols, &parent) != 0) {
        pcpy_release(&x);
        return NULL;
    }
    pc_hclt *hclt = NULL;
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = pc_learn_hclt_create(data.width, parent.view.buf, num_cats, num_latents, &hclt);
    if (st == PC_OK) st = pc_learn_init_params(hclt, &data, seed);
    Py_END_ALLOW_THREADS
    pcpy_release(&x);
    pcpy_release(&parent);
    if (st != PC_OK) {
        pc_hclt_free(hclt);
        return pcpy_raise(st);
    }
    return pcpy_model_wrap(hclt);
}

/* shuffle(rows, state) -> state: pclearn's Fisher-Yates pass over int64 rows [n] from a
 * splitmix64 state; returns the state after it. */
static PyObject *shuffle(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *rows_obj;
    unsigned long long state;
    if (!PyArg_ParseTuple(args, "OK:shuffle", &rows_obj, &state)) return NULL;
    pcpy_rows rows;
    if (pcpy_get_flat(rows_obj, "rows", PCPY_I64, 1, -1, &rows) != 0) return NULL;
    pc_rng rng = {state};
    int64_t *r = rows.view.buf;
    for (int64_t i = rows.rows - 1; i > 0; i--) {
        const int64_t j = pc_rng_below(&rng, i + 1), t = r[i];
        r[i] = r[j];
        r[j] = t;
    }
    pcpy_release(&rows);
    return PyLong_FromUnsignedLongLong(rng.state);
}

PyMethodDef pcpy_learn_methods[] = {
    {"mutual_info", mutual_info, METH_VARARGS,
     "mutual_info(x, num_cats, num_bins, max_rows, seed, mi)"},
    {"chow_liu", chow_liu, METH_VARARGS, "chow_liu(mi, parent)"},
    {"hclt_init", hclt_init, METH_VARARGS,
     "hclt_init(parent, num_cats, num_latents, x, seed) -> Model"},
    {"shuffle", shuffle, METH_VARARGS, "shuffle(rows, state) -> state"},
    {NULL, NULL, 0, NULL},
};

/* ---- pcinfer._core.Em: pc_em over a model's structure --------------------------------- */

typedef struct pcpy_em {
    PyObject_HEAD
    pcpy_model *model; /* the structure export() copies */
    pc_em *em;
    /* The training data attached to the state (pc_em_attach_data), held for the state's life:
     * the view keeps the array alive and its memory in place, and `data` is the one pc_data
     * the library knows the attachment by (it compares the pointer), passed to every step on
     * those rows. A GPU state without a device copy (it did not fit) holds nothing. */
    pcpy_rows train;
    pc_data data;
    char streamed; /* a GPU state whose training data did not fit: steps copy their rows in */
    int busy;
} pcpy_em;

/* Em(model, x, cuda, f32, cuda_device): pc_em_create_opts, then x attached once, as pclearn
 * does (pc_tool_em_create): data too large for the GPU is streamed from the host each step. */
static PyObject *em_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    (void)kwds;
    pcpy_model *model;
    PyObject *x_obj;
    int cuda, f32, cuda_device;
    if (!PyArg_ParseTuple(args, "O!Oppi:Em", &pcpy_model_type, &model, &x_obj, &cuda, &f32,
                          &cuda_device))
        return NULL;
    pcpy_em *self = (pcpy_em *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    Py_INCREF(model);
    self->model = model;
    if (borrow_data(x_obj, &self->train, &self->data) != 0) {
        Py_DECREF(self);
        return NULL;
    }
    const pc_em_opts opts = {.device = cuda ? PC_EM_CUDA : PC_EM_CPU, .f32 = f32,
                             .cuda_device = cuda_device};
    pc_status st;
    /* without the GIL: a GPU state starts CUDA and copies the model and the data over */
    Py_BEGIN_ALLOW_THREADS
    st = pc_em_create_opts(model->hclt, &opts, &self->em);
    if (st == PC_OK) st = pc_em_attach_data(self->em, &self->data);
    Py_END_ALLOW_THREADS
    if (st == PC_ERR_DEVICE_MEMORY && self->em) { /* made, but the data did not fit */
        self->streamed = 1;
        pcpy_release(&self->train);
    } else if (st != PC_OK) {
        pcpy_raise(st);
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void em_dealloc(pcpy_em *self) {
    pc_em_free(self->em); /* drops the attachment before the data is let go */
    pcpy_release(&self->train);
    Py_XDECREF(self->model);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* step(x, rows, step, pseudocount) -> sum of log p(x) over the rows before the step; rows is
 * int64 [n] of row indices into x, or None for every row. */
static PyObject *em_step(pcpy_em *self, PyObject *args) {
    PyObject *x_obj, *rows_obj;
    double step, pseudocount;
    if (!PyArg_ParseTuple(args, "OOdd:step", &x_obj, &rows_obj, &step, &pseudocount))
        return NULL;
    if (self->busy) return pcpy_raise_msg(PC_ERR_ARG, "Em is in use by another thread");
    pcpy_rows x, rows;
    pc_data data;
    rows.held = 0;
    if (borrow_data(x_obj, &x, &data) != 0) return NULL;
    if (rows_obj != Py_None && pcpy_get_flat(rows_obj, "rows", PCPY_I64, 0, -1, &rows) != 0) {
        pcpy_release(&x);
        return NULL;
    }
    const int64_t *r = rows.held ? rows.view.buf : NULL;
    const int64_t n = rows.held ? rows.rows : x.rows;
    PyObject *result = NULL;
    if (x.cols != self->model->hclt->num_vars) {
        pcpy_raise_msg(PC_ERR_DATA, "x has %lld values per row but the model has num_vars = %d",
                       (long long)x.cols, self->model->hclt->num_vars);
        goto done;
    }
    for (int64_t i = 0; r && i < n; i++)
        if (r[i] < 0 || r[i] >= x.rows) {
            pcpy_raise_msg(PC_ERR_ARG, "rows[%lld] = %lld is not a row of x (0..%lld)",
                           (long long)i, (long long)r[i], (long long)x.rows - 1);
            goto done;
        }
    /* The attached data is known by its pc_data: rows of that same memory go through it, so
     * that a GPU state gathers them from its copy. */
    const int attached = self->train.held && data.values == self->data.values &&
                         data.count == self->data.count && data.width == self->data.width;
    double loglik = 0.0;
    pc_status st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = pc_em_step(self->em, attached ? &self->data : &data, r, n, step, pseudocount, &loglik);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    result = st == PC_OK ? PyFloat_FromDouble(loglik) : pcpy_raise(st);
done:
    pcpy_release(&x);
    pcpy_release(&rows);
    return result;
}

/* export(smooth, smooth_width) -> Model: the current parameters on the structure the Em was
 * made from, the input rows smoothed (pc_learn_smooth_inputs; smooth 0: as they are). */
static PyObject *em_export(pcpy_em *self, PyObject *args) {
    double weight, width;
    if (!PyArg_ParseTuple(args, "dd:export", &weight, &width)) return NULL;
    if (self->busy) return pcpy_raise_msg(PC_ERR_ARG, "Em is in use by another thread");
    const pc_hclt *s = self->model->hclt;
    pc_hclt *hclt = NULL;
    pc_status st = pc_hclt_create(s->num_vars, s->num_cats, s->num_latents, s->num_trans, &hclt);
    if (st != PC_OK) return pcpy_raise(st);
    memcpy(hclt->parent, s->parent, (size_t)s->num_vars * sizeof *s->parent);
    memcpy(hclt->trans_index, s->trans_index, (size_t)s->num_vars * sizeof *s->trans_index);
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = pc_em_export(self->em, hclt);
    if (st == PC_OK) st = pc_learn_smooth_inputs(hclt, weight, width);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st == PC_OK) st = pc_hclt_validate(hclt, "learned model");
    if (st != PC_OK) {
        pc_hclt_free(hclt);
        return pcpy_raise(st);
    }
    return pcpy_model_wrap(hclt);
}

static PyMethodDef em_methods[] = {
    {"step", (PyCFunction)em_step, METH_VARARGS,
     "step(x, rows, step, pseudocount) -> log-likelihood sum before the step"},
    {"export", (PyCFunction)em_export, METH_VARARGS,
     "export(smooth, smooth_width) -> Model (input rows smoothed as pclearn --smooth)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef em_members[] = {
    {"streamed", T_BOOL, offsetof(pcpy_em, streamed), READONLY,
     "True when x did not fit the GPU: each step copies its rows in from the host"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject pcpy_em_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcinfer._core.Em",
    .tp_basicsize = sizeof(pcpy_em),
    .tp_dealloc = (destructor)em_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Em(model, x, cuda, f32, cuda_device): EM state (pc_em) starting from the "
              "model's parameters, on the CPU or the GPU cuda_device (-1: the current one; "
              "f32: FP32 values and messages), with the training data x attached: x must not "
              "change while the Em lives. streamed: x did not fit the GPU.",
    .tp_methods = em_methods,
    .tp_members = em_members,
    .tp_new = em_new,
};
