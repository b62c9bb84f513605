/* The GPU engine's plans, checked without a GPU: the message-slot plan (gpu_plan.c) on random
 * circuits and on the shipped MNIST model (every message stays in its slot until its parent has
 * read it, and a wait never points into the writer's own layer), the persistent fuse kernel's
 * split between wide and narrow items against a direct search, the warp strategy's chains, the
 * tile strategy's schedule, and fuse's choices (gpu_choice.c) against their restatement from
 * the tuning table's fields, on the sm_90 table (with its measured switch points pinned), on
 * the default table, and on a table of other values (so that every rule reads its fields). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "eval/cuda/gpu_chains.h"
#include "eval/cuda/gpu_choice.h"
#include "eval/cuda/gpu_plan.h"
#include "eval/cuda/gpu_tile_schedule.h"
#include "pc/circuit.h"
#include "pc/hclt.h"

static const pc_gpu_tuning *const T90 = &pc_gpu_tuning_sm90;

/* Checks the plan of c and returns its slot count. */
static int32_t check_plan(const pc_circuit *c) {
    const int32_t G = c->num_groups;
    pc_gpu_group *g = calloc((size_t)G, sizeof *g);
    int32_t *layer_of = malloc(sizeof(int32_t) * (size_t)G);
    int32_t slots = 0;
    assert_non_null(g);
    assert_non_null(layer_of);
    assert_int_equal(pc_gpu_plan(c, g, &slots), PC_OK);
    assert_true(slots >= 1 && slots <= (G > 1 ? G - 1 : 1));
    for (int32_t l = 0; l < c->num_layers; l++)
        for (int32_t i = c->layer_start[l]; i < c->layer_start[l + 1]; i++) layer_of[i] = l;
    /* last[s]: the latest group written into slot s so far (evaluation order), or -1. */
    int32_t *last = malloc(sizeof(int32_t) * (size_t)slots);
    assert_non_null(last);
    for (int32_t s = 0; s < slots; s++) last[s] = -1;
    for (int32_t i = 0; i < G; i++) {
        assert_int_equal(g[i].var_begin, c->var_start[i]);
        assert_int_equal(g[i].var_end, c->var_start[i + 1]);
        assert_int_equal(g[i].child_begin, c->child_start[i]);
        assert_int_equal(g[i].child_end, c->child_start[i + 1]);
        if (c->group_parent[i] < 0) {
            assert_int_equal(g[i].slot, -1);
            assert_int_equal(g[i].wait, -1);
            continue;
        }
        assert_true(g[i].slot >= 0 && g[i].slot < slots);
        const int32_t prev = last[g[i].slot];
        if (prev < 0) {
            assert_int_equal(g[i].wait, -1); /* a fresh slot needs no wait */
        } else {
            /* The previous occupant's reader is its parent: i waits for it, and that reader is
             * in an earlier layer, so the layered path has run it and the wait never chains
             * siblings of one layer. */
            const int32_t reader = c->group_parent[prev];
            assert_int_equal(g[i].wait, reader);
            assert_true(layer_of[reader] < layer_of[i]);
        }
        last[g[i].slot] = i;
    }
    /* Every child's slot, as its parent sees it, still holds that child: no later group of an
     * earlier-or-equal layer than the parent took it over. */
    for (int32_t p = 0; p < G; p++)
        for (int32_t k = c->child_start[p]; k < c->child_start[p + 1]; k++) {
            const int32_t ch = c->group_children[k];
            for (int32_t j = ch + 1; j < G && layer_of[j] <= layer_of[p]; j++)
                if (g[j].slot == g[ch].slot) fail_msg("group %d overwrites child %d of %d", j, ch, p);
        }
    free(last), free(layer_of), free(g);
    return slots;
}

/* Checks the chain plan of c with chains of at most max_len groups whose links have at most
 * max_link_vars variables together; returns their number. */
