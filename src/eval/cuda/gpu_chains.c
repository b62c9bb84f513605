/* The chain plans of the fuse warp strategy (gpu_chains.h). */
#include "base/fail.h"
#include "eval/cuda/gpu_chains.h"

#include <stdlib.h>

#include "eval/cuda/gpu_plan.h"

/* Sort keys of the chains: start step ascending, then the longest path of costs up to the
 * root descending (the chain that holds up the most goes first), then the bottom's order. */
typedef struct chain_key {
    int32_t start, index;
    double prio;
} chain_key;

static int chain_key_cmp(const void *pa, const void *pb) {
    const chain_key *a = pa, *b = pb;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->prio != b->prio) return a->prio > b->prio ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* prio[i] = the longest path of costs from chain i up to the root, its own cost included,
 * for chains listed with every parent after its children; chain_of [G] is scratch. */
static void chain_paths(const pc_circuit *c, const pc_gpu_tuning *t, const pc_gpu_chains *ch,
                        int32_t *chain_of, double *prio) {
    const int32_t n = ch->num_chains;
    for (int32_t i = 0; i < n; i++)
        for (int32_t m = ch->begin[i]; m < ch->begin[i + 1]; m++) chain_of[ch->groups[m]] = i;
    for (int32_t i = n - 1; i >= 0; i--) { /* a parent chain's bottom comes later */
        const int32_t top = ch->groups[ch->begin[i + 1] - 1], p = c->group_parent[top];
        double cost = 0.0;
        for (int32_t m = ch->begin[i]; m < ch->begin[i + 1]; m++) {
            const int32_t g = ch->groups[m];
            cost += pc_gpu_group_cost(t, c->child_start[g + 1] - c->child_start[g] +
                                             c->var_start[g + 1] - c->var_start[g]);
        }
        prio[i] = cost + (p >= 0 ? prio[chain_of[p]] : 0.0);
    }
}

/* key[i] = chain i's start step (the latest finish of the chains its bottom reads; finish =
 * start + length) and prio; finish [n] is scratch. */
static void chain_start_keys(const pc_circuit *c, const pc_gpu_chains *ch, const double *prio,
                             int32_t *finish, chain_key *key) {
    for (int32_t i = 0; i < ch->num_chains; i++) {
        const int32_t b = ch->groups[ch->begin[i]];
        key[i].index = i, key[i].start = 0, key[i].prio = prio[i];
        for (int32_t k = c->child_start[b]; k < c->child_start[b + 1]; k++) {
            const int32_t f = finish[ch->child_chain[k]];
            if (f > key[i].start) key[i].start = f;
        }
        finish[i] = key[i].start + ch->begin[i + 1] - ch->begin[i];
    }
}

/* The chains in the order of the sorted keys: their groups into begin [n + 1] and groups [G],
 * child_chain renumbered (rank [n] is scratch). */
static void renumber_chains(const pc_circuit *c, pc_gpu_chains *ch, const chain_key *key,
                            int32_t *rank, int32_t *begin, int32_t *groups) {
    begin[0] = 0;
    for (int32_t r = 0; r < ch->num_chains; r++) {
        const int32_t i = key[r].index, len = ch->begin[i + 1] - ch->begin[i];
        rank[i] = r;
        for (int32_t m = 0; m < len; m++) groups[begin[r] + m] = ch->groups[ch->begin[i] + m];
        begin[r + 1] = begin[r] + len;
    }
    for (int32_t k = 0; k < c->num_groups - 1; k++) ch->child_chain[k] = rank[ch->child_chain[k]];
}

/* Reorders the chains (listed in the evaluation order of their bottoms) by the step at which
 * each can start if every group takes one step, ties by prio, then the bottoms' order: a
 * chain's children finish, so start, earlier, and stay ahead. Then fills ch->by_path: by prio
 * alone, ties in the new order; a chain's path is its parent's plus its own cost, so children
 * stay ahead there too. */
static pc_status order_chains(const pc_circuit *c, const pc_gpu_tuning *t, pc_gpu_chains *ch) {
    const int32_t n = ch->num_chains, G = c->num_groups;
    int32_t *finish = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *chain_of = malloc(sizeof(int32_t) * (size_t)G);
    int32_t *rank = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *begin = malloc(sizeof(int32_t) * (size_t)(n + 1));
    int32_t *groups = malloc(sizeof(int32_t) * (size_t)G);
    double *prio = malloc(sizeof(double) * (size_t)n);
    chain_key *key = malloc(sizeof(chain_key) * (size_t)n);
    ch->by_path = malloc(sizeof(int32_t) * (size_t)n);
    pc_status st = PC_OK;
    if (!finish || !chain_of || !rank || !begin || !groups || !prio || !key || !ch->by_path) {
        st = pc_fail(PC_ERR_NOMEM, "GPU chain plan for %d groups: out of host memory", G);
        goto fail;
    }
    chain_paths(c, t, ch, chain_of, prio);
    chain_start_keys(c, ch, prio, finish, key);
    qsort(key, (size_t)n, sizeof(chain_key), chain_key_cmp);
    renumber_chains(c, ch, key, rank, begin, groups);
    for (int32_t r = 0; r < n; r++) key[r].index = r, key[r].start = 0; /* prio alone */
    qsort(key, (size_t)n, sizeof(chain_key), chain_key_cmp);
    for (int32_t r = 0; r < n; r++) ch->by_path[r] = key[r].index;
    free(ch->begin), free(ch->groups);
    ch->begin = begin, ch->groups = groups;
    begin = groups = NULL;
fail:
    free(finish), free(chain_of), free(rank), free(begin), free(groups), free(prio), free(key);
    return st;
}

