/* The CPU LSE forms that lsebench does not time, on inputs of U(lo, 0), one thread, for every
 * instruction set this CPU has: the wide ranges are where subnormals used to slow the kernels
 * down 10-20x before the kernels ran with flush-to-zero (bench/harness/cpu_lse_wide.sh runs
 * this next to lsebench's rows).
 *
 * Variants (shapes fixed; the inputs are not rotated):
 *   1  weighted, fuse: out[b, j] = LSE_k (w[j, k] + x[b, k]), batch 64, 256 outputs x 1024
 *      inputs (w 1 MB, x 256 KB); ns per term (batch x outputs x inputs)
 *   2  backward: grad[i] = exp(x[i] - lse) for one row of 2^20 (4 MB); ns per element
 * Each is checked against the double reference below before it is timed: the backward at
 * every range; the weighted form on U(-10, 0), since its exp-once form (pc/lse.h) takes exp(w)
 * in FP32, which is 0 below -103 nats by design, so at wider ranges only its speed is asked.
 * Median of 7 calls after one warm-up.
 *
 *   usage: cpu_lse_wide VARIANT|all LABEL LO...   one JSON object per (form, isa, lo) on stdout
 * Results: bench/notebook/cpu_lse_wide_ftz_xeon-2c.{json,md} (before and after flush-to-zero). */
#include "pc/lse.h"

#include "common.h"

#define REPEATS 7
#define BATCH 64
#define OUTS 256
#define INS 1024
#define ROW (1 << 20)

static const char *const variants[] = {"weighted form, fuse (64 x 256 x 1024)",
                                       "backward (softmax) of one row of 2^20"};

static void fill(float *v, int64_t n, double lo, unsigned *state) {
    for (int64_t i = 0; i < n; i++) {
        *state = *state * 1664525u + 1013904223u;
        v[i] = (float)(lo * (double)(*state >> 8) / 16777216.0);
    }
}

static void fail(const char *what) {
    fprintf(stderr, "cpu_lse_wide: %s: %s\n", what, pc_last_error());
    exit(1);
}

/* out[b, j] = log sum_k exp(w[j, k] + x[b, k]) in double, shifted by the row's max term. */
static void weighted_ref(const float *w, const float *x, double *out) {
    for (int b = 0; b < BATCH; b++)
        for (int j = 0; j < OUTS; j++) {
            double m = -INFINITY, s = 0.0;
            for (int k = 0; k < INS; k++) {
                const double t = (double)w[j * INS + k] + x[b * INS + k];
                m = t > m ? t : m;
            }
            for (int k = 0; k < INS; k++) s += exp((double)w[j * INS + k] + x[b * INS + k] - m);
            out[b * OUTS + j] = m + log(s);
        }
}

/* The row's LSE in double, and grad[i] = exp(x[i] - lse) in double for the given FP32 lse. */
static double row_lse_ref(const float *x) {
    double m = -INFINITY, s = 0.0;
    for (int i = 0; i < ROW; i++) m = x[i] > m ? x[i] : m;
    for (int i = 0; i < ROW; i++) s += exp(x[i] - m);
    return m + log(s);
}

static double *as_double(const float *v, int64_t n) {
    double *d = lab_malloc(sizeof(double) * n);
    for (int64_t i = 0; i < n; i++) d[i] = v[i];
    return d;
}

/* The weighted form's FP32 result against the double one: FP32 rounding of a few terms. */
static void check_weighted(const char *isa, const pc_lse_cpu_opts *opts) {
    float *w = lab_malloc(sizeof(float) * OUTS * INS), *x = lab_malloc(sizeof(float) * BATCH * INS);
    float *out = lab_malloc(sizeof(float) * BATCH * OUTS);
    double *ref = lab_malloc(sizeof(double) * BATCH * OUTS);
    unsigned state = 7;
    fill(w, OUTS * INS, -10.0, &state);
    fill(x, BATCH * INS, -10.0, &state);
    for (int i = 0; i < BATCH * OUTS; i++) out[i] = NAN;
    if (pc_lse_weighted(PC_LSE_FUSE, w, x, BATCH, OUTS, INS, INS, out, opts) != PC_OK)
        fail("pc_lse_weighted");
    weighted_ref(w, x, ref);
    double *got = as_double(out, BATCH * OUTS);
    char what[64];
    snprintf(what, sizeof what, "weighted fuse %s, U(-10, 0)", isa);
    lab_check(what, ref, got, BATCH * OUTS, 1e-5, 1e-6);
    free(w), free(x), free(out), free(ref), free(got);
}