static int32_t check_chains(const pc_circuit *c, int32_t max_len, int32_t max_link_vars) {
    const int32_t G = c->num_groups;
    pc_gpu_chains ch = {0};
    assert_int_equal(pc_gpu_chain_plan(c, T90, max_len, max_link_vars, &ch), PC_OK);
    const int32_t n = ch.num_chains;
    int32_t *chain_of = malloc(sizeof(int32_t) * (size_t)G);
    assert_non_null(chain_of);
    for (int32_t g = 0; g < G; g++) chain_of[g] = -1;
    assert_true(n >= 1 && n <= G);
    assert_int_equal(ch.begin[0], 0);
    assert_int_equal(ch.begin[n], G);
    /* link_vars[i]: the variables of chain i's links; full: whether group g could not join
     * chain i (too long, or too many link variables with g's). */
    int32_t *link_vars = calloc((size_t)n, sizeof(int32_t));
    assert_non_null(link_vars);
#define FULL(i, nv)                                                                            \
    (ch.begin[(i) + 1] - ch.begin[i] == max_len || link_vars[i] + (nv) > max_link_vars)
    for (int32_t i = 0; i < n; i++) {
        assert_true(ch.begin[i] < ch.begin[i + 1]); /* no empty chain, none too long */
        assert_true(ch.begin[i + 1] - ch.begin[i] <= max_len);
        for (int32_t m = ch.begin[i]; m < ch.begin[i + 1]; m++) {
            const int32_t g = ch.groups[m];
            assert_true(g >= 0 && g < G);
            assert_int_equal(chain_of[g], -1); /* every group in one chain, once */
            chain_of[g] = i;
            const int32_t nch = c->child_start[g + 1] - c->child_start[g];
            const int32_t nv = c->var_start[g + 1] - c->var_start[g];
            if (m == ch.begin[i]) {
                /* A bottom continues no chain, unless the one below is full or it has too
                 * many variables. */
                if (nch == 1 && nv <= PC_GPU_CHAIN_LINK_VARS) {
                    const int32_t below = chain_of[c->group_children[c->child_start[g]]];
                    assert_true(below >= 0 && below < i);
                    assert_true(FULL(below, nv));
                }
            } else {
                assert_int_equal(nch, 1); /* the one child is the group below */
                assert_true(nv <= PC_GPU_CHAIN_LINK_VARS);
                assert_int_equal(c->group_children[c->child_start[g]], ch.groups[m - 1]);
                link_vars[i] += nv;
            }
        }
        assert_true(link_vars[i] <= max_link_vars);
    }
    /* The top's parent does not continue the chain, unless it is full. */
    for (int32_t i = 0; i < n; i++) {
        const int32_t top = ch.groups[ch.begin[i + 1] - 1], p = c->group_parent[top];
        const int32_t pv = p < 0 ? 0 : c->var_start[p + 1] - c->var_start[p];
        assert_true(p < 0 || c->child_start[p + 1] - c->child_start[p] != 1 ||
                    pv > PC_GPU_CHAIN_LINK_VARS || FULL(i, pv));
    }
#undef FULL
    free(link_vars);
    for (int32_t g = 0; g < G; g++) assert_true(chain_of[g] >= 0);
    /* A bottom's children are tops of earlier chains, found through child_chain; chains come
     * by the step they can start at, one step per group, ties by the longest path of costs to
     * the root (descending), then by their bottoms. */
    int32_t *finish = malloc(sizeof(int32_t) * (size_t)n), last_start = 0;
    double *prio = malloc(sizeof(double) * (size_t)n);
    assert_non_null(finish);
    assert_non_null(prio);
    for (int32_t i = n - 1; i >= 0; i--) { /* parents come later in the order */
        const int32_t top = ch.groups[ch.begin[i + 1] - 1], p = c->group_parent[top];
        double cost = 0.0;
        for (int32_t m = ch.begin[i]; m < ch.begin[i + 1]; m++) {
            const int32_t g = ch.groups[m];
            cost += 1.0 + T90->source_cost * (c->child_start[g + 1] - c->child_start[g] +
                                              c->var_start[g + 1] - c->var_start[g]);
        }
        if (p >= 0) assert_true(chain_of[p] > i);
        prio[i] = cost + (p >= 0 ? prio[chain_of[p]] : 0.0);
    }
    for (int32_t i = 0; i < n; i++) {
        const int32_t b = ch.groups[ch.begin[i]];
        int32_t start = 0;
        for (int32_t k = c->child_start[b]; k < c->child_start[b + 1]; k++) {
            const int32_t q = ch.child_chain[k], child = c->group_children[k];
            assert_int_equal(q, chain_of[child]);
            assert_true(q < i);
            assert_int_equal(ch.groups[ch.begin[q + 1] - 1], child);
            if (finish[q] > start) start = finish[q];
        }
        finish[i] = start + ch.begin[i + 1] - ch.begin[i];
        assert_true(start >= last_start);
        if (i > 0 && start == last_start)
            assert_true(prio[i - 1] > prio[i] ||
                        (prio[i - 1] == prio[i] && ch.groups[ch.begin[i - 1]] < b));
        last_start = start;
    }
    /* The second queue order: every chain once, by prio descending, then in chain order, so
     * a chain's children (higher prio) come before it. */
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n);
    assert_non_null(pos);
    for (int32_t i = 0; i < n; i++) pos[i] = -1;
    for (int32_t r = 0; r < n; r++) {
        const int32_t i = ch.by_path[r];
        assert_true(i >= 0 && i < n);
        assert_int_equal(pos[i], -1);
        pos[i] = r;
        if (r > 0) {
            const int32_t h = ch.by_path[r - 1];
            assert_true(prio[h] > prio[i] || (prio[h] == prio[i] && h < i));
        }
    }
    for (int32_t i = 0; i < n; i++) {
        const int32_t b = ch.groups[ch.begin[i]];
        for (int32_t k = c->child_start[b]; k < c->child_start[b + 1]; k++)
            assert_true(pos[ch.child_chain[k]] < pos[i]);
    }
    free(pos), free(finish), free(prio), free(chain_of);
    pc_gpu_chains_free(&ch);
    return n;
}

