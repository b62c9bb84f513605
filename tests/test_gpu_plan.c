/* The GPU engine's message-slot plan (src/layers/gpu_plan.c), checked without a GPU: on random
 * circuits and on the shipped MNIST model, every message stays in its slot until its parent has
 * read it, and a wait never points into the writer's own layer. Also the persistent fuse
 * kernel's split between wide and narrow items, against a direct search. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "layers/gpu_plan.h"
#include "pc/circuit.h"
#include "pc/hclt.h"

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

static void test_random_circuits(void **state) {
    (void)state;
    for (int rep = 0; rep < 200; rep++) {
        const int32_t V = (int32_t)pc_hr_int(1, 300);
        pc_hclt *m = pc_hr_model(V, 2, (int32_t)pc_hr_int(1, 4), pc_hr_unit(), 0);
        pc_circuit *c = NULL;
        if (pc_circuit_compile(m, &c) != PC_OK) fail_msg("compile: %s", pc_last_error());
        check_plan(c);
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
    const int32_t slots = check_plan(c);
    print_message("mnist.h5: %d groups, %d layers, %d message slots\n", c->num_groups,
                  c->num_layers, slots);
    assert_true(slots < c->num_groups / 2);
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

static void test_bad_arguments(void **state) {
    (void)state;
    int32_t slots = 0;
    assert_int_equal(pc_gpu_plan(NULL, NULL, &slots), PC_ERR_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_circuits),
        cmocka_unit_test(test_mnist_model),
        cmocka_unit_test(test_split_layers),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
