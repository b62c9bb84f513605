/* Data of few categories: 0/1 values in a model of 256 categories learn the same tree as the
 * same data stored as 0/255 (they once collapsed it to a star: every value fell into MI bin 0),
 * and the category report says how many categories the data uses. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mnist_find.h"
#include "pc/learn.h"
#include "pc/rng.h"
#include "testutil.h"

static uint64_t g_seed;

/* Binary tree-shaped data: every child copies its parent with probability 0.85, else a fair
 * bit; `one` is the value stored for a 1 (1 or 255). */
static pc_data *binary_tree_data(int32_t n, int64_t rows, uint64_t seed, uint8_t one) {
    pc_rng rng = {seed};
    int32_t parent[64];
    parent[0] = -1;
    for (int32_t v = 1; v < n; v++) parent[v] = (int32_t)pc_rng_below(&rng, v);
    pc_data *d = NULL;
    assert_int_equal(pc_data_create(rows, n, &d), PC_OK);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *x = d->values + r * n;
        for (int32_t v = 0; v < n; v++) {
            const int bit = (parent[v] < 0 || pc_rng_unit(&rng) >= 0.85)
                                ? (int)pc_rng_below(&rng, 2)
                                : x[parent[v]] != 0;
            x[v] = bit ? one : 0;
        }
    }
    return d;
}

/* MI -> Chow-Liu -> HCLT (C = 256) -> init -> `steps` full EM steps; the mean LL per row of
 * the learned model on d goes to *mean_ll. With `star`, the MI is taken as 0 everywhere: the
 * star the tree collapsed to when 0/1 values all fell into one bin. */
static pc_hclt *learn(const pc_data *d, int32_t k, int steps, int star, double *mean_ll) {
    const int32_t n = d->width;
    double *mi = pc_test_alloc((size_t)n * n * sizeof *mi);
    int32_t *parent = pc_test_alloc((size_t)n * sizeof *parent);
    pc_test_poison_f64(mi, (size_t)n * n);
    assert_int_equal(pc_learn_mutual_info(d, 256, 16, 0, g_seed, mi), PC_OK);
    if (star) memset(mi, 0, (size_t)n * n * sizeof *mi);
    assert_int_equal(pc_learn_chow_liu(n, mi, parent), PC_OK);
    pc_hclt *m = NULL;
    assert_int_equal(pc_learn_hclt_create(n, parent, 256, k, &m), PC_OK);
    assert_int_equal(pc_learn_init_params(m, d, g_seed), PC_OK);
    pc_em *em = NULL;
    assert_int_equal(pc_em_create(m, &em), PC_OK);
    for (int s = 0; s < steps; s++)
        assert_int_equal(pc_em_step(em, d, NULL, d->count, 1.0, 0.1, NULL), PC_OK);
    assert_int_equal(pc_em_export(em, m), PC_OK);
    pc_em_free(em);
    double *lp = pc_test_alloc((size_t)d->count * sizeof *lp), sum = 0;
    assert_int_equal(pc_learn_loglik(m, d, lp), PC_OK);
    for (int64_t i = 0; i < d->count; i++) sum += lp[i];
    *mean_ll = sum / (double)d->count;
    free(lp);
    free(mi);
    free(parent);
    return m;
}

/* 0/1 and 0/255 give the same MI bit for bit, far from 0 for the tree's edges. */
static void test_mi_of_binary_data(void **state) {
    (void)state;
    const int32_t n = 12;
    pc_data *d01 = binary_tree_data(n, 3000, g_seed, 1);
    pc_data *d255 = binary_tree_data(n, 3000, g_seed, 255);
    double mi01[144], mi255[144];
    pc_test_poison_f64(mi01, 144);
    pc_test_poison_f64(mi255, 144);
    assert_int_equal(pc_learn_mutual_info(d01, 256, 16, 0, g_seed, mi01), PC_OK);
    assert_int_equal(pc_learn_mutual_info(d255, 256, 16, 0, g_seed, mi255), PC_OK);
    assert_memory_equal(mi01, mi255, sizeof mi01);
    double top = 0;
    for (int i = 0; i < 144; i++) top = mi01[i] > top ? mi01[i] : top;
    /* a copy with probability 0.85 + half of 0.15: MI ~ 0.33 nats */
    assert_true(top > 0.2);
    pc_data_free(d01);
    pc_data_free(d255);
}

/* The learned structure has transition rows and the same LL as for 0/255 data (the init draws
 * differ between category 1 and 255, so close rather than equal); both beat the star. */
