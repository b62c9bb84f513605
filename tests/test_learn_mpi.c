/* Data-parallel pclearn under mpirun on CPU ranks: 1, 2, 3 and 4 ranks (and one rank with two
 * threads) learn the same model bit for bit and report the same log-likelihoods; a bad data
 * file fails every rank with a non-zero exit and no model, without hanging. The shard and
 * gather of the tools' scoring (mpi_ranks.h) put every row back in order, run by this program
 * itself under mpirun (--gather-worker). Needs PC_MPIEXEC (ctest sets it in a build with MPI,
 * PC_MPI); skipped otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "hclt_random.h"
#include "mpi_ranks.h"
#include "pc/hclt.h"

static char g_tool[1024], g_self[1024];
static const char *g_mpiexec;
static char *g_dir;

/* mpirun -np ranks pclearn args, under a 120 s timeout; stdout to out.json. */
static int run(int ranks, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout 120 '%s' --oversubscribe -np %d '%s' %s >'%s' 2>'%s'",
             g_mpiexec, ranks, g_tool, args, pc_hr_path(g_dir, "out.json"),
             pc_hr_path(g_dir, "err.txt"));
    const int st = system(cmd);
    assert_true(st != -1 && WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void write_idx(const char *name, int n, long cut) {
    FILE *f = fopen(pc_hr_path(g_dir, name), "wb");
    assert_non_null(f);
    const unsigned char head[16] = {0, 0, 8, 3, 0, 0, (unsigned char)(n >> 8), (unsigned char)n,
                                    0, 0, 0, 6, 0, 0, 0, 5};
    assert_int_equal(fwrite(head, 1, 16, f), 16);
    unsigned char row[30];
    for (long i = 0; i < (long)n * 30 - cut; i++) {
        const int v = (int)(i % 30);
        row[v] = v > 0 && pc_hr_unit() < 0.7 ? row[v / 2] : (unsigned char)pc_hr_int(0, 255);
        fputc(row[v], f);
    }
    assert_int_equal(fclose(f), 0);
}

static char *slurp(const char *name) {
    static char buf[1 << 15];
    FILE *f = fopen(pc_hr_path(g_dir, name), "r");
    assert_non_null(f);
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* The summary without its timings and its process count: the numbers that must agree. */
static void strip_times(char *json, char *out, size_t len) {
    size_t w = 0;
    for (const char *p = json; *p && w + 1 < len; p++) {
        if (!strncmp(p, "_s\": ", 5) || !strncmp(p, "seconds\": ", 10) ||
            !strncmp(p, "processes\": ", 12)) {
            while (*p && *p != ',' && *p != '}') p++;
            if (!*p) break;
        }
        out[w++] = *p;
    }
    out[w] = '\0';
}

static void assert_same_model(const pc_hclt *a, const pc_hclt *b) {
    const size_t k = (size_t)a->num_latents;
    assert_int_equal(a->num_trans, b->num_trans);
    assert_memory_equal(a->parent, b->parent, (size_t)a->num_vars * sizeof(int32_t));
    assert_memory_equal(a->root_logw, b->root_logw, k * sizeof(double));
    assert_memory_equal(a->trans_logw, b->trans_logw, (size_t)a->num_trans * k * k * 8);
    assert_memory_equal(a->input_logp, b->input_logp, (size_t)a->num_vars * k * a->num_cats * 8);
}

static void test_ranks_learn_one_model(void **state) {
    (void)state;
    write_idx("train.idx", 700, 0);
    char args[2048], want_json[1 << 15], got_json[1 << 15];
    const char *fmt = "--latents 3 --epochs 2 --batch 100 --full-epochs 1 --threads %d --json "
                      "--data '%s' --valid '%s' -o '%s'";
    snprintf(args, sizeof args, fmt, 1, pc_hr_path(g_dir, "train.idx"),
             pc_hr_path(g_dir, "train.idx"), pc_hr_path(g_dir, "m.h5"));
    assert_int_equal(run(1, args), 0);
    strip_times(slurp("out.json"), want_json, sizeof want_json);
    pc_hclt *want = NULL;
    assert_int_equal(pc_hclt_load(pc_hr_path(g_dir, "m.h5"), &want), PC_OK);
    for (int ranks = 1; ranks <= 4; ranks++) {
        snprintf(args, sizeof args, fmt, ranks == 1 ? 2 : 1, pc_hr_path(g_dir, "train.idx"),
                 pc_hr_path(g_dir, "train.idx"), pc_hr_path(g_dir, "m.h5"));
        assert_int_equal(run(ranks, args), 0);
        char *out = slurp("out.json");
        assert_non_null(strstr(out, "\"processes\": "));
        strip_times(out, got_json, sizeof got_json);
        assert_string_equal(got_json, want_json);
        pc_hclt *got = NULL;
        assert_int_equal(pc_hclt_load(pc_hr_path(g_dir, "m.h5"), &got), PC_OK);
        assert_same_model(got, want);
        pc_hclt_free(got);
    }
    pc_hclt_free(want);
    remove(pc_hr_path(g_dir, "m.h5"));
}

static void test_bad_data_fails_every_rank(void **state) {
    (void)state;
    write_idx("short.idx", 50, 7);
    char args[2048];
    snprintf(args, sizeof args, "--latents 2 --threads 1 --data '%s' -o '%s'",
             pc_hr_path(g_dir, "short.idx"), pc_hr_path(g_dir, "bad.h5"));
    const int rc = run(3, args);
    assert_true(rc != 0 && rc != 124); /* failed, and not by the timeout */
    struct stat sb;
    assert_int_not_equal(stat(pc_hr_path(g_dir, "bad.h5"), &sb), 0);
}

/* Under mpirun: each rank fills its shard of n rows with their row numbers, rank 0 gathers and
 * checks them all; exit 0 when every row came back in its place. */
static int gather_worker(int argc, char **argv) {
    pc_tool_mpi mpi;
    pc_tool_mpi_init(&argc, &argv, &mpi);
    int bad = 0;
    for (int64_t n = 1; n < 40; n += 7) {
        const int64_t unit = 1 + n % 4; /* shards of whole units, the last one short */
        int64_t lo = 0, hi = 0;
        pc_tool_mpi_shard(&mpi, n, unit, &lo, &hi);
        bad += lo % unit != 0 || (hi % unit != 0 && hi != n);
        double mine[40], all[40];
        for (int64_t i = lo; i < hi; i++) mine[i - lo] = (double)i;
        for (int i = 0; i < 40; i++) all[i] = -1;
        pc_tool_mpi_gather(&mpi, mine, all, n, unit);
        for (int64_t i = 0; i < n && mpi.rank == 0; i++) bad += all[i] != (double)i;
    }
    pc_tool_mpi_finalize(&mpi);
    return bad != 0;
}

static void test_gather_in_row_order(void **state) {
    (void)state;
    for (int ranks = 1; ranks <= 4; ranks++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "timeout 60 '%s' --oversubscribe -np %d '%s' --gather-worker",
                 g_mpiexec, ranks, g_self);
        const int st = system(cmd);
        assert_true(st != -1 && WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--gather-worker")) return gather_worker(argc, argv);
    pc_hr_seed();
    const char *bin = getenv("PC_BINARY_DIR");
    g_mpiexec = getenv("PC_MPIEXEC");
    if (!bin || !g_mpiexec || !*g_mpiexec) {
        printf("PC_BINARY_DIR or PC_MPIEXEC is not set (a build without MPI): skipped\n");
        return 77;
    }
    snprintf(g_tool, sizeof g_tool, "%s/pclearn", bin);
    snprintf(g_self, sizeof g_self, "%s/test_learn_mpi", bin);
    g_dir = pc_hr_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_learn_one_model),
        cmocka_unit_test(test_bad_data_fails_every_rank),
        cmocka_unit_test(test_gather_in_row_order),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    pc_hr_rmdir(g_dir);
    return rc;
}
