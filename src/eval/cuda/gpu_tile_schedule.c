/* The fuse tile strategy's schedule (gpu_tile_schedule.h). */
#include "base/fail.h"
#include "eval/cuda/gpu_tile_schedule.h"

#include <stdlib.h>

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

/* The schedule's working arrays, one allocation. Per group: its slices' parts, its first
 * unit (ubase, G + 1), a part's cost, the longest path of costs from it to the root (gprio) and
 * the groups waiting on it for their slots (waiters[wstart[q] .. wstart[q + 1])). Per slice:
 * parts still to deal, and when the last dealt so far finishes. Per unit: its group, prio,
 * ready (minus the time its last dependency finishes), the dependencies still open, its warp and
 * the dealing sequence; two heaps (ready units by prio, pending ones by time). Per warp: when it
 * frees. */
typedef struct sched {
    int32_t G, per_group, warps, units;
    int32_t *nparts, *ubase, *wstart, *waiters, *left;
    int32_t *ugroup, *deps, *heap, *pend, *warp_of, *seq;
    double *cost, *gprio, *sdone, *free_at, *prio, *ready;
    void *block;
} sched;

static pc_status sched_alloc(sched *S, int32_t G, int32_t per_group, int32_t parts,
                             int32_t warps) {
    const size_t ng = (size_t)G, ns = ng * (size_t)per_group, nmax = ns * (size_t)parts;
    const size_t doubles = 2 * ng + ns + (size_t)warps + 2 * nmax;
    const size_t ints = 2 * ng + 2 * (ng + 1) + ns + 6 * nmax;
    double *d = calloc(doubles * sizeof(double) + ints * sizeof(int32_t), 1);
    if (!d)
        return pc_fail(PC_ERR_NOMEM, "GPU tile schedule of %zu units: out of host memory", nmax);
    S->block = d;
    S->G = G, S->per_group = per_group, S->warps = warps;
    S->cost = d, S->gprio = d + ng, S->sdone = d + 2 * ng, S->free_at = S->sdone + ns;
    S->prio = S->free_at + warps, S->ready = S->prio + nmax;
    int32_t *i = (int32_t *)(S->ready + nmax);
    S->nparts = i, S->ubase = i + ng, S->wstart = S->ubase + ng + 1;
    S->waiters = S->wstart + ng + 1;
    S->left = S->waiters + ng, S->ugroup = S->left + ns, S->deps = S->ugroup + nmax;
    S->heap = S->deps + nmax, S->pend = S->heap + nmax, S->warp_of = S->pend + nmax;
    S->seq = S->warp_of + nmax;
    return PC_OK;
}

/* Units per group and their costs; the groups that wait on each group for their slots. */
static void sched_units(sched *S, const pc_gpu_group *groups, const pc_gpu_tuning *t,
                        int32_t parts, const uint8_t *split) {
    const int32_t G = S->G;
    S->ubase[0] = 0;
    for (int32_t g = 0; g < G; g++) {
        const pc_gpu_group *h = &groups[g];
        S->nparts[g] = split && split[g] ? parts : 1;
        S->ubase[g + 1] = S->ubase[g] + S->per_group * S->nparts[g];
        S->cost[g] = pc_gpu_group_cost(t, h->child_end - h->child_begin + h->var_end -
                                              h->var_begin) *
                     (S->nparts[g] > 1 ? t->part_cost : 1.0);
        if (h->wait >= 0) S->wstart[h->wait + 1]++;
    }
    S->units = S->ubase[G];
    for (int32_t g = 0; g < G; g++) S->wstart[g + 1] += S->wstart[g];
    for (int32_t g = 0; g < G; g++)
        if (groups[g].wait >= 0) S->waiters[S->wstart[groups[g].wait]++] = g;
    for (int32_t g = G; g > 0; g--) S->wstart[g] = S->wstart[g - 1];
    S->wstart[0] = 0;
}

/* gprio[g]: g's cost plus the longest path after it, through its parent and its waiters
 * (both come later in evaluation order). */
static void sched_paths(sched *S, const pc_circuit *c) {
    for (int32_t g = S->G - 1; g >= 0; g--) {
        double after = c->group_parent[g] >= 0 ? S->gprio[c->group_parent[g]] : 0.0;
        for (int32_t i = S->wstart[g]; i < S->wstart[g + 1]; i++)
            after = S->gprio[S->waiters[i]] > after ? S->gprio[S->waiters[i]] : after;
        S->gprio[g] = S->cost[g] + after;
    }
}

/* Every unit's prio and open dependencies; those with none go on the ready heap. */
static void sched_ready(sched *S, const pc_gpu_group *groups, int32_t *nready) {
    for (int32_t g = 0; g < S->G; g++) {
        for (int32_t s = 0; s < S->per_group; s++) S->left[g * S->per_group + s] = S->nparts[g];
        for (int32_t u = S->ubase[g]; u < S->ubase[g + 1]; u++) {
            S->ugroup[u] = g, S->prio[u] = S->gprio[g];
            S->deps[u] = groups[g].child_end - groups[g].child_begin + (groups[g].wait >= 0);
            if (S->deps[u] == 0) heap_push(S->heap, nready, S->prio, u);
        }
    }
}

