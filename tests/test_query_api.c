/* The contracts in front of the evaluator: the data's width and one call at a time per
 * evaluator (two threads on one evaluator). */
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
#include "pc/eval.h"
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

/* Two threads calling one evaluator at once. */
typedef struct hammer {
    pc_evaluator *e;
    const uint8_t *x;
    int64_t n, width;
    const double *want;
    double deadline;
    int ok, busy, wrong, other;
} hammer;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Calls pc_evaluate until the deadline, or until both outcomes were seen often enough; counts
 * successes (checked against want), "in use" refusals and anything else. */
static void *hammer_run(void *arg) {
    hammer *h = arg;
    double *lp = pc_test_alloc((size_t)h->n * sizeof(double));
    while (now_s() < h->deadline && !(h->ok >= 20 && h->busy >= 20)) {
        pc_test_poison_f64(lp, (size_t)h->n);
        const pc_status st = pc_evaluate(h->e, h->x, NULL, h->n, h->width, lp);
        if (st == PC_OK) {
            h->ok++;
            if (memcmp(lp, h->want, (size_t)h->n * sizeof(double)) != 0) h->wrong++;
        } else if (st == PC_ERR_ARG && strstr(pc_last_error(), "in use by another thread")) {
            h->busy++;
        } else {
            h->other++;
        }
    }
    free(lp);
    return NULL;
}

static void test_evaluator_used_by_two_threads(void **state) {
    (void)state;
    const int32_t V = 300, C = 4;
    const int64_t n = 400;
    pc_hclt *m = pc_hr_model(V, C, 8, 0.3, 0);
    pc_circuit *c = pc_test_compile(m);
    uint8_t *x = pc_hr_data(n, V, C, 0.0, NULL);
    pc_evaluator *e = pc_test_evaluator(c, PC_BACKEND_REF, n, 1);
    double *want = pc_test_alloc((size_t)n * sizeof(double));
    assert_int_equal(pc_evaluate(e, x, NULL, n, V, want), PC_OK);
    hammer h[2];
    pthread_t tid[2];
    for (int t = 0; t < 2; t++) {
        h[t] = (hammer){e, x, n, V, want, now_s() + 20.0, 0, 0, 0, 0};
        assert_int_equal(pthread_create(&tid[t], NULL, hammer_run, &h[t]), 0);
    }
    for (int t = 0; t < 2; t++) assert_int_equal(pthread_join(tid[t], NULL), 0);
    print_message("  thread 0: %d ok, %d refused; thread 1: %d ok, %d refused\n", h[0].ok,
                  h[0].busy, h[1].ok, h[1].busy);
    assert_int_equal(h[0].wrong + h[1].wrong, 0);
    assert_int_equal(h[0].other + h[1].other, 0);
    assert_true(h[0].ok + h[1].ok > 0);
    assert_true(h[0].busy + h[1].busy > 0); /* the calls did overlap, and were refused */
    /* One thread after the other is fine, and the evaluator is free again. */
    double *lp = pc_test_alloc((size_t)n * sizeof(double));
    assert_int_equal(pc_evaluate(e, x, NULL, n, V, lp), PC_OK);
    assert_memory_equal(lp, want, (size_t)n * sizeof(double));
    free(lp), free(want), free(x);
    pc_evaluator_free(e);
    pc_circuit_free(c);
    pc_hclt_free(m);
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evaluate_checks_width),
        cmocka_unit_test(test_evaluator_used_by_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
