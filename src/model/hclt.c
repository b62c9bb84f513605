/* HCLT models in memory: allocation and the validity rules of HCLT_FORMAT v1 (docs/format.md). */
#include "pc/hclt.h"
#include "base/fail.h"
#include "base/parallel.h"
#include "base/size_check.h"
#include "model/hclt_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

/* Normalised means |LSE over the last axis| <= this (natural log). */
#define PC_HCLT_NORM_TOL 1e-3

int64_t pc_hclt_model_bytes(int64_t V, int64_t C, int64_t K, int64_t T) {
    const int64_t in[3] = {V, K, C}, tr[3] = {T, K, K};
    int64_t n_in, n_tr, params, bytes;
    if (pc_size_product(in, 3, &n_in) && pc_size_product(tr, 3, &n_tr) &&
        pc_size_add(n_in, n_tr, &params) && pc_size_add(params, K, &params) &&
        pc_size_add(params, V, &params) && pc_size_mul(params, 8, &bytes))
        return bytes;
    return INT64_MAX;
}

pc_status pc_hclt_check_size(int64_t V, int64_t C, int64_t K, int64_t T, int64_t max_bytes,
                             const char *name, pc_status status) {
    int64_t bytes = pc_hclt_model_bytes(V, C, K, T);
    if (bytes <= max_bytes) return PC_OK;
    char need[64], most[64];
    return pc_fail(status,
                   "%s: num_vars = %lld, num_cats = %lld, num_latents = %lld and %lld transition "
                   "rows need %s of memory; at most %s are accepted",
                   name, (long long)V, (long long)C, (long long)K, (long long)T,
                   pc_bytes_text(bytes, need, sizeof need),
                   pc_bytes_text(max_bytes, most, sizeof most));
}

pc_status pc_hclt_create(int32_t num_vars, int32_t num_cats, int32_t num_latents,
                         int32_t num_trans, pc_hclt **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_hclt_create: out is NULL");
    *out = NULL;
    if (num_vars < 1 || num_cats < 2 || num_latents < 1 || num_trans < 0)
        return pc_fail(PC_ERR_ARG,
                       "pc_hclt_create: sizes V = %d, C = %d, K = %d, T = %d (need V >= 1, "
                       "C >= 2, K >= 1, T >= 0)",
                       num_vars, num_cats, num_latents, num_trans);
    pc_status st = pc_hclt_check_size(num_vars, num_cats, num_latents, num_trans,
                                      PC_HCLT_MAX_BYTES, "pc_hclt_create", PC_ERR_ARG);
    if (st != PC_OK) return st;
    /* Below PC_HCLT_MAX_BYTES every product fits in size_t. */
    const size_t n_in = (size_t)num_vars * (size_t)num_latents * (size_t)num_cats;
    const size_t n_tr = (size_t)num_trans * (size_t)num_latents * (size_t)num_latents;
    pc_hclt *m = calloc(1, sizeof *m);
    if (!m) return pc_fail(PC_ERR_NOMEM, "pc_hclt_create: out of memory");
    m->num_vars = num_vars;
    m->num_cats = num_cats;
    m->num_latents = num_latents;
    m->num_trans = num_trans;
    m->parent = malloc((size_t)num_vars * sizeof *m->parent);
    m->trans_index = malloc((size_t)num_vars * sizeof *m->trans_index);
    m->root_logw = calloc((size_t)num_latents, sizeof *m->root_logw);
    /* calloc(0) may return NULL; allocate at least one element so NULL always means failure. */
    m->trans_logw = calloc(n_tr > 0 ? n_tr : 1, sizeof *m->trans_logw);
    m->input_logp = calloc(n_in, sizeof *m->input_logp);
    if (!m->parent || !m->trans_index || !m->root_logw || !m->trans_logw || !m->input_logp) {
        pc_hclt_free(m);
        return pc_fail(PC_ERR_NOMEM, "pc_hclt_create: out of memory for V = %d, C = %d, K = %d",
                       num_vars, num_cats, num_latents);
    }
    for (int32_t v = 0; v < num_vars; v++) m->parent[v] = m->trans_index[v] = -1;
    *out = m;
    return PC_OK;
}

void pc_hclt_free(pc_hclt *model) {
    if (!model) return;
    free(model->parent);
    free(model->trans_index);
    free(model->root_logw);
    free(model->trans_logw);
    free(model->input_logp);
    free(model);
}

