/* Compiles a validated HCLT into layers of node groups (pc/circuit.h).
 *
 * One group per latent: the root's and one per variable with a trans row. A variable without
 * one joins the group of its parent's latent. Group height = 0 for groups without children,
 * else 1 + the largest child height; sorting by height puts children before parents and the
 * root alone in the last layer. Within a layer, groups keep breadth-first order.
 *
 * Also a circuit's copy with more states per latent, the added ones of zero probability. */
#include "pc/circuit.h"
#include "base/fail.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void pc_circuit_free(pc_circuit *c) {
    if (!c) return;
    free(c->layer_start);
    free(c->group_parent);
    free(c->group_trans);
    free(c->var_start);
    free(c->group_vars);
    free(c->child_start);
    free(c->group_children);
    free(c->root_logw);
    free(c->trans_logw);
    free(c->input_logp);
    free(c);
}

/* Scratch arrays of the compiler, all [V] or [G] int32. */
typedef struct work {
    int32_t *kid_start, *kids;  /* CSR children of each variable, [V + 1] and [V] */
    int32_t *order;             /* [V] variables in breadth-first order from the root */
    int32_t *owner;             /* [V] the variable owning each variable's latent */
    int32_t *group_of_owner;    /* [V] provisional group id of an owner variable, else -1 */
    int32_t *height;            /* [G] by provisional id */
    int32_t *rank;              /* [G] final position of each provisional group */
    int32_t *owner_of_group;    /* [G] owner variable of each provisional group */
} work;

static void work_free(work *w) {
    free(w->kid_start), free(w->kids), free(w->order), free(w->owner);
    free(w->group_of_owner), free(w->height), free(w->rank), free(w->owner_of_group);
}

static int alloc_all(pc_circuit *c, work *w, int32_t V, int32_t G, int64_t K, int64_t C,
                     int64_t T) {
    w->kid_start = calloc((size_t)V + 1, sizeof(int32_t));
    w->kids = malloc((size_t)V * sizeof(int32_t));
    w->order = malloc((size_t)V * sizeof(int32_t));
    w->owner = malloc((size_t)V * sizeof(int32_t));
    w->group_of_owner = malloc((size_t)V * sizeof(int32_t));
    w->height = calloc((size_t)G, sizeof(int32_t));
    w->rank = malloc((size_t)G * sizeof(int32_t));
    w->owner_of_group = malloc((size_t)G * sizeof(int32_t));
    c->layer_start = malloc(((size_t)G + 1) * sizeof(int32_t));
    c->group_parent = malloc((size_t)G * sizeof(int32_t));
    c->group_trans = malloc((size_t)G * sizeof(int32_t));
    c->var_start = calloc((size_t)G + 1, sizeof(int32_t));
    c->group_vars = malloc((size_t)V * sizeof(int32_t));
    c->child_start = calloc((size_t)G + 1, sizeof(int32_t));
    c->group_children = malloc((size_t)G * sizeof(int32_t)); /* G - 1 used; never size 0 */
    c->root_logw = malloc((size_t)K * sizeof(double));
    c->trans_logw = malloc((size_t)(T > 0 ? T * K * K : 1) * sizeof(double));
    c->input_logp = malloc((size_t)V * K * C * sizeof(double));
    return w->kid_start && w->kids && w->order && w->owner && w->group_of_owner && w->height &&
           w->rank && w->owner_of_group && c->layer_start && c->group_parent && c->group_trans &&
           c->var_start && c->group_vars && c->child_start && c->group_children && c->root_logw &&
           c->trans_logw && c->input_logp;
}

