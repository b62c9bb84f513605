/* The queries' outputs by format (pcinfer.h): .npy, IDX (plain or gzip) and PNG pictures,
 * each written a batch at a time into the run's pc_file_writer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "pcinfer.h"
#include "npy.h"
#include "png_grid.h"
#include "tool_error.h"

struct out_sink {
    out_format format;
    pc_file_writer *w;
    int32_t V, C, side; /* side: of a square image, else 0 */
    int conditional;    /* the answer is probs [n, V, C], not values */
    int evidence;       /* batches come with x and missing */
    z_stream z;         /* .idx.gz */
    int deflating;
    uint8_t zbuf[1 << 16];
    pc_tool_grid *grid; /* .png */
    float *means;       /* [V]: a conditional's expected values, for .png */
};

/* Compresses n bytes (or, with Z_FINISH, the rest of the stream) into the writer. */
static pc_status deflate_into(out_sink *s, const uint8_t *bytes, size_t n, int flush) {
    do {
        const size_t chunk = n < (1u << 30) ? n : (1u << 30); /* zlib counts in uInt */
        s->z.next_in = (Bytef *)bytes;
        s->z.avail_in = (uInt)chunk;
        bytes += chunk;
        n -= chunk;
        const int step = n ? Z_NO_FLUSH : flush;
        int zr;
        do {
            s->z.next_out = s->zbuf;
            s->z.avail_out = sizeof s->zbuf;
            zr = deflate(&s->z, step);
            if (zr == Z_STREAM_ERROR) return pc_tool_fail(PC_ERR_IO, "gzip: deflate failed");
            const size_t have = sizeof s->zbuf - s->z.avail_out;
            pc_status st = pc_tool_pass(pc_file_writer_write(s->w, s->zbuf, have));
            if (st != PC_OK) return st;
        } while (s->z.avail_out == 0 || (step == Z_FINISH && zr != Z_STREAM_END));
    } while (n > 0);
    return PC_OK;
}

static pc_status put(out_sink *s, const void *bytes, size_t n) {
    if (s->format == OUT_IDX_GZ) return deflate_into(s, bytes, n, Z_NO_FLUSH);
    return pc_tool_pass(pc_file_writer_write(s->w, bytes, n));
}

/* float32 values as little-endian bytes, the .npy file's '<f4'. */
static pc_status put_floats(out_sink *s, const float *v, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    uint8_t le[4096];
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; k < sizeof le / 4 && i < n; k++, i++) {
            uint32_t u;
            memcpy(&u, v + i, 4);
            for (int b = 0; b < 4; b++) le[4 * k + b] = (uint8_t)(u >> (8 * b));
        }
        pc_status st = put(s, le, 4 * k);
        if (st != PC_OK) return st;
    }
    return PC_OK;
#else
    return put(s, v, n * sizeof *v);
#endif
}

static pc_status start_npy(out_sink *s, int64_t n) {
    const int64_t shape[3] = {n, s->V, s->C};
    char head[256];
    const size_t len = pc_tool_npy_start(head, sizeof head, s->conditional ? "<f4" : "|u1",
                                         shape, s->conditional ? 3 : 2);
    return put(s, head, len);
}

/* The IDX image layout: magic 0x00000803, then [n, s, s] or [n, V] as big-endian uint32. */
static pc_status start_idx(out_sink *s, int64_t n) {
    if (n > UINT32_MAX)
        return pc_tool_fail(PC_ERR_ARG, "an IDX file holds at most 2^32 - 1 images, not %lld: "
                                        "write .npy", (long long)n);
    if (s->format == OUT_IDX_GZ) {
        if (deflateInit2(&s->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                         Z_DEFAULT_STRATEGY) != Z_OK)
            return pc_tool_fail(PC_ERR_NOMEM, "gzip: out of memory");
        s->deflating = 1;
    }
    const uint32_t dims[3] = {(uint32_t)n, (uint32_t)(s->side ? s->side : s->V),
                              (uint32_t)s->side};
    const int ndim = s->side ? 3 : 2;
    uint8_t head[16] = {0, 0, 0x08, (uint8_t)ndim};
    for (int i = 0; i < ndim; i++)
        for (int b = 0; b < 4; b++) head[4 + 4 * i + b] = (uint8_t)(dims[i] >> (24 - 8 * b));
    return put(s, head, 4 + 4 * (size_t)ndim);
}

