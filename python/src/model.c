/* pcinfer._core.Model: an HCLT (pc/hclt.h) and its compiled circuit (pc/circuit.h). */
#include "core.h"

#include <stddef.h>
#include <string.h>

#include <structmember.h>

PyObject *pcpy_model_wrap(pc_hclt *hclt) {
    pc_circuit *circuit = NULL;
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = pc_circuit_compile(hclt, &circuit);
    Py_END_ALLOW_THREADS
    if (st != PC_OK) {
        pc_hclt_free(hclt);
        return pcpy_raise(st);
    }
    pcpy_model *self = PyObject_New(pcpy_model, &pcpy_model_type);
    if (!self) {
        pc_circuit_free(circuit);
        pc_hclt_free(hclt);
        return NULL;
    }
    self->hclt = hclt;
    self->circuit = circuit;
    self->num_vars = hclt->num_vars;
    self->num_cats = hclt->num_cats;
    self->num_latents = hclt->num_latents;
    self->num_trans = hclt->num_trans;
    self->num_groups = circuit->num_groups;
    self->num_layers = circuit->num_layers;
    return (PyObject *)self;
}

static void model_dealloc(pcpy_model *self) {
    pc_circuit_free(self->circuit);
    pc_hclt_free(self->hclt);
    PyObject_Free(self);
}

static PyObject *model_load(PyObject *cls, PyObject *args) {
    (void)cls;
    PyObject *path_obj = NULL;
    if (!PyArg_ParseTuple(args, "O&:load", PyUnicode_FSConverter, &path_obj)) return NULL;
    pc_hclt *hclt = NULL;
    pc_status st;
    /* A model file may come from anyone: it is parsed by the reader program, never by libhdf5
     * in this process (docs/format.md). */
    Py_BEGIN_ALLOW_THREADS
    st = pc_hclt_load_isolated(PyBytes_AS_STRING(path_obj), NULL, &hclt);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_obj);
    return st == PC_OK ? pcpy_model_wrap(hclt) : pcpy_raise(st);
}

/* The five arrays of HCLT_FORMAT v1, in the order from_arrays takes and param() names them. */
static const char *const param_names[] = {"parent", "trans_index", "root_logw", "trans_logw",
                                          "input_logp"};

static int64_t param_count(const pc_hclt *m, int which) {
    const int64_t V = m->num_vars, K = m->num_latents, C = m->num_cats, T = m->num_trans;
    const int64_t counts[] = {V, V, K, T * K * K, V * K * C};
    return counts[which];
}

static void *param_data(const pc_hclt *m, int which) {
    void *data[] = {m->parent, m->trans_index, m->root_logw, m->trans_logw, m->input_logp};
    return data[which];
}

static pcpy_format param_format(int which) { return which < 2 ? PCPY_I32 : PCPY_F64; }

/* from_arrays(parent, trans_index, root_logw, trans_logw, input_logp, num_cats, name): C-
 * contiguous int32 [V], int32 [V], float64 [K], float64 [T, K, K] and [V, K, C]; validated
 * with `name` starting the messages. */
