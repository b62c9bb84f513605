/* pcinfer._core: the CPython extension over libpcinfer's public API (include/pc).
 *
 * The module is thin on purpose: every function checks the buffers it is given (format, shape,
 * strides, writability) against what the C call will read and write, releases the GIL around
 * the call and turns a failing pc_status into pcinfer.Error carrying pc_last_error(). Choices
 * of policy (kernel names, "auto", batching, dtype conversion, torch) live in the Python
 * package; this layer only refuses what would make a C call read or write out of bounds.
 */
#ifndef PCPY_CORE_H
#define PCPY_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "pc/circuit.h"
#include "pc/eval.h"
#include "pc/hclt.h"
#include "pc/status.h"

/* ---- errors (module.c) ---------------------------------------------------------------- */

/* Raises pcinfer.Error(pc_last_error(), status) and returns NULL. Call it on the thread that
 * made the failing library call: the library's message is per thread. */
PyObject *pcpy_raise(pc_status status);

/* Raises pcinfer.Error with a message of the binding's own (an argument the library never
 * sees, such as a buffer of the wrong format) and returns NULL. */
PyObject *pcpy_raise_msg(pc_status status, const char *fmt, ...);

/* ---- buffers (buffer.c) ----------------------------------------------------------------- */

/* A buffer viewed as `rows` rows of `cols` elements, row starts `stride` elements apart. */
typedef struct pcpy_rows {
    Py_buffer view;
    int64_t rows, cols, stride;
    int held; /* view must be released */
} pcpy_rows;

/* Element formats as the buffer protocol spells them (struct module letters). */
typedef enum pcpy_format {
    PCPY_U8,  /* B (bool '?' is accepted too: a byte holding 0 or 1) */
    PCPY_I32, /* i */
    PCPY_I64, /* q or l (numpy's int64 on LP64) */
    PCPY_U16, /* H: the bits of an f16 or bf16 value */
    PCPY_F16, /* e */
    PCPY_F32, /* f */
    PCPY_F64, /* d */
} pcpy_format;

/* Gets obj as a 2-D buffer of `format` whose rows may be apart (elements within a row are
 * adjacent), writable when asked. `name` names the argument in messages. On failure raises
 * pcinfer.Error (status PC_ERR_ARG) and returns -1. */
int pcpy_get_rows(PyObject *obj, const char *name, pcpy_format format, int writable,
                  pcpy_rows *out);

/* The same, and the rows must be adjacent too (C-contiguous [rows, cols]). */
int pcpy_get_matrix(PyObject *obj, const char *name, pcpy_format format, int writable,
                    pcpy_rows *out);

/* A C-contiguous buffer of exactly `count` elements of `format`, any number of dimensions
 * (count < 0: any count, read back from out->rows). */
int pcpy_get_flat(PyObject *obj, const char *name, pcpy_format format, int writable,
                  int64_t count, pcpy_rows *out);

void pcpy_release(pcpy_rows *b);

/* ---- types ------------------------------------------------------------------------------ */

/* pcinfer._core.Model: a validated HCLT and its compiled circuit. Immutable: learning makes
 * new models, so evaluators built on a model never see its parameters change. */
typedef struct pcpy_model {
    PyObject_HEAD
    pc_hclt *hclt;
    pc_circuit *circuit;
    /* The shape, read-only attributes of the object. */
    int num_vars, num_cats, num_latents, num_trans, num_groups, num_layers;
} pcpy_model;

extern PyTypeObject pcpy_model_type;

/* Takes ownership of hclt (validated): compiles it and wraps both; frees hclt on failure. */
PyObject *pcpy_model_wrap(pc_hclt *hclt);

/* pcinfer._core.Evaluator: one pc_evaluator on a model (which it keeps alive). */
typedef struct pcpy_evaluator {
    PyObject_HEAD
    pcpy_model *model;
    pc_evaluator *evaluator;
    int64_t max_batch;
    int busy; /* set under the GIL while a call runs without it */
} pcpy_evaluator;

extern PyTypeObject pcpy_evaluator_type;

/* Marks the evaluator busy (raising pcinfer.Error if another thread's call holds it); every
 * successful acquire is paired with a release. */
int pcpy_evaluator_acquire(pcpy_evaluator *self);
void pcpy_evaluator_release(pcpy_evaluator *self);

/* Checks that x (and missing, when not None) are C-contiguous uint8 [n, V] for the
 * evaluator's model; fills the views. On failure raises and returns -1 (nothing held). */
int pcpy_get_evidence(PyObject *x_obj, PyObject *missing_obj,
                      pcpy_rows *x, pcpy_rows *missing);

extern PyTypeObject pcpy_em_type;

/* ---- method tables of the modules' parts, joined in module.c ---------------------------- */

extern PyMethodDef pcpy_lse_methods[];
extern PyMethodDef pcpy_learn_methods[];
extern PyMethodDef pcpy_data_methods[];
extern PyMethodDef pcpy_query_methods[]; /* evaluator methods (query.c) */

#endif
