/* Data-parallel EM (pc_em_set_shard) with threads standing in for processes: R "ranks" give
 * the model of one process bit for bit, for R = 1..5 (more ranks than chunks included), over
 * mini-batch and full-batch steps; a failing sum or a failed peer fails every rank alike and
 * leaves the parameters unchanged; and the options of pc_em_create_opts. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/fail.h"
#include "learn_models.h"
#include "pc/learn.h"
#include "pc/rng.h"
#include "testutil.h"

#define MAX_RANKS 5

static uint64_t g_seed;

/* The "collective": every rank posts its buffer, all wait, each sums every rank's into a
 * scratch of its own, all wait, each copies its sum back. */
typedef struct team {
    int ranks;
    pthread_barrier_t barrier;
    int64_t *bufs[MAX_RANKS];
    int64_t counts[MAX_RANKS];
    int fail_sum;  /* the sum itself fails on every rank */
    int fake_peer; /* the first sum reports one more failed process */
} team;

typedef struct rank_ctx {
    team *t;
    int rank;
    int calls;
} rank_ctx;

static pc_status team_sum(void *ctx, int64_t *values, int64_t count) {
    rank_ctx *r = ctx;
    team *t = r->t;
    t->bufs[r->rank] = values;
    t->counts[r->rank] = count;
    pthread_barrier_wait(&t->barrier);
    for (int i = 0; i < t->ranks; i++)
        if (t->counts[i] != count) return pc_fail(PC_ERR_INTERNAL, "ranks disagree on count");
    int64_t *total = calloc((size_t)count, sizeof *total);
    if (!total) abort();
    for (int i = 0; i < t->ranks; i++)
        for (int64_t j = 0; j < count; j++) total[j] += t->bufs[i][j];
    if (t->fake_peer && r->calls++ == 0) total[0] += 1; /* the first sum: failures first */
    pthread_barrier_wait(&t->barrier);
    memcpy(values, total, (size_t)count * sizeof *total);
    free(total);
    pthread_barrier_wait(&t->barrier);
    return t->fail_sum ? pc_fail(PC_ERR_IO, "the sum failed") : PC_OK;
}

/* Tree-shaped data over n variables with C = 4 values, some of them missing. */
static pc_data *tree_data(int32_t n, int64_t rows, uint64_t seed, int32_t *parent) {
    pc_rng rng = {seed};
    pc_data *d = NULL;
    assert_int_equal(pc_data_create(rows, n, &d), PC_OK);
    d->missing = calloc((size_t)(rows * n), 1);
    assert_non_null(d->missing);
    parent[0] = -1;
    for (int32_t v = 1; v < n; v++) parent[v] = (int32_t)pc_rng_below(&rng, v);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *x = d->values + r * n;
        for (int32_t v = 0; v < n; v++) {
            x[v] = (parent[v] < 0 || pc_rng_unit(&rng) >= 0.7) ? (uint8_t)pc_rng_below(&rng, 4)
                                                              : x[parent[v]];
            d->missing[r * n + v] = pc_rng_unit(&rng) < 0.05;
        }
    }
    return d;
}

/* One rank's run: mini-batches of 100 shuffled rows (4 chunks of 32 each, the last short),
 * then a full-batch step; the LL of every step goes to ll, the model to out. */
typedef struct run {
    team *t;
    int rank;
    const pc_hclt *start;
    const pc_data *d;
    pc_hclt *out;
    double ll[16];
    pc_status st;
} run;

static void *run_rank(void *arg) {
    run *r = arg;
    rank_ctx ctx = {r->t, r->rank, 0};
    pc_em *em = NULL;
    r->st = pc_em_create(r->start, &em);
    if (r->st == PC_OK && r->t) r->st = pc_em_set_shard(em, r->rank, r->t->ranks, team_sum, &ctx);
    const int64_t n = r->d->count;
    int64_t *rows = malloc((size_t)n * sizeof *rows);
    if (!rows) abort();
    for (int64_t i = 0; i < n; i++) rows[i] = i;
    pc_rng rng = {g_seed ^ 0x51};
    int s = 0;
    for (int epoch = 0; epoch < 2 && r->st == PC_OK; epoch++) {
        for (int64_t i = n - 1; i > 0; i--) {
            const int64_t j = pc_rng_below(&rng, i + 1), tmp = rows[i];
            rows[i] = rows[j];
            rows[j] = tmp;
        }
        for (int64_t b = 0; b < n && r->st == PC_OK; b += 100, s++)
            r->st = pc_em_step(em, r->d, rows + b, n - b < 100 ? n - b : 100, 0.6, 0.1, &r->ll[s]);
    }
    if (r->st == PC_OK) r->st = pc_em_step(em, r->d, NULL, n, 1.0, 0.1, &r->ll[s]);
    if (em && pc_em_export(em, r->out) != PC_OK) abort(); /* after a failure too */
    free(rows);
    pc_em_free(em);
    return NULL;
}

static void assert_same_model(const pc_hclt *a, const pc_hclt *b) {
    const int64_t k = a->num_latents;
    assert_memory_equal(a->root_logw, b->root_logw, (size_t)k * sizeof(double));
    assert_memory_equal(a->trans_logw, b->trans_logw,
                        (size_t)(a->num_trans * k * k) * sizeof(double));
    assert_memory_equal(a->input_logp, b->input_logp,
                        (size_t)(a->num_vars * k * a->num_cats) * sizeof(double));
}