/* "name: " or "" so every message can start with the file name when there is one. */
#define PFX(name) (name) ? (name) : "", (name) ? ": " : ""

/* LSE of a row, and in *bad the index of its first NaN or +inf element (-1: none; the LSE is
 * then not computed). */
static double row_lse(const double *row, int64_t n, int64_t *bad) {
    double max = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(row[i]) || row[i] == INFINITY) {
            *bad = i;
            return NAN;
        }
        if (row[i] > max) max = row[i];
    }
    *bad = -1;
    double sum = 0.0;
    if (max > -INFINITY)
        for (int64_t i = 0; i < n; i++) sum += exp(row[i] - max);
    return max > -INFINITY ? max + log(sum) : -INFINITY;
}

static int row_ok(const double *row, int64_t n) {
    int64_t bad;
    const double lse = row_lse(row, n, &bad);
    return bad < 0 && fabs(lse) <= PC_HCLT_NORM_TOL;
}

/* Checks that every element of a row is neither NaN nor +inf and that LSE(row) = 0 within the
 * tolerance. `field` and the index text name the row in the message. */
static pc_status check_row(const double *row, int64_t n, const char *name, const char *field,
                           const char *index) {
    int64_t bad;
    const double lse = row_lse(row, n, &bad);
    if (bad >= 0)
        return pc_fail(PC_ERR_MODEL, "%s%s%s[%s%s%lld] is %s, not a log-probability", PFX(name),
                       field, index, *index ? ", " : "", (long long)bad,
                       isnan(row[bad]) ? "NaN" : "+inf");
    if (!(fabs(lse) <= PC_HCLT_NORM_TOL))
        return pc_fail(PC_ERR_MODEL, "%s%s%s[%s%s:] sums to %.6g, not 1", PFX(name), field, index,
                       *index ? ", " : "", lse > -INFINITY ? exp(lse) : 0.0);
    return PC_OK;
}

/* The transition rows [T * K] of K values, then the input rows [V * K] of C values, as one
 * list: row r's values and length. */
static const double *table_row(const pc_hclt *m, int64_t r, int64_t *n) {
    const int64_t K = m->num_latents, trans = (int64_t)m->num_trans * K;
    if (r < trans) {
        *n = K;
        return m->trans_logw + r * K;
    }
    *n = m->num_cats;
    return m->input_logp + (r - trans) * m->num_cats;
}

typedef struct row_scan {
    const pc_hclt *m;
    atomic_llong first_bad; /* the lowest failing row so far, or the row count */
} row_scan;

static void scan_rows(void *ctx, int64_t lo, int64_t hi) {
    row_scan *s = ctx;
    for (int64_t r = lo; r < hi && r < atomic_load(&s->first_bad); r++) {
        int64_t n;
        const double *row = table_row(s->m, r, &n);
        if (row_ok(row, n)) continue;
        long long seen = atomic_load(&s->first_bad);
        while (r < seen && !atomic_compare_exchange_weak(&s->first_bad, &seen, r)) {
        }
        return;
    }
}

