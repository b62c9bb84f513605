/* Structure learning: mutual information, Chow-Liu tree, centre rooting, HCLT structure. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "learn/learn_internal.h"
#include "pc/rng.h"
#include "pc/learn.h"
#include "testutil.h"

static uint64_t g_seed;

/* Eccentricity of every vertex of the tree `parent` [n] (all-pairs distances, n small). */
static void eccentricities(int32_t n, const int32_t *parent, int32_t *ecc) {
    int32_t *dist = malloc((size_t)n * n * sizeof *dist);
    assert_non_null(dist);
    for (int32_t i = 0; i < n * n; i++) dist[i] = (i / n == i % n) ? 0 : n + 1;
    for (int32_t v = 0; v < n; v++)
        if (parent[v] >= 0) dist[v * n + parent[v]] = dist[parent[v] * n + v] = 1;
    for (int32_t k = 0; k < n; k++)
        for (int32_t i = 0; i < n; i++)
            for (int32_t j = 0; j < n; j++)
                if (dist[i * n + k] + dist[k * n + j] < dist[i * n + j])
                    dist[i * n + j] = dist[i * n + k] + dist[k * n + j];
    for (int32_t i = 0; i < n; i++) {
        ecc[i] = 0;
        for (int32_t j = 0; j < n; j++) {
            assert_true(dist[i * n + j] <= n); /* connected */
            if (dist[i * n + j] > ecc[i]) ecc[i] = dist[i * n + j];
        }
    }
    free(dist);
}

/* One root, parents in range, no cycles; the root has least eccentricity (lowest index among
 * ties). */
static void assert_centre_rooted_tree(int32_t n, const int32_t *parent) {
    int32_t root = -1;
    for (int32_t v = 0; v < n; v++) {
        if (parent[v] == -1) {
            assert_int_equal(root, -1);
            root = v;
        } else {
            assert_in_range(parent[v], 0, n - 1);
        }
    }
    assert_true(root >= 0);
    int32_t *ecc = malloc((size_t)n * sizeof *ecc);
    assert_non_null(ecc);
    eccentricities(n, parent, ecc);
    for (int32_t v = 0; v < n; v++) {
        assert_true(ecc[root] <= ecc[v]);
        if (ecc[v] == ecc[root]) assert_true(root <= v);
    }
    free(ecc);
}

static void test_mi_independent_vs_identical(void **state) {
    (void)state;
    pc_rng rng = {g_seed};
    const int64_t n = 4000;
    pc_data d = {.count = n, .width = 4};
    d.values = malloc((size_t)(n * 4));
    assert_non_null(d.values);
    for (int64_t i = 0; i < n; i++) {
        uint8_t a = (uint8_t)pc_rng_below(&rng, 256);
        d.values[i * 4 + 0] = a;
        d.values[i * 4 + 1] = a;                                       /* identical */
        d.values[i * 4 + 2] = (uint8_t)pc_rng_below(&rng, 256); /* independent */
        d.values[i * 4 + 3] = (uint8_t)(255 - a);                      /* a bijection of a */
    }
    double mi[16];
    for (int i = 0; i < 16; i++) mi[i] = NAN; /* poison */
    assert_int_equal(pc_learn_mutual_info(&d, 256, 16, 0, g_seed, mi), PC_OK);
    for (int i = 0; i < 4; i++) {
        assert_true(mi[i * 4 + i] == 0);
        for (int j = 0; j < 4; j++) assert_true(mi[i * 4 + j] == mi[j * 4 + i]);
    }
    /* identical columns: MI = entropy of the 16 bins, log 16 = 2.77 for uniform values, less
     * sampling noise (4000 rows: a few hundredths) */
    assert_true(fabs(mi[0 * 4 + 1] - log(16.0)) < 0.05);
    assert_true(fabs(mi[0 * 4 + 3] - log(16.0)) < 0.05);
    /* independent: only the estimator's bias, about (B-1)^2 / (2n) = 0.028 */
    assert_true(mi[0 * 4 + 2] < 0.06);
    assert_true(mi[1 * 4 + 2] < 0.06);

    /* a sample of the rows: close to the full estimate; all rows: identical to max_rows = 0 */
    double mi_sub[16], mi_all[16];
    assert_int_equal(pc_learn_mutual_info(&d, 256, 16, 3000, g_seed, mi_sub), PC_OK);
    assert_true(fabs(mi_sub[1] - mi[1]) < 0.1 && mi_sub[2] < 0.1);
    assert_int_equal(pc_learn_mutual_info(&d, 256, 16, n, g_seed, mi_all), PC_OK);
    assert_memory_equal(mi_all, mi, sizeof mi);

    /* missing values are left out: identical columns stay at the entropy */
    d.missing = calloc((size_t)(n * 4), 1);
    assert_non_null(d.missing);
    for (int64_t i = 0; i < n; i += 3) d.missing[i * 4 + 1] = 1;
    for (int64_t i = 0; i < n; i += 5) d.values[i * 4 + 1] = (uint8_t)(d.values[i * 4 + 1] ^ 0x80);
    for (int64_t i = 0; i < n; i += 5) d.missing[i * 4 + 1] = 1; /* the altered ones are hidden */
    assert_int_equal(pc_learn_mutual_info(&d, 256, 16, 0, g_seed, mi), PC_OK);
    assert_true(fabs(mi[1] - log(16.0)) < 0.07);
    free(d.missing);
    free(d.values);
}

