/* Buffer checks: every array the module hands to the library is read through the buffer
 * protocol, and its format, shape and strides are checked against what the C call reads. */
#include "core.h"

#include <string.h>

static const char *format_name(pcpy_format f) {
    switch (f) {
    case PCPY_U8: return "uint8";
    case PCPY_I32: return "int32";
    case PCPY_I64: return "int64";
    case PCPY_U16: return "uint16";
    case PCPY_F16: return "float16";
    case PCPY_F32: return "float32";
    case PCPY_F64: return "float64";
    }
    return "?";
}

static Py_ssize_t format_size(pcpy_format f) {
    switch (f) {
    case PCPY_U8: return 1;
    case PCPY_U16:
    case PCPY_F16: return 2;
    case PCPY_I32:
    case PCPY_F32: return 4;
    case PCPY_I64:
    case PCPY_F64: return 8;
    }
    return 0;
}

/* The buffer's format letter, without a native or little-endian prefix ('@', '=', '<'); 0 for
 * anything longer than one letter (structs, big-endian data). The library is little-endian
 * only, like the machines it runs on. */
static char format_letter(const Py_buffer *v) {
    const char *s = v->format ? v->format : "B";
    if (*s == '@' || *s == '=' || *s == '<') s++;
    return s[0] && !s[1] ? s[0] : 0;
}

static int format_matches(const Py_buffer *v, pcpy_format f) {
    const char c = format_letter(v);
    if (v->itemsize != format_size(f)) return 0;
    switch (f) {
    case PCPY_U8: return c == 'B' || c == '?';
    case PCPY_I32: return c == 'i' || (c == 'l' && sizeof(long) == 4);
    case PCPY_I64: return c == 'q' || (c == 'l' && sizeof(long) == 8);
    case PCPY_U16: return c == 'H';
    case PCPY_F16: return c == 'e';
    case PCPY_F32: return c == 'f';
    case PCPY_F64: return c == 'd';
    }
    return 0;
}

static int get_view(PyObject *obj, const char *name, pcpy_format format, int writable,
                    pcpy_rows *out) {
    memset(out, 0, sizeof *out);
    const int flags = PyBUF_RECORDS_RO | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &out->view, flags) != 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        pcpy_raise_msg(PC_ERR_ARG, "%s: not a %s%s buffer (%s)", name,
                       writable ? "writable " : "", format_name(format),
                       text ? PyUnicode_AsUTF8(text) : "no buffer interface");
        Py_XDECREF(text);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    out->held = 1;
    if (!format_matches(&out->view, format)) {
        pcpy_raise_msg(PC_ERR_ARG, "%s: elements of format '%s' (%zd bytes), expected %s", name,
                       out->view.format ? out->view.format : "B", out->view.itemsize,
                       format_name(format));
        pcpy_release(out);
        return -1;
    }
    return 0;
}

int pcpy_get_rows(PyObject *obj, const char *name, pcpy_format format, int writable,
                  pcpy_rows *out) {
    if (get_view(obj, name, format, writable, out) != 0) return -1;
    const Py_buffer *v = &out->view;
    if (v->ndim != 2) {
        pcpy_raise_msg(PC_ERR_ARG, "%s: %d dimensions, expected 2 ([rows, cols])", name, v->ndim);
        pcpy_release(out);
        return -1;
    }
    out->rows = (int64_t)v->shape[0];
    out->cols = (int64_t)v->shape[1];
    /* strides may be NULL for a C-contiguous exporter under some flags; RECORDS asks for them,
     * but an exporter may still be minimal. */
    const Py_ssize_t s0 = v->strides ? v->strides[0] : v->shape[1] * v->itemsize;
    const Py_ssize_t s1 = v->strides ? v->strides[1] : v->itemsize;
    if (out->cols > 1 && s1 != v->itemsize) {
        pcpy_raise_msg(PC_ERR_ARG, "%s: elements of a row are %zd bytes apart, not adjacent "
                       "(%zd bytes)", name, s1, v->itemsize);
        pcpy_release(out);
        return -1;
    }
    if (out->rows <= 1) {
        out->stride = out->cols;
        return 0;
    }
    if (s0 < 0 || s0 % v->itemsize != 0 || s0 / v->itemsize < out->cols) {
        pcpy_raise_msg(PC_ERR_ARG, "%s: rows are %zd bytes apart, which is not a whole number "
                       ">= cols = %lld of %zd-byte elements", name, s0, (long long)out->cols,
                       v->itemsize);
        pcpy_release(out);
        return -1;
    }
    out->stride = (int64_t)(s0 / v->itemsize);
    return 0;
}

int pcpy_get_matrix(PyObject *obj, const char *name, pcpy_format format, int writable,
                    pcpy_rows *out) {
    if (pcpy_get_rows(obj, name, format, writable, out) != 0) return -1;
    if (out->stride != out->cols) {
        pcpy_raise_msg(PC_ERR_ARG, "%s: rows are %lld elements apart, not C-contiguous "
                       "(%lld)", name, (long long)out->stride, (long long)out->cols);
        pcpy_release(out);
        return -1;
    }
    return 0;
}

int pcpy_get_flat(PyObject *obj, const char *name, pcpy_format format, int writable,
                  int64_t count, pcpy_rows *out) {
    if (get_view(obj, name, format, writable, out) != 0) return -1;
    if (!PyBuffer_IsContiguous(&out->view, 'C')) {
        pcpy_raise_msg(PC_ERR_ARG, "%s: not C-contiguous", name);
        pcpy_release(out);
        return -1;
    }
    const int64_t n = (int64_t)(out->view.len / out->view.itemsize);
    if (count >= 0 && n != count) {
        pcpy_raise_msg(PC_ERR_ARG, "%s: %lld elements, expected %lld", name, (long long)n,
                       (long long)count);
        pcpy_release(out);
        return -1;
    }
    out->rows = n;
    out->cols = 1;
    out->stride = 1;
    return 0;
}

void pcpy_release(pcpy_rows *b) {
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}
