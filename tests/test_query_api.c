/* The contracts in front of the evaluator and its queries: the data's width, one call at a
 * time per evaluator (two threads on one evaluator), and bad arguments of every call. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "enumerate.h"
#include "hclt_random.h"
#include "pc/query.h"
#include "testutil.h"

/* Rows narrower or wider than the model's V are refused before anything is read: the
 * buffers are allocated at exactly the size the width claims, so a read past them would
 * show under AddressSanitizer, and logp must stay poisoned. */
static void test_evaluate_checks_width(void **state) {
    (void)state;
    const int32_t V = 7, C = 3;
    pc_hclt *m = pc_hr_model(V, C, 2, 0.3, 0);
    pc_circuit *c = pc_test_compile(m);
    const pc_backend backends[] = {PC_BACKEND_REF, PC_BACKEND_CPU, PC_BACKEND_CPU_FUSE};
    for (int b = 0; b < 3; b++) {
        pc_evaluator *e = pc_test_evaluator(c, backends[b], 4, 1);
        for (int64_t width = V - 2; width <= V + 2; width++) {
            uint8_t *x = pc_hr_data(4, (int32_t)width, C, 0.0, NULL);
            double lp[4];
            pc_test_poison_f64(lp, 4);
            const pc_status st = pc_evaluate(e, x, NULL, 4, width, lp);
            if (width == V) {
                assert_int_equal(st, PC_OK);
                for (int i = 0; i < 4; i++) assert_true(lp[i] <= 0.0);
            } else {
                assert_int_equal(st, PC_ERR_DATA);
                char want[64];
                snprintf(want, sizeof want, "rows of %lld values", (long long)width);
                assert_non_null(strstr(pc_last_error(), want));
                for (int i = 0; i < 4; i++) assert_true(isnan(lp[i]));
            }
            free(x);
        }
        pc_evaluator_free(e);
    }
    pc_circuit_free(c);
    pc_hclt_free(m);
}

/* Two threads calling one evaluator at once: pc_evaluate (kind 0) or pc_mpe (kind 1). */
typedef struct hammer {
    pc_evaluator *e;
    int kind;
    const uint8_t *x, *missing;
    int64_t n, width;
    const void *want; /* the call's output when alone: logp [n] or completions [n, width] */
    size_t want_bytes;
    double deadline;
    int ok, busy, wrong, other;
} hammer;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static pc_status hammer_call(const hammer *h, void *out) {
    if (h->kind == 0) return pc_evaluate(h->e, h->x, h->missing, h->n, h->width, out);
    return pc_mpe(h->e, h->x, h->missing, h->n, h->width, out, NULL);
}

/* Calls until the deadline, or until both outcomes were seen often enough; counts successes
 * (checked against want), "in use" refusals and anything else. */
static void *hammer_run(void *arg) {
    hammer *h = arg;
    void *out = pc_test_alloc(h->want_bytes);
    while (now_s() < h->deadline && !(h->ok >= 20 && h->busy >= 20)) {
        pc_test_poison_bytes(out, h->want_bytes);
        const pc_status st = hammer_call(h, out);
        if (st == PC_OK) {
            h->ok++;
            if (memcmp(out, h->want, h->want_bytes) != 0) h->wrong++;
        } else if (st == PC_ERR_ARG && strstr(pc_last_error(), "in use by another thread")) {
            h->busy++;
        } else {
            h->other++;
        }
    }
    free(out);
    return NULL;
}

static void test_evaluator_used_by_two_threads(void **state) {
    (void)state;
    const int32_t V = 300, C = 4;
    const int64_t n = 400;
    pc_hclt *m = pc_hr_model(V, C, 8, 0.3, 0);
    pc_circuit *c = pc_test_compile(m);
    uint8_t *missing = NULL, *x = pc_hr_data(n, V, C, 0.3, &missing);
    pc_evaluator *e = pc_test_evaluator(c, PC_BACKEND_REF, n, 1);
    for (int kind = 0; kind < 2; kind++) {
        const size_t bytes = kind == 0 ? (size_t)n * sizeof(double) : (size_t)(n * V);
        void *want = pc_test_alloc(bytes);
        hammer h[2];
        h[0] = (hammer){e, kind, x, missing, n, V, want, bytes, now_s() + 20.0, 0, 0, 0, 0};
        assert_int_equal(hammer_call(&h[0], want), PC_OK);
        h[1] = h[0];
        pthread_t tid[2];
        for (int t = 0; t < 2; t++)
            assert_int_equal(pthread_create(&tid[t], NULL, hammer_run, &h[t]), 0);
        for (int t = 0; t < 2; t++) assert_int_equal(pthread_join(tid[t], NULL), 0);
        print_message("  %s: thread 0: %d ok, %d refused; thread 1: %d ok, %d refused\n",
                      kind == 0 ? "pc_evaluate" : "pc_mpe", h[0].ok, h[0].busy, h[1].ok,
                      h[1].busy);
        assert_int_equal(h[0].wrong + h[1].wrong, 0);
        assert_int_equal(h[0].other + h[1].other, 0);
        assert_true(h[0].ok + h[1].ok > 0);
        assert_true(h[0].busy + h[1].busy > 0); /* the calls did overlap, and were refused */
        /* One thread after the other is fine, and the evaluator is free again. */
        void *again = pc_test_alloc(bytes);
        assert_int_equal(hammer_call(&h[0], again), PC_OK);
        assert_memory_equal(again, want, bytes);
        free(again), free(want);
    }
    free(x), free(missing);
    pc_evaluator_free(e);
    pc_circuit_free(c);
    pc_hclt_free(m);
}