static void test_mi_bad_arguments(void **state) {
    (void)state;
    uint8_t values[6] = {0, 1, 2, 3, 4, 9};
    pc_data d = {.count = 3, .width = 2, .values = values};
    double mi[4];
    assert_int_equal(pc_learn_mutual_info(&d, 256, 1, 0, 1, mi), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "num_bins"));
    assert_int_equal(pc_learn_mutual_info(&d, 1, 4, 0, 1, mi), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "num_cats"));
    assert_int_equal(pc_learn_mutual_info(&d, 8, 4, 0, 1, mi), PC_ERR_DATA); /* value 9 >= 8 */
    assert_non_null(strstr(pc_last_error(), "value 9"));
    /* ... unless it is marked missing: it is never read, and gives what 0 there gives */
    uint8_t missing[6] = {0, 0, 0, 0, 0, 1};
    double mi0[4];
    d.missing = missing;
    assert_int_equal(pc_learn_mutual_info(&d, 8, 4, 0, 1, mi), PC_OK);
    values[5] = 0;
    assert_int_equal(pc_learn_mutual_info(&d, 8, 4, 0, 1, mi0), PC_OK);
    for (int i = 0; i < 4; i++) assert_true(mi[i] == mi0[i]);
    values[5] = 9;
    d.missing = NULL;
    assert_int_equal(pc_learn_mutual_info(NULL, 8, 4, 0, 1, mi), PC_ERR_ARG);
    pc_data empty = {.count = 0, .width = 2, .values = values};
    assert_int_equal(pc_learn_mutual_info(&empty, 256, 4, 0, 1, mi), PC_ERR_DATA);
}

/* Samples a tree-shaped distribution (each child copies its parent with probability 0.75, else
 * draws uniformly from C = 4 values) and checks that Chow-Liu finds the tree's edges. */
static void test_chow_liu_recovers_tree(void **state) {
    (void)state;
    pc_rng rng = {g_seed ^ 0x1234};
    const int32_t n = 14;
    const int64_t rows = 20000;
    int32_t perm[14], true_parent[14], parent[14];
    for (int32_t i = 0; i < n; i++) perm[i] = i;
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t)pc_rng_below(&rng, i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    /* tree over positions 0..n-1 with parent earlier; variables are perm[position] */
    true_parent[perm[0]] = -1;
    for (int32_t i = 1; i < n; i++) true_parent[perm[i]] = perm[pc_rng_below(&rng, i)];
    pc_data d = {.count = rows, .width = n};
    d.values = malloc((size_t)(rows * n));
    assert_non_null(d.values);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *x = d.values + r * n;
        for (int32_t i = 0; i < n; i++) {
            int32_t v = perm[i];
            if (true_parent[v] < 0 || pc_rng_unit(&rng) >= 0.75)
                x[v] = (uint8_t)pc_rng_below(&rng, 4);
            else
                x[v] = x[true_parent[v]];
        }
    }
    double *mi = malloc((size_t)n * n * sizeof *mi);
    assert_non_null(mi);
    assert_int_equal(pc_learn_mutual_info(&d, 4, 4, 0, g_seed, mi), PC_OK);
    for (int32_t v = 0; v < n; v++) parent[v] = -7; /* poison */
    assert_int_equal(pc_learn_chow_liu(n, mi, parent), PC_OK);
    assert_centre_rooted_tree(n, parent);
    for (int32_t v = 0; v < n; v++) {
        if (parent[v] < 0) continue;
        int32_t p = parent[v];
        assert_true(true_parent[v] == p || true_parent[p] == v);
    }
    free(mi);
    free(d.values);
}

/* On random weights: a spanning tree, rooted at a centre, that is maximal (every non-tree edge
 * weighs no more than any edge on the tree path between its ends). */
static void test_chow_liu_maximal_and_centred(void **state) {
    (void)state;
    pc_rng rng = {g_seed ^ 0xABCD};
    for (int32_t n = 1; n <= 40; n += 13) {
        double *w = malloc((size_t)n * n * sizeof *w);
        int32_t *parent = malloc((size_t)n * sizeof *parent);
        int32_t *depth = malloc((size_t)n * sizeof *depth);
        assert_true(w && parent && depth);
        for (int32_t i = 0; i < n; i++)
            for (int32_t j = 0; j <= i; j++)
                w[i * n + j] = w[j * n + i] = i == j ? 0 : pc_rng_unit(&rng);
        if (n > 3) w[1 * n + 2] = w[2 * n + 1] = INFINITY; /* a huge weight is fine */
        assert_int_equal(pc_learn_chow_liu(n, w, parent), PC_OK);
        assert_centre_rooted_tree(n, parent);
        for (int32_t v = 0; v < n; v++) {
            depth[v] = 0;
            for (int32_t u = v; parent[u] >= 0; u = parent[u]) depth[v]++;
        }
        for (int32_t a = 0; a < n; a++)
            for (int32_t b = a + 1; b < n; b++) {
                if (parent[a] == b || parent[b] == a) continue;
                /* walk both ends up to their common ancestor; every edge passed must weigh
                 * at least w[a, b] */
                int32_t x = a, y = b;
                while (x != y) {
                    if (depth[x] >= depth[y]) {
                        assert_true(w[x * n + parent[x]] >= w[a * n + b]);
                        x = parent[x];
                    } else {
                        assert_true(w[y * n + parent[y]] >= w[a * n + b]);
                        y = parent[y];
                    }
                }
            }
        free(w);
        free(parent);
        free(depth);
    }
}

