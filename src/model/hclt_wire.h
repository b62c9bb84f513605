/* The answer of the model reader program (src/libexec) to pc_hclt_load_isolated, over a pipe.
 *
 * Records, each a uint32 tag then its body, in native byte order (both ends are one build on
 * one machine):
 *   'S'  int32 V, C, K, T: the sizes, checked against the file, sent before any data is read
 *   'D'  parent[V], trans_index[V] (int32), root_logw[K], trans_logw[T, K, K],
 *        input_logp[V, K, C] (double): the model, not yet validated
 *   'E'  int32 status, uint32 n, then n bytes of message (n < 1024)
 * An answer is S D (a model), E, or S E (the data could not be read).
 *
 * The receiving side trusts nothing it reads: sizes are checked against its own limit before
 * it allocates, every read has a deadline, and the model is validated after it arrives. */
#ifndef PC_MODEL_HCLT_WIRE_H
#define PC_MODEL_HCLT_WIRE_H

#include <stdint.h>

#include "pc/hclt.h"

/* Sender (the reader program). Each returns PC_OK or PC_ERR_IO (the pipe was closed). */
pc_status pc_wire_send_sizes(int fd, int32_t V, int32_t C, int32_t K, int32_t T);
pc_status pc_wire_send_model(int fd, const pc_hclt *m);
pc_status pc_wire_send_error(int fd, pc_status status, const char *text);

/* How an answer ended. */
typedef enum pc_wire_end {
    PC_WIRE_MODEL,   /* S D: *out holds the model */
    PC_WIRE_ERROR,   /* E: the reader's status is returned, its message recorded */
    PC_WIRE_EOF,     /* the pipe closed early: the reader died (its exit status says how) */
    PC_WIRE_TIMEOUT, /* a deadline passed */
    PC_WIRE_BAD      /* bytes that are no answer, or sizes above the limit: message recorded */
} pc_wire_end;

/* The reader program gets `header_seconds` of CPU time for the file's structure and then
 * pc_hclt_data_seconds(header_seconds, model bytes) more for the data; the receiver waits three
 * times as long in wall time for each record (a busy machine, a blocked read) before it gives
 * up. */
typedef struct pc_wire_limits {
    int64_t max_bytes;
    double header_seconds;
} pc_wire_limits;

#define PC_WIRE_WALL_FACTOR 3.0

/* Seconds allowed for reading a model's data of `bytes` bytes once its sizes are checked:
 * the header's allowance again plus one second per 50 MB (decoding, conversion and the pipe
 * run at several hundred MB/s; a slow machine keeps a wide margin). */
double pc_hclt_data_seconds(double header_seconds, int64_t bytes);

/* Reads one answer from fd. Returns the reader's status for PC_WIRE_ERROR, PC_OK for
 * PC_WIRE_MODEL, and PC_ERR_FORMAT otherwise; *end says which, *sizes_seen whether the S
 * record came (the data stage had started). `name` starts recorded messages. */
pc_status pc_wire_receive(int fd, const pc_wire_limits *limits, const char *name, pc_hclt **out,
                          pc_wire_end *end, int *sizes_seen);

#endif