/* Every query's bad arguments, each refused with a status and a message, outputs untouched
 * where the call could not start. */
static void test_query_bad_arguments(void **state) {
    (void)state;
    const int32_t V = 6, C = 3;
    const int64_t n = 4, cells = n * V * C;
    pc_hclt *m = pc_hr_model(V, C, 2, 0.3, 0);
    pc_circuit *c = pc_test_compile(m);
    uint8_t *missing = NULL, *x = pc_hr_data(n, V, C, 0.3, &missing);
    double p64[72], lp[4];
    float p32[72];
    uint8_t out[24];
    for (int b = 0; b < 3; b++) {
        const pc_backend backend = b == 0 ? PC_BACKEND_REF : b == 1 ? PC_BACKEND_CPU_FUSE
                                                                    : PC_BACKEND_CPU;
        pc_evaluator *e = pc_test_evaluator(c, backend, n, 1);
        /* NULL evaluator. */
        assert_int_equal(pc_conditionals(NULL, x, missing, n, V, C, p64, lp), PC_ERR_ARG);
        assert_int_equal(pc_conditionals_f32(NULL, x, missing, n, V, C, p32, lp), PC_ERR_ARG);
        assert_int_equal(pc_mpe(NULL, x, missing, n, V, out, lp), PC_ERR_ARG);
        assert_int_equal(pc_sample(NULL, n, V, 1, 0, out), PC_ERR_ARG);
        assert_int_equal(pc_sample_conditional(NULL, x, missing, n, V, 1, 0, out), PC_ERR_ARG);
        /* Wrong width: the data's is PC_ERR_DATA, pc_sample's (an output shape) PC_ERR_ARG. */
        pc_test_poison_f64(p64, (size_t)cells);
        assert_int_equal(pc_conditionals(e, x, missing, n, V + 1, C, p64, lp), PC_ERR_DATA);
        assert_true(isnan(p64[0]));
        assert_int_equal(pc_conditionals_f32(e, x, missing, n, V - 1, C, p32, lp), PC_ERR_DATA);
        assert_int_equal(pc_mpe(e, x, missing, n, V - 1, out, lp), PC_ERR_DATA);
        assert_non_null(strstr(pc_last_error(), "rows of 5 values"));
        assert_int_equal(pc_sample(e, n, V + 1, 1, 0, out), PC_ERR_ARG);
        assert_int_equal(pc_sample_conditional(e, x, missing, n, 0, 1, 0, out), PC_ERR_DATA);
        /* Wrong number of categories for the conditionals' rows. */
        assert_int_equal(pc_conditionals(e, x, missing, n, V, C + 1, p64, lp), PC_ERR_ARG);
        assert_non_null(strstr(pc_last_error(), "categories"));
        /* n < 0 or above max_batch; n = 0 does nothing, even with NULL arrays. */
        assert_int_equal(pc_conditionals(e, x, missing, -1, V, C, p64, lp), PC_ERR_ARG);
        assert_int_equal(pc_mpe(e, x, missing, n + 1, V, out, lp), PC_ERR_ARG);
        assert_int_equal(pc_sample(e, -1, V, 1, 0, out), PC_ERR_ARG);
        assert_int_equal(pc_sample(e, n + 1, V, 1, 0, out), PC_ERR_ARG);
        assert_int_equal(pc_sample_conditional(e, x, missing, -5, V, 1, 0, out), PC_ERR_ARG);
        assert_int_equal(pc_conditionals(e, NULL, NULL, 0, V, C, NULL, NULL), PC_OK);
        assert_int_equal(pc_mpe(e, NULL, NULL, 0, V, NULL, NULL), PC_OK);
        assert_int_equal(pc_sample(e, 0, V, 1, 0, NULL), PC_OK);
        assert_int_equal(pc_sample_conditional(e, NULL, NULL, 0, V, 1, 0, NULL), PC_OK);
        /* NULL data or outputs. */
        assert_int_equal(pc_conditionals(e, NULL, missing, n, V, C, p64, lp), PC_ERR_ARG);
        assert_int_equal(pc_conditionals(e, x, missing, n, V, C, NULL, lp), PC_ERR_ARG);
        assert_int_equal(pc_conditionals_f32(e, x, missing, n, V, C, NULL, lp), PC_ERR_ARG);
        assert_int_equal(pc_mpe(e, x, missing, n, V, NULL, lp), PC_ERR_ARG);
        assert_int_equal(pc_mpe(e, NULL, missing, n, V, out, lp), PC_ERR_ARG);
        assert_int_equal(pc_sample(e, n, V, 1, 0, NULL), PC_ERR_ARG);
        assert_int_equal(pc_sample_conditional(e, x, missing, n, V, 1, 0, NULL), PC_ERR_ARG);
        /* Observed values >= C (the same value under the mask is fine). */
        uint8_t bad[24];
        memcpy(bad, x, sizeof bad);
        missing[2 * V + 4] = 0, bad[2 * V + 4] = (uint8_t)C;
        assert_int_equal(pc_conditionals(e, bad, missing, n, V, C, p64, lp), PC_ERR_DATA);
        assert_non_null(strstr(pc_last_error(), "sample 2, variable 4"));
        assert_int_equal(pc_mpe(e, bad, missing, n, V, out, lp), PC_ERR_DATA);
        assert_int_equal(pc_sample_conditional(e, bad, missing, n, V, 1, 0, out), PC_ERR_DATA);
        missing[2 * V + 4] = 1;
        assert_int_equal(pc_mpe(e, bad, missing, n, V, out, lp), PC_OK);
        /* Stream offsets: negative, or first + n past INT64_MAX. */
        assert_int_equal(pc_sample(e, n, V, 1, -1, out), PC_ERR_ARG);
        assert_int_equal(pc_sample(e, n, V, 1, INT64_MAX - 2, out), PC_ERR_ARG);
        assert_int_equal(pc_sample(e, n, V, 1, INT64_MAX - n, out), PC_OK);
        assert_int_equal(pc_sample_conditional(e, x, missing, n, V, 1, -3, out), PC_ERR_ARG);
        /* Outputs overlapping the inputs, other than exactly in place. */
        uint8_t both[48];
        memcpy(both, x, 24);
        assert_int_equal(pc_mpe(e, both, missing, n, V, both + 1, lp), PC_ERR_ARG);
        assert_non_null(strstr(pc_last_error(), "overlaps"));
        assert_int_equal(pc_sample_conditional(e, both, missing, n, V, 1, 0, missing), PC_ERR_ARG);
        assert_int_equal(pc_mpe(e, both, missing, n, V, both, lp), PC_OK);
        pc_evaluator_free(e);
    }
    free(x), free(missing);
    pc_circuit_free(c);
    pc_hclt_free(m);
}