/* Checks the tile strategy's schedule of c for per_group slices and `warps` warps, the slices
 * of layers of at most max_slices slices split into `parts` parts: every (slice, part) dealt
 * once, with the split flag of its layer, and the lists run to the end (some warp's next unit
 * always finds its children's and its wait group's slices done, all their parts: no deadlock).
 * Returns the warp of the unit of slice `probe` (part 0). */
static int32_t check_schedule(const pc_circuit *c, int32_t per_group, int32_t parts,
                              int32_t max_slices, int32_t warps, int32_t probe) {
    const int32_t G = c->num_groups, slices = G * per_group;
    pc_gpu_group *g = calloc((size_t)G, sizeof *g);
    uint8_t *split = calloc((size_t)G, 1);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)slices * (size_t)parts);
    int32_t *begin = malloc(sizeof(int32_t) * (size_t)(warps + 1));
    int32_t *dealt = calloc((size_t)slices, sizeof(int32_t)); /* bit p: part p seen */
    int32_t slots = 0, probe_warp = -1, units = 0;
    assert_true(g && split && order && begin && dealt);
    assert_int_equal(pc_gpu_plan(c, g, &slots), PC_OK);
    pc_gpu_tile_thin_layers(c, per_group, max_slices, split);
    for (int32_t l = 0; l < c->num_layers; l++) {
        const int32_t width = c->layer_start[l + 1] - c->layer_start[l];
        for (int32_t gi = c->layer_start[l]; gi < c->layer_start[l + 1]; gi++)
            assert_int_equal(split[gi], width * per_group <= max_slices);
    }
    for (int32_t gi = 0; gi < G; gi++) units += per_group * (split[gi] && parts > 1 ? parts : 1);
    assert_int_equal(pc_gpu_tile_schedule(c, g, T90, per_group, parts, split, warps, order, begin),
                     PC_OK);
    assert_int_equal(begin[0], 0);
    assert_int_equal(begin[warps], units);
    for (int32_t w = 0; w < warps; w++) {
        assert_true(begin[w] <= begin[w + 1]);
        for (int32_t i = begin[w]; i < begin[w + 1]; i++) {
            const int32_t e = order[i], gi = PC_GPU_TILE_ENTRY_GROUP(e);
            const int32_t sl = gi * per_group + PC_GPU_TILE_ENTRY_SLICE(e);
            const int32_t p = PC_GPU_TILE_ENTRY_PART(e);
            assert_true(gi >= 0 && gi < G && PC_GPU_TILE_ENTRY_SLICE(e) < per_group);
            assert_true(sl >= 0 && sl < slices);
            assert_int_equal(PC_GPU_TILE_ENTRY_SPLIT(e), split[gi] && parts > 1);
            assert_true(p < (PC_GPU_TILE_ENTRY_SPLIT(e) ? parts : 1));
            assert_false(dealt[sl] >> p & 1);
            dealt[sl] |= 1 << p;
            if (sl == probe && p == 0) probe_warp = w;
        }
    }
    /* Run the lists: done[slice] counts its parts run. */
    int32_t *pos = calloc((size_t)warps, sizeof(int32_t)), left = units;
    int32_t *done = calloc((size_t)slices, sizeof(int32_t));
    assert_true(pos && done);
