/* The message-slot plan of the GPU circuit engine (see gpu_plan.h). */
#include "eval/cuda/gpu_plan.h"
#include "base/fail.h"

#include <stdlib.h>

pc_status pc_gpu_plan(const pc_circuit *c, pc_gpu_group *groups, int32_t *num_slots) {
    if (!c || !groups || !num_slots) return pc_fail(PC_ERR_ARG, "pc_gpu_plan: NULL argument");
    const int32_t G = c->num_groups;
    /* A FIFO of freed slots with their readers: every group but the root is read once. */
    int32_t *fifo_slot = malloc(sizeof(int32_t) * (size_t)(G + 1));
    int32_t *fifo_reader = malloc(sizeof(int32_t) * (size_t)(G + 1));
    int32_t *layer_of = malloc(sizeof(int32_t) * (size_t)(G + 1));
    if (!fifo_slot || !fifo_reader || !layer_of) {
        free(fifo_slot), free(fifo_reader), free(layer_of);
        return pc_fail(PC_ERR_NOMEM, "GPU plan for %d groups: out of host memory", G);
    }
    for (int32_t l = 0; l < c->num_layers; l++)
        for (int32_t g = c->layer_start[l]; g < c->layer_start[l + 1]; g++) layer_of[g] = l;
    int32_t head = 0, tail = 0, slots = 0;
    for (int32_t g = 0; g < G; g++) {
        pc_gpu_group *h = &groups[g];
        h->var_begin = c->var_start[g], h->var_end = c->var_start[g + 1];
        h->child_begin = c->child_start[g], h->child_end = c->child_start[g + 1];
        h->wait = -1;
        if (c->group_parent[g] < 0)
            h->slot = -1;
        else if (head < tail && layer_of[fifo_reader[head]] < layer_of[g])
            h->slot = fifo_slot[head], h->wait = fifo_reader[head], head++;
        else
            h->slot = slots++;
        /* g reads its children's messages: their slots are free once g has run. */
        for (int32_t i = h->child_begin; i < h->child_end; i++) {
            fifo_slot[tail] = groups[c->group_children[i]].slot;
            fifo_reader[tail] = g;
            tail++;
        }
    }
    free(fifo_slot), free(fifo_reader), free(layer_of);
    *num_slots = slots > 0 ? slots : 1;
    return PC_OK;
}

/* Waves of `grid` blocks that `items` take. */
static int64_t waves(int64_t items, int32_t grid) { return (items + grid - 1) / grid; }

int32_t pc_gpu_split_layers(const pc_circuit *c, int64_t wide_items, int64_t narrow_items,
                            double wide_cost, int64_t min_wide, int32_t grid) {
    const int32_t L = c->num_layers;
    if (L == 0 || (int64_t)(c->layer_start[1] - c->layer_start[0]) * wide_items < min_wide)
        return 0;
    /* Everything narrow first, then move the boundary up one layer at a time. */
    double t = 0.0;
    for (int32_t l = 0; l < L; l++) {
        const int64_t w = c->layer_start[l + 1] - c->layer_start[l];
        t += (double)waves(w * narrow_items, grid);
    }
    double best = t;
    int32_t split = 0;
    for (int32_t l = 0; l < L; l++) {
        const int64_t w = c->layer_start[l + 1] - c->layer_start[l];
        t += wide_cost * (double)waves(w * wide_items, grid);
        t -= (double)waves(w * narrow_items, grid);
        if (t < best) best = t, split = l + 1;
    }
    return split;
}

/* A group's cost in the schedules' model: 1 + PC_GPU_TILE_SOURCE_COST per source (a child's
 * message or an input row). */
static double group_cost(int32_t sources) { return 1.0 + PC_GPU_TILE_SOURCE_COST * sources; }

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
static void chain_paths(const pc_circuit *c, const pc_gpu_chains *ch, int32_t *chain_of,
                        double *prio) {
    const int32_t n = ch->num_chains;
    for (int32_t i = 0; i < n; i++)
        for (int32_t m = ch->begin[i]; m < ch->begin[i + 1]; m++) chain_of[ch->groups[m]] = i;
    for (int32_t i = n - 1; i >= 0; i--) { /* a parent chain's bottom comes later */
        const int32_t top = ch->groups[ch->begin[i + 1] - 1], p = c->group_parent[top];
        double cost = 0.0;
        for (int32_t m = ch->begin[i]; m < ch->begin[i + 1]; m++) {
            const int32_t g = ch->groups[m];
            cost += group_cost(c->child_start[g + 1] - c->child_start[g] + c->var_start[g + 1] -
                               c->var_start[g]);
        }
        prio[i] = cost + (p >= 0 ? prio[chain_of[p]] : 0.0);
    }
}

