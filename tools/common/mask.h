/* Missing masks for the tools' --missing SPEC: which entries of each row are unobserved.
 *
 *   left, right, top, bottom   a half of a square image of side s (V = s * s): the first or
 *                              last s / 2 columns or rows (for an odd s the middle one stays
 *                              observed)
 *   center                     the centre square of side s / 2 (a quarter of the image)
 *   random:P                   each entry missing with probability P in [0, 1], row i drawn
 *                              from a stream of (seed, i) apart from the samplers' streams
 *   FILE                       anything else: an IDX (plain or .gz) or .npy file of uint8 rows
 *                              of the data's width, one row per data row or a single row for
 *                              all; nonzero = missing (a file named like a keyword: ./left)
 *
 * Masks are made a batch of rows at a time, in row order, so memory does not grow with the
 * data; a row's mask depends on its number only, not on the batch size or on where a run
 * started (pc_tool_mask_skip). Errors: pc_tool_last_error(). */
#ifndef PC_TOOLS_MASK_H
#define PC_TOOLS_MASK_H

#include <stdint.h>

#include "pc/status.h"

typedef enum pc_tool_mask_kind {
    PC_TOOL_MASK_LEFT,
    PC_TOOL_MASK_RIGHT,
    PC_TOOL_MASK_TOP,
    PC_TOOL_MASK_BOTTOM,
    PC_TOOL_MASK_CENTER,
    PC_TOOL_MASK_RANDOM,
    PC_TOOL_MASK_FILE,
} pc_tool_mask_kind;

typedef struct pc_tool_mask_spec {
    pc_tool_mask_kind kind;
    double p;         /* random: the probability of missing */
    const char *text; /* the SPEC as given (the path for a file) */
} pc_tool_mask_spec;

/* s when width = s * s (a square image of side s), else 0. */
int32_t pc_tool_square_side(int64_t width);

/* Parses a SPEC; PC_ERR_ARG for random: without a probability in [0, 1]. */
pc_status pc_tool_mask_parse(const char *text, pc_tool_mask_spec *out);

typedef struct pc_tool_mask pc_tool_mask;

/* A mask for `count` rows of `width` values (count: the data's rows, which a file must match
 * unless it holds one row). A half or centre needs a square width; a file is opened and its
 * shape checked here. */
pc_status pc_tool_mask_open(const pc_tool_mask_spec *spec, int32_t width, int64_t count,
                            uint64_t seed, pc_tool_mask **out);

/* The masks of the next `rows` rows into missing [rows, width] (1 or a file's nonzero value
 * = missing). */
pc_status pc_tool_mask_next(pc_tool_mask *m, int64_t rows, uint8_t *missing);

/* Moves past the masks of the next `rows` rows: the mask after it is the one the row after
 * them gets in a run that made them all (a process scoring rows [lo, hi) skips lo). */
pc_status pc_tool_mask_skip(pc_tool_mask *m, int64_t rows);

/* NULL does nothing. */
void pc_tool_mask_close(pc_tool_mask *m);

#endif