#define SLICE_DONE(q, sl) (done[(q) * per_group + (sl)] == (split[q] && parts > 1 ? parts : 1))
    while (left > 0) {
        int progress = 0;
        for (int32_t w = 0; w < warps; w++) {
            if (begin[w] + pos[w] == begin[w + 1]) continue;
            const int32_t e = order[begin[w] + pos[w]];
            const int32_t u = PC_GPU_TILE_ENTRY_GROUP(e) * per_group + PC_GPU_TILE_ENTRY_SLICE(e);
            const int32_t gi = u / per_group, sl = u % per_group;
            int ok = g[gi].wait < 0 || SLICE_DONE(g[gi].wait, sl);
            for (int32_t k = g[gi].child_begin; k < g[gi].child_end; k++)
                ok = ok && SLICE_DONE(c->group_children[k], sl);
            if (ok) done[u]++, pos[w]++, left--, progress = 1;
        }
        assert_true(progress);
    }
#undef SLICE_DONE
    free(g), free(split), free(order), free(begin), free(dealt), free(pos), free(done);
    return probe_warp;
}

static void test_random_circuits(void **state) {
    (void)state;
    for (int rep = 0; rep < 200; rep++) {
        const int32_t V = (int32_t)pc_hr_int(1, 300);
        pc_hclt *m = pc_hr_model(V, 2, (int32_t)pc_hr_int(1, 4), pc_hr_unit(), 0);
        pc_circuit *c = NULL;
        if (pc_circuit_compile(m, &c) != PC_OK) fail_msg("compile: %s", pc_last_error());
        check_plan(c);
        check_chains(c, INT32_MAX, INT32_MAX);
        check_chains(c, (int32_t)pc_hr_int(1, 5), INT32_MAX);
        check_chains(c, INT32_MAX, (int32_t)pc_hr_int(0, 12));
        check_chains(c, (int32_t)pc_hr_int(1, 8), PC_GPU_CHAIN_WINDOW_VARS);
        check_schedule(c, (int32_t)pc_hr_int(1, 4), (int32_t)pc_hr_int(1, 8),
                       (int32_t)pc_hr_int(0, 40), (int32_t)pc_hr_int(1, 20), -1);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
}

/* The shipped model's tree: the plan is valid and reuses slots (far fewer than groups). */
static void test_mnist_model(void **state) {
    (void)state;
    const char *src = getenv("PC_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/models/mnist.h5", src ? src : ".");
    pc_hclt *m = NULL;
    if (pc_hclt_load(path, &m) != PC_OK) fail_msg("%s", pc_last_error());
    pc_circuit *c = NULL;
    if (pc_circuit_compile(m, &c) != PC_OK) fail_msg("compile: %s", pc_last_error());
    const int32_t slots = check_plan(c), chains = check_chains(c, INT32_MAX, INT32_MAX);
    int32_t slots_again = 0;
    assert_int_equal(check_chains(c, 1, INT32_MAX), c->num_groups); /* one chain per group */
    assert_int_equal(check_chains(c, INT32_MAX, 0), check_chains(c, 1, INT32_MAX)); /* no links */
    print_message("mnist.h5: %d groups, %d layers, %d message slots, %d chains\n",
                  c->num_groups, c->num_layers, slots, chains);
    assert_true(slots < c->num_groups / 2);
    assert_true(chains < c->num_groups / 2); /* most groups of the tree have one child */
    /* The tile strategy's schedule (16 warps, one slice) gives the warp of the largest group
     * (101 variables, the image's border) fewer units than the others' mean. */
    int32_t big = 0;
    for (int32_t g = 1; g < c->num_groups; g++)
        if (c->var_start[g + 1] - c->var_start[g] > c->var_start[big + 1] - c->var_start[big])
            big = g;
    const int32_t w = check_schedule(c, 1, 1, 0, 16, big);
    check_schedule(c, 1, 4, 8, 16, big); /* as the K = 32 kernel at batch 512 runs it */
    pc_gpu_group *gr = calloc((size_t)c->num_groups, sizeof *gr);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)c->num_groups), begin[17];
    assert_true(gr && order);
    assert_int_equal(pc_gpu_plan(c, gr, &slots_again), PC_OK);
    assert_int_equal(pc_gpu_tile_schedule(c, gr, T90, 1, 1, NULL, 16, order, begin), PC_OK);
    print_message("tile schedule: the warp of group %d (%d variables) runs %d of %d units\n", big,
                  c->var_start[big + 1] - c->var_start[big], begin[w + 1] - begin[w],
                  c->num_groups);
    assert_true(begin[w + 1] - begin[w] < c->num_groups / 16);
    free(gr), free(order);
    pc_circuit_free(c);
    pc_hclt_free(m);
}

