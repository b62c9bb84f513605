/* CPU log-sum-exp, fuse f32: rows far from 0 and rows whose max grows from chunk to chunk, on
 * every instruction set, against the FP64 reference.
 *
 * Far from 0: the SIMD exp passes shift by fl(m log2 e) with one FMA and correct for its
 * rounding afterwards, which only works while that rounding is small; rows around 1e20 once came
 * out as inf on AVX2 and AVX-512. Growing max: after the first chunk (2048 values) a row's
 * chunks are summed against the running max, and a chunk whose max lies above it either moves
 * the shift (a small step) or goes back to the two passes (a large one). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "lsetest.h"
#include "pc/lse.h"
#include "testutil.h"

/* Short rows (the 4-row path), one chunk, a few chunks with a tail, many chunks. */
static const int64_t lengths[] = {100, 2048, 4101, 20000};
#define N_LENGTHS ((int)(sizeof lengths / sizeof lengths[0]))
#define ROWS 9 /* two blocks of 4 rows and one left over */
/* |got - ref| / max(1, |ref|): a float result is within 6e-8 of its value; the fuse bound. */
#define TOL 1e-6

/* Runs rows x cols of v (row r: v + r * cols) through fuse f32 on every instruction set and
 * checks each output against the FP64 reference. */
static void check_rows(const double *v, int64_t cols, const char *what) {
    int64_t n = ROWS * cols;
    float *x = pc_test_alloc((size_t)n * sizeof(float));
    pc_lsetest_encode(PC_F32, v, n, x);
    double ref[ROWS];
    float got[ROWS];
    assert_int_equal(pc_lse_rows_ref(PC_F32, x, ROWS, cols, cols, ref), PC_OK);
    pc_isa isas[3];
    int count = pc_lsetest_isas(isas);
    for (int i = 0; i < count; i++) {
        pc_lse_cpu_opts opts = {1, isas[i]};
        pc_test_poison_f32(got, ROWS);
        assert_int_equal(pc_lse_rows(PC_LSE_FUSE, PC_F32, x, ROWS, cols, cols, got, &opts), PC_OK);
        for (int r = 0; r < ROWS; r++) {
            double e = pc_lsetest_rel_err(got[r], ref[r]);
            if (!(e <= TOL))
                fail_msg("%s, isa %s, %lld cols, row %d: got %.9g, want %.9g (rel err %g)", what,
                         pc_isa_name(isas[i]), (long long)cols, r, got[r], ref[r], e);
        }
    }
    free(x);
}

/* Rows U(c - 20, c) around centres c from 1e2 to 1e37, both signs, each row its own centre. */
static void test_far_from_zero(void **state) {
    (void)state;
    const double centres[] = {1e2, 3e4, 1e5, 1e10, 1e20, 3e30, 1e37};
    const int nc = (int)(sizeof centres / sizeof centres[0]);
    for (int l = 0; l < N_LENGTHS; l++) {
        int64_t cols = lengths[l];
        double *v = pc_test_alloc((size_t)(ROWS * cols) * sizeof(double));
        for (int k = 0; k < nc; k++) {
            for (int r = 0; r < ROWS; r++) {
                double c = centres[(k + r) % nc] * ((r & 1) ? -1.0 : 1.0);
                for (int64_t i = 0; i < cols; i++)
                    v[r * cols + i] = c - pc_rng_uniform(pc_test_rng(), 0.0, 20.0);
            }
            check_rows(v, cols, "far from 0");
        }
        free(v);
    }
}

/* Rows U(-10, 0) plus a ramp: slopes whose max grows from chunk to chunk by less than a nat,
 * by a few, by many; and a row whose largest values all sit in its last chunk. */
static void test_growing_max(void **state) {
    (void)state;
    const double slopes[] = {1e-5, 2e-4, 3e-3, 0.05};
    for (int l = 1; l < N_LENGTHS; l++) {
        int64_t cols = lengths[l];
        double *v = pc_test_alloc((size_t)(ROWS * cols) * sizeof(double));
        for (int k = 0; k < 4; k++) {
            for (int r = 0; r < ROWS; r++) {
                double slope = slopes[(k + r) % 4];
                for (int64_t i = 0; i < cols; i++)
                    v[r * cols + i] = pc_rng_uniform(pc_test_rng(), -10.0, 0.0) + slope * (double)i;
            }
            check_rows(v, cols, "growing max");
        }
        for (int r = 0; r < ROWS; r++)
            for (int64_t i = 0; i < cols; i++)
                v[r * cols + i] = pc_rng_uniform(pc_test_rng(), -10.0, 0.0) +
                                  (i >= cols - 1000 ? 50.0 + r : 0.0);
        check_rows(v, cols, "max in the last chunk");
        free(v);
    }
}

int main(void) {
    pc_test_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_far_from_zero),
        cmocka_unit_test(test_growing_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
