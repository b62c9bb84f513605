/* .npy headers and the streaming uint8 reader (npy.h). Nothing is allocated from a header's
 * claims but the header itself (at most 1 MiB): rows go into the caller's buffer. */
#include "npy.h"
#include "tool_error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_HEADER (1 << 20)
#define NPY_MAX_SIZE ((int64_t)1 << 62)

/* A cursor over the dict text; errors name the file and the offset. */
typedef struct cursor {
    const char *text, *path;
    size_t len, at;
} cursor;

static pc_status bad(const cursor *c, const char *what) {
    return pc_tool_fail(PC_ERR_DATA, "%s: .npy header: %s at offset %zu of its dict", c->path,
                        what, c->at);
}

static void skip_space(cursor *c) {
    while (c->at < c->len && (c->text[c->at] == ' ' || c->text[c->at] == '\t' ||
                              c->text[c->at] == '\n' || c->text[c->at] == '\r'))
        c->at++;
}

/* Consumes ch after optional spaces; 1 if it was there. */
static int take(cursor *c, char ch) {
    skip_space(c);
    if (c->at < c->len && c->text[c->at] == ch) {
        c->at++;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes ('...' or "...") into out[cap]. */
static pc_status quoted(cursor *c, char *out, size_t cap) {
    skip_space(c);
    if (c->at >= c->len || (c->text[c->at] != '\'' && c->text[c->at] != '"'))
        return bad(c, "expected a quoted string");
    const char q = c->text[c->at++];
    size_t n = 0;
    while (c->at < c->len && c->text[c->at] != q) {
        if (c->text[c->at] == '\\' || n + 1 >= cap) return bad(c, "unexpected string");
        out[n++] = c->text[c->at++];
    }
    if (c->at >= c->len) return bad(c, "unterminated string");
    c->at++;
    out[n] = '\0';
    return PC_OK;
}

/* Consumes the word w after optional spaces; 1 if it was there. */
static int word(cursor *c, const char *w) {
    skip_space(c);
    size_t n = strlen(w);
    if (c->len - c->at < n || memcmp(c->text + c->at, w, n)) return 0;
    c->at += n;
    return 1;
}

static pc_status boolean(cursor *c, int *out) {
    if (word(c, "True")) *out = 1;
    else if (word(c, "False")) *out = 0;
    else return bad(c, "expected True or False");
    return PC_OK;
}

/* A tuple of sizes: (), (5,), (5, 6), with an optional Python 2 'L' after each number. */
static pc_status shape(cursor *c, pc_tool_npy_header *h) {
    if (!take(c, '(')) return bad(c, "expected '(' for the shape");
    h->ndim = 0;
    for (;;) {
        if (take(c, ')')) return PC_OK;
        if (h->ndim == PC_TOOL_NPY_MAX_DIMS) return bad(c, "more than 32 dimensions");
        skip_space(c);
        int64_t v = 0;
        size_t digits = 0;
        while (c->at < c->len && c->text[c->at] >= '0' && c->text[c->at] <= '9') {
            const int digit = c->text[c->at++] - '0';
            if (v > (NPY_MAX_SIZE - digit) / 10) return bad(c, "a size above 2^62");
            v = v * 10 + digit;
            digits++;
        }
        if (!digits) return bad(c, "expected a size");
        if (c->at < c->len && c->text[c->at] == 'L') c->at++;
        h->shape[h->ndim++] = v;
        if (!take(c, ',')) {
            if (take(c, ')')) return PC_OK;
            return bad(c, "expected ',' or ')' in the shape");
        }
    }
}

pc_status pc_tool_npy_parse(const char *text, size_t len, const char *path,
                            pc_tool_npy_header *out) {
    memset(out, 0, sizeof *out);
    cursor c = {text, path, len, 0};
    int seen_descr = 0, seen_order = 0, seen_shape = 0;
    if (!take(&c, '{')) return bad(&c, "expected '{'");
    while (!take(&c, '}')) {
        char key[32];
        pc_status st = quoted(&c, key, sizeof key); /* key is a string only when it succeeds */
        if (st != PC_OK) return st;
        if (!take(&c, ':')) return bad(&c, "expected ':'");
        int *seen = !strcmp(key, "descr")           ? &seen_descr
                    : !strcmp(key, "fortran_order") ? &seen_order
                    : !strcmp(key, "shape")         ? &seen_shape
                                                    : NULL;
        if (!seen) return bad(&c, "unknown key");
        if (*seen) return bad(&c, "a key given twice");
        *seen = 1;
        if (seen == &seen_descr) st = quoted(&c, out->descr, sizeof out->descr);
        else if (seen == &seen_order) st = boolean(&c, &out->fortran_order);
        else st = shape(&c, out);
        if (st != PC_OK) return st;
        if (!take(&c, ',')) {
            if (take(&c, '}')) break;
            return bad(&c, "expected ',' or '}'");
        }
    }
    skip_space(&c);
    if (c.at != c.len) return bad(&c, "text after the dict");
    if (!seen_descr || !seen_order || !seen_shape)
        return pc_tool_fail(PC_ERR_DATA, "%s: .npy header lacks '%s'", path,
                            !seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape");
    return PC_OK;
}

size_t pc_tool_npy_start(char *buf, size_t cap, const char *descr, const int64_t *shape,
                         int ndim) {
    char dict[64 + 24 * PC_TOOL_NPY_MAX_DIMS];
    if (ndim < 0 || ndim > PC_TOOL_NPY_MAX_DIMS) return 0;
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (int i = 0; i < ndim && n > 0 && (size_t)n < sizeof dict; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "",
                      (long long)shape[i]);
    if (n > 0 && (size_t)n < sizeof dict)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", ndim == 1 ? "," : "");
    if (n <= 0 || (size_t)n >= sizeof dict) return 0;
    /* 10 bytes before the dict; the dict, spaces and '\n' fill the rest up to 64k bytes. */
    const size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64, header = total - 10;
    if (total > cap || header > 65535) return 0;
    memcpy(buf, NPY_MAGIC "\x01\x00", 8);
    buf[8] = (char)(header & 0xff);
    buf[9] = (char)(header >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', header - (size_t)n - 1);
    buf[total - 1] = '\n';
    return total;
}

struct pc_tool_npy_reader {
    FILE *f;
    char *path;
    int64_t count, width, row; /* rows claimed, bytes per row, rows read so far */
    int ended;                 /* the end of the file has been checked */
};

/* Reads exactly n bytes; PC_ERR_DATA (truncated) or PC_ERR_IO otherwise. */
static pc_status read_exact(pc_tool_npy_reader *r, void *buf, size_t n, const char *what) {
    if (fread(buf, 1, n, r->f) == n) return PC_OK;
    if (ferror(r->f))
        return pc_tool_fail(PC_ERR_IO, "%s: cannot read: %s", r->path, strerror(errno));
    return pc_tool_fail(PC_ERR_DATA, "%s: truncated %s", r->path, what);
}

/* Magic, version and the dict; *start = bytes before the array. */
static pc_status read_header(pc_tool_npy_reader *r, pc_tool_npy_header *h, int64_t *start) {
    uint8_t head[12];
    pc_status st = read_exact(r, head, 8, ".npy header");
    if (st != PC_OK) return st;
    if (memcmp(head, NPY_MAGIC, 6))
        return pc_tool_fail(PC_ERR_DATA, "%s: not a .npy file (it does not start with "
                                         "\\x93NUMPY)", r->path);
    if (head[6] < 1 || head[6] > 3 || head[7] != 0)
        return pc_tool_fail(PC_ERR_DATA, "%s: .npy format version %d.%d (known: 1.0, 2.0, 3.0)",
                            r->path, head[6], head[7]);
    const int wide = head[6] > 1; /* 2.0 and 3.0: a uint32 length */
    st = read_exact(r, head + 8, wide ? 4 : 2, ".npy header");
    if (st != PC_OK) return st;
    uint32_t len = (uint32_t)head[8] | (uint32_t)head[9] << 8;
    if (wide) len |= (uint32_t)head[10] << 16 | (uint32_t)head[11] << 24;
    if (len > NPY_MAX_HEADER)
        return pc_tool_fail(PC_ERR_DATA, "%s: .npy header of %u bytes (at most %d are read)",
                            r->path, len, NPY_MAX_HEADER);
    char *text = malloc(len ? len : 1);
    if (!text) return pc_tool_fail(PC_ERR_NOMEM, "%s: out of memory", r->path);
    st = read_exact(r, text, len, ".npy header");
    if (st == PC_OK) st = pc_tool_npy_parse(text, len, r->path, h);
    free(text);
    *start = (wide ? 12 : 10) + (int64_t)len;
    return st;
}

/* The array must be uint8 [count, ...] in C order. */
static pc_status check_array(pc_tool_npy_reader *r, const pc_tool_npy_header *h) {
    static const char *const kinds[] = {"|u1", "<u1", ">u1", "=u1", "u1",
                                        "|b1", "<b1", ">b1", "=b1", "b1"};
    int known = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        known |= !strcmp(h->descr, kinds[i]);
    if (!known)
        return pc_tool_fail(PC_ERR_DATA, "%s: dtype '%s' is not uint8 ('|u1') or bool ('|b1')",
                            r->path, h->descr);
    if (h->fortran_order)
        return pc_tool_fail(PC_ERR_DATA, "%s: the array is in Fortran order; C order is read "
                                         "(numpy.ascontiguousarray makes it)", r->path);
    if (h->ndim < 2)
        return pc_tool_fail(PC_ERR_DATA, "%s: the array has %d dimension%s; expected [count, "
                                         "width] or more", r->path, h->ndim,
                            h->ndim == 1 ? "" : "s");
    /* The product stays below 2^62 while each factor and the running width are below 2^31. */
    int64_t width = 1;
    for (int i = 1; i < h->ndim; i++) width = h->shape[i] ? width : 0;
    for (int i = 1; i < h->ndim && width <= INT32_MAX; i++)
        width = h->shape[i] <= INT32_MAX ? width * h->shape[i] : INT64_MAX;
    if (width < 1 || width > INT32_MAX)
        return pc_tool_fail(PC_ERR_DATA, "%s: row width %s is out of range [1, 2^31)", r->path,
                            width ? "2^31 or more" : "0");
    if (h->shape[0] > INT64_MAX / width)
        return pc_tool_fail(PC_ERR_DATA, "%s: %lld rows of %lld bytes are more than 2^63 bytes",
                            r->path, (long long)h->shape[0], (long long)width);
    r->count = h->shape[0];
    r->width = width;
    return PC_OK;
}

/* A regular file holds exactly the claimed bytes after the header. */
static pc_status check_length(const pc_tool_npy_reader *r, int64_t start) {
    struct stat sb;
    if (fstat(fileno(r->f), &sb) != 0 || !S_ISREG(sb.st_mode)) return PC_OK;
    const int64_t held = (int64_t)sb.st_size - start, claimed = r->count * r->width;
    if (held < claimed)
        return pc_tool_fail(PC_ERR_DATA, "%s: truncated: the header claims %lld rows of %lld "
                                         "bytes (%lld bytes), the file holds %lld",
                            r->path, (long long)r->count, (long long)r->width,
                            (long long)claimed, (long long)held);
    if (held > claimed)
        return pc_tool_fail(PC_ERR_DATA, "%s: more data than the header's %lld bytes (%lld)",
                            r->path, (long long)claimed, (long long)held);
    return PC_OK;
}

pc_status pc_tool_npy_open(const char *path, pc_tool_npy_reader **out) {
    *out = NULL;
    pc_tool_npy_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return pc_tool_fail(PC_ERR_NOMEM, "%s: out of memory", path);
    }
    pc_status st = PC_OK;
    pc_tool_npy_header h;
    int64_t start = 0;
    if (!(r->f = fopen(path, "rbe")))
        st = pc_tool_fail(PC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (st == PC_OK) st = read_header(r, &h, &start);
    if (st == PC_OK) st = check_array(r, &h);
    if (st == PC_OK) st = check_length(r, start);
    if (st != PC_OK) {
        pc_tool_npy_close(r);
        return st;
    }
    *out = r;
    return PC_OK;
}

int64_t pc_tool_npy_count(const pc_tool_npy_reader *r) { return r ? r->count : 0; }
int32_t pc_tool_npy_width(const pc_tool_npy_reader *r) { return r ? (int32_t)r->width : 0; }

pc_status pc_tool_npy_read(pc_tool_npy_reader *r, uint8_t *values, int64_t max_rows,
                           int64_t *rows_read) {
    *rows_read = 0;
    const int64_t want = r->count - r->row < max_rows ? r->count - r->row : max_rows;
    const size_t got = want > 0 ? fread(values, (size_t)r->width, (size_t)want, r->f) : 0;
    r->row += (int64_t)got;
    if ((int64_t)got < want) {
        if (ferror(r->f))
            return pc_tool_fail(PC_ERR_IO, "%s: cannot read: %s", r->path, strerror(errno));
        return pc_tool_fail(PC_ERR_DATA, "%s: truncated: the header promises %lld rows of %lld "
                                         "bytes, the file ends in row %lld",
                            r->path, (long long)r->count, (long long)r->width,
                            (long long)r->row);
    }
    *rows_read = want;
    if (r->row == r->count && !r->ended) {
        r->ended = 1;
        if (fgetc(r->f) != EOF)
            return pc_tool_fail(PC_ERR_DATA, "%s: more data than the header's %lld rows",
                                r->path, (long long)r->count);
    }
    return PC_OK;
}

pc_status pc_tool_npy_skip(pc_tool_npy_reader *r, int64_t rows) {
    if (rows < 0) return pc_tool_fail(PC_ERR_ARG, "%s: cannot skip %lld rows", r->path,
                                      (long long)rows);
    const int64_t skip = r->count - r->row < rows ? r->count - r->row : rows;
    struct stat sb;
    if (skip <= 0) return PC_OK;
    if (fstat(fileno(r->f), &sb) == 0 && S_ISREG(sb.st_mode) &&
        fseeko(r->f, (off_t)(skip * r->width), SEEK_CUR) == 0) {
        r->row += skip;
        return PC_OK;
    }
    /* A pipe: read a block of rows at a time (at least one) and drop them. */
    const int64_t per = r->width < (1 << 16) ? (1 << 16) / r->width : 1;
    uint8_t *drop = malloc((size_t)(per * r->width));
    if (!drop) return pc_tool_fail(PC_ERR_NOMEM, "%s: out of memory", r->path);
    pc_status st = PC_OK;
    for (int64_t done = 0, got = 0; st == PC_OK && done < skip; done += got)
        st = pc_tool_npy_read(r, drop, skip - done < per ? skip - done : per, &got);
    free(drop);
    return st;
}

void pc_tool_npy_close(pc_tool_npy_reader *r) {
    if (!r) return;
    if (r->f) fclose(r->f);
    free(r->path);
    free(r);
}
