/* The GPU backends (fuse, int, gemm) and fuse's two strategies against the CPU FP64 `ref` on
 * random HCLTs of awkward shape: K = 1, 3, 7, 16, 17, 100, 200 (one output tile of 256), 300 (two
 * output tiles); a chain of 300 variables (300 layers); a star; V = 1; C = 256; zero
 * probabilities; missing values; batches that are not a multiple of any tile and batches
 * streamed in several chunks. Outputs are poisoned before each run. Without a GPU (or without
 * CUDA) the program exits 77 (skipped); test_eval checks what creating a GPU evaluator returns
 * there. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "testutil.h"
#include "pc/circuit.h"
#include "pc/eval.h"
#include "pc/hclt.h"
#include "testing/testing.h"

/* Largest |Delta| (nats) per sample against ref. fuse and gemm keep every K-vector near 0 in
 * FP32 with FP64 offsets: ~1e-7 per sum group, here <= 300 groups in a row. int's Q16.16 steps
 * err by up to ~1.4e-5 nats each, log2(K) + 1 steps per group. */
#define TOL_EXACT 1e-4
#define TOL_INT 1e-2

static const pc_backend gpu_backends[] = {PC_BACKEND_FUSE, PC_BACKEND_INT, PC_BACKEND_GEMM};

/* Every GPU path: the public backends (fuse picks a strategy by K and batch) and fuse's two
 * strategies forced, so each runs on every shape it takes (tile and warp K <= 128). */
typedef struct variant {
    const char *name;
    pc_backend backend;
    const char *strategy;      /* fuse's strategy forced (testing.h), or NULL: its own choice */
    int32_t max_k;             /* a forced strategy may refuse larger K (0: takes every K) */
} variant;

static const variant variants[] = {
    {"fuse", PC_BACKEND_FUSE, NULL, 0},
    {"fuse/tile", PC_BACKEND_FUSE, "tile", 128},
    {"fuse/persistent", PC_BACKEND_FUSE, "persistent", 0},
    {"fuse/warp", PC_BACKEND_FUSE, "warp", 128},
    {"int", PC_BACKEND_INT, NULL, 0},
    {"gemm", PC_BACKEND_GEMM, NULL, 0},
};

static void poison(double *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
}

/* Re-hangs a random model's variables as a chain (v below v - 1) or a star (all below 0),
 * giving its T trans rows to a random subset of the non-root variables. */
