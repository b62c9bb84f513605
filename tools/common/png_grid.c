/* PNG grids of square images through libpng (png_grid.h).
 *
 * Geometry: a panel is s * scale pixels square, scale = 84 / s clamped to [1, 8] (3 for
 * MNIST's 28 x 28, so a panel is 84 pixels: large enough to read in a README); lines of GAP
 * pixels frame every panel. A band is GAP rows of line and one row of panels; the picture is
 * `rows` bands and a last line: height = rows * (s * scale + GAP) + GAP. */
#include "png_grid.h"
#include "tool_error.h"

#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#define GAP 2
#define PNG_MAX_SIDE 1000000 /* libpng's default PNG_USER_WIDTH_MAX / HEIGHT_MAX */

static const uint8_t line_rgb[3] = {128, 128, 128};
static const uint8_t hidden_rgb[3] = {40, 72, 128};

struct pc_tool_grid {
    png_structp png;
    png_infop info;
    pc_file_writer *out;
    pc_status io_status;  /* the first failed write */
    char png_error[256];  /* libpng's message */
    int32_t side, scale, levels;
    int64_t cols, rows, width, height;
    int64_t placed;       /* panels put so far */
    uint8_t *band;        /* [GAP + side * scale, width, 3] */
};

static int32_t scale_for(int32_t side) {
    int32_t s = 84 / side;
    return s < 1 ? 1 : s > 8 ? 8 : s;
}

void pc_tool_grid_size(int32_t side, int64_t cols, int64_t rows, int64_t *width,
                       int64_t *height) {
    const int64_t panel = (int64_t)side * scale_for(side) + GAP;
    *width = cols * panel + GAP;
    *height = rows * panel + GAP;
}