pc_status pc_circuit_compile(const pc_hclt *m, pc_circuit **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_circuit_compile: out is NULL");
    *out = NULL;
    pc_status st = pc_hclt_validate(m, "pc_circuit_compile");
    if (st != PC_OK) return st;
    const int32_t V = m->num_vars, G = 1 + m->num_trans;
    const int64_t K = m->num_latents, C = m->num_cats, T = m->num_trans;
    pc_circuit *c = calloc(1, sizeof *c);
    work w;
    memset(&w, 0, sizeof w);
    if (!c || !alloc_all(c, &w, V, G, K, C, T)) {
        work_free(&w);
        pc_circuit_free(c);
        return pc_fail(PC_ERR_NOMEM, "pc_circuit_compile: out of memory (V = %d, K = %lld)", V,
                       (long long)K);
    }
    c->num_vars = V, c->num_cats = (int32_t)C, c->num_latents = (int32_t)K;
    c->num_groups = G, c->num_trans = (int32_t)T;

    /* Children of each variable (CSR) and the breadth-first order from the root. */
    int32_t root = -1;
    for (int32_t v = 0; v < V; v++) {
        if (m->parent[v] < 0) root = v;
        else w.kid_start[m->parent[v] + 1]++;
    }
    for (int32_t v = 0; v < V; v++) w.kid_start[v + 1] += w.kid_start[v];
    for (int32_t v = 0; v < V; v++) w.order[v] = w.kid_start[v]; /* fill cursor */
    for (int32_t v = 0; v < V; v++)
        if (m->parent[v] >= 0) w.kids[w.order[m->parent[v]]++] = v;
    int32_t head = 0, tail = 0;
    w.order[tail++] = root;
    while (head < tail) {
        int32_t v = w.order[head++];
        for (int32_t i = w.kid_start[v]; i < w.kid_start[v + 1]; i++) w.order[tail++] = w.kids[i];
    }

    /* Owners and provisional group ids (in breadth-first order, root = 0). */
    int32_t ng = 0;
    for (int32_t i = 0; i < V; i++) {
        int32_t v = w.order[i];
        w.group_of_owner[v] = -1;
        if (v == root || m->trans_index[v] >= 0) {
            w.owner[v] = v;
            w.group_of_owner[v] = ng;
            w.owner_of_group[ng++] = v;
        } else {
            w.owner[v] = w.owner[m->parent[v]];
        }
    }
    /* Heights, children first (reverse breadth-first order). */
    for (int32_t i = V - 1; i > 0; i--) {
        int32_t v = w.order[i];
        if (w.owner[v] != v) continue;
        int32_t g = w.group_of_owner[v], pg = w.group_of_owner[w.owner[m->parent[v]]];
        if (w.height[g] + 1 > w.height[pg]) w.height[pg] = w.height[g] + 1;
    }
    /* Final order: a stable counting sort of the provisional ids by height (within a height,
     * breadth-first order); rank = final id. group_parent holds the sorted ids until the loop
     * below replaces each entry, after reading it, with the parent's final id. */
    int32_t *sorted = c->group_parent;
    int32_t *count = c->var_start;     /* [G + 1], zeroed; rewritten below */
    for (int32_t g = 0; g < G; g++) count[w.height[g] + 1]++;
    for (int32_t h = 0; h < G; h++) count[h + 1] += count[h];
    for (int32_t g = 0; g < G; g++) sorted[count[w.height[g]]++] = g;
    memset(count, 0, ((size_t)G + 1) * sizeof *count);
    for (int32_t i = 0; i < G; i++) w.rank[sorted[i]] = i;
    int32_t nl = 0;
    for (int32_t i = 0; i < G; i++)
        if (i == 0 || w.height[sorted[i]] != w.height[sorted[i - 1]]) c->layer_start[nl++] = i;
    c->layer_start[nl] = G;
    c->num_layers = nl;
    for (int32_t i = 0; i < G; i++) {
        int32_t v = w.owner_of_group[sorted[i]];
        c->group_trans[i] = m->trans_index[v];
        c->group_parent[i] = v == root ? -1 : w.rank[w.group_of_owner[w.owner[m->parent[v]]]];
    }
    /* The root's group is the highest: it must be last. */
    if (c->group_parent[G - 1] != -1) {
        work_free(&w);
        pc_circuit_free(c);
        return pc_fail(PC_ERR_INTERNAL, "pc_circuit_compile: the root group is not last");
    }
    /* CSR vars (owner first: breadth-first order visits the owner before its sharers) and
     * children. */
    for (int32_t v = 0; v < V; v++) c->var_start[w.rank[w.group_of_owner[w.owner[v]]] + 1]++;
    for (int32_t g = 0; g < G - 1; g++) c->child_start[c->group_parent[g] + 1]++;
    for (int32_t g = 0; g < G; g++) {
        c->var_start[g + 1] += c->var_start[g];
        c->child_start[g + 1] += c->child_start[g];
    }
    int32_t *cursor = w.height; /* heights are no longer needed: reuse as a fill cursor */
    for (int32_t g = 0; g < G; g++) cursor[g] = c->var_start[g];
    for (int32_t i = 0; i < V; i++) {
        int32_t v = w.order[i], g = w.rank[w.group_of_owner[w.owner[v]]];
        c->group_vars[cursor[g]++] = v;
    }
    for (int32_t g = 0; g < G; g++) cursor[g] = c->child_start[g];
    for (int32_t g = 0; g < G - 1; g++) c->group_children[cursor[c->group_parent[g]]++] = g;

    memcpy(c->root_logw, m->root_logw, (size_t)K * sizeof(double));
    if (T > 0) memcpy(c->trans_logw, m->trans_logw, (size_t)(T * K * K) * sizeof(double));
    memcpy(c->input_logp, m->input_logp, (size_t)(V * K * C) * sizeof(double));
    work_free(&w);
    *out = c;
    return PC_OK;
}

