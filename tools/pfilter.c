/* pfilter: a bootstrap particle filter on the univariate nonstationary growth model, with the
 * log-weights normalised by pcinfer's LSE (pc_lse_rows), one call per step.
 *
 *   x_t = x_{t-1}/2 + 25 x_{t-1} / (1 + x_{t-1}^2) + 8 cos(1.2 t) + v_t,   v_t ~ N(0, 10)
 *   y_t = x_t^2 / 20 + w_t,                                               w_t ~ N(0, 1)
 *   x_0 ~ N(0, 5); particles start from the same prior.
 *
 *   pfilter --particles N [--steps T] [--kernel int|fuse|ref] [--threads T] [--seed S]
 *           [--per-step] [--json]
 *
 * Each step: propagate the particles, log w_i = -(y_t - x_i^2/20)^2 / 2, lse = LSE(log w),
 * w_i = exp(log w_i - lse), estimate x^_t = sum_i w_i x_i, systematic resampling. The weights
 * are used as the LSE leaves them (not renormalised), so the LSE's error reaches the estimate.
 * The filter runs twice from the same seed, with --kernel and with the FP64 `ref` kernel; both
 * consume the same random numbers, so the mean |x^ - x^_ref| isolates the LSE's effect.
 * Resampling makes runs chaotic (a weight that moves by 1e-7 can flip one particle, and the runs
 * drift apart by Monte Carlo noise), so each step also evaluates, untimed, the FP64 LSE on the
 * same log-weights: |LSE - LSE_ref| and |x^ - x^ with LSE_ref| measure the LSE's own effect.
 * Reported: the LSE call's time per step (median over steps), the whole step's time (median),
 * RMSE of x^ against the simulated truth for both runs (and, as a baseline, the RMS of the truth:
 * the RMSE of always guessing 0), the mean |x^ - x^_ref| of the two runs, and the same-particle
 * differences.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pc/lse.h"
#include "pc/rng.h"

typedef struct options {
    int64_t particles;
    int steps, threads, per_step, json;
    pc_lse_kernel kernel;
    uint64_t seed;
} options;

typedef struct run {
    double *est;      /* [steps] state estimates */
    double *lse_ms;   /* [steps] time of the LSE call */
    double *step_ms;  /* [steps] time of the whole step (without the side check below) */
    double *est_same; /* [steps] the estimate with the FP64 LSE on the same particles */
    double *lse_err;  /* [steps] |LSE - FP64 LSE| on the same log-weights */
} run;

static void usage(void) {
    fprintf(stderr, "usage: pfilter --particles N [--steps T] [--kernel int|fuse|ref] "
                    "[--threads T] [--seed S] [--per-step] [--json]\n");
    exit(2);
}

static int64_t parse_int(const char *s, const char *name, int64_t lo, int64_t hi) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "pfilter: %s must be an integer in [%" PRId64 ", %" PRId64 "], got '%s'\n",
                name, lo, hi, s);
        exit(2);
    }
    return v;
}

static options parse(int argc, char **argv) {
    options o = {0, 50, 1, 0, 0, PC_LSE_INT, (uint64_t)time(NULL)};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) { o.json = 1; continue; }
        if (!strcmp(a, "--per-step")) { o.per_step = 1; continue; }
        if (!v) usage();
        i++;
        if (!strcmp(a, "--particles")) o.particles = parse_int(v, a, 1, (int64_t)1 << 28);
        else if (!strcmp(a, "--steps")) o.steps = (int)parse_int(v, a, 1, 1000000);
        else if (!strcmp(a, "--threads")) o.threads = (int)parse_int(v, a, 1, 1024);
        else if (!strcmp(a, "--seed")) o.seed = (uint64_t)parse_int(v, a, 0, INT64_MAX);
        else if (!strcmp(a, "--kernel")) {
            if (pc_lse_kernel_parse(v, &o.kernel) != PC_OK) {
                fprintf(stderr, "pfilter: %s\n", pc_last_error());
                exit(2);
            }
        } else usage();
    }
    if (!o.particles) usage();
    return o;
}

