/* Pictures of square images for the tools: a grid of cols x rows panels, each an s x s image
 * drawn as gray levels with every value a scale x scale block of pixels, panels apart by thin
 * lines. Written through libpng (8-bit RGB) into a pc_file_writer a band at a time (one row
 * of panels), so memory holds one band whatever the number of panels.
 *
 *   pc_tool_grid *g;
 *   pc_tool_grid_open(writer, side, levels, cols, rows, &g);
 *   pc_tool_grid_put(g, &panel);    cols x rows times at most, row by row
 *   pc_tool_grid_finish(g);         blank panels for the rest, then the PNG's end
 *   pc_tool_grid_free(g);
 *
 * Errors (libpng's included) give a status and pc_tool_last_error(); the writer is the
 * caller's to commit or abort. */
#ifndef PC_TOOLS_PNG_GRID_H
#define PC_TOOLS_PNG_GRID_H

#include <stdint.h>

#include "pc/file.h"
#include "pc/status.h"

/* How a panel shows its missing entries (missing != NULL). */
typedef enum pc_tool_panel_style {
    PC_TOOL_PANEL_PLAIN,    /* not at all: the values as they are */
    PC_TOOL_PANEL_EVIDENCE, /* hidden under a flat blue: what the model was shown */
    PC_TOOL_PANEL_FILLED,   /* tinted blue: values the model filled in */
} pc_tool_panel_style;

typedef struct pc_tool_panel {
    const uint8_t *values;  /* [s * s] levels 0 .. levels - 1 (higher ones show as the top) */
    const float *means;     /* used when values is NULL: [s * s] levels as real numbers (a
                               conditional mean); NaN shows as the evidence blue */
    const uint8_t *missing; /* [s * s], nonzero = missing; or NULL */
    pc_tool_panel_style style;
} pc_tool_panel;

typedef struct pc_tool_grid pc_tool_grid;

/* The PNG's pixel size for a grid (what pc_tool_grid_open would write). */
void pc_tool_grid_size(int32_t side, int64_t cols, int64_t rows, int64_t *width,
                       int64_t *height);

/* Starts the PNG: side >= 1, levels >= 1 (values 0 .. levels - 1 map to black .. white),
 * cols, rows >= 1. PC_ERR_ARG when the picture would be wider or taller than libpng writes
 * (1,000,000 pixels). */
pc_status pc_tool_grid_open(pc_file_writer *out, int32_t side, int32_t levels, int64_t cols,
                            int64_t rows, pc_tool_grid **g);
pc_status pc_tool_grid_put(pc_tool_grid *g, const pc_tool_panel *panel);
pc_status pc_tool_grid_finish(pc_tool_grid *g);
/* NULL does nothing. */
void pc_tool_grid_free(pc_tool_grid *g);

#endif
