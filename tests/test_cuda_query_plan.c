/* The GPU queries' host-side logic, checked without a GPU (src/eval/cuda/query): the plan's
 * groups, variable map and draw numbers against the CPU sampler's order of draws; the
 * counter-based random numbers and the fixed-step inverse-CDF search against the CPU
 * samplers' own (pc_query_stream, pc_query_draw_cdf), including zero-probability entries and
 * targets at the top of the CDF; the launch shape, samples per block and chunk rules; and the
 * layouts of the host tables. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "enumerate.h"
#include "eval/cuda/query/gpu_query_plan.h"
#include "eval/cuda/query/gpu_query_rng.h"
#include "eval/cuda/query/gpu_query_tables.h"
#include "eval/query/query.h"
#include "hclt_random.h"
#include "testutil.h"

/* A random circuit: V in [1, 60], K in [1, 20], C in [2, 6], some latents shared. */
static pc_circuit *random_circuit(pc_hclt **model) {
    const int32_t V = (int32_t)pc_hr_int(1, 60), K = (int32_t)pc_hr_int(1, 20);
    *model = pc_hr_model(V, (int32_t)pc_hr_int(2, 6), K, pc_hr_unit(), (int)pc_hr_int(0, 1));
    return pc_test_compile(*model);
}

/* The plan's fields are the circuit's, and the draw numbers of Z_g and of X_v are the counts
 * of draws the CPU's p(x) sampler makes before them (query_sample.c: from the root down, Z_g
 * then g's variables). */
static void check_plan(const pc_circuit *c) {
    const int32_t G = c->num_groups, V = c->num_vars;
    pc_gpu_query_group *g = pc_test_alloc(sizeof *g * (size_t)G);
    int32_t *var_group = pc_test_alloc(sizeof(int32_t) * (size_t)V);
    int32_t *var_draw = pc_test_alloc(sizeof(int32_t) * (size_t)V);
    for (int32_t v = 0; v < V; v++) var_group[v] = var_draw[v] = -1;
    assert_int_equal(pc_gpu_query_plan(c, g, var_group, NULL), PC_ERR_ARG);
    assert_int_equal(pc_gpu_query_plan(c, g, var_group, var_draw), PC_OK);
    int32_t draws = 0;
    for (int32_t i = G - 1; i >= 0; i--) {
        assert_int_equal(g[i].var_begin, c->var_start[i]);
        assert_int_equal(g[i].var_end, c->var_start[i + 1]);
        assert_int_equal(g[i].child_begin, c->child_start[i]);
        assert_int_equal(g[i].child_end, c->child_start[i + 1]);
        assert_int_equal(g[i].parent, c->group_parent[i]);
        assert_int_equal(g[i].trans, c->group_trans[i]);
        assert_int_equal(g[i].draw, draws);
        draws++;
        for (int32_t vi = c->var_start[i]; vi < c->var_start[i + 1]; vi++, draws++) {
            assert_int_equal(var_group[c->group_vars[vi]], i);
            assert_int_equal(var_draw[c->group_vars[vi]], draws);
        }
    }
    assert_int_equal(draws, G + V);
    for (int32_t v = 0; v < V; v++) assert_true(var_group[v] >= 0);
    free(g), free(var_group), free(var_draw);
}

/* The gather's ranges cover the groups in order, hold at most per_range variables unless they
 * are one group, and are closed only where the next group would not fit. */
static void check_ranges(const pc_circuit *c, int32_t per_range) {
    const int32_t G = c->num_groups;
    int32_t *starts = pc_test_alloc(sizeof(int32_t) * (size_t)(G + 1));
    const int32_t n = pc_gpu_query_gather_ranges(c, per_range, starts);
    assert_true(n >= 1 && n <= G);
    assert_int_equal(starts[0], 0);
    assert_int_equal(starts[n], G);
    for (int32_t r = 0; r < n; r++) {
        const int32_t g0 = starts[r], g1 = starts[r + 1];
        const int32_t vars = c->var_start[g1] - c->var_start[g0];
        assert_true(g1 > g0);
        assert_true(vars <= per_range || g1 == g0 + 1);
        if (r + 1 < n) assert_true(vars + c->var_start[g1 + 1] - c->var_start[g1] > per_range);
    }
    free(starts);
}