/* The estimated time of wide items for layers [0, split) and narrow ones after, summed from
 * scratch (the function under test updates one running sum). */
static double split_time(const pc_circuit *c, int32_t split, int64_t wide, int64_t narrow,
                         double cost, int32_t grid) {
    double t = 0.0;
    for (int32_t l = 0; l < c->num_layers; l++) {
        const int64_t w = c->layer_start[l + 1] - c->layer_start[l];
        const int64_t items = l < split ? w * wide : w * narrow;
        t += (l < split ? cost : 1.0) * (double)((items + grid - 1) / grid);
    }
    return t;
}

/* A circuit that has only layers (all the split looks at). */
static void set_widths(pc_circuit *c, int32_t *starts, const int32_t *widths, int32_t L) {
    c->num_layers = L, c->layer_start = starts;
    starts[0] = 0;
    for (int32_t l = 0; l < L; l++) starts[l + 1] = starts[l] + widths[l];
}

static void test_split_layers(void **state) {
    (void)state;
    int32_t widths[64], starts[65];
    pc_circuit c = {0};
    for (int rep = 0; rep < 2000; rep++) {
        const int32_t L = (int32_t)pc_hr_int(1, 60);
        for (int32_t l = 0; l < L; l++) widths[l] = (int32_t)pc_hr_int(1, 200);
        set_widths(&c, starts, widths, L);
        const int64_t wide = pc_hr_int(1, 64);
        const int64_t narrow = wide * pc_hr_int(1, 32);
        /* quarters: the sums stay exact, so ties are ties in both computations */
        const double cost = 0.25 * (double)pc_hr_int(1, 80);
        const int32_t grid = (int32_t)pc_hr_int(1, 500);
        const int64_t min_wide = pc_hr_int(0, 1) ? 0 : pc_hr_int(1, 2 * grid);
        const int32_t got = pc_gpu_split_layers(&c, wide, narrow, cost, min_wide, grid);
        int32_t want = 0;
        for (int32_t s = 1; s <= L && widths[0] * wide >= min_wide; s++)
            if (split_time(&c, s, wide, narrow, cost, grid) <
                split_time(&c, want, wide, narrow, cost, grid))
                want = s;
        if (got != want)
            fail_msg("L=%d wide=%lld narrow=%lld cost=%g min %lld grid=%d: split %d, want %d",
                     L, (long long)wide, (long long)narrow, cost, (long long)min_wide, grid,
                     got, want);
    }
    /* Extremes: wide items that cost nothing go everywhere; wide items as dear as all their
     * narrow ones together, and no faster per wave, go nowhere. */
    const int32_t mnist_like[] = {87, 69, 56, 51, 46, 35, 30, 27, 22, 21, 15, 12, 7, 2, 2, 2, 1};
    set_widths(&c, starts, mnist_like, 17);
    assert_int_equal(pc_gpu_split_layers(&c, 8, 128, 0.25, 0, 264), 17);
    assert_int_equal(pc_gpu_split_layers(&c, 8, 128, 16.0, 0, 264), 0);
    /* ... unless the first layer has too few of them: then none. */
    assert_int_equal(pc_gpu_split_layers(&c, 8, 128, 0.25, 8 * 87, 264), 17);
    assert_int_equal(pc_gpu_split_layers(&c, 8, 128, 0.25, 8 * 88, 264), 0);
    /* K = 256 at batch 512 (8 wide, 128 narrow items per group, a wide item 8 narrow ones):
     * the wide layers at the leaves, the thin top narrow. */
    const int32_t split = pc_gpu_split_layers(&c, 8, 128, 8.0, 0, 264);
    assert_true(split > 0 && split < 13);
}