/* Reorders the chains (listed in the evaluation order of their bottoms) by the step at which
 * each can start if every group takes one step: start = the latest finish of the chains its
 * bottom reads, finish = start + length; ties go to the chain with the longest path of costs
 * to the root (a group costs 1 + PC_GPU_TILE_SOURCE_COST x its sources: the MNIST tree's
 * 101-variable group, at the bottom of its deepest path, goes first among the leaves), then
 * keep the bottoms' order. A chain's children finish, so start, earlier: they stay ahead.
 * Also fills ch->by_path, the second queue order: the chains by that path alone, longest first,
 * ties in the new chain order (highest level first, Hu's rule: optimal for tasks of one step on
 * a tree). A chain's path is its parent's plus its own cost, so children stay ahead there too. */
static pc_status order_chains(const pc_circuit *c, pc_gpu_chains *ch) {
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
        goto done;
    }
    chain_paths(c, ch, chain_of, prio);
    for (int32_t i = 0; i < n; i++) {
        const int32_t b = ch->groups[ch->begin[i]];
        key[i].index = i, key[i].start = 0, key[i].prio = prio[i];
        for (int32_t k = c->child_start[b]; k < c->child_start[b + 1]; k++) {
            const int32_t f = finish[ch->child_chain[k]];
            if (f > key[i].start) key[i].start = f;
        }
        finish[i] = key[i].start + ch->begin[i + 1] - ch->begin[i];
    }
    qsort(key, (size_t)n, sizeof(chain_key), chain_key_cmp);
    begin[0] = 0;
    for (int32_t r = 0; r < n; r++) {
        const int32_t i = key[r].index, len = ch->begin[i + 1] - ch->begin[i];
        rank[i] = r;
        for (int32_t m = 0; m < len; m++) groups[begin[r] + m] = ch->groups[ch->begin[i] + m];
        begin[r + 1] = begin[r] + len;
    }
    for (int32_t k = 0; k < G - 1; k++) ch->child_chain[k] = rank[ch->child_chain[k]];
    for (int32_t r = 0; r < n; r++) key[r].index = r, key[r].start = 0; /* prio alone */
    qsort(key, (size_t)n, sizeof(chain_key), chain_key_cmp);
    for (int32_t r = 0; r < n; r++) ch->by_path[r] = key[r].index;
    free(ch->begin), free(ch->groups);
    ch->begin = begin, ch->groups = groups;
    begin = groups = NULL;
done:
    free(finish), free(chain_of), free(rank), free(begin), free(groups), free(prio), free(key);
    return st;
}