static void on_png_error(png_structp png, png_const_charp msg) {
    pc_tool_grid *g = png_get_error_ptr(png);
    snprintf(g->png_error, sizeof g->png_error, "%s", msg);
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static void on_png_write(png_structp png, png_bytep bytes, size_t n) {
    pc_tool_grid *g = png_get_io_ptr(png);
    if (g->io_status == PC_OK) g->io_status = pc_file_writer_write(g->out, bytes, n);
}

static void on_png_flush(png_structp png) { (void)png; }

static pc_status png_failed(const pc_tool_grid *g) {
    return pc_tool_fail(PC_ERR_IO, "PNG: %s", g->png_error);
}

/* A band with its lines drawn and blank (line-coloured) panels. */
static void clear_band(pc_tool_grid *g) {
    const int64_t pixels = (int64_t)(GAP + g->side * g->scale) * g->width;
    for (int64_t i = 0; i < pixels; i++) memcpy(g->band + 3 * i, line_rgb, 3);
}

pc_status pc_tool_grid_open(pc_file_writer *out, int32_t side, int32_t levels, int64_t cols,
                            int64_t rows, pc_tool_grid **gp) {
    *gp = NULL;
    if (side < 1 || levels < 1 || cols < 1 || rows < 1)
        return pc_tool_fail(PC_ERR_ARG, "PNG grid: side %d, levels %d, %lld x %lld panels",
                            side, levels, (long long)cols, (long long)rows);
    int64_t width, height;
    if (side > PNG_MAX_SIDE || cols > PNG_MAX_SIDE || rows > PNG_MAX_SIDE) width = height = -1;
    else pc_tool_grid_size(side, cols, rows, &width, &height);
    if (width < 0 || width > PNG_MAX_SIDE || height > PNG_MAX_SIDE)
        return pc_tool_fail(PC_ERR_ARG, "a PNG of %lld x %lld panels of %d x %d would be larger "
                                        "than libpng's %d pixels a side: write .npy, or fewer "
                                        "images", (long long)cols, (long long)rows, side, side,
                            PNG_MAX_SIDE);
    pc_tool_grid *g = calloc(1, sizeof *g);
    if (!g) return pc_tool_fail(PC_ERR_NOMEM, "PNG grid: out of memory");
    g->out = out;
    g->side = side;
    g->scale = scale_for(side);
    g->levels = levels;
    g->cols = cols;
    g->rows = rows;
    g->width = width;
    g->height = height;
    g->band = malloc((size_t)(GAP + side * g->scale) * (size_t)width * 3);
    if (g->band) g->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, g, on_png_error,
                                                  on_png_warning);
    if (g->png) g->info = png_create_info_struct(g->png);
    if (!g->info) {
        pc_tool_grid_free(g);
        return pc_tool_fail(PC_ERR_NOMEM, "PNG grid: out of memory for %lld x %lld pixels",
                            (long long)width, (long long)height);
    }
    if (setjmp(png_jmpbuf(g->png))) {
        pc_status st = png_failed(g);
        pc_tool_grid_free(g);
        return st;
    }
    png_set_write_fn(g->png, g, on_png_write, on_png_flush);
    png_set_IHDR(g->png, g->info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(g->png, g->info);
    clear_band(g);
    *gp = g;
    return PC_OK;
}

/* The RGB of one value: gray, hidden (flat blue) or filled in (gray tinted blue). */
static void shade(const pc_tool_grid *g, const pc_tool_panel *p, int64_t i, uint8_t rgb[3]) {
    const int miss = p->missing && p->missing[i] && p->style != PC_TOOL_PANEL_PLAIN;
    double level = p->values ? (double)p->values[i] : (double)p->means[i];
    if (miss && p->style == PC_TOOL_PANEL_EVIDENCE) level = NAN;
    if (isnan(level)) {
        memcpy(rgb, hidden_rgb, 3);
        return;
    }
    const double top = g->levels > 1 ? g->levels - 1 : 1;
    const double v = level <= 0 ? 0.0 : level >= top ? 255.0 : 255.0 * level / top;
    if (miss) {
        rgb[0] = (uint8_t)(0.75 * v + 0.5);
        rgb[1] = (uint8_t)(0.85 * v + 10.5);
        rgb[2] = (uint8_t)(0.80 * v + 51.5);
    } else {
        rgb[0] = rgb[1] = rgb[2] = (uint8_t)(v + 0.5);
    }
}

static pc_status write_band(pc_tool_grid *g, int64_t lines) {
    if (setjmp(png_jmpbuf(g->png))) return png_failed(g);
    for (int64_t y = 0; y < lines; y++) png_write_row(g->png, g->band + y * g->width * 3);
    return g->io_status != PC_OK ? pc_tool_pass(g->io_status) : PC_OK;
}

pc_status pc_tool_grid_put(pc_tool_grid *g, const pc_tool_panel *p) {
    if (g->placed >= g->cols * g->rows)
        return pc_tool_fail(PC_ERR_ARG, "PNG grid: more than %lld panels",
                            (long long)(g->cols * g->rows));
    const int64_t x0 = GAP + (g->placed % g->cols) * (g->side * g->scale + GAP);
    for (int32_t r = 0; r < g->side; r++)
        for (int32_t c = 0; c < g->side; c++) {
            uint8_t rgb[3];
            shade(g, p, (int64_t)r * g->side + c, rgb);
            for (int32_t dy = 0; dy < g->scale; dy++) {
                uint8_t *px = g->band + ((GAP + r * g->scale + dy) * g->width + x0 +
                                         c * g->scale) * 3;
                for (int32_t dx = 0; dx < g->scale; dx++) memcpy(px + 3 * dx, rgb, 3);
            }
        }
    if (++g->placed % g->cols) return PC_OK;
    pc_status st = write_band(g, GAP + g->side * g->scale);
    clear_band(g);
    return st;
}

pc_status pc_tool_grid_finish(pc_tool_grid *g) {
    pc_status st = PC_OK;
    if (g->placed % g->cols) st = write_band(g, GAP + g->side * g->scale);
    g->placed = (g->placed + g->cols - 1) / g->cols * g->cols;
    clear_band(g);
    for (; st == PC_OK && g->placed < g->cols * g->rows; g->placed += g->cols)
        st = write_band(g, GAP + g->side * g->scale);
    if (st == PC_OK) st = write_band(g, GAP); /* the last line */
    if (st != PC_OK) return st;
    if (setjmp(png_jmpbuf(g->png))) return png_failed(g);
    png_write_end(g->png, g->info);
    return g->io_status != PC_OK ? pc_tool_pass(g->io_status) : PC_OK;
}

void pc_tool_grid_free(pc_tool_grid *g) {
    if (!g) return;
    if (g->png) png_destroy_write_struct(&g->png, g->info ? &g->info : NULL);
    free(g->band);
    free(g);
}