/* Values are written as uint8: a model with more than 256 categories gets conditionals but no
 * MPE and no samples. */
static void test_query_wide_categories(void **state) {
    (void)state;
    const int32_t V = 3, C = 300;
    pc_hclt *m = pc_hr_model(V, C, 2, 0.0, 0);
    pc_circuit *c = pc_test_compile(m);
    pc_evaluator *e = pc_test_evaluator(c, PC_BACKEND_REF, 1, 1);
    const uint8_t x[3] = {1, 2, 3}, missing[3] = {0, 1, 0};
    uint8_t out[3];
    double *p = pc_test_alloc(3 * C * sizeof(double)), lp;
    assert_int_equal(pc_conditionals(e, x, missing, 1, V, C, p, &lp), PC_OK);
    double total = 0.0;
    for (int32_t i = 0; i < C; i++) total += p[C + i];
    assert_true(fabs(total - 1.0) <= 1e-12);
    assert_int_equal(pc_mpe(e, x, missing, 1, V, out, NULL), PC_ERR_UNSUPPORTED);
    assert_non_null(strstr(pc_last_error(), "300 categories"));
    assert_int_equal(pc_sample(e, 1, V, 1, 0, out), PC_ERR_UNSUPPORTED);
    assert_int_equal(pc_sample_conditional(e, x, missing, 1, V, 1, 0, out), PC_ERR_UNSUPPORTED);
    free(p);
    pc_evaluator_free(e);
    pc_circuit_free(c);
    pc_hclt_free(m);
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evaluate_checks_width),
        cmocka_unit_test(test_evaluator_used_by_two_threads),
        cmocka_unit_test(test_query_bad_arguments),
        cmocka_unit_test(test_query_wide_categories),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
