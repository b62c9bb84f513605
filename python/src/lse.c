/* Row-wise LSE, its backward and token log-probabilities (pc/lse.h, pc/logprob.h).
 *
 * CPU calls take buffers and check them here (but lse_rows_at, the torch CPU fast path).
 * CUDA calls take device addresses as integers (torch's data_ptr()), which no buffer protocol
 * describes: the Python caller derives them from the tensors, with rows, cols and strides,
 * and the library checks what it can (sizes, alignment, kernel and dtype); the launch is
 * asynchronous on the given stream. */
#include "core.h"

#include <limits.h>

#include "pc/logprob.h"
#include "pc/lse.h"

/* The buffer format of each pc_dtype's elements: f16 as 'e' or its bits as 'H', bf16 as 'H'
 * (NumPy has no bfloat16), q10.6 as int16 ('h' is not offered: Python passes uint16 bits). */
static int dtype_format(int dtype, pcpy_format *format) {
    switch (dtype) {
    case PC_F32: *format = PCPY_F32; return 0;
    case PC_F16: *format = PCPY_F16; return 0;
    case PC_BF16: *format = PCPY_U16; return 0;
    default:
        pcpy_raise_msg(PC_ERR_ARG, "dtype %d is not offered from Python (f32, f16, bf16)", dtype);
        return -1;
    }
}

static int get_input(PyObject *obj, const char *name, int dtype, pcpy_rows *x) {
    pcpy_format format;
    if (dtype_format(dtype, &format) != 0) return -1;
    return pcpy_get_rows(obj, name, format, 0, x);
}

/* lse_rows(kernel, dtype, x, out, threads, isa): out float32 [rows] (pc_lse_rows), or float64
 * [rows] with kernel ref (pc_lse_rows_ref, the FP64 reference). */
static PyObject *lse_rows(PyObject *self, PyObject *args) {
    (void)self;
    int kernel, dtype, threads, isa;
    PyObject *x_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "iiOOii:lse_rows", &kernel, &dtype, &x_obj, &out_obj, &threads,
                          &isa))
        return NULL;
    pcpy_rows x, out;
    if (get_input(x_obj, "x", dtype, &x) != 0) return NULL;
    const int ref = kernel == PC_LSE_REF;
    if (pcpy_get_flat(out_obj, "out", ref ? PCPY_F64 : PCPY_F32, 1, x.rows, &out) != 0) {
        pcpy_release(&x);
        return NULL;
    }
    const pc_lse_cpu_opts opts = {threads, (pc_isa)isa};
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    if (ref)
        st = pc_lse_rows_ref((pc_dtype)dtype, x.view.buf, x.rows, x.cols, x.stride, out.view.buf);
    else
        st = pc_lse_rows((pc_lse_kernel)kernel, (pc_dtype)dtype, x.view.buf, x.rows, x.cols,
                         x.stride, out.view.buf, &opts);
    Py_END_ALLOW_THREADS
    pcpy_release(&x);
    pcpy_release(&out);
    if (st != PC_OK) return pcpy_raise(st);
    Py_RETURN_NONE;
}

/* lse_backward(x, lse, grad, threads, isa): grad[r, i] = exp(x[r, i] - lse[r]); x float32
 * [rows, cols] (rows apart), lse float32 [rows], grad float32 [rows, cols] (rows apart),
 * written. */
static PyObject *lse_backward(PyObject *self, PyObject *args) {
    (void)self;
    int threads, isa;
    PyObject *x_obj, *lse_obj, *grad_obj;
    if (!PyArg_ParseTuple(args, "OOOii:lse_backward", &x_obj, &lse_obj, &grad_obj, &threads,
                          &isa))
        return NULL;
    pcpy_rows x, lse, grad;
    if (pcpy_get_rows(x_obj, "x", PCPY_F32, 0, &x) != 0) return NULL;
    if (pcpy_get_flat(lse_obj, "lse", PCPY_F32, 0, x.rows, &lse) != 0) {
        pcpy_release(&x);
        return NULL;
    }
    if (pcpy_get_rows(grad_obj, "grad", PCPY_F32, 1, &grad) != 0) {
        pcpy_release(&x);
        pcpy_release(&lse);
        return NULL;
    }
    PyObject *result = NULL;
    if (grad.rows != x.rows || grad.cols != x.cols) {
        pcpy_raise_msg(PC_ERR_ARG, "grad is [%lld, %lld] but x is [%lld, %lld]",
                       (long long)grad.rows, (long long)grad.cols, (long long)x.rows,
                       (long long)x.cols);
    } else {
        const pc_lse_cpu_opts opts = {threads, (pc_isa)isa};
        pc_status st;
        Py_BEGIN_ALLOW_THREADS
        st = pc_lse_backward(x.view.buf, lse.view.buf, x.rows, x.cols, x.stride, grad.view.buf,
                             grad.stride, &opts);
        Py_END_ALLOW_THREADS
        if (st == PC_OK) {
            result = Py_None;
            Py_INCREF(result);
        } else {
            pcpy_raise(st);
        }
    }
    pcpy_release(&x);
    pcpy_release(&lse);
    pcpy_release(&grad);
    return result;
}

