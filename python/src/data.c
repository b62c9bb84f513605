/* Data files (pc/data.h): IDX images read by the library's reader. */
#include "core.h"

#include <string.h>

#include "pc/data.h"

/* load_idx(path) -> (bytearray of count * width values, count, width). */
static PyObject *load_idx(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *path_obj = NULL;
    if (!PyArg_ParseTuple(args, "O&:load_idx", PyUnicode_FSConverter, &path_obj)) return NULL;
    pc_data *data = NULL;
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = pc_data_load_idx(PyBytes_AS_STRING(path_obj), &data);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_obj);
    if (st != PC_OK) return pcpy_raise(st);
    PyObject *values = PyByteArray_FromStringAndSize((const char *)data->values,
                                                     (Py_ssize_t)(data->count * data->width));
    PyObject *result = values ? Py_BuildValue("(NLi)", values, (long long)data->count,
                                              (int)data->width)
                              : NULL;
    pc_data_free(data);
    return result;
}

PyMethodDef pcpy_data_methods[] = {
    {"load_idx", load_idx, METH_VARARGS, "load_idx(path) -> (bytearray, count, width)"},
    {NULL, NULL, 0, NULL},
};