static void test_plan(void **state) {
    (void)state;
    for (int rep = 0; rep < 40; rep++) {
        pc_hclt *m;
        pc_circuit *c = random_circuit(&m);
        check_plan(c);
        for (int32_t per = 1; per <= 2 * c->num_vars; per = 2 * per + 1) check_ranges(c, per);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
    pc_gpu_query_group g;
    int32_t vg, vd;
    assert_int_equal(pc_gpu_query_plan(NULL, &g, &vg, &vd), PC_ERR_ARG);
}

/* Draw d of row `index` equals the (d + 1)-th pc_rng_unit of the CPU's stream. */
static void test_counter_rng(void **state) {
    (void)state;
    for (int rep = 0; rep < 200; rep++) {
        const uint64_t seed = rep < 3 ? (uint64_t)rep : pc_rng_u64(pc_test_rng());
        const int64_t index = rep % 7 == 0 ? INT64_MAX - rep : (int64_t)pc_hr_int(0, 1 << 30);
        pc_rng cpu = pc_query_stream(seed, index);
        const uint64_t s = pc_gq_stream(seed, index);
        for (int64_t d = 0; d < 300; d++) {
            const double want = pc_rng_unit(&cpu);
            if (pc_gq_unit(s, d) != want)
                fail_msg("seed %llu row %lld draw %lld: %.17g, the CPU %.17g",
                         (unsigned long long)seed, (long long)index, (long long)d,
                         pc_gq_unit(s, d), want);
        }
    }
}

/* pc_gq_search gives pc_query_draw_cdf's answer for the same uniform, on cumulative sums with
 * runs of zero-probability entries and for targets on their values and at the top. */
static void test_search(void **state) {
    (void)state;
    double *cdf = pc_test_alloc(300 * sizeof(double));
    for (int rep = 0; rep < 3000; rep++) {
        const int32_t n = rep < 300 ? rep + 1 : (int32_t)pc_hr_int(1, 300);
        double sum = 0.0;
        for (int32_t i = 0; i < n; i++) cdf[i] = sum += pc_hr_unit() < 0.3 ? 0.0 : pc_hr_unit();
        if (sum == 0.0) cdf[n - 1] = sum = 1.0;
        const int32_t half = pc_gpu_query_half(n);
        for (int t = 0; t < 20; t++) {
            pc_rng rng;
            pc_rng_init(&rng, pc_rng_u64(pc_test_rng()));
            pc_rng copy = rng;
            double u = pc_rng_unit(&copy);
            const int32_t want = pc_query_draw_cdf(cdf, n, &rng);
            assert_int_equal(pc_gq_search(cdf, n, half, u * cdf[n - 1]), want);
            assert_true(cdf[want] > (want > 0 ? cdf[want - 1] : 0.0) || want == n - 1);
        }
        /* Targets exactly on a value, below everything and at (or past) the top. */
        const int32_t i = (int32_t)pc_hr_int(0, n - 1);
        int32_t lowest_above = 0;
        while (lowest_above < n - 1 && cdf[lowest_above] <= cdf[i]) lowest_above++;
        assert_int_equal(pc_gq_search(cdf, n, half, cdf[i]), lowest_above);
        assert_int_equal(pc_gq_search(cdf, n, half, -1.0), 0);
        assert_int_equal(pc_gq_search(cdf, n, half, cdf[n - 1]), n - 1);
    }
    assert_int_equal(pc_gpu_query_half(1), 0);
    assert_int_equal(pc_gpu_query_half(2), 1);
    assert_int_equal(pc_gpu_query_half(256), 128);
    assert_int_equal(pc_gpu_query_half(257), 256);
    free(cdf);
}

static void test_shape_rows_chunk(void **state) {
    (void)state;
    for (int32_t K = 1; K <= 1000; K += K < 40 ? 1 : 37) {
        pc_gpu_query_shape s;
        assert_int_equal(pc_gpu_query_shape_for(K, 227 * 1024, &s), PC_OK);
        assert_true(s.team >= 4 && s.team <= 32 && (s.team >= K || s.team == 32));
        assert_true(s.team == 4 || s.team / 2 < K);
        assert_int_equal(s.threads, s.team * s.teams);
        assert_true(s.threads % 32 == 0 && s.threads <= PC_GPU_QUERY_THREADS);
        assert_true(s.smem == (size_t)s.teams * 2 * K * sizeof(double) && s.smem <= 227 * 1024);
        if (K <= 400) assert_int_equal(s.threads, PC_GPU_QUERY_THREADS);
    }
    pc_gpu_query_shape s;
    assert_int_equal(pc_gpu_query_shape_for(20000, 227 * 1024, &s), PC_ERR_UNSUPPORTED);
    assert_int_equal(pc_gpu_query_shape_for(16, 100, &s), PC_ERR_UNSUPPORTED);
    assert_int_equal(pc_gpu_query_rows_for(512, 132, 0), 1);
    assert_int_equal(pc_gpu_query_rows_for(528, 132, 0), 1);
    assert_int_equal(pc_gpu_query_rows_for(529, 132, 0), 2);
    assert_int_equal(pc_gpu_query_rows_for(4096, 132, 0), 8);
    assert_int_equal(pc_gpu_query_rows_for(2000, 132, 0), 4);
    assert_int_equal(pc_gpu_query_rows_for(16384, 132, 0), 8);
    assert_int_equal(pc_gpu_query_rows_for(1, 0, 0), 1);
    assert_int_equal(pc_gpu_query_rows_for(512, 132, 3), 3);
    /* pieces: at most 4 x 4 x 132 = 2112 rows on 132 SMs, equal, within the chunk */
    assert_int_equal(pc_gpu_query_piece(512, 16384, 132, 0), 512);
    assert_int_equal(pc_gpu_query_piece(2112, 16384, 132, 0), 2112);
    assert_int_equal(pc_gpu_query_piece(2113, 16384, 132, 0), 1057);
    assert_int_equal(pc_gpu_query_piece(4096, 16384, 132, 0), 2048);
    assert_int_equal(pc_gpu_query_piece(16384, 16384, 132, 0), 2048);
    assert_int_equal(pc_gpu_query_piece(100000, 1000, 132, 0), 1000);
    assert_int_equal(pc_gpu_query_piece(17, 16384, 0, 0), 9); /* no SMs known: 1 */
    assert_int_equal(pc_gpu_query_piece(4096, 16384, 132, 4096), 4096);
    assert_int_equal(pc_gpu_query_piece(4096, 3000, 132, 4096), 3000);
    for (int64_t n = 1; n <= 40000; n += 97)
        for (int sms = 1; sms <= 200; sms += 33) {
            const int64_t chunk = n % 3 ? 16384 : 700, p = pc_gpu_query_piece(n, chunk, sms, 0);
            const int64_t most = 16LL * sms < chunk ? 16LL * sms : chunk;
            const int64_t pieces = (n + p - 1) / p;
            assert_true(p >= 1 && p <= most && p <= n);
            assert_true(pieces == (n > most ? (n + most - 1) / most : 1)); /* the fewest */
        }
    assert_int_equal(pc_gpu_query_chunk(1000, 1 << 20, 100000), 1048);
    assert_int_equal(pc_gpu_query_chunk(1000, 1 << 30, 100000), PC_GPU_QUERY_CHUNK_MAX);
    assert_int_equal(pc_gpu_query_chunk(1000, 1 << 30, 77), 77);
    assert_int_equal(pc_gpu_query_chunk(1 << 30, 1 << 20, 77), 1);
    assert_int_equal(pc_gpu_query_chunk(0, 1 << 20, 5), 5);
}

/* The sum-product tables: in[v][c][k] = input_logp[v, k, c], row C the LSE; both weight
 * layouts; rows of the conditionals' table sum to 1. */
static void test_tables(void **state) {
    (void)state;
    for (int rep = 0; rep < 10; rep++) {
        pc_hclt *m;
        pc_circuit *c = random_circuit(&m);
        const int64_t V = c->num_vars, C = c->num_cats, K = c->num_latents, T = c->num_trans;
        pc_gpu_query_sp_tables t = {NULL, NULL, NULL, NULL};
        double *cond = NULL;
        assert_int_equal(pc_gpu_query_sp_tables_make(c, &t), PC_OK);
        assert_int_equal(pc_gpu_query_cond_table_make(c, &cond), PC_OK);
        for (int64_t v = 0; v < V; v++)
            for (int64_t k = 0; k < K; k++) {
                const double *row = c->input_logp + (v * K + k) * C;
                double mx = -INFINITY, sum = 0.0, total = 0.0;
                for (int64_t x = 0; x < C; x++) {
                    assert_true(t.in[(v * (C + 1) + x) * K + k] == row[x]);
                    mx = fmax(mx, row[x]);
                    total += cond[(v * K + k) * C + x];
                }
                for (int64_t x = 0; x < C; x++) sum += exp(row[x] - mx);
                assert_true(fabs(t.in[(v * (C + 1) + C) * K + k] - (mx + log(sum))) <= 1e-12);
                assert_true(fabs(total - 1.0) <= 1e-12);
            }
        for (int64_t i = 0; i < T * K * K; i++) {
            const int64_t tr = i / (K * K), j = i / K % K, k = i % K;
            assert_true(t.wexp[i] == exp(c->trans_logw[i]));
            assert_true(t.wexp_t[(tr * K + k) * K + j] == t.wexp[i]);
        }
        for (int64_t k = 0; k < K; k++) assert_true(t.root_exp[k] == exp(c->root_logw[k]));
        free(t.in), free(t.wexp), free(t.wexp_t), free(t.root_exp), free(cond);
        pc_circuit_free(c);
        pc_hclt_free(m);
    }
}

int main(void) {
    pc_hr_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_counter_rng),
        cmocka_unit_test(test_search),
        cmocka_unit_test(test_shape_rows_chunk),
        cmocka_unit_test(test_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