/* The tables a rule is checked on: sm_90, the default, and one of other values. */
static pc_gpu_tuning other_table(void) {
    pc_gpu_tuning t = pc_gpu_tuning_sm90;
    t.name = "other";
    t.pad_128_above = 100, t.warp_over_tile_t_k32 = 16, t.warp_over_tile_t_k64 = 8;
    t.warp_always_max_k = 96, t.warp_k128_per_sm = 7, t.tile_k128_max_waves = 3;
    t.tile_k128_min_per_sm = 2, t.tile_k128_gap_lo_per_sm = 6, t.tile_k128_gap_hi_per_sm = 9;
    t.tile_blocks_per_sm = 2, t.warp_eight_above_k = 120, t.warp_eight_per_sm = 5;
    t.warp_eight_per_sm_64 = 3, t.warp_three_per_sm = 30, t.chain_long_max_k = 16;
    t.chain_long_per_sm = 40, t.persistent_large_n = 1000;
    return t;
}

/* fuse's choices restated from the table's fields (gpu_choice.h). */
static int32_t want_samples(const pc_gpu_tuning *t, int64_t n, int32_t sms) {
    int32_t T = 4;
    while (T < PC_GPU_TILE_MAX_T && (n + T - 1) / T > (int64_t)t->tile_blocks_per_sm * sms) T *= 2;
    return T;
}
static int want_warp(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms) {
    if (K < 1 || K > 128) return 0;
    if (K <= 64)
        return want_samples(t, n, sms) > (K <= 32 ? t->warp_over_tile_t_k32 : t->warp_over_tile_t_k64);
    return K <= t->warp_always_max_k || n > (int64_t)t->warp_k128_per_sm * sms;
}
static int want_tile(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms) {
    if (K <= 64) return 1;
    if (K <= t->warp_always_max_k || K > 128) return 0;
    const int64_t s = sms;
    return n <= t->tile_k128_max_waves * 32 * s && n > t->tile_k128_min_per_sm * s &&
           !(n > t->tile_k128_gap_lo_per_sm * s && n < t->tile_k128_gap_hi_per_sm * s);
}
static int want_form(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms) {
    return K > t->warp_eight_above_k                                        ? PC_GPU_WARP_EIGHT
           : K > 64 && n <= t->warp_eight_per_sm * (int64_t)sms           ? PC_GPU_WARP_EIGHT
           : K > 32 && K <= 64 && n <= t->warp_eight_per_sm_64 * (int64_t)sms ? PC_GPU_WARP_EIGHT
           : K > 64 && K <= 96 && n > t->warp_three_per_sm * (int64_t)sms ? PC_GPU_WARP_THREE
                                                                          : PC_GPU_WARP_TWO;
}
static int want_chains(const pc_gpu_tuning *t, int32_t K, int64_t n, int32_t sms) {
    return K <= t->chain_long_max_k || n > t->chain_long_per_sm * (int64_t)sms
               ? PC_GPU_CHAINS_LONG
               : PC_GPU_CHAINS_SHORT;
}
static int32_t want_states(const pc_gpu_tuning *t, int32_t K) {
    return K > 32 && K < 64 ? 64 : K > t->pad_128_above && K < 128 ? 128 : (K + 3) / 4 * 4;
}

/* Every rule against its restatement at random (K, n, sms) on table t. */
static void check_rules(const pc_gpu_tuning *t) {
    for (int rep = 0; rep < 40000; rep++) {
        const int32_t sms = (int32_t)pc_hr_int(1, 200), K = (int32_t)pc_hr_int(1, 300);
        const int64_t n = pc_hr_int(1, 20000);
        const int got[6] = {pc_gpu_tile_samples(t, n, sms), pc_gpu_fuse_takes_warp(t, K, n, sms),
                            pc_gpu_fuse_takes_tile(t, K, n, sms),
                            K <= 128 ? pc_gpu_warp_form(t, K, n, sms) : 0,
                            K <= 128 ? pc_gpu_warp_chains(t, K, n, sms) : 0,
                            pc_gpu_fuse_states(t, K)};
        const int want[6] = {want_samples(t, n, sms), want_warp(t, K, n, sms),
                             want_tile(t, K, n, sms), K <= 128 ? want_form(t, K, n, sms) : 0,
                             K <= 128 ? want_chains(t, K, n, sms) : 0, want_states(t, K)};
        for (int i = 0; i < 6; i++)
            if (got[i] != want[i])
                fail_msg("table %s, rule %d: K = %d, n = %lld on %d SMs: %d, want %d", t->name,
                         i, K, (long long)n, sms, got[i], want[i]);
        if (pc_gpu_fuse_warp_k(K) != (K <= 128)) fail_msg("K = %d: warp considered", K);
        if (pc_gpu_persistent_large(t, n) != (n >= t->persistent_large_n))
            fail_msg("table %s: n = %lld: persistent large", t->name, (long long)n);
        if (pc_gpu_warp_queue_by_path(t, n, sms) != (n >= (int64_t)t->warp_path_waves * sms))
            fail_msg("table %s: %lld gangs on %d blocks: by path", t->name, (long long)n, sms);
    }
}