static void test_learn_binary_data(void **state) {
    (void)state;
    const int32_t n = 16;
    pc_data *d01 = binary_tree_data(n, 2000, g_seed ^ 3, 1);
    pc_data *d255 = binary_tree_data(n, 2000, g_seed ^ 3, 255);
    double ll01 = NAN, ll255 = NAN;
    pc_hclt *m01 = learn(d01, 2, 20, 0, &ll01);
    pc_hclt *m255 = learn(d255, 2, 20, 0, &ll255);
    printf("0/1: %d transition rows, LL %.4f; 0/255: %d rows, LL %.4f\n", m01->num_trans, ll01,
           m255->num_trans, ll255);
    assert_true(m01->num_trans > 0);
    assert_int_equal(m01->num_trans, m255->num_trans);
    assert_memory_equal(m01->parent, m255->parent, (size_t)n * sizeof(int32_t));
    assert_true(fabs(ll01 - ll255) < 0.02 * fabs(ll255));
    /* fully independent bits: n ln 2 = 11.09 nats; the tree explains much of it */
    assert_true(ll01 > -0.85 * n * log(2.0));
    pc_hclt_free(m01);
    pc_hclt_free(m255);
    pc_data_free(d01);
    pc_data_free(d255);
}

/* Binarised MNIST (2000 training images, pixel > 127): the tree keeps hundreds of transition
 * rows, as the 0/255 images do. Skipped without MNIST. */
static void test_learn_binarised_mnist(void **state) {
    (void)state;
    char path[4096];
    if (pc_tool_find_mnist(NULL, "train-images-idx3-ubyte.gz", path, sizeof path) != PC_OK) {
        printf("MNIST not found: %s\n", pc_last_error());
        skip();
    }
    pc_data *all = NULL;
    assert_int_equal(pc_data_load_idx(path, &all), PC_OK);
    pc_data *d01 = NULL, *d255 = NULL;
    const int64_t rows = 2000;
    assert_int_equal(pc_data_create(rows, all->width, &d01), PC_OK);
    assert_int_equal(pc_data_create(rows, all->width, &d255), PC_OK);
    for (int64_t i = 0; i < rows * all->width; i++) {
        d01->values[i] = all->values[i] > 127;
        d255->values[i] = all->values[i] > 127 ? 255 : 0;
    }
    double ll01 = NAN, ll255 = NAN, ll_star = NAN;
    pc_hclt *m01 = learn(d01, 4, 15, 0, &ll01);
    pc_hclt *m255 = learn(d255, 4, 15, 0, &ll255);
    pc_hclt *star = learn(d01, 4, 15, 1, &ll_star);
    printf("binarised MNIST: 0/1 %d transition rows, LL %.2f; 0/255 %d rows, LL %.2f; "
           "star LL %.2f\n",
           m01->num_trans, ll01, m255->num_trans, ll255, ll_star);
    assert_true(m01->num_trans > 300);
    assert_int_equal(m01->num_trans, m255->num_trans);
    assert_true(fabs(ll01 - ll255) < 0.02 * fabs(ll255));
    assert_true(ll01 > ll_star + 20);
    pc_hclt_free(star);
    pc_category_use use;
    assert_int_equal(pc_learn_category_use(d01, 256, &use), PC_OK);
    assert_int_equal(use.used, 2);
    pc_hclt_free(m01);
    pc_hclt_free(m255);
    pc_data_free(d01);
    pc_data_free(d255);
    pc_data_free(all);
}

static void test_category_use(void **state) {
    (void)state;
    uint8_t values[8] = {0, 3, 3, 0, 7, 0, 3, 3};
    uint8_t missing[8] = {0, 0, 0, 0, 1, 0, 0, 0};
    pc_data d = {.count = 4, .width = 2, .values = values, .missing = missing};
    pc_category_use use = {-1, -1, -2};
    assert_int_equal(pc_learn_category_use(&d, 4, &use), PC_OK); /* 7 is hidden: never read */
    assert_int_equal(use.observed, 7);
    assert_int_equal(use.used, 2);
    assert_int_equal(use.max_value, 3);
    char text[256];
    memset(text, 'x', sizeof text);
    assert_int_equal(pc_learn_category_warning(&use, 256, text, sizeof text), 1);
    assert_non_null(strstr(text, "uses 2 of the model's 256 categories"));
    assert_non_null(strstr(text, "largest value 3"));
    assert_int_equal(pc_learn_category_warning(&use, 2, text, sizeof text), 0);
    assert_string_equal(text, "");
    /* a value >= num_cats names its place; a NULL or bad argument fails */
    d.missing = NULL;
    assert_int_equal(pc_learn_category_use(&d, 4, &use), PC_ERR_DATA);
    assert_non_null(strstr(pc_last_error(), "value 7 at row 2, variable 0"));
    assert_int_equal(pc_learn_category_use(NULL, 4, &use), PC_ERR_ARG);
    assert_int_equal(pc_learn_category_use(&d, 0, &use), PC_ERR_ARG);
    /* all missing: nothing used */
    uint8_t all_missing[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    d.missing = all_missing;
    assert_int_equal(pc_learn_category_use(&d, 8, &use), PC_OK);
    assert_int_equal(use.used, 0);
    assert_int_equal(use.max_value, -1);
    assert_int_equal(pc_learn_category_warning(&use, 8, text, sizeof text), 1);
}

int main(void) {
    g_seed = pc_test_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mi_of_binary_data),
        cmocka_unit_test(test_learn_binary_data),
        cmocka_unit_test(test_learn_binarised_mnist),
        cmocka_unit_test(test_category_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
