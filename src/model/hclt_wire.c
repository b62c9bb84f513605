/* The reader program's answer over a pipe (hclt_wire.h). */
#include "model/hclt_wire.h"
#include "base/fail.h"
#include "model/hclt_internal.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { TAG_SIZES = 'S', TAG_DATA = 'D', TAG_ERROR = 'E' };
#define PC_WIRE_TEXT_MAX 1024

double pc_hclt_data_seconds(double header_seconds, int64_t bytes) {
    return header_seconds + (double)bytes / 50e6;
}

/* ---- sending -------------------------------------------------------------------------------- */

static pc_status send_all(int fd, const void *bytes, size_t n) {
    const char *p = bytes;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return PC_ERR_IO;
        p += w, n -= (size_t)w;
    }
    return PC_OK;
}

pc_status pc_wire_send_sizes(int fd, int32_t V, int32_t C, int32_t K, int32_t T) {
    const uint32_t tag = TAG_SIZES;
    const int32_t sizes[4] = {V, C, K, T};
    pc_status st = send_all(fd, &tag, sizeof tag);
    return st == PC_OK ? send_all(fd, sizes, sizeof sizes) : st;
}

pc_status pc_wire_send_model(int fd, const pc_hclt *m) {
    const uint32_t tag = TAG_DATA;
    const size_t V = (size_t)m->num_vars, K = (size_t)m->num_latents, C = (size_t)m->num_cats;
    const size_t T = (size_t)m->num_trans;
    pc_status st = send_all(fd, &tag, sizeof tag);
    if (st == PC_OK) st = send_all(fd, m->parent, V * sizeof *m->parent);
    if (st == PC_OK) st = send_all(fd, m->trans_index, V * sizeof *m->trans_index);
    if (st == PC_OK) st = send_all(fd, m->root_logw, K * sizeof *m->root_logw);
    if (st == PC_OK) st = send_all(fd, m->trans_logw, T * K * K * sizeof *m->trans_logw);
    if (st == PC_OK) st = send_all(fd, m->input_logp, V * K * C * sizeof *m->input_logp);
    return st;
}

pc_status pc_wire_send_error(int fd, pc_status status, const char *text) {
    const uint32_t tag = TAG_ERROR;
    size_t n = strlen(text);
    if (n >= PC_WIRE_TEXT_MAX) n = PC_WIRE_TEXT_MAX - 1;
    const int32_t code = (int32_t)status;
    const uint32_t len = (uint32_t)n;
    pc_status st = send_all(fd, &tag, sizeof tag);
    if (st == PC_OK) st = send_all(fd, &code, sizeof code);
    if (st == PC_OK) st = send_all(fd, &len, sizeof len);
    return st == PC_OK ? send_all(fd, text, n) : st;
}

/* ---- receiving ------------------------------------------------------------------------------ */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Reads exactly n bytes before `deadline`: PC_WIRE_MODEL (done), PC_WIRE_EOF or
 * PC_WIRE_TIMEOUT. */
static pc_wire_end read_full(int fd, void *bytes, size_t n, double deadline) {
    char *p = bytes;
    while (n > 0) {
        double left = deadline - now_seconds();
        if (left <= 0) return PC_WIRE_TIMEOUT;
        struct pollfd pfd = {fd, POLLIN, 0};
        int ready = poll(&pfd, 1, left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) return PC_WIRE_EOF;
        if (ready == 0) continue;
        ssize_t got = read(fd, p, n);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) return PC_WIRE_EOF;
        p += got, n -= (size_t)got;
    }
    return PC_WIRE_MODEL;
}

/* The E record's body: the reader's status (any unknown value becomes PC_ERR_FORMAT) and its
 * message, made printable. */