static void test_rules_on_tables(void **state) {
    (void)state;
    const pc_gpu_tuning other = other_table();
    check_rules(&pc_gpu_tuning_sm90);
    check_rules(&pc_gpu_tuning_default);
    check_rules(&other);
    /* the other table's values move the switches */
    assert_true(pc_gpu_fuse_takes_warp(T90, 128, 600, 132));
    assert_false(pc_gpu_fuse_takes_warp(&other, 128, 600, 132));
    assert_int_equal(pc_gpu_fuse_states(&other, 101), 128);
    assert_int_equal(pc_gpu_fuse_states(T90, 101), 104);
    /* the tables by compute capability: 9.x has its own, everything else the default */
    assert_ptr_equal(pc_gpu_tuning_for(9, 0), &pc_gpu_tuning_sm90);
    assert_ptr_equal(pc_gpu_tuning_for(8, 0), &pc_gpu_tuning_default);
    assert_ptr_equal(pc_gpu_tuning_for(10, 0), &pc_gpu_tuning_default);
}

/* On sm_90's table and 132 SMs (an H200), the switch points where the measurements put them
 * (docs/tuning.md): tile samples per block; warp from 1,057 samples (more than 8 per tile
 * block) at K <= 32, from 529 (more than 4) at 32 < K <= 64 and 112 < K <= 128, always at
 * 64 < K <= 112; above K = 64 tile up to 8,448 samples (two waves of 32-sample blocks) but not
 * at n <= 132 nor at 529-659 (on 100 SMs: not at n <= 100 nor 401-499). */
static void test_fuse_choice(void **state) {
    (void)state;
    assert_int_equal(pc_gpu_tile_samples(T90, 528, 132), 4);
    assert_int_equal(pc_gpu_tile_samples(T90, 529, 132), 8);
    assert_int_equal(pc_gpu_tile_samples(T90, 1 << 20, 132), PC_GPU_TILE_MAX_T);
    static const int64_t warp[][3] = {
        {16, 512, 0},  {32, 1056, 0}, {32, 1057, 1}, {16, 2112, 1}, {32, 4096, 1},
        {64, 512, 0},  {33, 528, 0},  {33, 529, 1},  {64, 640, 1},  {64, 4096, 1},
        {65, 1, 1},    {80, 16, 1},   {72, 4096, 1}, {81, 16, 1},   {96, 1, 1},
        {97, 16, 1},   {112, 330, 1}, {113, 528, 0}, {113, 529, 1}, {128, 528, 0},
        {128, 529, 1}, {129, 4096, 0}, {0, 100, 0}};
    for (size_t i = 0; i < sizeof warp / sizeof warp[0]; i++)
        if (pc_gpu_fuse_takes_warp(T90, (int32_t)warp[i][0], warp[i][1], 132) != warp[i][2])
            fail_msg("K = %lld, n = %lld: takes warp, want %lld", (long long)warp[i][0],
                     (long long)warp[i][1], (long long)warp[i][2]);
    static const int64_t tile[][4] = {
        {128, 100, 100, 0}, {128, 101, 100, 1}, {128, 400, 100, 1}, {128, 401, 100, 0},
        {128, 499, 100, 0}, {128, 500, 100, 1}, {96, 400, 132, 0},  {112, 400, 132, 0},
        {116, 400, 132, 1}, {128, 8448, 132, 1}, {128, 8449, 132, 0}, {64, 20000, 132, 1}};
    for (size_t i = 0; i < sizeof tile / sizeof tile[0]; i++)
        if (pc_gpu_fuse_takes_tile(T90, (int32_t)tile[i][0], tile[i][1], (int32_t)tile[i][2]) !=
            tile[i][3])
            fail_msg("K = %lld, n = %lld on %lld SMs: takes tile, want %lld",
                     (long long)tile[i][0], (long long)tile[i][1], (long long)tile[i][2],
                     (long long)tile[i][3]);
}