static PyObject *model_from_arrays(PyObject *cls, PyObject *args) {
    (void)cls;
    PyObject *objs[5];
    int num_cats = 0;
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOis:from_arrays", &objs[0], &objs[1], &objs[2], &objs[3],
                          &objs[4], &num_cats, &name))
        return NULL;
    pcpy_rows b[5];
    memset(b, 0, sizeof b);
    pc_hclt *hclt = NULL;
    PyObject *result = NULL;
    for (int i = 0; i < 5; i++)
        if (pcpy_get_flat(objs[i], param_names[i], param_format(i), 0, -1, &b[i]) != 0) goto done;
    const int64_t V = b[0].rows, K = b[2].rows;
    const int64_t T = K > 0 ? b[3].rows / (K * K) : 0;
    if (V < 1 || V > INT32_MAX || K < 1 || K > INT32_MAX || num_cats < 2 || b[1].rows != V ||
        b[3].rows != T * K * K || b[4].rows != V * K * (int64_t)num_cats || T > INT32_MAX) {
        pcpy_raise_msg(PC_ERR_MODEL, "%s: array sizes parent %lld, trans_index %lld, root_logw "
                       "%lld, trans_logw %lld, input_logp %lld do not make an HCLT with C = %d",
                       name, (long long)b[0].rows, (long long)b[1].rows, (long long)b[2].rows,
                       (long long)b[3].rows, (long long)b[4].rows, num_cats);
        goto done;
    }
    pc_status st = pc_hclt_create((int32_t)V, num_cats, (int32_t)K, (int32_t)T, &hclt);
    if (st != PC_OK) {
        pcpy_raise(st);
        goto done;
    }
    for (int i = 0; i < 5; i++)
        memcpy(param_data(hclt, i), b[i].view.buf, (size_t)b[i].view.len);
    Py_BEGIN_ALLOW_THREADS
    st = pc_hclt_validate(hclt, name);
    Py_END_ALLOW_THREADS
    if (st != PC_OK) {
        pc_hclt_free(hclt);
        pcpy_raise(st);
        goto done;
    }
    result = pcpy_model_wrap(hclt);
done:
    for (int i = 0; i < 5; i++) pcpy_release(&b[i]);
    return result;
}

/* param(name) -> bytes: a copy of one of the five arrays (int32 or float64, C order). */
static PyObject *model_param(pcpy_model *self, PyObject *arg) {
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, param_names[i])) {
            const size_t size = param_format(i) == PCPY_I32 ? 4 : 8;
            return PyBytes_FromStringAndSize(param_data(self->hclt, i),
                                             (Py_ssize_t)(param_count(self->hclt, i) * size));
        }
    return pcpy_raise_msg(PC_ERR_ARG, "no model array named '%s' (parent, trans_index, "
                          "root_logw, trans_logw, input_logp)", name);
}

/* save(path, float64) writes the HDF5 file (pc_hclt_save: temporary file, then rename). */
static PyObject *model_save(pcpy_model *self, PyObject *args) {
    PyObject *path_obj = NULL;
    int f64 = 0;
    if (!PyArg_ParseTuple(args, "O&p:save", PyUnicode_FSConverter, &path_obj, &f64)) return NULL;
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = pc_hclt_save(self->hclt, PyBytes_AS_STRING(path_obj), f64 ? PC_HCLT_F64 : PC_HCLT_F32);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_obj);
    if (st != PC_OK) return pcpy_raise(st);
    Py_RETURN_NONE;
}

#define PCPY_MEMBER(name, doc) {#name, T_INT, offsetof(pcpy_model, name), READONLY, doc}
static PyMemberDef model_members[] = {
    PCPY_MEMBER(num_vars, "V, variables per sample"),
    PCPY_MEMBER(num_cats, "C, categories per variable"),
    PCPY_MEMBER(num_latents, "K, states per latent"),
    PCPY_MEMBER(num_trans, "T, rows of trans_logw"),
    PCPY_MEMBER(num_groups, "latent groups of the compiled circuit"),
    PCPY_MEMBER(num_layers, "layers of the compiled circuit"),
    {NULL, 0, 0, 0, NULL},
};
#undef PCPY_MEMBER

static PyMethodDef model_methods[] = {
    {"load", (PyCFunction)model_load, METH_VARARGS | METH_CLASS,
     "load(path) -> Model: reads, validates and compiles an HCLT file"},
    {"from_arrays", (PyCFunction)model_from_arrays, METH_VARARGS | METH_CLASS,
     "from_arrays(parent, trans_index, root_logw, trans_logw, input_logp, num_cats, name)"},
    {"param", (PyCFunction)model_param, METH_O, "param(name) -> bytes of one model array"},
    {"save", (PyCFunction)model_save, METH_VARARGS, "save(path, float64)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pcpy_model_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pcinfer._core.Model",
    .tp_basicsize = sizeof(pcpy_model),
    .tp_dealloc = (destructor)model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A validated HCLT and its compiled circuit (immutable).",
    .tp_methods = model_methods,
    .tp_members = model_members,
};