/* Runs `ranks` threads (0: one plain process) and returns rank 0's run. */
static void run_team(int ranks, const pc_hclt *start, const pc_data *d, team *t, run *runs) {
    pthread_t th[MAX_RANKS];
    if (ranks > 0) {
        t->ranks = ranks;
        assert_int_equal(pthread_barrier_init(&t->barrier, NULL, (unsigned)ranks), 0);
    }
    const int n = ranks > 0 ? ranks : 1;
    for (int i = 0; i < n; i++) {
        runs[i] = (run){.t = ranks > 0 ? t : NULL, .rank = i, .start = start, .d = d,
                        .out = pc_lm_same_shape(start)};
        assert_int_equal(pthread_create(&th[i], NULL, run_rank, &runs[i]), 0);
    }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    if (ranks > 0) pthread_barrier_destroy(&t->barrier);
}

static void test_ranks_give_one_process_model(void **state) {
    (void)state;
    int32_t tree[11];
    pc_data *d = tree_data(11, 430, g_seed, tree);
    pc_hclt *m = NULL;
    assert_int_equal(pc_learn_hclt_create(11, tree, 4, 3, &m), PC_OK);
    assert_int_equal(pc_learn_init_params(m, d, g_seed), PC_OK);
    run one[1], runs[MAX_RANKS];
    team t = {0};
    run_team(0, m, d, &t, one);
    assert_int_equal(one[0].st, PC_OK);
    for (int ranks = 1; ranks <= MAX_RANKS; ranks++) {
        run_team(ranks, m, d, &t, runs);
        for (int i = 0; i < ranks; i++) {
            assert_int_equal(runs[i].st, PC_OK);
            assert_same_model(runs[i].out, one[0].out);
            assert_memory_equal(runs[i].ll, one[0].ll, sizeof one[0].ll);
            pc_hclt_free(runs[i].out);
        }
    }
    pc_hclt_free(one[0].out);
    pc_hclt_free(m);
    pc_data_free(d);
}

/* A failing sum, or a peer that failed: every rank's step fails, the parameters stay. */
static void test_failures_reach_every_rank(void **state) {
    (void)state;
    int32_t tree[6];
    pc_data *d = tree_data(6, 200, g_seed ^ 5, tree);
    pc_hclt *m = NULL;
    assert_int_equal(pc_learn_hclt_create(6, tree, 4, 2, &m), PC_OK);
    assert_int_equal(pc_learn_init_params(m, d, g_seed), PC_OK);
    for (int mode = 0; mode < 2; mode++) {
        team t = {.fail_sum = mode == 0, .fake_peer = mode == 1};
        run runs[3];
        run_team(3, m, d, &t, runs);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(runs[i].st, mode == 0 ? PC_ERR_IO : PC_ERR_INTERNAL);
            for (int64_t j = 0; j < 6 * 2 * 4; j++) /* the first step failed: no change */
                assert_true(fabs(runs[i].out->input_logp[j] - m->input_logp[j]) < 1e-12);
            pc_hclt_free(runs[i].out);
        }
    }
    pc_hclt_free(m);
    pc_data_free(d);
}

static void test_shard_and_opts_arguments(void **state) {
    (void)state;
    int32_t tree[4];
    pc_data *d = tree_data(4, 64, g_seed ^ 9, tree);
    pc_hclt *m = NULL;
    assert_int_equal(pc_learn_hclt_create(4, tree, 4, 2, &m), PC_OK);
    pc_em *em = NULL;
    pc_em_opts opts = {0};
    assert_int_equal(pc_em_create_opts(m, &opts, &em), PC_OK); /* zeros: the CPU */
    assert_int_equal(pc_em_attach_data(em, d), PC_OK);         /* nothing to do on the CPU */
    assert_int_equal(pc_em_attach_data(NULL, d), PC_ERR_ARG);
    assert_int_equal(pc_em_set_shard(em, 0, 0, team_sum, NULL), PC_ERR_ARG);
    assert_int_equal(pc_em_set_shard(em, 2, 2, team_sum, NULL), PC_ERR_ARG);
    assert_int_equal(pc_em_set_shard(em, -1, 2, team_sum, NULL), PC_ERR_ARG);
    assert_int_equal(pc_em_set_shard(em, 0, 2, NULL, NULL), PC_ERR_ARG);
    assert_int_equal(pc_em_set_shard(em, 0, 1, NULL, NULL), PC_OK);
    assert_int_equal(pc_em_set_shard(NULL, 0, 1, NULL, NULL), PC_ERR_ARG);
    pc_em_free(em);
    opts.device = (pc_em_device)7;
    assert_int_equal(pc_em_create_opts(m, &opts, &em), PC_ERR_ARG);
    assert_null(em);
    opts.device = PC_EM_CPU;
    opts.max_chunk = -1;
    assert_int_equal(pc_em_create_opts(m, &opts, &em), PC_ERR_ARG);
    /* the GPU: fails cleanly without one (or without CUDA), else works */
    opts = (pc_em_opts){.device = PC_EM_CUDA};
    const pc_status st = pc_em_create_opts(m, &opts, &em);
    if (st != PC_OK) {
        assert_true(st == PC_ERR_NO_DEVICE || st == PC_ERR_UNSUPPORTED);
        assert_null(em);
        printf("no GPU EM here: %s\n", pc_last_error());
    }
    pc_em_free(em);
    pc_hclt_free(m);
    pc_data_free(d);
}

int main(void) {
    g_seed = pc_test_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_give_one_process_model),
        cmocka_unit_test(test_failures_reach_every_rank),
        cmocka_unit_test(test_shard_and_opts_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
