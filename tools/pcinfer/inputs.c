/* The inputs every pcinfer command opens (pcinfer.h), and what the commands share. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pcinfer.h"
#include "mnist_find.h"
#include "tool_error.h"

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int g_hold;          /* messages held (pcinfer_hold_messages) */
static char g_message[2048]; /* the first one held, "" when none */

int fail_printf(const char *fmt, ...) {
    char text[sizeof g_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (!g_hold) fprintf(stderr, "pcinfer: %s\n", text);
    else if (!g_message[0]) memcpy(g_message, text, sizeof text);
    return 1;
}

int fail_with(const char *what) { return fail_printf("%s", what); }

void pcinfer_hold_messages(int hold) {
    g_hold = hold;
    g_message[0] = '\0';
}

int pcinfer_agree(const pc_tool_mpi *mpi, int rc) {
    if (mpi->size == 1) return rc;
    const int first = pc_tool_mpi_first_failed(mpi, rc != 0);
    if (first < 0) return 0;
    if (first == mpi->rank)
        fprintf(stderr, "pcinfer: %s\n", g_message[0] ? g_message : "failed (no message)");
    g_message[0] = '\0';
    return 1;
}

int fail_batch(pc_status st, const char *data, int64_t first) {
    const char *msg = pc_tool_last_error();
    char where[96] = "";
    if (data && first > 0)
        snprintf(where, sizeof where, " (sample numbers count from image %lld of the data)",
                 (long long)first);
    const int name = data && st == PC_ERR_DATA && !strstr(msg, data);
    return fail_printf("%s%s%s%s", name ? data : "", name ? ": " : "", msg, where);
}

void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20) printf("\\u%04x", ch);
        else putchar(ch);
    }
    putchar('"');
}

/* JSON has no inf or NaN: those print as null. */
void json_number(double v) {
    if (isfinite(v)) printf("%.17g", v);
    else printf("null");
}

/* The data and its mask: rows of the model's width, n of them. */
static int open_data(inputs *in, const args *a) {
    const int32_t V = in->model->num_vars;
    if (pc_tool_rows_open(in->data_path, &in->data) != PC_OK)
        return fail_with(pc_tool_last_error());
    if (pc_tool_rows_width(in->data) != V)
        return fail_printf("%s: images have %d values but the model %s has num_vars = %d",
                           in->data_path, pc_tool_rows_width(in->data), a->model, V);
    const int64_t count = pc_tool_rows_count(in->data);
    in->n = a->limit >= 0 && a->limit < count ? a->limit : count;
    if (in->n == 0) return fail_printf("%s: no images in it", in->data_path);
    if (a->missing && pc_tool_mask_open(&a->mask, V, count, a->seed, &in->mask) != PC_OK)
        return fail_with(pc_tool_last_error());
    return 0;
}

int inputs_open(inputs *in, const args *a) {
    memset(in, 0, sizeof *in);
    const int from_prior = a->command == PCINFER_SAMPLE && !a->data;
    if (a->data) {
        in->data_path = a->data;
    } else if (!from_prior) {
        if (pc_tool_find_mnist(NULL, MNIST_TEST_IMAGES, in->found, sizeof in->found) != PC_OK)
            return fail_with(in->found);
        in->data_path = in->found;
    }
    /* The output is checked (and its temporary file made) before any work; under mpirun rank
     * 0 writes it. */
    const char *mask_file = a->missing && a->mask.kind == PC_TOOL_MASK_FILE ? a->mask.text : NULL;
    const char *read[3] = {a->model, in->data_path, mask_file};
    if (a->output && a->mpi.rank == 0 && pc_file_writer_open(a->output, read, 3, &in->out) != PC_OK)
        return fail_with(pc_last_error());
    if (pc_hclt_load_isolated(a->model, NULL, &in->model) != PC_OK)
        return fail_with(pc_last_error());
    in->n = a->count;
    if (!from_prior && open_data(in, a) != 0) return 1;
    if (pc_circuit_compile(in->model, &in->circuit) != PC_OK) return fail_with(pc_last_error());
    return 0;
}

void inputs_close(inputs *in) {
    pc_file_writer_abort(in->out);
    pc_tool_mask_close(in->mask);
    pc_tool_rows_close(in->data);
    pc_circuit_free(in->circuit);
    pc_hclt_free(in->model);
    memset(in, 0, sizeof *in);
}