static void reshape(pc_hclt *m, int chain) {
    const int32_t V = m->num_vars;
    int32_t *order = malloc(sizeof(int32_t) * (size_t)V);
    assert_non_null(order);
    for (int32_t v = 0; v < V; v++) {
        m->parent[v] = v == 0 ? -1 : chain ? v - 1 : 0;
        m->trans_index[v] = -1;
        order[v] = v;
    }
    for (int32_t i = V - 1; i > 1; i--) {
        int32_t j = (int32_t)pc_hr_int(1, i), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (int32_t t = 0; t < m->num_trans; t++) m->trans_index[order[1 + t]] = t;
    free(order);
    assert_int_equal(pc_hclt_validate(m, "reshaped"), PC_OK);
}

/* Scores n samples with a fresh evaluator of backend (fuse: with `strategy` forced, or NULL),
 * output poisoned first; *peak gets its peak device bytes. */
static pc_status score_with(const pc_circuit *c, pc_backend backend, const char *strategy,
                            int64_t max_batch, const uint8_t *x, const uint8_t *missing,
                            int64_t n, double *logp, size_t *peak) {
    pc_eval_opts opts = {backend, max_batch, 0};
    pc_evaluator *e = NULL;
    pc_status st = pc_testing_evaluator_create(c, &opts, strategy, &e);
    if (st != PC_OK) return st;
    poison(logp, n);
    st = pc_evaluate(e, x, missing, n, c->num_vars, logp);
    if (peak) *peak = pc_evaluator_peak_device_bytes(e);
    pc_evaluator_free(e);
    return st;
}

static pc_status score(const pc_circuit *c, pc_backend backend, int64_t max_batch,
                       const uint8_t *x, const uint8_t *missing, int64_t n, double *logp,
                       size_t *peak) {
    return score_with(c, backend, NULL, max_batch, x, missing, n, logp, peak);
}

/* Like score() for a variant; PC_ERR_UNSUPPORTED from a forced strategy means it does not
 * take this circuit (K above the variant's max_k). */
static pc_status score_variant(const pc_circuit *c, const variant *v, int64_t max_batch,
                               const uint8_t *x, const uint8_t *missing, int64_t n,
                               double *logp, size_t *peak) {
    return score_with(c, v->backend, v->strategy, max_batch, x, missing, n, logp, peak);
}

/* Every GPU path against ref on one model and one data set. */
static void compare_all(const char *name, const pc_hclt *m, int64_t n, double missing_rate) {
    pc_circuit *c = NULL;
    if (pc_circuit_compile(m, &c) != PC_OK) fail_msg("%s: compile: %s", name, pc_last_error());
    uint8_t *missing = NULL;
    uint8_t *x = pc_hr_data(n, m->num_vars, m->num_cats, missing_rate,
                            missing_rate > 0 ? &missing : NULL);
    double *want = malloc(sizeof(double) * (size_t)n), *got = malloc(sizeof(double) * (size_t)n);
    assert_true(x && want && got);
    if (score(c, PC_BACKEND_REF, n, x, missing, n, want, NULL) != PC_OK)
        fail_msg("%s: ref: %s", name, pc_last_error());
    for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
        const variant *v = &variants[vi];
        const double tol = v->backend == PC_BACKEND_INT ? TOL_INT : TOL_EXACT;
        size_t peak = 0;
        const pc_status st = score_variant(c, v, n, x, missing, n, got, &peak);
        if (st == PC_ERR_UNSUPPORTED && v->max_k && c->num_latents > v->max_k) continue;
        if (st != PC_OK) fail_msg("%s: %s: %s", name, v->name, pc_last_error());
        assert_true(peak > 0);
        double worst = 0.0, sum = 0.0;
        for (int64_t i = 0; i < n; i++) {
            if (isinf(want[i]) && want[i] < 0) {
                if (!(isinf(got[i]) && got[i] < 0))
                    fail_msg("%s: %s: sample %lld: ref -inf, got %.17g", name, v->name,
                             (long long)i, got[i]);
                continue;
            }
            const double d = fabs(got[i] - want[i]);
            if (!(d <= tol))
                fail_msg("%s: %s: sample %lld: got %.17g, ref %.17g (|Delta| %.3g > %.0e)", name,
                         v->name, (long long)i, got[i], want[i], d, tol);
            worst = d > worst ? d : worst, sum += d;
        }
        print_message("  %-28s %-15s n=%-6lld mean|D| %.2e  max|D| %.2e  peak %.1f MiB\n",
                      name, v->name, (long long)n, sum / (double)n, worst, peak / 1048576.0);
    }
    free(x), free(missing), free(want), free(got);
    pc_circuit_free(c);
}

typedef struct shape_case {
    const char *name;
    int32_t V, C, K;
    double share;
    int zeros, layout; /* layout: 0 random tree, 1 chain, 2 star */
    int64_t n;
    double missing;
} shape_case;

