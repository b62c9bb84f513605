/* Chow-Liu tree over the mutual information, rooted at a centre, and the HCLT built on it.
 *
 * Prim's algorithm on the dense V x V matrix is O(V^2) time, O(V) extra memory; the centre is
 * found by a breadth-first search from every vertex (O(V^2) for a tree), which keeps the rule
 * "least eccentricity, then lowest index" plain to check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/fail.h"
#include "learn/learn_internal.h"
#include "pc/learn.h"

/* Maximum spanning tree: link[v] = the tree neighbour through which v joined (-1 for vertex 0). */
static void prim(int32_t n, const double *mi, int32_t *link, double *best, uint8_t *in_tree) {
    for (int32_t v = 0; v < n; v++) {
        in_tree[v] = 0;
        best[v] = -INFINITY;
        link[v] = -1;
    }
    int32_t next = 0;
    for (int32_t step = 0; step < n; step++) {
        int32_t u = next;
        in_tree[u] = 1;
        next = -1;
        for (int32_t v = 0; v < n; v++) {
            if (in_tree[v]) continue;
            double w = mi[(int64_t)u * n + v];
            if (link[v] < 0 || w > best[v]) { /* the first link counts even at -inf */
                best[v] = w;
                link[v] = u;
            }
            if (next < 0 || best[v] > best[next]) next = v;
        }
    }
}

/* Breadth-first search over the tree in CSR form (adj_start [n+1], adj [2(n-1)]) from `src`:
 * fills order [n] (visit order) and, if parent is not NULL, parent [n]; returns the
 * eccentricity of src (the depth of the last vertex visited). */
static int32_t bfs(int32_t n, const int32_t *adj_start, const int32_t *adj, int32_t src,
                   int32_t *order, int32_t *depth, int32_t *parent) {
    for (int32_t v = 0; v < n; v++) depth[v] = -1;
    int32_t head = 0, tail = 0;
    order[tail++] = src;
    depth[src] = 0;
    if (parent) parent[src] = -1;
    while (head < tail) {
        int32_t u = order[head++];
        for (int32_t e = adj_start[u]; e < adj_start[u + 1]; e++) {
            int32_t v = adj[e];
            if (depth[v] >= 0) continue;
            depth[v] = depth[u] + 1;
            if (parent) parent[v] = u;
            order[tail++] = v;
        }
    }
    return depth[order[tail - 1]];
}

pc_status pc_learn_chow_liu(int32_t num_vars, const double *mi, int32_t *parent) {
    if (!mi || !parent) return pc_fail(PC_ERR_ARG, "Chow-Liu: NULL argument");
    if (num_vars < 1) return pc_fail(PC_ERR_ARG, "Chow-Liu: num_vars = %d is not >= 1", num_vars);
    const int32_t n = num_vars;
    for (int64_t i = 0; i < (int64_t)n * n; i++)
        if (isnan(mi[i]))
            return pc_fail(PC_ERR_ARG, "Chow-Liu: mi[%lld, %lld] is NaN", (long long)(i / n),
                           (long long)(i % n));

    int32_t *link = malloc((size_t)n * sizeof *link);
    int32_t *adj_start = calloc((size_t)n + 1, sizeof *adj_start);
    int32_t *adj = malloc((size_t)(2 * n) * sizeof *adj);
    int32_t *fill = malloc((size_t)n * sizeof *fill);
    int32_t *order = malloc((size_t)n * sizeof *order);
    int32_t *depth = malloc((size_t)n * sizeof *depth);
    double *best = malloc((size_t)n * sizeof *best);
    uint8_t *in_tree = malloc((size_t)n);
    pc_status st = PC_OK;
    if (!link || !adj_start || !adj || !fill || !order || !depth || !best || !in_tree) {
        st = pc_fail(PC_ERR_NOMEM, "Chow-Liu: buffers for %d variables", n);
        goto fail;
    }
    prim(n, mi, link, best, in_tree);

    /* undirected adjacency in CSR form */
    for (int32_t v = 0; v < n; v++)
        if (link[v] >= 0) {
            adj_start[v + 1]++;
            adj_start[link[v] + 1]++;
        }
    for (int32_t v = 0; v < n; v++) {
        adj_start[v + 1] += adj_start[v];
        fill[v] = adj_start[v];
    }
    for (int32_t v = 0; v < n; v++)
        if (link[v] >= 0) {
            adj[fill[v]++] = link[v];
            adj[fill[link[v]]++] = v;
        }

    int32_t root = 0, root_ecc = INT32_MAX;
    for (int32_t v = 0; v < n; v++) {
        int32_t ecc = bfs(n, adj_start, adj, v, order, depth, NULL);
        if (ecc < root_ecc) {
            root_ecc = ecc;
            root = v;
        }
    }
    bfs(n, adj_start, adj, root, order, depth, parent);
fail:
    free(link);
    free(adj_start);
    free(adj);
    free(fill);
    free(order);
    free(depth);
    free(best);
    free(in_tree);
    return st;
}