/* Box-Muller on pc/rng.h's stream: the same seed gives the same stream in every run. */
static void normals(pc_rng *g, float *z, int64_t n) {
    for (int64_t i = 0; i < n; i += 2) {
        double r = sqrt(-2.0 * log(pc_rng_open_unit(g))),
               a = 6.283185307179586 * pc_rng_open_unit(g);
        z[i] = (float)(r * cos(a));
        if (i + 1 < n) z[i + 1] = (float)(r * sin(a));
    }
}

static double drift(double x, int t) {
    return 0.5 * x + 25.0 * x / (1.0 + x * x) + 8.0 * cos(1.2 * t);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* The truth and the observations, from their own stream (seed + 1). */
static void simulate(uint64_t seed, int steps, double *truth, double *obs) {
    pc_rng g = {seed + 1};
    float z[2];
    normals(&g, z, 2);
    double x = sqrt(5.0) * z[0];
    for (int t = 1; t <= steps; t++) {
        normals(&g, z, 2);
        x = drift(x, t) + sqrt(10.0) * z[0];
        truth[t - 1] = x;
        obs[t - 1] = x * x / 20.0 + z[1];
    }
}

/* One filter run with `kernel`; fills r. Returns 0, or 1 after printing the library's error. */
static int filter(const options *o, pc_lse_kernel kernel, const double *obs, run *r) {
    int64_t n = o->particles;
    float *x = malloc((size_t)n * sizeof *x), *nx = malloc((size_t)n * sizeof *nx);
    float *logw = malloc((size_t)n * sizeof *logw), *z = malloc((size_t)(n + 1) * sizeof *z);
    double *w = malloc((size_t)n * sizeof *w);
    int rc = 1;
    if (!x || !nx || !logw || !z || !w) {
        fprintf(stderr, "pfilter: out of memory for %" PRId64 " particles\n", n);
        goto fail;
    }
    pc_rng g = {o->seed};
    normals(&g, z, n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(sqrt(5.0) * z[i]);
    pc_lse_cpu_opts opts = {o->threads, PC_ISA_AUTO};
    for (int t = 1; t <= o->steps; t++) {
        double t0 = now_ms();
        normals(&g, z, n);
        const double y = obs[t - 1], sv = sqrt(10.0);
        for (int64_t i = 0; i < n; i++) {
            double xi = drift(x[i], t) + sv * z[i], e = y - xi * xi / 20.0;
            x[i] = (float)xi;
            logw[i] = (float)(-0.5 * e * e);
        }
        float lse = 0.0f;
        double t1 = now_ms();
        if (pc_lse_rows(kernel, PC_F32, logw, 1, n, n, &lse, &opts) != PC_OK) {
            fprintf(stderr, "pfilter: LSE (%s): %s\n", pc_lse_kernel_name(kernel), pc_last_error());
            goto fail;
        }
        r->lse_ms[t - 1] = now_ms() - t1;
        double est = 0.0;
        for (int64_t i = 0; i < n; i++) {
            w[i] = exp((double)logw[i] - (double)lse);
            est += w[i] * x[i];
        }
        r->est[t - 1] = est;
        /* Side check, not timed: the FP64 LSE on the same log-weights and the estimate it
         * gives. */
        double t2 = now_ms(), lse_ref = 0.0, est_same = 0.0;
        if (pc_lse_rows_ref(PC_F32, logw, 1, n, n, &lse_ref) != PC_OK) {
            fprintf(stderr, "pfilter: FP64 LSE: %s\n", pc_last_error());
            goto fail;
        }
        for (int64_t i = 0; i < n; i++) est_same += exp((double)logw[i] - lse_ref) * x[i];
        r->est_same[t - 1] = est_same;
        r->lse_err[t - 1] = fabs((double)lse - lse_ref);
        double side_ms = now_ms() - t2;
        /* Systematic resampling: points (u + k) / n against the running sum of the weights. */
        double u = pc_rng_open_unit(&g) / (double)n, cum = w[0];
        for (int64_t k = 0, i = 0; k < n; k++) {
            double p = u + (double)k / (double)n;
            while (p > cum && i + 1 < n) cum += w[++i];
            nx[k] = x[i];
        }
        float *swap = x;
        x = nx, nx = swap;
        r->step_ms[t - 1] = now_ms() - t0 - side_ms;
    }
    rc = 0;
fail:
    free(x), free(nx), free(logw), free(z), free(w);
    return rc;
}

static int cmp_double(const void *p, const void *q) {
    double a = *(const double *)p, b = *(const double *)q;
    return (a > b) - (a < b);
}

static double median(const double *v, int n) {
    double *c = malloc((size_t)n * sizeof *c);
    if (!c) return NAN;
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

static double rmse(const double *a, const double *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (a[i] - b[i]) * (a[i] - b[i]);
    return sqrt(s / n);
}

int main(int argc, char **argv) {
    options o = parse(argc, argv);
    int T = o.steps;
    double *buf = calloc((size_t)T * 12, sizeof *buf);
    if (!buf) { fprintf(stderr, "pfilter: out of memory\n"); return 1; }
    double *truth = buf, *obs = buf + T;
    run k = {buf + 2 * T, buf + 3 * T, buf + 4 * T, buf + 5 * T, buf + 6 * T};
    run ref = {buf + 7 * T, buf + 8 * T, buf + 9 * T, buf + 10 * T, buf + 11 * T};
    simulate(o.seed, T, truth, obs);
    if (filter(&o, o.kernel, obs, &k) || filter(&o, PC_LSE_REF, obs, &ref)) return 1;
    double diff = 0.0, diff_same = 0.0, lse_err = 0.0;
    for (int t = 0; t < T; t++) {
        diff += fabs(k.est[t] - ref.est[t]) / T;
        diff_same += fabs(k.est[t] - k.est_same[t]) / T;
        lse_err += k.lse_err[t] / T;
    }
    if (o.per_step)
        for (int t = 0; t < T; t++)
            fprintf(o.json ? stderr : stdout,
                    "step %d: truth %.4f est %.4f est_ref %.4f lse %.4f ms step %.4f ms\n", t + 1,
                    truth[t], k.est[t], ref.est[t], k.lse_ms[t], k.step_ms[t]);
    double lse_ms = median(k.lse_ms, T), step_ms = median(k.step_ms, T);
    double *zero = calloc((size_t)T, sizeof *zero); /* the estimate "always 0", a baseline */
    double rms_truth = zero ? rmse(zero, truth, T) : NAN;
    free(zero);
    double lse_ref_ms = median(ref.lse_ms, T);
    if (o.json)
        printf(
            "{\"tool\":\"pfilter\",\"kernel\":\"%s\",\"isa\":\"%s\",\"particles\":%" PRId64
            ",\"steps\":%d,\"threads\":%d,\"seed\":%" PRIu64 ",\"lse_ms\":%.6g,\"lse_ref_ms\":%.6g,"
            "\"step_ms\":%.6g,\"rmse\":%.6g,\"rmse_ref\":%.6g,\"mean_abs_diff_vs_ref\":%.6g,"
            "\"mean_abs_diff_same_particles\":%.6g,\"mean_lse_abs_err\":%.6g,\"rms_truth\":%.6g}\n",
            pc_lse_kernel_name(o.kernel), pc_isa_name(pc_cpu_best_isa()), o.particles, T, o.threads,
            o.seed, lse_ms, lse_ref_ms, step_ms, rmse(k.est, truth, T), rmse(ref.est, truth, T),
            diff, diff_same, lse_err, rms_truth);
    else
        printf("pfilter %s, %" PRId64 " particles, %d steps (median per step): LSE %.4f ms "
               "(ref %.4f ms), whole step %.4f ms; RMSE vs truth %.4f (ref %.4f); "
               "mean |est - est_ref| %.3g (same particles %.3g; |LSE err| %.3g)\n",
               pc_lse_kernel_name(o.kernel), o.particles, T, lse_ms, lse_ref_ms, step_ms,
               rmse(k.est, truth, T), rmse(ref.est, truth, T), diff, diff_same, lse_err);
    free(buf);
    return 0;
}
