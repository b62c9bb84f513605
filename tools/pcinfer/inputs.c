/* The inputs every pcinfer command opens (pcinfer.h), and what the commands share. */
#include <math.h>
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

int fail_with(const char *what) {
    fprintf(stderr, "pcinfer: %s\n", what);
    return 1;
}

int fail_batch(pc_status st, const char *data, int64_t first) {
    const char *msg = pc_tool_last_error();
    fprintf(stderr, "pcinfer: ");
    if (data && st == PC_ERR_DATA && !strstr(msg, data)) fprintf(stderr, "%s: ", data);
    fprintf(stderr, "%s", msg);
    if (data && first > 0)
        fprintf(stderr, " (sample numbers count from image %lld of the data)", (long long)first);
    fputc('\n', stderr);
    return 1;
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
    if (pc_tool_rows_width(in->data) != V) {
        fprintf(stderr, "pcinfer: %s: images have %d values but the model %s has num_vars = %d\n",
                in->data_path, pc_tool_rows_width(in->data), a->model, V);
        return 1;
    }
    const int64_t count = pc_tool_rows_count(in->data);
    in->n = a->limit >= 0 && a->limit < count ? a->limit : count;
    if (in->n == 0) {
        fprintf(stderr, "pcinfer: %s: no images in it\n", in->data_path);
        return 1;
    }
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
    /* The output is checked (and its temporary file made) before any work. */
    const char *mask_file = a->missing && a->mask.kind == PC_TOOL_MASK_FILE ? a->mask.text : NULL;
    const char *read[3] = {a->model, in->data_path, mask_file};
    if (a->output && pc_file_writer_open(a->output, read, 3, &in->out) != PC_OK)
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
