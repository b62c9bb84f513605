/* Missing masks from a SPEC (mask.h). */
#include "mask.h"
#include "rows.h"
#include "tool_error.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pc/rng.h"

/* Mixed into the seed so that a row's mask stream is not the stream the samplers draw the
 * same row with (pc/query.h: the stream of (seed, row)). */
#define MASK_SALT 0x6d61736b2d726f77ull

struct pc_tool_mask {
    pc_tool_mask_kind kind;
    int32_t width;
    double p;
    uint64_t seed;
    int64_t row;        /* rows made so far */
    uint8_t *one_row;   /* [width]: the mask of every row (halves, centre, a one-row file) */
    pc_tool_rows *file; /* a file with a row per data row */
};

static const struct {
    const char *name;
    pc_tool_mask_kind kind;
} keywords[] = {
    {"left", PC_TOOL_MASK_LEFT},     {"right", PC_TOOL_MASK_RIGHT},
    {"top", PC_TOOL_MASK_TOP},       {"bottom", PC_TOOL_MASK_BOTTOM},
    {"center", PC_TOOL_MASK_CENTER},
};

pc_status pc_tool_mask_parse(const char *text, pc_tool_mask_spec *out) {
    out->text = text;
    out->p = 0.0;
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
        if (!strcmp(text, keywords[i].name)) {
            out->kind = keywords[i].kind;
            return PC_OK;
        }
    if (strncmp(text, "random:", 7) != 0) {
        out->kind = PC_TOOL_MASK_FILE;
        return PC_OK;
    }
    char *end = NULL;
    errno = 0;
    out->kind = PC_TOOL_MASK_RANDOM;
    out->p = strtod(text + 7, &end);
    if (errno || end == text + 7 || *end || !(out->p >= 0.0 && out->p <= 1.0))
        return pc_tool_fail(PC_ERR_ARG, "--missing %s: random:P needs a probability P in [0, 1]",
                            text);
    return PC_OK;
}

int32_t pc_tool_square_side(int64_t width) {
    if (width < 1) return 0;
    int64_t s = (int64_t)sqrt((double)width);
    while (s * s > width) s--;
    while ((s + 1) * (s + 1) <= width) s++;
    return s * s == width && s <= INT32_MAX ? (int32_t)s : 0;
}

/* The one-row mask of a half or the centre of an s x s image. */
static pc_status make_region(pc_tool_mask *m, const char *spec) {
    const int32_t s = pc_tool_square_side(m->width);
    if (!s)
        return pc_tool_fail(PC_ERR_DATA, "--missing %s needs square images, but rows have %d "
                                         "values (not a square number)", spec, m->width);
    const int32_t half = s / 2, lo = (s - half) / 2;
    for (int32_t r = 0; r < s; r++)
        for (int32_t c = 0; c < s; c++) {
            int miss = 0;
            switch (m->kind) {
            case PC_TOOL_MASK_LEFT: miss = c < half; break;
            case PC_TOOL_MASK_RIGHT: miss = c >= s - half; break;
            case PC_TOOL_MASK_TOP: miss = r < half; break;
            case PC_TOOL_MASK_BOTTOM: miss = r >= s - half; break;
            default: miss = r >= lo && r < lo + half && c >= lo && c < lo + half; break;
            }
            m->one_row[(int64_t)r * s + c] = (uint8_t)miss;
        }
    return PC_OK;
}

/* A mask file: rows of the data's width, one per data row or one for all. */
static pc_status open_file(pc_tool_mask *m, const char *path, int64_t count) {
    pc_status st = pc_tool_rows_open(path, &m->file);
    if (st != PC_OK)
        return pc_tool_fail(st, "%s (--missing takes left, right, top, bottom, center, random:P "
                                "or a mask file)", pc_tool_last_error());
    const int64_t rows = pc_tool_rows_count(m->file);
    const int32_t width = pc_tool_rows_width(m->file);
    if (width != m->width || (rows != count && rows != 1))
        return pc_tool_fail(PC_ERR_DATA, "%s: the mask is %lld rows of %d values; the data is "
                                         "%lld rows of %d (or give one row for all)",
                            path, (long long)rows, width, (long long)count, m->width);
    if (rows != 1 || count == 1) return PC_OK;
    int64_t got = 0;
    st = pc_tool_rows_read(m->file, m->one_row, 1, &got);
    pc_tool_rows_close(m->file);
    m->file = NULL;
    return st;
}

pc_status pc_tool_mask_open(const pc_tool_mask_spec *spec, int32_t width, int64_t count,
                            uint64_t seed, pc_tool_mask **out) {
    *out = NULL;
    pc_tool_mask *m = calloc(1, sizeof *m);
    if (m) m->one_row = calloc((size_t)width, 1);
    if (!m || !m->one_row) {
        free(m);
        return pc_tool_fail(PC_ERR_NOMEM, "out of memory for a mask of %d values", width);
    }
    m->kind = spec->kind;
    m->width = width;
    m->p = spec->p;
    m->seed = seed;
    pc_status st = PC_OK;
    if (spec->kind == PC_TOOL_MASK_FILE) st = open_file(m, spec->text, count);
    else if (spec->kind != PC_TOOL_MASK_RANDOM) st = make_region(m, spec->text);
    if (st != PC_OK) {
        pc_tool_mask_close(m);
        return st;
    }
    *out = m;
    return PC_OK;
}

/* Row i's entries from the stream of (seed ^ salt, i), mixed as the samplers mix theirs. */
static void random_row(const pc_tool_mask *m, int64_t row, uint8_t *missing) {
    pc_rng rng;
    pc_rng_init(&rng, m->seed ^ MASK_SALT);
    pc_rng_init(&rng, pc_rng_u64(&rng) ^ (uint64_t)row);
    pc_rng_init(&rng, pc_rng_u64(&rng));
    for (int32_t v = 0; v < m->width; v++) missing[v] = pc_rng_unit(&rng) < m->p;
}

pc_status pc_tool_mask_next(pc_tool_mask *m, int64_t rows, uint8_t *missing) {
    if (m->file) {
        int64_t got = 0;
        pc_status st = pc_tool_rows_read(m->file, missing, rows, &got);
        if (st == PC_OK && got < rows)
            st = pc_tool_fail(PC_ERR_DATA, "the mask file has no row %lld",
                              (long long)(m->row + got));
        m->row += got;
        return st;
    }
    for (int64_t i = 0; i < rows; i++, m->row++) {
        uint8_t *row = missing + i * m->width;
        if (m->kind == PC_TOOL_MASK_RANDOM) random_row(m, m->row, row);
        else memcpy(row, m->one_row, (size_t)m->width);
    }
    return PC_OK;
}

pc_status pc_tool_mask_skip(pc_tool_mask *m, int64_t rows) {
    pc_status st = m->file ? pc_tool_rows_skip(m->file, rows) : PC_OK;
    if (st == PC_OK) m->row += rows;
    return st;
}

void pc_tool_mask_close(pc_tool_mask *m) {
    if (!m) return;
    pc_tool_rows_close(m->file);
    free(m->one_row);
    free(m);
}