pc_status pc_learn_hclt_create(int32_t num_vars, const int32_t *parent, int32_t num_cats,
                               int32_t num_latents, pc_hclt **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "HCLT structure: NULL output");
    *out = NULL;
    if (!parent) return pc_fail(PC_ERR_ARG, "HCLT structure: NULL parent array");
    if (num_vars < 1 || num_cats < 2 || num_latents < 1)
        return pc_fail(PC_ERR_ARG,
                       "HCLT structure: V = %d, C = %d, K = %d (need V >= 1, C >= 2, K >= 1)",
                       num_vars, num_cats, num_latents);
    int32_t *children = calloc((size_t)num_vars, sizeof *children);
    if (!children) return pc_fail(PC_ERR_NOMEM, "HCLT structure: %d child counts", num_vars);
    int32_t roots = 0;
    for (int32_t v = 0; v < num_vars; v++) {
        if (parent[v] == -1) {
            roots++;
        } else if (parent[v] < 0 || parent[v] >= num_vars || parent[v] == v) {
            free(children);
            return pc_fail(PC_ERR_ARG, "HCLT structure: parent[%d] = %d is out of range", v,
                           parent[v]);
        } else {
            children[parent[v]]++;
        }
    }
    if (roots != 1) {
        free(children);
        return pc_fail(PC_ERR_ARG, "HCLT structure: %d roots, need exactly one", roots);
    }
    int32_t num_trans = 0;
    for (int32_t v = 0; v < num_vars; v++)
        if (parent[v] >= 0 && children[v] > 0) num_trans++;

    char what[128];
    snprintf(what, sizeof what, "an HCLT with V = %d, C = %d, K = %d, T = %d", num_vars, num_cats,
             num_latents, num_trans);
    pc_status st = pc_learn_check_memory(8.0 * ((double)num_trans * num_latents * num_latents +
                                                (double)num_vars * num_latents * num_cats),
                                         what);
    if (st != PC_OK) {
        free(children);
        return st;
    }
    pc_hclt *m = NULL;
    st = pc_hclt_create(num_vars, num_cats, num_latents, num_trans, &m);
    if (st != PC_OK) {
        free(children);
        return st;
    }
    int32_t t = 0;
    for (int32_t v = 0; v < num_vars; v++) {
        m->parent[v] = parent[v];
        m->trans_index[v] = (parent[v] >= 0 && children[v] > 0) ? t++ : -1;
    }
    free(children);
    const int64_t k = num_latents;
    for (int64_t i = 0; i < k; i++) m->root_logw[i] = -log((double)k);
    for (int64_t i = 0; i < (int64_t)num_trans * k * k; i++) m->trans_logw[i] = -log((double)k);
    for (int64_t i = 0; i < (int64_t)num_vars * k * num_cats; i++)
        m->input_logp[i] = -log((double)num_cats);
    st = pc_hclt_validate(m, "learned structure"); /* catches a cycle in parent */
    if (st != PC_OK) {
        pc_hclt_free(m);
        return st;
    }
    *out = m;
    return PC_OK;
}