static pc_status receive_error(int fd, const char *name, double deadline, pc_wire_end *end) {
    int32_t code = 0;
    uint32_t len = 0;
    char text[PC_WIRE_TEXT_MAX];
    if ((*end = read_full(fd, &code, sizeof code, deadline)) != PC_WIRE_MODEL ||
        (*end = read_full(fd, &len, sizeof len, deadline)) != PC_WIRE_MODEL)
        return PC_ERR_FORMAT;
    if (len >= PC_WIRE_TEXT_MAX) {
        *end = PC_WIRE_BAD;
        return pc_fail(PC_ERR_FORMAT, "%s: not a valid model file (the reader's message is %u "
                                      "bytes long)", name, len);
    }
    if ((*end = read_full(fd, text, len, deadline)) != PC_WIRE_MODEL) return PC_ERR_FORMAT;
    text[len] = '\0';
    for (uint32_t i = 0; i < len; i++)
        if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f) text[i] = '?';
    if (!(code <= PC_ERR_ARG && code >= PC_ERR_INTERNAL)) code = PC_ERR_FORMAT;
    *end = PC_WIRE_ERROR;
    return pc_fail((pc_status)code, "%s", text);
}

/* The D record's arrays into a model of the announced sizes (allocated here, after the sizes
 * pass this side's limit). */
static pc_wire_end receive_model(int fd, const int32_t s[4], double deadline, pc_hclt *m) {
    const size_t V = (size_t)s[0], C = (size_t)s[1], K = (size_t)s[2], T = (size_t)s[3];
    pc_wire_end e = read_full(fd, m->parent, V * sizeof *m->parent, deadline);
    if (e == PC_WIRE_MODEL) e = read_full(fd, m->trans_index, V * sizeof(int32_t), deadline);
    if (e == PC_WIRE_MODEL) e = read_full(fd, m->root_logw, K * sizeof(double), deadline);
    if (e == PC_WIRE_MODEL) e = read_full(fd, m->trans_logw, T * K * K * sizeof(double), deadline);
    if (e == PC_WIRE_MODEL) e = read_full(fd, m->input_logp, V * K * C * sizeof(double), deadline);
    return e;
}

static pc_status garbled(const char *name, pc_wire_end *end) {
    *end = PC_WIRE_BAD;
    return pc_fail(PC_ERR_FORMAT, "%s: not a valid model file (the reader's answer is garbled)",
                   name);
}

pc_status pc_wire_receive(int fd, const pc_wire_limits *limits, const char *name, pc_hclt **out,
                          pc_wire_end *end, int *sizes_seen) {
    *out = NULL;
    *sizes_seen = 0;
    double deadline = now_seconds() + PC_WIRE_WALL_FACTOR * limits->header_seconds;
    uint32_t tag = 0;
    if ((*end = read_full(fd, &tag, sizeof tag, deadline)) != PC_WIRE_MODEL) return PC_ERR_FORMAT;
    if (tag == TAG_ERROR) return receive_error(fd, name, deadline, end);
    int32_t s[4];
    if (tag != TAG_SIZES) return garbled(name, end);
    if ((*end = read_full(fd, s, sizeof s, deadline)) != PC_WIRE_MODEL) return PC_ERR_FORMAT;
    *sizes_seen = 1;
    if (s[0] < 1 || s[1] < 2 || s[2] < 1 || s[3] < 0) return garbled(name, end);
    pc_status st;
    if ((st = pc_hclt_check_size(s[0], s[1], s[2], s[3], limits->max_bytes, name,
                                 PC_ERR_FORMAT)) != PC_OK) {
        *end = PC_WIRE_BAD;
        return st;
    }
    deadline = now_seconds() +
               PC_WIRE_WALL_FACTOR *
                   pc_hclt_data_seconds(limits->header_seconds,
                                        pc_hclt_model_bytes(s[0], s[1], s[2], s[3]));
    if ((*end = read_full(fd, &tag, sizeof tag, deadline)) != PC_WIRE_MODEL) return PC_ERR_FORMAT;
    if (tag == TAG_ERROR) return receive_error(fd, name, deadline, end);
    if (tag != TAG_DATA) return garbled(name, end);
    pc_hclt *m = NULL;
    if ((st = pc_hclt_create(s[0], s[1], s[2], s[3], &m)) != PC_OK) {
        *end = PC_WIRE_BAD;
        return pc_fail(st, "%s: %s", name, pc_last_error());
    }
    char extra;
    if ((*end = receive_model(fd, s, deadline, m)) != PC_WIRE_MODEL ||
        read_full(fd, &extra, 1, deadline) != PC_WIRE_EOF) {
        pc_hclt_free(m);
        return *end != PC_WIRE_MODEL ? PC_ERR_FORMAT : garbled(name, end);
    }
    *out = m;
    return PC_OK;
}