/* Slice s of group g is done at sdone[sl]: its parent's and its waiters' units of the same
 * slice have one dependency less, and cannot start before then. */
static void sched_release(sched *S, const pc_circuit *c, int32_t g, int32_t s, int32_t sl,
                          int32_t *npend) {
    for (int32_t i = S->wstart[g] - 1; i < S->wstart[g + 1]; i++) {
        const int32_t q = i < S->wstart[g] ? c->group_parent[g] : S->waiters[i];
        if (q < 0) continue;
        for (int32_t p = 0; p < S->nparts[q]; p++) {
            const int32_t v = S->ubase[q] + s * S->nparts[q] + p;
            S->ready[v] = -S->sdone[sl] < S->ready[v] ? -S->sdone[sl] : S->ready[v]; /* latest */
            if (--S->deps[v] == 0) heap_push(S->pend, npend, S->ready, v);
        }
    }
}

/* List scheduling in time: the warp that frees first takes, of the units that are ready by
 * then, the one with the longest path to the root (or, if none is, waits for the next). */
static void sched_deal(sched *S, const pc_circuit *c, const pc_gpu_group *groups) {
    int32_t nready = 0, npend = 0; /* heap: ready units by prio; pend: the others by time */
    sched_ready(S, groups, &nready);
    for (int32_t k = 0; k < S->units; k++) {
        int32_t w = 0;
        for (int32_t i = 1; i < S->warps; i++) w = S->free_at[i] < S->free_at[w] ? i : w;
        double t = S->free_at[w];
        if (nready == 0 || (npend > 0 && -S->ready[S->pend[0]] <= t))
            while (npend > 0 && (nready == 0 || -S->ready[S->pend[0]] <= t)) {
                const int32_t v = heap_pop(S->pend, &npend, S->ready);
                t = -S->ready[v] > t ? -S->ready[v] : t;
                heap_push(S->heap, &nready, S->prio, v);
            }
        const int32_t u = heap_pop(S->heap, &nready, S->prio), g = S->ugroup[u];
        const int32_t s = (u - S->ubase[g]) / S->nparts[g], sl = g * S->per_group + s;
        const double finish = t + S->cost[g];
        S->free_at[w] = finish, S->warp_of[u] = w, S->seq[k] = u;
        S->sdone[sl] = finish > S->sdone[sl] ? finish : S->sdone[sl];
        if (--S->left[sl] == 0) sched_release(S, c, g, s, sl, &npend);
    }
}

/* Each warp's units in the order they were dealt: an order in which every unit comes after
 * the units it waits on. */
static void sched_lists(const sched *S, int32_t *order, int32_t *begin) {
    for (int32_t w = 0; w <= S->warps; w++) begin[w] = 0;
    for (int32_t u = 0; u < S->units; u++) begin[S->warp_of[u] + 1]++;
    for (int32_t w = 0; w < S->warps; w++) begin[w + 1] += begin[w];
    for (int32_t k = 0; k < S->units; k++) {
        const int32_t u = S->seq[k], g = S->ugroup[u], r = u - S->ubase[g];
        order[begin[S->warp_of[u]]++] =
            PC_GPU_TILE_ENTRY(g, r / S->nparts[g], S->nparts[g] > 1, r % S->nparts[g]);
    }
    for (int32_t w = S->warps; w > 0; w--) begin[w] = begin[w - 1];
    begin[0] = 0;
}

pc_status pc_gpu_tile_schedule(const pc_circuit *c, const pc_gpu_group *groups,
                               const pc_gpu_tuning *t, int32_t per_group, int32_t parts,
                               const uint8_t *split, int32_t warps, int32_t *order,
                               int32_t *begin) {
    if (!c || !groups || !t || !order || !begin || per_group < 1 ||
        per_group > PC_GPU_TILE_MAX_SLICES || warps < 1 || parts < 1 ||
        parts > PC_GPU_TILE_MAX_PARTS || c->num_groups > (1 << 22))
        return pc_fail(PC_ERR_ARG, "pc_gpu_tile_schedule: NULL argument, warps < 1, per_group "
                                   "not in 1 .. %d, parts not in 1 .. %d, or more than 2^22 groups",
                       PC_GPU_TILE_MAX_SLICES, PC_GPU_TILE_MAX_PARTS);
    sched S = {0};
    pc_status st = sched_alloc(&S, c->num_groups, per_group, parts, warps);
    if (st) return st;
    sched_units(&S, groups, t, parts, split);
    sched_paths(&S, c);
    sched_deal(&S, c, groups);
    sched_lists(&S, order, begin);
    free(S.block);
    return PC_OK;
}

void pc_gpu_tile_thin_layers(const pc_circuit *c, int32_t per_group, int32_t max_slices,
                             uint8_t *split) {
    for (int32_t l = 0; l < c->num_layers; l++) {
        const int32_t a = c->layer_start[l], b = c->layer_start[l + 1];
        const uint8_t thin = (int64_t)(b - a) * per_group <= max_slices;
        for (int32_t g = a; g < b; g++) split[g] = thin;
    }
}
