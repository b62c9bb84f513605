/* Inside the pcinfer program: the parsed command line, the inputs every command opens, the
 * output formats of the queries, and the commands themselves (score.c, query.c). */
#ifndef PC_TOOLS_PCINFER_H
#define PC_TOOLS_PCINFER_H

#include <stdint.h>

#include "pc/circuit.h"
#include "pc/eval.h"
#include "pc/file.h"
#include "pc/hclt.h"

#include "mask.h"
#include "mpi_ranks.h"
#include "rows.h"

#define MNIST_TEST_IMAGES "t10k-images-idx3-ubyte.gz"

typedef enum pcinfer_command {
    PCINFER_SCORE,
    PCINFER_SAMPLE,
    PCINFER_MPE,
    PCINFER_CONDITIONAL,
} pcinfer_command;

/* What --output's extension asks for (the queries' outputs; score writes text lines). */
typedef enum out_format {
    OUT_NONE,
    OUT_NPY,    /* .npy: uint8 [n, V], or float32 [n, V, C] for conditionals */
    OUT_IDX,    /* .idx: uint8, [n, s, s] for square images, else [n, V] */
    OUT_IDX_GZ, /* .idx.gz: the same, gzip-compressed */
    OUT_PNG,    /* .png: a picture (square images only) */
} out_format;

typedef struct args {
    pcinfer_command command;
    const char *kernel, *data, *output, *compare, *model, *missing;
    int64_t limit, batch, count;
    uint64_t seed;
    int threads, json;
    pc_tool_mask_spec mask; /* parsed from missing when it is given */
    out_format format;      /* of output, for the queries */
    pc_backend cpu_backend; /* where a GPU kernel falls back to */
    pc_tool_mpi mpi;        /* this process among the run's (mpirun -np R pcinfer) */
} args;

/* The inputs of a run, opened in this order: the data's path (--data, else the MNIST test set;
 * none for sampling from p(x)), the output's temporary file (so a bad output path fails before
 * any work), the model (isolated loader), the data and the mask; then the circuit. n is the
 * number of rows the run covers (the data's rows up to --limit, or --count). */
typedef struct inputs {
    const char *data_path;
    char found[4096];
    pc_file_writer *out;
    pc_hclt *model;
    pc_circuit *circuit;
    pc_tool_rows *data;
    pc_tool_mask *mask;
    int64_t n;
} inputs;

/* Returns 0, or 1 after printing the message; inputs_close frees what was opened (and aborts
 * the output file unless it was committed and set to NULL). */
int inputs_open(inputs *in, const args *a);
void inputs_close(inputs *in);

/* Images per evaluation call for scoring: --batch, or by kernel. */
int64_t batch_for(const args *a, pc_backend backend);

/* The commands: exit status 0 or 1, every message printed. */
int pcinfer_score(const args *a, pc_backend backend);
int pcinfer_query(const args *a, pc_backend backend);

/* The output of a query, written a batch at a time (output.c). */
typedef struct out_sink out_sink;

/* Makes the sink for n rows of V values (C categories) of the command into w and writes the
 * file's header: a .png needs square images, an .idx at most 2^32 - 1 rows. Errors of the
 * sink functions come with pc_tool_last_error(). */
pc_status out_open(out_format format, pc_file_writer *w, pcinfer_command command,
                   int evidence, int64_t n, int32_t V, int32_t C, out_sink **out);
/* One batch of nb rows: x and missing the evidence ([nb, V]; NULL for sampling from p(x)),
 * and the answer: values [nb, V] (samples, completions) or probs [nb, V, C]. */
pc_status out_batch(out_sink *s, int64_t nb, const uint8_t *x, const uint8_t *missing,
                    const uint8_t *values, const float *probs);
/* Ends the file's contents (not the writer: the caller commits it). */
pc_status out_finish(out_sink *s);
void out_free(out_sink *s);

/* JSON output: a quoted, escaped string; a number, or null for inf and NaN. */
void json_string(const char *s);
void json_number(double v);

double now_seconds(void);
/* Prints "pcinfer: <message>" on stderr and returns 1; while messages are held, keeps the
 * first one instead. */
int fail_printf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* fail_printf("%s", what). */
int fail_with(const char *what);
/* Under mpirun every rank stops at the same step when one fails, and one message is printed:
 * while held (hold = 1), failures keep their message; pcinfer_agree (called by every rank)
 * then returns 1 on every rank when any rank's rc is nonzero, the lowest such rank printing
 * its message, else 0. Without a run of several ranks it returns rc (messages not held). */
void pcinfer_hold_messages(int hold);
int pcinfer_agree(const pc_tool_mpi *mpi, int rc);
/* Prints pc_tool_last_error() for a failed step of a batch loop and returns 1. A library call
 * on the batch from image `first` of `data` names samples within the batch: the file is
 * named where the message does not, and where the batch starts (data NULL: a reader's or a
 * writer's message, which names its file). */
int fail_batch(pc_status st, const char *data, int64_t first);

#endif