static void test_shapes(void **state) {
    (void)state;
    const shape_case cases[] = {
        {"K=1 random tree", 50, 5, 1, 0.3, 0, 0, 300, 0.1},
        {"K=3 random, zeros", 40, 2, 3, 0.5, 1, 0, 1000, 0.2},
        {"K=17 random, zeros", 30, 7, 17, 0.3, 1, 0, 257, 0.1},
        {"K=100 random", 20, 4, 100, 0.3, 0, 0, 129, 0.1},
        {"K=200 (BN = 256)", 12, 3, 200, 0.2, 0, 0, 65, 0.1},
        {"K=300 (two j-tiles)", 8, 3, 300, 0.2, 1, 0, 67, 0.1},
        {"chain V=300 K=16", 300, 3, 16, 0.1, 0, 1, 200, 0.05},
        {"star V=60 K=8", 60, 4, 8, 0.5, 1, 2, 333, 0.1},
        {"V=1 K=5", 1, 3, 5, 0.0, 0, 0, 7, 0.3},
        {"C=256 K=32 random", 25, 256, 32, 0.3, 0, 0, 1, 0.0},
        {"C=256 K=64 random", 25, 256, 64, 0.3, 1, 0, 500, 0.1},
        /* batches large enough for the tile strategy's 16-sample units (K <= 16) */
        {"K=16 random, n=3001", 40, 5, 16, 0.3, 1, 0, 3001, 0.1},
        {"K=7 random, n=2500", 30, 3, 7, 0.3, 0, 0, 2500, 0.1},
        /* most latents shared: groups of many variables, some past what the warp strategy
         * multiplies in above a chain's bottom (PC_GPU_CHAIN_LINK_VARS) */
        {"K=16 shared, n=4100", 120, 4, 16, 0.85, 0, 0, 4100, 0.1},
        /* enough gangs (188 of 64 samples per chain, about 115 chains: some 33 times the
         * H200's 660 resident blocks) that the warp strategy's queue hands the chains out by
         * path (from WARP_PATH_WAVES times its resident blocks) */
        {"K=32 random, n=12000", 200, 4, 32, 0.3, 0, 0, 12000, 0.1},
        /* a root group of about 90 variables: more than a warp item stages (WARP_STAGE_VARS) */
        {"star V=100 K=16 shared, n=600", 100, 3, 16, 0.9, 0, 2, 600, 0.1},
        /* 299 messages alive at once: the tile strategy's messages do not fit in shared memory */
        {"star V=300 K=64, n=2500", 300, 3, 64, 0.0, 0, 2, 2500, 0.1},
        /* wide layers at large batches: the persistent strategy's wide items (its narrow ones
         * take the root); K = 17 runs padded to 20 in fuse (zero-probability states), as every
         * K % 4 != 0 does there, and as it is in int and gemm */
        {"star V=300 K=17, n=2000", 300, 3, 17, 0.0, 1, 2, 2000, 0.1},
        {"star V=200 K=100, n=1000", 200, 3, 100, 0.0, 0, 2, 1000, 0.1},
        {"star V=100 K=200, n=700", 100, 3, 200, 0.0, 1, 2, 700, 0.1},
        /* the tile strategy's four columns per lane (64 < K <= 128): K = 128 (its constant-stride
         * form) with four samples per block, K = 96 with eight and zero probabilities */
        {"K=128 random, n=500", 30, 4, 128, 0.3, 0, 0, 500, 0.1},
        {"K=96 random, zeros, n=1000", 30, 3, 96, 0.3, 1, 0, 1000, 0.1},
        /* the warp strategy at 64 < K <= 128 on a padded circuit (K = 71 as 72, rows of 80;
         * K = 100 above has rows of 112), and its 3-block forms at 64 < K <= 96 (from 20
         * samples per SM: 2,640 on an H200) with rows of 80 and 96 */
        {"K=71 random, zeros, n=700", 30, 3, 71, 0.3, 1, 0, 700, 0.1},
        {"K=80 random, n=3500", 30, 3, 80, 0.3, 0, 0, 3500, 0.1},
        {"K=92 random, n=2700", 20, 3, 92, 0.3, 1, 0, 2700, 0.1},
        /* its 16-sample items with two blocks per SM above 64 < K <= 112 (the batches
         * between 12 and 20 samples per SM on an H200; below, 8-sample items, as in the
         * cases at n <= 1,000) */
        {"K=76 random, n=2000", 20, 3, 76, 0.3, 0, 0, 2000, 0.1},
        {"K=88 random, zeros, n=2200", 20, 3, 88, 0.3, 1, 0, 2200, 0.1},
        {"K=104 random, n=1700", 20, 3, 104, 0.3, 0, 0, 1700, 0.1},
        /* K that fuse runs as the tile kernel's full row (pc_gpu_fuse_states): 45 as 64,
         * 118 as 128 */
        {"K=45 random, zeros, n=600", 30, 3, 45, 0.3, 1, 0, 600, 0.1},
        {"K=118 random, n=300", 20, 3, 118, 0.3, 0, 0, 300, 0.1},
        /* the persistent strategy's two configurations above K = 64 (from 2,048 samples FP32
         * items of 64 samples, below that tensor-core items at K <= 128 and 32-sample items at
         * K > 128), on the model's K and on a padded circuit (K = 130 as 132); the
         * tile strategy's 16 samples per block at K = 128 */
        {"K=128 random, n=2100", 20, 4, 128, 0.3, 1, 0, 2100, 0.1},
        {"K=128 random, n=1900", 20, 4, 128, 0.3, 0, 0, 1900, 0.1},
        {"K=256 random, n=2049", 10, 3, 256, 0.3, 1, 0, 2049, 0.1},
        {"K=130 random, n=2100", 10, 3, 130, 0.3, 0, 0, 2100, 0.1},
        /* the warp strategy's long chains above K = 32 (from 24 samples per SM, 3,169 on an
         * H200: pc_gpu_warp_chains; at K <= 32 always) in 8-sample items at K = 128 and
         * 16-sample items at K = 64; K = 80 at n = 3,500 above takes them too */
        {"K=128 random, n=3300", 20, 4, 128, 0.3, 0, 0, 3300, 0.1},
        {"chain V=120 K=64, n=3400", 120, 3, 64, 0.2, 1, 1, 3400, 0.1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const shape_case *k = &cases[i];
        pc_hclt *m = pc_hr_model(k->V, k->C, k->K, k->share, k->zeros);
        if (k->layout && k->V > 1) reshape(m, k->layout == 1);
        compare_all(k->name, m, k->n, k->missing);
        pc_hclt_free(m);
    }
}

/* n larger than the internal batch: several chunks through both staging buffers; then the same
 * evaluator with a smaller n and without a mask (other graphs), then the first call again. */
static void test_chunks_and_reuse(void **state) {
    (void)state;
    const int64_t n = 40000, small = 5;
    pc_hclt *m = pc_hr_model(20, 3, 3, 0.3, 0);
    pc_circuit *c = NULL;
    assert_int_equal(pc_circuit_compile(m, &c), PC_OK);
    uint8_t *missing = NULL;
    uint8_t *x = pc_hr_data(n, 20, 3, 0.1, &missing);
    /* Without a mask every value must be < C: a fresh, fully observed set. */
    uint8_t *x_small = pc_hr_data(small, 20, 3, 0.0, NULL);
    double *want = malloc(sizeof(double) * n), *want_small = malloc(sizeof(double) * small);
    double *got = malloc(sizeof(double) * n);
    assert_true(x && x_small && want && want_small && got);
    assert_int_equal(score(c, PC_BACKEND_REF, n, x, missing, n, want, NULL), PC_OK);
    assert_int_equal(score(c, PC_BACKEND_REF, small, x_small, NULL, small, want_small, NULL),
                     PC_OK);
    for (size_t bi = 0; bi < sizeof gpu_backends / sizeof gpu_backends[0]; bi++) {
        const pc_backend be = gpu_backends[bi];
        const double tol = be == PC_BACKEND_INT ? TOL_INT : TOL_EXACT;
        pc_eval_opts opts = {be, n, 0};
        pc_evaluator *e = NULL;
        if (pc_evaluator_create(c, &opts, &e) != PC_OK) fail_msg("%s", pc_last_error());
        for (int round = 0; round < 2; round++) {
            poison(got, n);
            assert_int_equal(pc_evaluate(e, x, missing, n, c->num_vars, got), PC_OK);
            for (int64_t i = 0; i < n; i++)
                if (!(fabs(got[i] - want[i]) <= tol))
                    fail_msg("%s round %d: sample %lld: got %.17g, ref %.17g",
                             pc_backend_name(be), round, (long long)i, got[i], want[i]);
            poison(got, n);
            assert_int_equal(pc_evaluate(e, x_small, NULL, small, c->num_vars, got), PC_OK);
            for (int64_t i = 0; i < small; i++) assert_true(fabs(got[i] - want_small[i]) <= tol);
            assert_true(isnan(got[small])); /* nothing past n is written */
        }
        pc_evaluator_free(e);
    }
    free(x), free(x_small), free(missing), free(want), free(want_small), free(got);
    pc_circuit_free(c);
    pc_hclt_free(m);
}

/* A model whose input table alone (V x 257 x 512 floats = 158 GB) exceeds any GPU: create fails
 * with PC_ERR_DEVICE_MEMORY and a message, before touching the parameters (NULL here). */
static void test_too_large(void **state) {
    (void)state;
    const int32_t V = 300000;
    int32_t layer_start[2] = {0, 1}, parent = -1, trans = -1, zero_starts[2] = {0, 0};
    int32_t var_start[2] = {0, V};
    int32_t *vars = malloc(sizeof(int32_t) * V);
    double root[512] = {0};
    assert_non_null(vars);
    for (int32_t v = 0; v < V; v++) vars[v] = v;
    pc_circuit c = {V, 256, 512, 1, 1, layer_start, &parent, &trans, var_start, vars,
                    zero_starts, NULL, root, NULL, NULL, 0};
    /* K = 511 as well: fuse would pad it to 512 in a host copy of the parameters. */
    for (int32_t K = 512; K >= 511; K--)
        for (size_t bi = 0; bi < sizeof gpu_backends / sizeof gpu_backends[0]; bi++) {
            pc_eval_opts opts = {gpu_backends[bi], 64, 0};
            pc_evaluator *e = NULL;
            c.num_latents = K;
            assert_int_equal(pc_evaluator_create(&c, &opts, &e), PC_ERR_DEVICE_MEMORY);
            assert_null(e);
            assert_non_null(strstr(pc_last_error(), "GPU memory"));
        }
    free(vars);
}

int main(void) {
    pc_test_require_gpu_or_exit("test_cuda_eval");
    fprintf(stderr, "seed %llu\n", (unsigned long long)pc_hr_seed());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_chunks_and_reuse),
        cmocka_unit_test(test_too_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