/* The softmax of an FP32 row against exp(x - lse) in double: absolute, since the gradients of
 * a wide row are mostly far below FP32's smallest normal and flushed to zero. */
static void check_backward(const char *isa, double lo, const float *x, const float *grad,
                           float lse) {
    double *ref = lab_malloc(sizeof(double) * ROW);
    for (int i = 0; i < ROW; i++) ref[i] = exp((double)x[i] - lse);
    double *got = as_double(grad, ROW);
    char what[64];
    snprintf(what, sizeof what, "backward %s, U(%g, 0)", isa, lo);
    lab_check(what, ref, got, ROW, 1e-30, 1e-5);
    free(ref), free(got);
}

int main(int argc, char **argv) {
    int first, last;
    lab_pick(argc, argv, variants, 2, &first, &last);
    if (argc < 4) {
        fprintf(stderr, "usage: %s VARIANT|all LABEL LO...\n", argv[0]);
        return 2;
    }
    float *w = lab_malloc(sizeof(float) * OUTS * INS), *x = lab_malloc(sizeof(float) * BATCH * INS);
    float *out = lab_malloc(sizeof(float) * BATCH * OUTS), *bx = lab_malloc(sizeof(float) * ROW);
    float *g = lab_malloc(sizeof(float) * ROW);
    const pc_isa best = pc_cpu_best_isa();
    for (int form = first - 1; form <= last - 1; form++) {
        for (int isa = PC_ISA_SCALAR; isa <= (int)best && form == 0; isa++) {
            const pc_lse_cpu_opts opts = {1, (pc_isa)isa};
            check_weighted(pc_isa_name((pc_isa)isa), &opts);
        }
        for (int a = 3; a < argc; a++) {
            const double lo = atof(argv[a]);
            unsigned state = 1;
            fill(w, OUTS * INS, lo, &state);
            fill(x, BATCH * INS, lo, &state);
            fill(bx, ROW, lo, &state);
            const float lse = (float)row_lse_ref(bx);
            for (int isa = PC_ISA_SCALAR; isa <= (int)best; isa++) {
                const pc_lse_cpu_opts opts = {1, (pc_isa)isa};
                if (form == 1) {
                    for (int i = 0; i < ROW; i++) g[i] = NAN;
                    if (pc_lse_backward(bx, &lse, 1, ROW, ROW, g, ROW, &opts) != PC_OK)
                        fail("pc_lse_backward");
                    check_backward(pc_isa_name((pc_isa)isa), lo, bx, g, lse);
                }
                double t[REPEATS];
                for (int r = -1; r < REPEATS; r++) {
                    const double t0 = lab_now_s();
                    const pc_status st =
                        form == 0 ? pc_lse_weighted(PC_LSE_FUSE, w, x, BATCH, OUTS, INS, INS, out,
                                                    &opts)
                                  : pc_lse_backward(bx, &lse, 1, ROW, ROW, g, ROW, &opts);
                    if (st != PC_OK) fail(variants[form]);
                    if (r >= 0) t[r] = lab_now_s() - t0;
                }
                const double per = form == 0 ? (double)BATCH * OUTS * INS : (double)ROW;
                printf("{\"label\": \"%s\", \"form\": \"%s\", \"isa\": \"%s\", \"range\": [%g, 0], "
                       "\"ns_per_%s\": %.4f}\n",
                       argv[2], form == 0 ? "weighted_fuse" : "backward",
                       pc_isa_name((pc_isa)isa), lo, form == 0 ? "term" : "elem",
                       lab_median(t, REPEATS) * 1e9 / per);
            }
        }
    }
    free(w), free(x), free(out), free(bx), free(g);
    return 0;
}
