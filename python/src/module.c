/* Module set-up: pcinfer.Error, the status codes as module constants, the method tables of
 * the parts (lse.c, learn.c, data.c, query.c) joined into one. */
#include "core.h"

#include <stdarg.h>
#include <stdio.h>

#include "pc/cuda.h"
#include "pc/eval.h"
#include "pc/lse.h"
#include "pc/version.h"

static PyObject *error_class; /* pcinfer._errors.Error */

static PyObject *raise_text(pc_status status, const char *text) {
    PyObject *exc = PyObject_CallFunction(error_class, "si", text, (int)status);
    if (exc) {
        PyErr_SetObject(error_class, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

PyObject *pcpy_raise(pc_status status) {
    const char *text = pc_last_error();
    return raise_text(status, text && *text ? text : pc_status_str(status));
}

PyObject *pcpy_raise_msg(pc_status status, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return raise_text(status, text);
}

static PyObject *status_str(PyObject *self, PyObject *arg) {
    (void)self;
    const long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(pc_status_str((pc_status)code));
}

static PyObject *cuda_available(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(pc_cuda_available());
}

static PyObject *cuda_describe(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    char text[256];
    const pc_status st = pc_cuda_describe(text, sizeof text);
    return st == PC_OK ? PyUnicode_FromString(text) : pcpy_raise(st);
}

static PyObject *cpu_best_isa(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyUnicode_FromString(pc_isa_name(pc_cpu_best_isa()));
}

/* The library's parsers of the names the tools take, so that the package spells kernels and
 * instruction sets exactly as they do: name -> enum value, or pcinfer.Error with the list. */
typedef pc_status (*parse_fn)(const char *name, int *value);

static PyObject *parse_with(PyObject *arg, parse_fn parse) {
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    int value = 0;
    const pc_status st = parse(name, &value);
    return st == PC_OK ? PyLong_FromLong(value) : pcpy_raise(st);
}

static pc_status parse_backend(const char *name, int *value) {
    pc_backend b = PC_BACKEND_REF;
    const pc_status st = pc_backend_parse(name, &b);
    *value = (int)b;
    return st;
}

static pc_status parse_lse_kernel(const char *name, int *value) {
    pc_lse_kernel k = PC_LSE_REF;
    const pc_status st = pc_lse_kernel_parse(name, &k);
    *value = (int)k;
    return st;
}

static pc_status parse_isa(const char *name, int *value) {
    pc_isa isa = PC_ISA_AUTO;
    const pc_status st = pc_isa_parse(name, &isa);
    *value = (int)isa;
    return st;
}

static PyObject *backend_parse(PyObject *self, PyObject *arg) {
    (void)self;
    return parse_with(arg, parse_backend);
}

static PyObject *lse_kernel_parse(PyObject *self, PyObject *arg) {
    (void)self;
    return parse_with(arg, parse_lse_kernel);
}

static PyObject *isa_parse(PyObject *self, PyObject *arg) {
    (void)self;
    return parse_with(arg, parse_isa);
}

static PyObject *backend_is_gpu(PyObject *self, PyObject *arg) {
    (void)self;
    const long b = PyLong_AsLong(arg);
    if (b == -1 && PyErr_Occurred()) return NULL;
    return PyBool_FromLong(pc_backend_is_gpu((pc_backend)b));
}

static PyMethodDef module_methods[] = {
    {"backend_parse", backend_parse, METH_O, "backend_parse(name) -> pc_backend ('cpu', ...)"},
    {"backend_is_gpu", backend_is_gpu, METH_O, "backend_is_gpu(backend) -> bool"},
    {"lse_kernel_parse", lse_kernel_parse, METH_O, "lse_kernel_parse(name) -> pc_lse_kernel"},
    {"isa_parse", isa_parse, METH_O, "isa_parse(name) -> pc_isa ('auto', 'avx2', ...)"},
    {"status_str", status_str, METH_O, "status_str(code) -> the library's words for a status"},
    {"cuda_available", cuda_available, METH_NOARGS,
     "cuda_available() -> True when this build has CUDA and a usable GPU is present"},
    {"cuda_describe", cuda_describe, METH_NOARGS, "cuda_describe() -> the current GPU, in words"},
    {"cpu_best_isa", cpu_best_isa, METH_NOARGS,
     "cpu_best_isa() -> the best instruction set of this CPU ('avx512', 'avx2', 'scalar')"},
    {NULL, NULL, 0, NULL},
};

/* The parts' tables, joined once at import into one array that lives as long as the process
 * (a module's method table must outlive it). */
static PyMethodDef *join_methods(void) {
    PyMethodDef *parts[] = {
        module_methods, pcpy_lse_methods, pcpy_learn_methods, pcpy_data_methods,
        pcpy_query_methods,
    };
    size_t total = 1;
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++)
        for (PyMethodDef *m = parts[p]; m->ml_name; m++) total++;
    PyMethodDef *all = PyMem_RawCalloc(total, sizeof *all);
    if (!all) return NULL;
    size_t at = 0;
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++)
        for (PyMethodDef *m = parts[p]; m->ml_name; m++) all[at++] = *m;
    return all;
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "pcinfer._core",
    "The C extension of pcinfer: buffers in, library calls, pcinfer.Error out.", -1, NULL,
    NULL, NULL, NULL, NULL,
};

static int add_constants(PyObject *m) {
#define PCPY_ADD_STATUS(name, value, words) \
    if (PyModule_AddIntConstant(m, #name + 3, value) != 0) return -1;
    PC_STATUS_MAP(PCPY_ADD_STATUS)
#undef PCPY_ADD_STATUS
    if (PyModule_AddStringConstant(m, "library_version", pc_version()) != 0) return -1;
    return 0;
}

static int add_type(PyObject *m, PyTypeObject *type, const char *name) {
    if (PyType_Ready(type) != 0) return -1;
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) != 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__core(void) {
    PyObject *errors = PyImport_ImportModule("pcinfer._errors");
    if (!errors) return NULL;
    error_class = PyObject_GetAttrString(errors, "Error");
    Py_DECREF(errors);
    if (!error_class) return NULL;
    module_def.m_methods = join_methods();
    if (!module_def.m_methods) return PyErr_NoMemory();
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (add_constants(m) != 0 || add_type(m, &pcpy_model_type, "Model") != 0 ||
        add_type(m, &pcpy_evaluator_type, "Evaluator") != 0 ||
        add_type(m, &pcpy_em_type, "Em") != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