/* logprob_rows(kernel, dtype, logits, targets, out, threads, isa): logits [rows, vocab] (rows
 * apart), targets int64 [rows], out float32 [rows] (float64 with kernel ref). */
static PyObject *logprob_rows(PyObject *self, PyObject *args) {
    (void)self;
    int kernel, dtype, threads, isa;
    PyObject *x_obj, *t_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "iiOOOii:logprob_rows", &kernel, &dtype, &x_obj, &t_obj,
                          &out_obj, &threads, &isa))
        return NULL;
    pcpy_rows x, targets, out;
    if (get_input(x_obj, "logits", dtype, &x) != 0) return NULL;
    const int ref = kernel == PC_LSE_REF;
    if (pcpy_get_flat(t_obj, "targets", PCPY_I64, 0, x.rows, &targets) != 0) {
        pcpy_release(&x);
        return NULL;
    }
    if (pcpy_get_flat(out_obj, "out", ref ? PCPY_F64 : PCPY_F32, 1, x.rows, &out) != 0) {
        pcpy_release(&x);
        pcpy_release(&targets);
        return NULL;
    }
    const pc_lse_cpu_opts opts = {threads, (pc_isa)isa};
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    if (ref)
        st = pc_logprob_rows_ref((pc_dtype)dtype, x.view.buf, x.rows, x.cols, x.stride,
                                 targets.view.buf, out.view.buf);
    else
        st = pc_logprob_rows((pc_lse_kernel)kernel, (pc_dtype)dtype, x.view.buf, x.rows, x.cols,
                             x.stride, targets.view.buf, out.view.buf, &opts);
    Py_END_ALLOW_THREADS
    pcpy_release(&x);
    pcpy_release(&targets);
    pcpy_release(&out);
    if (st != PC_OK) return pcpy_raise(st);
    Py_RETURN_NONE;
}

/* logprob_check_targets(targets, vocab): PC_ERR_ARG naming the first target outside
 * [0, vocab) (the GPU path does not copy targets back to check them). */
static PyObject *logprob_check_targets(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *t_obj;
    long long vocab;
    if (!PyArg_ParseTuple(args, "OL:logprob_check_targets", &t_obj, &vocab)) return NULL;
    pcpy_rows targets;
    if (pcpy_get_flat(t_obj, "targets", PCPY_I64, 0, -1, &targets) != 0) return NULL;
    const pc_status st = pc_logprob_check_targets(targets.view.buf, targets.rows, vocab);
    pcpy_release(&targets);
    if (st != PC_OK) return pcpy_raise(st);
    Py_RETURN_NONE;
}

/* ---- Addresses as integers (CUDA device memory, and host memory of torch CPU tensors): the
 * hot path of the torch binding, so arguments are read by position without a format
 * string. ------------------------------------------------------------------------------- */

static int read_i64(PyObject *const *args, Py_ssize_t i, int64_t *out) {
    const long long v = PyLong_AsLongLong(args[i]);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = (int64_t)v;
    return 0;
}

/* Reads n integer arguments into v (device addresses and streams fit in int64 on the 64-bit
 * platforms CUDA runs on). */
static int read_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t n, const char *name,
                     int64_t *v) {
    if (nargs != n) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd integer arguments (%zd given)", name, n,
                     nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (read_i64(args, i, &v[i]) != 0) return -1;
    return 0;
}

#define PTR(v) ((void *)(uintptr_t)(v))

/* lse_rows_at(kernel, dtype, x, rows, cols, stride, out, threads, isa): lse_rows on host
 * addresses (a contiguous torch CPU tensor's data_ptr(), which no buffer protocol describes:
 * going through NumPy views of the input and the output cost 1.2 of a small call's 4.4 us).
 * out is float32 [rows], float64 with kernel ref. The caller derives every argument from the
 * tensors it holds, as for the CUDA calls. */
static PyObject *lse_rows_at(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    int64_t v[9];
    if (read_args(args, nargs, 9, "lse_rows_at", v) != 0) return NULL;
    if (v[7] < INT_MIN || v[7] > INT_MAX || v[8] < INT_MIN || v[8] > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "lse_rows_at: threads or isa out of range");
        return NULL;
    }
    const pc_lse_cpu_opts opts = {(int)v[7], (pc_isa)v[8]};
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    if (v[0] == PC_LSE_REF)
        st = pc_lse_rows_ref((pc_dtype)v[1], PTR(v[2]), v[3], v[4], v[5], PTR(v[6]));
    else
        st = pc_lse_rows((pc_lse_kernel)v[0], (pc_dtype)v[1], PTR(v[2]), v[3], v[4], v[5],
                         PTR(v[6]), &opts);
    Py_END_ALLOW_THREADS
    if (st != PC_OK) return pcpy_raise(st);
    Py_RETURN_NONE;
}