static int32_t *copy_ints(const int32_t *src, size_t n) {
    int32_t *dst = malloc((n > 0 ? n : 1) * sizeof *dst);
    if (dst && n > 0) memcpy(dst, src, n * sizeof *dst);
    return dst;
}

pc_status pc_circuit_pad_latents(const pc_circuit *c, int32_t num_latents, pc_circuit **out) {
    if (!out) return pc_fail(PC_ERR_ARG, "pc_circuit_pad_latents: out is NULL");
    *out = NULL;
    if (!c || num_latents < c->num_latents)
        return pc_fail(PC_ERR_ARG,
                       "pc_circuit_pad_latents: %d states is fewer than the circuit's %d",
                       num_latents, c ? c->num_latents : 0);
    const size_t V = (size_t)c->num_vars, G = (size_t)c->num_groups, C = (size_t)c->num_cats;
    const size_t T = (size_t)c->num_trans, K = (size_t)c->num_latents, K2 = (size_t)num_latents;
    pc_circuit *p = calloc(1, sizeof *p);
    if (!p) return pc_fail(PC_ERR_NOMEM, "pc_circuit_pad_latents: out of memory");
    *p = *c;
    p->num_latents = num_latents;
    p->layer_start = copy_ints(c->layer_start, (size_t)c->num_layers + 1);
    p->group_parent = copy_ints(c->group_parent, G);
    p->group_trans = copy_ints(c->group_trans, G);
    p->var_start = copy_ints(c->var_start, G + 1);
    p->group_vars = copy_ints(c->group_vars, V);
    p->child_start = copy_ints(c->child_start, G + 1);
    p->group_children = copy_ints(c->group_children, G);
    p->root_logw = malloc(K2 * sizeof(double));
    p->trans_logw = malloc((T > 0 ? T * K2 * K2 : 1) * sizeof(double));
    p->input_logp = malloc(V * K2 * C * sizeof(double));
    if (!p->layer_start || !p->group_parent || !p->group_trans || !p->var_start ||
        !p->group_vars || !p->child_start || !p->group_children || !p->root_logw ||
        !p->trans_logw || !p->input_logp) {
        pc_circuit_free(p);
        return pc_fail(PC_ERR_NOMEM, "pc_circuit_pad_latents: out of memory (V = %zu, K = %zu)",
                       V, K2);
    }
    for (size_t k = 0; k < K2; k++) p->root_logw[k] = k < K ? c->root_logw[k] : -INFINITY;
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < K2; j++)
            for (size_t k = 0; k < K2; k++)
                p->trans_logw[(t * K2 + j) * K2 + k] =
                    j < K && k < K ? c->trans_logw[(t * K + j) * K + k] : -INFINITY;
    for (size_t v = 0; v < V; v++)
        for (size_t k = 0; k < K2; k++)
            for (size_t x = 0; x < C; x++)
                p->input_logp[(v * K2 + k) * C + x] =
                    k < K ? c->input_logp[(v * K + k) * C + x] : -INFINITY;
    *out = p;
    return PC_OK;
}