pc_status pc_gpu_chain_plan(const pc_circuit *c, int32_t max_len, int32_t max_link_vars,
                           pc_gpu_chains *out) {
    if (!c || !out || max_len < 1 || max_link_vars < 0)
        return pc_fail(PC_ERR_ARG,
                       "pc_gpu_chain_plan: NULL argument, max_len < 1 or max_link_vars < 0");
    const int32_t G = c->num_groups;
    pc_gpu_chains ch = {0};
    int32_t *chain_of = malloc(sizeof(int32_t) * (size_t)G);
    int32_t *link_vars = malloc(sizeof(int32_t) * (size_t)G); /* per chain */
    ch.begin = malloc(sizeof(int32_t) * (size_t)(G + 1));
    ch.groups = malloc(sizeof(int32_t) * (size_t)G);
    ch.child_chain = malloc(sizeof(int32_t) * (size_t)(G > 1 ? G - 1 : 1));
    if (!chain_of || !link_vars || !ch.begin || !ch.groups || !ch.child_chain) {
        free(chain_of), free(link_vars), pc_gpu_chains_free(&ch);
        return pc_fail(PC_ERR_NOMEM, "GPU chain plan for %d groups: out of host memory", G);
    }
    /* Evaluation order: a group with at most PC_GPU_CHAIN_LINK_VARS variables continues its
     * only child's chain (if shorter than max_len and if the chain's links keep to
     * max_link_vars with it), or starts one; begin[chain + 1] counts the members, then turns
     * into offsets. */
    for (int32_t i = 0; i <= G; i++) ch.begin[i] = 0;
    for (int32_t g = 0; g < G; g++) {
        const int32_t nch = c->child_start[g + 1] - c->child_start[g];
        const int32_t nv = c->var_start[g + 1] - c->var_start[g];
        const int32_t below = nch == 1 && nv <= PC_GPU_CHAIN_LINK_VARS
                                  ? chain_of[c->group_children[c->child_start[g]]]
                                  : -1;
        if (below >= 0 && ch.begin[below + 1] < max_len && link_vars[below] + nv <= max_link_vars) {
            chain_of[g] = below;
            link_vars[below] += nv;
        } else {
            chain_of[g] = ch.num_chains++;
            link_vars[chain_of[g]] = 0;
        }
        ch.begin[chain_of[g] + 1]++;
    }
    free(link_vars);
    for (int32_t i = 0; i < ch.num_chains; i++) ch.begin[i + 1] += ch.begin[i];
    /* Members in evaluation order, so bottom to top; begin[i] walks to begin[i + 1] and back. */
    for (int32_t g = 0; g < G; g++) ch.groups[ch.begin[chain_of[g]]++] = g;
    for (int32_t i = ch.num_chains; i > 0; i--) ch.begin[i] = ch.begin[i - 1];
    ch.begin[0] = 0;
    for (int32_t i = 0; i < G - 1; i++) ch.child_chain[i] = chain_of[c->group_children[i]];
    free(chain_of);
    pc_status st = order_chains(c, &ch);
    if (st) {
        pc_gpu_chains_free(&ch);
        return st;
    }
    *out = ch;
    return PC_OK;
}

void pc_gpu_chains_free(pc_gpu_chains *ch) {
    if (!ch) return;
    free(ch->begin), free(ch->groups), free(ch->child_chain), free(ch->by_path);
    ch->begin = ch->groups = ch->child_chain = ch->by_path = NULL;
    ch->num_chains = 0;
}

/* A heap of units: the one with the largest key first (ties: the lower unit). The ready
 * times go in negated, so that the earliest comes first. */
static int heap_before(const double *key, int32_t a, int32_t b) {
    return key[a] > key[b] || (key[a] == key[b] && a < b);
}