/* lse_rows_cuda(kernel, dtype, x, rows, cols, stride, out, scratch, scratch_bytes, stream):
 * queues the LSE and returns None; when scratch_bytes is less than the shape needs (scratch
 * 0 included) queues nothing and returns the bytes needed. The size query is asked here on
 * every call, so that the caller keeps one scratch buffer per stream and no table of sizes
 * per shape (the query is arithmetic on cached device properties). */
static PyObject *lse_rows_cuda(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    int64_t v[10];
    if (read_args(args, nargs, 10, "lse_rows_cuda", v) != 0) return NULL;
    size_t need = 0, bytes = (size_t)v[8];
    int queued = 0;
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = pc_lse_rows_cuda((pc_lse_kernel)v[0], (pc_dtype)v[1], PTR(v[2]), v[3], v[4], v[5],
                          PTR(v[6]), NULL, &need, (pc_stream)PTR(v[9]));
    if (st == PC_OK && v[7] && bytes >= need) {
        st = pc_lse_rows_cuda((pc_lse_kernel)v[0], (pc_dtype)v[1], PTR(v[2]), v[3], v[4], v[5],
                              PTR(v[6]), PTR(v[7]), &bytes, (pc_stream)PTR(v[9]));
        queued = 1;
    }
    Py_END_ALLOW_THREADS
    if (st != PC_OK) return pcpy_raise(st);
    if (!queued) return PyLong_FromSize_t(need);
    Py_RETURN_NONE;
}

/* lse_backward_cuda(x, lse, rows, cols, stride, grad, grad_stride, stream). */
static PyObject *lse_backward_cuda(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    int64_t v[8];
    if (read_args(args, nargs, 8, "lse_backward_cuda", v) != 0) return NULL;
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = pc_lse_backward_cuda(PTR(v[0]), PTR(v[1]), v[2], v[3], v[4], PTR(v[5]), v[6],
                              (pc_stream)PTR(v[7]));
    Py_END_ALLOW_THREADS
    if (st != PC_OK) return pcpy_raise(st);
    Py_RETURN_NONE;
}

/* logprob_rows_cuda(dtype, logits, rows, vocab, stride, targets, out, scratch, scratch_bytes,
 * stream): like lse_rows_cuda (returns the bytes needed, queuing nothing, when scratch_bytes
 * is less). The size query checks the pointers too, so it is given the real ones. */
static PyObject *logprob_rows_cuda(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    int64_t v[10];
    if (read_args(args, nargs, 10, "logprob_rows_cuda", v) != 0) return NULL;
    size_t need = 0, bytes = (size_t)v[8];
    int queued = 0;
    pc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = pc_logprob_rows_cuda(PC_LSE_FUSE, (pc_dtype)v[0], PTR(v[1]), v[2], v[3], v[4], PTR(v[5]),
                              PTR(v[6]), NULL, &need, (pc_stream)PTR(v[9]));
    if (st == PC_OK && v[7] && bytes >= need) {
        st = pc_logprob_rows_cuda(PC_LSE_FUSE, (pc_dtype)v[0], PTR(v[1]), v[2], v[3], v[4],
                                  PTR(v[5]), PTR(v[6]), PTR(v[7]), &bytes, (pc_stream)PTR(v[9]));
        queued = 1;
    }
    Py_END_ALLOW_THREADS
    if (st != PC_OK) return pcpy_raise(st);
    if (!queued) return PyLong_FromSize_t(need);
    Py_RETURN_NONE;
}

PyMethodDef pcpy_lse_methods[] = {
    {"lse_rows", lse_rows, METH_VARARGS, "lse_rows(kernel, dtype, x, out, threads, isa)"},
    {"lse_backward", lse_backward, METH_VARARGS, "lse_backward(x, lse, grad, threads, isa)"},
    {"logprob_rows", logprob_rows, METH_VARARGS,
     "logprob_rows(kernel, dtype, logits, targets, out, threads, isa)"},
    {"logprob_check_targets", logprob_check_targets, METH_VARARGS,
     "logprob_check_targets(targets, vocab)"},
    {"lse_rows_at", (PyCFunction)(void (*)(void))lse_rows_at, METH_FASTCALL,
     "lse_rows_at(kernel, dtype, x, rows, cols, stride, out, threads, isa)"},
    {"lse_rows_cuda", (PyCFunction)(void (*)(void))lse_rows_cuda, METH_FASTCALL,
     "lse_rows_cuda(kernel, dtype, x, rows, cols, stride, out, scratch, scratch_bytes, stream)"},
    {"lse_backward_cuda", (PyCFunction)(void (*)(void))lse_backward_cuda, METH_FASTCALL,
     "lse_backward_cuda(x, lse, rows, cols, stride, grad, grad_stride, stream)"},
    {"logprob_rows_cuda", (PyCFunction)(void (*)(void))logprob_rows_cuda, METH_FASTCALL,
     "logprob_rows_cuda(dtype, logits, rows, vocab, stride, targets, out, scratch, "
     "scratch_bytes, stream)"},
    {NULL, NULL, 0, NULL},
};