/* A path 0-1-...-(n-1) given by its weights: the centre is the middle (the lower one of two). */
static void test_chow_liu_path_centre(void **state) {
    (void)state;
    for (int32_t n = 2; n <= 7; n++) {
        double w[49] = {0};
        int32_t parent[7];
        for (int32_t i = 0; i + 1 < n; i++) w[i * n + i + 1] = w[(i + 1) * n + i] = 1.0 + i;
        assert_int_equal(pc_learn_chow_liu(n, w, parent), PC_OK);
        int32_t root = -1;
        for (int32_t v = 0; v < n; v++)
            if (parent[v] < 0) root = v;
        assert_int_equal(root, (n - 1) / 2);
        for (int32_t v = 0; v < n; v++)
            if (v != root) assert_int_equal(parent[v], v < root ? v + 1 : v - 1);
    }
}

static void test_chow_liu_bad_arguments(void **state) {
    (void)state;
    double w[4] = {0, NAN, NAN, 0};
    int32_t parent[2];
    assert_int_equal(pc_learn_chow_liu(2, w, parent), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "NaN"));
    assert_int_equal(pc_learn_chow_liu(0, w, parent), PC_ERR_ARG);
    assert_int_equal(pc_learn_chow_liu(2, NULL, parent), PC_ERR_ARG);
}

static void test_hclt_structure(void **state) {
    (void)state;
    /* root 2; 0 and 4 are leaves under 1 and 3; 5 is a leaf under the root */
    const int32_t parent[6] = {1, 2, -1, 2, 3, 2};
    pc_hclt *m = NULL;
    assert_int_equal(pc_learn_hclt_create(6, parent, 5, 3, &m), PC_OK);
    assert_int_equal(m->num_trans, 2);
    const int32_t want_trans[6] = {-1, 0, -1, 1, -1, -1};
    assert_memory_equal(m->trans_index, want_trans, sizeof want_trans);
    assert_memory_equal(m->parent, parent, sizeof parent);
    assert_int_equal(pc_hclt_validate(m, NULL), PC_OK);
    pc_hclt_free(m);

    /* a single variable: the root alone, no transitions */
    const int32_t one[1] = {-1};
    assert_int_equal(pc_learn_hclt_create(1, one, 2, 4, &m), PC_OK);
    assert_int_equal(m->num_trans, 0);
    pc_hclt_free(m);

    const int32_t two_roots[3] = {-1, -1, 0};
    assert_int_equal(pc_learn_hclt_create(3, two_roots, 2, 2, &m), PC_ERR_ARG);
    assert_null(m);
    assert_non_null(strstr(pc_last_error(), "roots"));
    const int32_t cycle[4] = {-1, 2, 3, 1};
    assert_int_not_equal(pc_learn_hclt_create(4, cycle, 2, 2, &m), PC_OK);
    assert_null(m);
    const int32_t out_of_range[2] = {-1, 5};
    assert_int_equal(pc_learn_hclt_create(2, out_of_range, 2, 2, &m), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "parent[1]"));
    assert_int_equal(pc_learn_hclt_create(2, parent, 1, 2, &m), PC_ERR_ARG);
    /* size, not K, decides: a model too large for any machine (8.8 TB of transitions) fails
     * cleanly instead of being killed later */
    const int32_t path[3] = {1, -1, 1};
    const int32_t chain[3] = {-1, 0, 1};
    assert_int_equal(pc_learn_hclt_create(3, path, 2, 1 << 20, &m), PC_OK); /* no rows: 50 MB */
    pc_hclt_free(m);
    assert_int_equal(pc_learn_hclt_create(3, chain, 2, 1 << 20, &m), PC_ERR_NOMEM);
    assert_null(m);
    assert_non_null(strstr(pc_last_error(), "GB"));
}

int main(void) {
    g_seed = pc_test_seed(); /* printed; PC_TEST_SEED replays a failing run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mi_independent_vs_identical),
        cmocka_unit_test(test_mi_bad_arguments),
        cmocka_unit_test(test_chow_liu_recovers_tree),
        cmocka_unit_test(test_chow_liu_maximal_and_centred),
        cmocka_unit_test(test_chow_liu_path_centre),
        cmocka_unit_test(test_chow_liu_bad_arguments),
        cmocka_unit_test(test_hclt_structure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