static pc_status check_tree(const pc_hclt *m, const char *name) {
    const int32_t V = m->num_vars;
    int32_t root = -1;
    for (int32_t v = 0; v < V; v++) {
        int32_t p = m->parent[v];
        if (p < -1 || p >= V)
            return pc_fail(PC_ERR_MODEL, "%s%s/structure/parent[%d] = %d is out of range [-1, %d)",
                           PFX(name), v, p, V);
        if (p == v)
            return pc_fail(PC_ERR_MODEL,
                           "%s%s/structure/parent[%d] = %d: a variable is its own parent",
                           PFX(name), v, p);
        if (p == -1) {
            if (root >= 0)
                return pc_fail(PC_ERR_MODEL,
                               "%s%s/structure/parent has more than one root: variables %d and %d",
                               PFX(name), root, v);
            root = v;
        }
    }
    if (root < 0)
        return pc_fail(PC_ERR_MODEL, "%s%s/structure/parent has no root (no entry is -1)",
                       PFX(name));

    /* Walk up from every variable; state 0 = unseen, 1 = on the current walk, 2 = reaches the
     * root. Meeting a 1 again means a cycle. Each variable is walked over once: O(V). */
    uint8_t *state = calloc((size_t)V, 1);
    if (!state) return pc_fail(PC_ERR_NOMEM, "%s%sout of memory checking the tree", PFX(name));
    pc_status st = PC_OK;
    state[root] = 2;
    for (int32_t v = 0; v < V && st == PC_OK; v++) {
        int32_t u = v;
        while (state[u] == 0) {
            state[u] = 1;
            u = m->parent[u];
        }
        if (state[u] == 1) {
            st = pc_fail(PC_ERR_MODEL,
                         "%s%s/structure/parent has a cycle through variable %d (it never reaches "
                         "the root %d)",
                         PFX(name), u, root);
            break;
        }
        for (u = v; state[u] == 1; u = m->parent[u]) state[u] = 2;
    }
    free(state);
    if (st != PC_OK) return st;

    if (m->trans_index[root] != -1)
        return pc_fail(PC_ERR_MODEL,
                       "%s%s/structure/trans_index[%d] = %d, but the root must have -1",
                       PFX(name), root, m->trans_index[root]);
    int32_t *user = malloc((size_t)(m->num_trans > 0 ? m->num_trans : 1) * sizeof *user);
    if (!user) return pc_fail(PC_ERR_NOMEM, "%s%sout of memory checking trans_index", PFX(name));
    for (int32_t t = 0; t < m->num_trans; t++) user[t] = -1;
    for (int32_t v = 0; v < V && st == PC_OK; v++) {
        int32_t t = m->trans_index[v];
        if (t < -1 || t >= m->num_trans)
            st = pc_fail(PC_ERR_MODEL,
                         "%s%s/structure/trans_index[%d] = %d is out of range [-1, %d)",
                         PFX(name), v, t, m->num_trans);
        else if (t >= 0 && user[t] >= 0)
            st = pc_fail(PC_ERR_MODEL,
                         "%s%s/structure/trans_index: row %d is used twice (variables %d and %d)",
                         PFX(name), t, user[t], v);
        else if (t >= 0)
            user[t] = v;
    }
    for (int32_t t = 0; t < m->num_trans && st == PC_OK; t++)
        if (user[t] < 0)
            st = pc_fail(PC_ERR_MODEL,
                         "%s%s/structure/trans_index: row %d of /params/trans_logw is used by no "
                         "variable (%d rows)",
                         PFX(name), t, m->num_trans);
    free(user);
    return st;
}

pc_status pc_hclt_validate(const pc_hclt *m, const char *name) {
    if (!m) return pc_fail(PC_ERR_ARG, "pc_hclt_validate: model is NULL");
    if (m->num_vars < 1 || m->num_cats < 2 || m->num_latents < 1 || m->num_trans < 0)
        return pc_fail(PC_ERR_MODEL,
                       "%s%ssizes V = %d, C = %d, K = %d, T = %d (need V >= 1, C >= 2, K >= 1, "
                       "T >= 0)",
                       PFX(name), m->num_vars, m->num_cats, m->num_latents, m->num_trans);
    if (!m->parent || !m->trans_index || !m->root_logw || !m->trans_logw || !m->input_logp)
        return pc_fail(PC_ERR_ARG, "pc_hclt_validate: the model has a NULL array");
    pc_status st = check_tree(m, name);
    if (st != PC_OK) return st;

    const int64_t K = m->num_latents, trans = (int64_t)m->num_trans * K;
    const int64_t rows = trans + (int64_t)m->num_vars * K;
    if ((st = check_row(m->root_logw, K, name, "/params/root_logw", "")) != PC_OK) return st;
    /* Every row on every usable CPU (one exp per parameter: 0.41 s for a K = 256 model on one
     * thread, 0.20 s on two), then the first failing row again for its message, as a scan in
     * order finds. */
    row_scan scan = {.m = m};
    atomic_init(&scan.first_bad, rows);
    pc_parallel_for(rows, 4096, scan_rows, &scan);
    const int64_t r = atomic_load(&scan.first_bad);
    if (r >= rows) return PC_OK;
    char index[64];
    int64_t n;
    const double *row = table_row(m, r, &n);
    const int64_t within = r < trans ? r : r - trans; /* (t, j) or (v, k) as t * K + j */
    snprintf(index, sizeof index, "%lld, %lld", (long long)(within / K), (long long)(within % K));
    return check_row(row, n, name, r < trans ? "/params/trans_logw" : "/params/input_logp", index);
}