/* fuse's states per latent on sm_90: a multiple of 4 at least K, 64 at 32 < K < 64 and 128 at
 * 112 < K < 128. */
static void test_fuse_states(void **state) {
    (void)state;
    for (int32_t K = 1; K <= 600; K++) {
        const int32_t got = pc_gpu_fuse_states(T90, K);
        if (got % 4 != 0 || got < K) fail_msg("K = %d: fuse runs %d states", K, got);
    }
    assert_int_equal(pc_gpu_fuse_states(T90, 33), 64);
    assert_int_equal(pc_gpu_fuse_states(T90, 66), 68);
    assert_int_equal(pc_gpu_fuse_states(T90, 112), 112);
    assert_int_equal(pc_gpu_fuse_states(T90, 113), 128);
    assert_int_equal(pc_gpu_fuse_states(T90, 254), 256);
}

/* The warp strategy's item forms and chain plans on sm_90 and 132 SMs, at the switches. */
static void test_warp_form_and_chains(void **state) {
    (void)state;
    static const int64_t form[][3] = {
        {128, 1, PC_GPU_WARP_EIGHT}, {128, 1 << 20, PC_GPU_WARP_EIGHT},
        {32, 16, PC_GPU_WARP_TWO},   {64, 1056, PC_GPU_WARP_EIGHT},
        {64, 1057, PC_GPU_WARP_TWO}, {96, 1584, PC_GPU_WARP_EIGHT},
        {96, 1585, PC_GPU_WARP_TWO}, {96, 2641, PC_GPU_WARP_THREE},
        {112, 4096, PC_GPU_WARP_TWO}};
    for (size_t i = 0; i < sizeof form / sizeof form[0]; i++)
        assert_int_equal(pc_gpu_warp_form(T90, (int32_t)form[i][0], form[i][1], 132), form[i][2]);
    static const int64_t chains[][3] = {
        {16, 1, PC_GPU_CHAINS_LONG},      {32, 1 << 20, PC_GPU_CHAINS_LONG},
        {36, 3168, PC_GPU_CHAINS_SHORT},  {64, 3169, PC_GPU_CHAINS_LONG},
        {128, 2048, PC_GPU_CHAINS_SHORT}, {128, 4096, PC_GPU_CHAINS_LONG}};
    for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++)
        assert_int_equal(pc_gpu_warp_chains(T90, (int32_t)chains[i][0], chains[i][1], 132),
                         chains[i][2]);
    assert_int_equal(T90->chain_short, 4);
    assert_int_equal(T90->chain_long, 8);
}

static void test_bad_arguments(void **state) {
    (void)state;
    int32_t slots = 0;
    assert_int_equal(pc_gpu_plan(NULL, NULL, &slots), PC_ERR_ARG);
    pc_gpu_chains ch = {0};
    assert_int_equal(pc_gpu_chain_plan(NULL, T90, INT32_MAX, INT32_MAX, &ch), PC_ERR_ARG);
    int32_t order[1], begin[2];
    assert_int_equal(pc_gpu_tile_schedule(NULL, NULL, T90, 1, 1, NULL, 1, order, begin),
                     PC_ERR_ARG);
    pc_circuit c = {0};
    pc_gpu_group g = {0};
    assert_int_equal(pc_gpu_tile_schedule(&c, &g, T90, 1, PC_GPU_TILE_MAX_PARTS + 1, NULL, 1,
                                          order, begin), PC_ERR_ARG);
    assert_int_equal(pc_gpu_tile_schedule(&c, &g, T90, PC_GPU_TILE_MAX_SLICES + 1, 1, NULL, 1,
                                          order, begin), PC_ERR_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_circuits),
        cmocka_unit_test(test_mnist_model),
        cmocka_unit_test(test_split_layers),
        cmocka_unit_test(test_rules_on_tables),
        cmocka_unit_test(test_fuse_choice),
        cmocka_unit_test(test_fuse_states),
        cmocka_unit_test(test_warp_form_and_chains),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