/* A grid of samples, about square; or a row per image: original | evidence | answer. */
static pc_status start_png(out_sink *s, int64_t n) {
    if (!s->side)
        return pc_tool_fail(PC_ERR_ARG, "a .png shows square images, and the model's %d "
                                        "variables are not a square number: write .npy or .idx",
                            s->V);
    int64_t cols = 3, rows = n;
    if (!s->evidence) {
        cols = 1;
        while (cols * cols < n) cols++;
        rows = (n + cols - 1) / cols;
    }
    if (s->conditional && !(s->means = malloc((size_t)s->V * sizeof *s->means)))
        return pc_tool_fail(PC_ERR_NOMEM, "out of memory");
    return pc_tool_grid_open(s->w, s->side, s->C, cols, rows, &s->grid);
}

pc_status out_open(out_format format, pc_file_writer *w, pcinfer_command command,
                   int evidence, int64_t n, int32_t V, int32_t C, out_sink **out) {
    *out = NULL;
    out_sink *s = calloc(1, sizeof *s);
    if (!s) return pc_tool_fail(PC_ERR_NOMEM, "out of memory");
    s->format = format;
    s->w = w;
    s->V = V;
    s->C = C;
    s->side = pc_tool_square_side(V);
    s->conditional = command == PCINFER_CONDITIONAL;
    s->evidence = evidence;
    pc_status st = format == OUT_NPY   ? start_npy(s, n)
                   : format == OUT_PNG ? start_png(s, n)
                                       : start_idx(s, n);
    if (st != PC_OK) {
        out_free(s);
        return st;
    }
    *out = s;
    return PC_OK;
}

/* p(X_v = c | e) [V, C] -> the expected value of each X_v; NaN rows stay NaN. */
static void expected_values(const out_sink *s, const float *probs, float *means) {
    for (int32_t v = 0; v < s->V; v++) {
        double m = 0.0;
        for (int32_t c = 0; c < s->C; c++) m += (double)c * probs[(int64_t)v * s->C + c];
        means[v] = (float)m;
    }
}

static pc_status png_row(out_sink *s, const uint8_t *x, const uint8_t *missing,
                         const uint8_t *values, const float *probs) {
    if (!s->evidence) {
        const pc_tool_panel sample = {values, NULL, NULL, PC_TOOL_PANEL_PLAIN};
        return pc_tool_grid_put(s->grid, &sample);
    }
    if (probs) expected_values(s, probs, s->means);
    const pc_tool_panel panels[3] = {
        {x, NULL, NULL, PC_TOOL_PANEL_PLAIN},
        {x, NULL, missing, PC_TOOL_PANEL_EVIDENCE},
        {probs ? NULL : values, s->means, missing, PC_TOOL_PANEL_FILLED},
    };
    pc_status st = PC_OK;
    for (int i = 0; i < 3 && st == PC_OK; i++) st = pc_tool_grid_put(s->grid, &panels[i]);
    return st;
}

pc_status out_batch(out_sink *s, int64_t nb, const uint8_t *x, const uint8_t *missing,
                    const uint8_t *values, const float *probs) {
    const size_t V = (size_t)s->V, cells = V * (size_t)s->C;
    if (s->format != OUT_PNG)
        return s->conditional ? put_floats(s, probs, (size_t)nb * cells)
                              : put(s, values, (size_t)nb * V);
    pc_status st = PC_OK;
    for (int64_t i = 0; i < nb && st == PC_OK; i++)
        st = png_row(s, x ? x + i * V : NULL, missing ? missing + i * V : NULL,
                     values ? values + i * V : NULL, probs ? probs + i * cells : NULL);
    return st;
}

pc_status out_finish(out_sink *s) {
    if (s->format == OUT_PNG) return pc_tool_grid_finish(s->grid);
    if (s->format == OUT_IDX_GZ) return deflate_into(s, NULL, 0, Z_FINISH);
    return PC_OK;
}

void out_free(out_sink *s) {
    if (!s) return;
    if (s->deflating) deflateEnd(&s->z);
    pc_tool_grid_free(s->grid);
    free(s->means);
    free(s);
}