static void heap_push(int32_t *h, int32_t *n, const double *key, int32_t u) {
    int32_t i = (*n)++;
    for (; i > 0 && heap_before(key, u, h[(i - 1) / 2]); i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = u;
}

static int32_t heap_pop(int32_t *h, int32_t *n, const double *key) {
    const int32_t top = h[0], last = h[--*n];
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_before(key, h[c + 1], h[c])) c++;
        if (!heap_before(key, h[c], last)) break;
        h[i] = h[c], i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

pc_status pc_gpu_tile_schedule(const pc_circuit *c, const pc_gpu_group *groups,
                               int32_t per_group, int32_t parts, const uint8_t *split,
                               int32_t warps, int32_t *order, int32_t *begin) {
    if (!c || !groups || !order || !begin || per_group < 1 || per_group > PC_GPU_TILE_MAX_SLICES ||
        warps < 1 || parts < 1 || parts > PC_GPU_TILE_MAX_PARTS || c->num_groups > (1 << 22))
        return pc_fail(PC_ERR_ARG, "pc_gpu_tile_schedule: NULL argument, warps < 1, per_group "
                                   "not in 1 .. %d, parts not in 1 .. %d, or more than 2^22 groups",
                       PC_GPU_TILE_MAX_SLICES, PC_GPU_TILE_MAX_PARTS);
    const int32_t G = c->num_groups;
    const size_t ng = (size_t)G, ns = ng * (size_t)per_group, nmax = ns * (size_t)parts;
    /* Per group: its slices' parts, its first unit (ubase, G + 1), a part's cost and the longest
     * path of costs from it to the root. Per slice: parts still to deal, and when the last dealt
     * so far finishes. Per unit: its group, prio, ready (minus the time its last dependency
     * finishes) and the dependencies (slices) still open. */
    int32_t *nparts = malloc(sizeof(int32_t) * ng), *ubase = malloc(sizeof(int32_t) * (ng + 1));
    double *cost = malloc(sizeof(double) * ng), *gprio = malloc(sizeof(double) * ng);
    int32_t *left = malloc(sizeof(int32_t) * ns);
    double *sdone = calloc(ns, sizeof(double)), *free_at = calloc((size_t)warps, sizeof(double));
    int32_t *ugroup = malloc(sizeof(int32_t) * nmax), *deps = malloc(sizeof(int32_t) * nmax);
    double *prio = malloc(sizeof(double) * nmax), *ready = calloc(nmax, sizeof(double));
    int32_t *heap = malloc(sizeof(int32_t) * nmax), *pend = malloc(sizeof(int32_t) * nmax);
    int32_t *warp_of = malloc(sizeof(int32_t) * nmax), *seq = malloc(sizeof(int32_t) * nmax);
    int32_t *wstart = calloc(ng + 1, sizeof(int32_t)), *waiters = malloc(sizeof(int32_t) * ng);
    pc_status st = PC_OK;
    if (!nparts || !ubase || !cost || !gprio || !left || !sdone || !free_at || !ugroup || !deps ||
        !prio || !ready || !heap || !pend || !warp_of || !seq || !wstart || !waiters) {
        st = pc_fail(PC_ERR_NOMEM, "GPU tile schedule of %zu units: out of host memory", nmax);
        goto done;
    }
    /* waiters[wstart[q] .. wstart[q + 1]): the groups that wait on q (for the slots q read). */
    ubase[0] = 0;
    for (int32_t g = 0; g < G; g++) {
        const pc_gpu_group *h = &groups[g];
        nparts[g] = split && split[g] ? parts : 1;
        ubase[g + 1] = ubase[g] + per_group * nparts[g];
        cost[g] = group_cost(h->child_end - h->child_begin + h->var_end - h->var_begin) *
                  (nparts[g] > 1 ? PC_GPU_TILE_PART_COST : 1.0);
        if (h->wait >= 0) wstart[h->wait + 1]++;
    }
    const int32_t units = ubase[G];
    for (int32_t g = 0; g < G; g++) wstart[g + 1] += wstart[g];
    for (int32_t g = 0; g < G; g++)
        if (groups[g].wait >= 0) waiters[wstart[groups[g].wait]++] = g;
    for (int32_t g = G; g > 0; g--) wstart[g] = wstart[g - 1];
    wstart[0] = 0;
    for (int32_t g = G - 1; g >= 0; g--) { /* parents and waiters come later */
        double after = c->group_parent[g] >= 0 ? gprio[c->group_parent[g]] : 0.0;
        for (int32_t i = wstart[g]; i < wstart[g + 1]; i++)
            after = gprio[waiters[i]] > after ? gprio[waiters[i]] : after;
        gprio[g] = cost[g] + after;
    }
    /* List scheduling in time: the warp that frees first takes, of the units that are ready by
     * then, the one with the longest path to the root (or, if none is, waits for the next). */
    int32_t nready = 0, npend = 0; /* heap: ready units by prio; pend: the others by time */
    for (int32_t g = 0; g < G; g++) {
        for (int32_t s = 0; s < per_group; s++) left[g * per_group + s] = nparts[g];
        for (int32_t u = ubase[g]; u < ubase[g + 1]; u++) {
            ugroup[u] = g, prio[u] = gprio[g];
            deps[u] = groups[g].child_end - groups[g].child_begin + (groups[g].wait >= 0);
            if (deps[u] == 0) heap_push(heap, &nready, prio, u);
        }
    }
    for (int32_t k = 0; k < units; k++) {
        int32_t w = 0;
        for (int32_t i = 1; i < warps; i++) w = free_at[i] < free_at[w] ? i : w;
        double t = free_at[w];
        if (nready == 0 || (npend > 0 && -ready[pend[0]] <= t))
            while (npend > 0 && (nready == 0 || -ready[pend[0]] <= t)) {
                const int32_t v = heap_pop(pend, &npend, ready);
                t = -ready[v] > t ? -ready[v] : t;
                heap_push(heap, &nready, prio, v);
            }
        const int32_t u = heap_pop(heap, &nready, prio), g = ugroup[u];
        const int32_t s = (u - ubase[g]) / nparts[g], sl = g * per_group + s;
        const double finish = t + cost[g];
        free_at[w] = finish, warp_of[u] = w, seq[k] = u;
        sdone[sl] = finish > sdone[sl] ? finish : sdone[sl];
        if (--left[sl] > 0) continue;
        /* The slice is done: release the same slice's units that wait on it, its parent's
         * and its waiters'. */
        for (int32_t i = wstart[g] - 1; i < wstart[g + 1]; i++) {
            const int32_t q = i < wstart[g] ? c->group_parent[g] : waiters[i];
            if (q < 0) continue;
            for (int32_t p = 0; p < nparts[q]; p++) {
                const int32_t v = ubase[q] + s * nparts[q] + p;
                ready[v] = -sdone[sl] < ready[v] ? -sdone[sl] : ready[v]; /* the latest */
                if (--deps[v] == 0) heap_push(pend, &npend, ready, v);
            }
        }
    }
    /* Each warp's units in the order they were dealt: an order in which every unit comes after
     * the units it waits on. */
    for (int32_t w = 0; w <= warps; w++) begin[w] = 0;
    for (int32_t u = 0; u < units; u++) begin[warp_of[u] + 1]++;
    for (int32_t w = 0; w < warps; w++) begin[w + 1] += begin[w];
    for (int32_t k = 0; k < units; k++) {
        const int32_t u = seq[k], g = ugroup[u], r = u - ubase[g];
        order[begin[warp_of[u]]++] =
            PC_GPU_TILE_ENTRY(g, r / nparts[g], nparts[g] > 1, r % nparts[g]);
    }
    for (int32_t w = warps; w > 0; w--) begin[w] = begin[w - 1];
    begin[0] = 0;
done:
    free(nparts), free(ubase), free(cost), free(gprio), free(left), free(sdone), free(free_at);
    free(ugroup), free(deps), free(prio), free(ready), free(heap), free(pend), free(warp_of);
    free(seq), free(wstart), free(waiters);
    return st;
}

void pc_gpu_tile_thin_layers(const pc_circuit *c, int32_t per_group, int32_t max_slices,
                             uint8_t *split) {
    for (int32_t l = 0; l < c->num_layers; l++) {
        const int32_t a = c->layer_start[l], b = c->layer_start[l + 1];
        const uint8_t thin = (int64_t)(b - a) * per_group <= max_slices;
        for (int32_t g = a; g < b; g++) split[g] = thin;
    }
}

int32_t pc_gpu_tile_samples(int64_t n, int32_t sms) {
    int32_t T = 4;
    while (T < PC_GPU_TILE_MAX_T && (n + T - 1) / T > sms) T *= 2;
    return T;
}

int32_t pc_gpu_fuse_states(int32_t K) {
    if (K > 32 && K < 64) return 64;
    if (K > 112 && K < 128) return 128;
    return (K + 3) & ~3;
}

int pc_gpu_fuse_warp_k(int32_t K) { return K >= 1 && K <= PC_GPU_WARP_MAX_K; }

int pc_gpu_fuse_takes_warp(int32_t K, int64_t n, int32_t sms) {
    if (!pc_gpu_fuse_warp_k(K)) return 0;
    if (K <= 64) return pc_gpu_tile_samples(n, sms) > (K <= 32 ? 8 : 4);
    if (K <= 112) return 1;
    return n > 4 * (int64_t)sms;
}

int pc_gpu_warp_form(int32_t K, int64_t n, int32_t sms) {
    if (K > 112) return PC_GPU_WARP_EIGHT;
    if (K > 32 &&
        n <= (int64_t)(K > 64 ? PC_GPU_WARP_EIGHT_PER_SM : PC_GPU_WARP_EIGHT_PER_SM_64) * sms)
        return PC_GPU_WARP_EIGHT;
    if (K > 64 && K <= 96 && n > (int64_t)PC_GPU_WARP_THREE_PER_SM * sms) return PC_GPU_WARP_THREE;
    return PC_GPU_WARP_TWO;
}

int pc_gpu_warp_chains(int32_t K, int64_t n, int32_t sms) {
    return K <= 32 || n > (int64_t)PC_GPU_CHAIN_LONG_PER_SM * sms ? PC_GPU_CHAINS_LONG
                                                                   : PC_GPU_CHAINS_SHORT;
}

int pc_gpu_fuse_takes_tile(int32_t K, int64_t n, int32_t sms) {
    if (K <= 64) return 1;
    if (K <= 112 || K > 128) return 0;
    return n <= 2 * (int64_t)PC_GPU_TILE_MAX_T * sms && n > sms &&
           !(n > 4 * (int64_t)sms && n < 5 * (int64_t)sms);
}