/* In evaluation order, chain_of[g]: a group with at most PC_GPU_CHAIN_LINK_VARS variables
 * continues its only child's chain (if shorter than max_len and if the chain's links keep to
 * max_link_vars with it), or starts one; ch->begin[chain + 1] counts the members. link_vars
 * [G] is scratch. */
static void assign_chains(const pc_circuit *c, int32_t max_len, int32_t max_link_vars,
                          pc_gpu_chains *ch, int32_t *chain_of, int32_t *link_vars) {
    for (int32_t i = 0; i <= c->num_groups; i++) ch->begin[i] = 0;
    for (int32_t g = 0; g < c->num_groups; g++) {
        const int32_t nch = c->child_start[g + 1] - c->child_start[g];
        const int32_t nv = c->var_start[g + 1] - c->var_start[g];
        const int32_t below = nch == 1 && nv <= PC_GPU_CHAIN_LINK_VARS
                                  ? chain_of[c->group_children[c->child_start[g]]]
                                  : -1;
        if (below >= 0 && ch->begin[below + 1] < max_len &&
            link_vars[below] + nv <= max_link_vars) {
            chain_of[g] = below;
            link_vars[below] += nv;
        } else {
            chain_of[g] = ch->num_chains++;
            link_vars[chain_of[g]] = 0;
        }
        ch->begin[chain_of[g] + 1]++;
    }
}

/* The counts of assign_chains into ranges, the members in evaluation order (so bottom to
 * top; begin[i] walks to begin[i + 1] and back), and each child entry's chain. */
static void list_chains(const pc_circuit *c, pc_gpu_chains *ch, const int32_t *chain_of) {
    const int32_t G = c->num_groups;
    for (int32_t i = 0; i < ch->num_chains; i++) ch->begin[i + 1] += ch->begin[i];
    for (int32_t g = 0; g < G; g++) ch->groups[ch->begin[chain_of[g]]++] = g;
    for (int32_t i = ch->num_chains; i > 0; i--) ch->begin[i] = ch->begin[i - 1];
    ch->begin[0] = 0;
    for (int32_t i = 0; i < G - 1; i++) ch->child_chain[i] = chain_of[c->group_children[i]];
}

pc_status pc_gpu_chain_plan(const pc_circuit *c, const pc_gpu_tuning *t, int32_t max_len,
                            int32_t max_link_vars, pc_gpu_chains *out) {
    if (!c || !t || !out || max_len < 1 || max_link_vars < 0)
        return pc_fail(PC_ERR_ARG,
                       "pc_gpu_chain_plan: NULL argument, max_len < 1 or max_link_vars < 0");
    const int32_t G = c->num_groups;
    pc_gpu_chains ch = {0};
    int32_t *chain_of = malloc(sizeof(int32_t) * (size_t)G);
    int32_t *link_vars = malloc(sizeof(int32_t) * (size_t)G); /* per chain */
    ch.begin = malloc(sizeof(int32_t) * (size_t)(G + 1));
    ch.groups = malloc(sizeof(int32_t) * (size_t)G);
    ch.child_chain = malloc(sizeof(int32_t) * (size_t)(G > 1 ? G - 1 : 1));
    pc_status st = PC_OK;
    if (!chain_of || !link_vars || !ch.begin || !ch.groups || !ch.child_chain) {
        st = pc_fail(PC_ERR_NOMEM, "GPU chain plan for %d groups: out of host memory", G);
        goto fail;
    }
    assign_chains(c, max_len, max_link_vars, &ch, chain_of, link_vars);
    list_chains(c, &ch, chain_of);
    if ((st = order_chains(c, t, &ch))) goto fail;
    *out = ch;
    ch = (pc_gpu_chains){0};
fail:
    free(chain_of), free(link_vars);
    pc_gpu_chains_free(&ch);
    return st;
}

void pc_gpu_chains_free(pc_gpu_chains *ch) {
    if (!ch) return;
    free(ch->begin), free(ch->groups), free(ch->child_chain), free(ch->by_path);
    ch->begin = ch->groups = ch->child_chain = ch->by_path = NULL;
    ch->num_chains = 0;
}
