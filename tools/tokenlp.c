/* tokenlp: times token log-probabilities (pc/logprob.h) on random logits and reports the error
 * against the FP64 reference.
 *
 *   tokenlp --device cpu|cuda --rows R --vocab V [--dtype f32|bf16] [--kernel ref|fuse|int]
 *           [--threads T] [--sd S] [--reps N] [--seed S] [--json]
 *
 * --kernel picks the CPU path (the GPU has one). Logits are N(0, S^2) per element (S = 3 by
 * default, a spread like a language model's), targets uniform. The time is the median of --reps
 * calls after one warm-up call; on the GPU each call is timed with CUDA events and, when the logits
 * are smaller than 256 MB, the calls rotate over copies so that no call reads from a warm 60 MB L2.
 * GB/s counts the logit bytes only.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pc/cuda.h"
#include "pc/logprob.h"
#include "pc/rng.h"

typedef struct args {
    int cuda, json, threads, reps;
    int64_t rows, vocab;
    pc_dtype dtype;
    pc_lse_kernel kernel;
    double sd;
    uint64_t seed;
} args;

static void usage(void) {
    fprintf(stderr,
            "usage: tokenlp --device cpu|cuda --rows R --vocab V [--dtype f32|bf16] "
            "[--kernel ref|fuse|int] [--threads T] [--sd S] [--reps N] [--seed S] [--json]\n");
    exit(2);
}

static int64_t parse_int(const char *s, const char *name, int64_t lo) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo) {
        fprintf(stderr, "tokenlp: %s must be an integer >= %" PRId64 ", got '%s'\n", name, lo, s);
        exit(2);
    }
    return v;
}

static args parse(int argc, char **argv) {
    args a = {0, 0, 1, 20, 0, 0, PC_F32, PC_LSE_FUSE, 3.0, (uint64_t)time(NULL)};
    int have_device = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--json")) { a.json = 1; continue; }
        if (!v) usage();
        i++;
        if (!strcmp(o, "--device")) {
            if (strcmp(v, "cpu") && strcmp(v, "cuda")) usage();
            a.cuda = !strcmp(v, "cuda"), have_device = 1;
        } else if (!strcmp(o, "--rows")) a.rows = parse_int(v, "--rows", 1);
        else if (!strcmp(o, "--vocab")) a.vocab = parse_int(v, "--vocab", 1);
        else if (!strcmp(o, "--threads")) a.threads = (int)parse_int(v, "--threads", 1);
        else if (!strcmp(o, "--reps")) a.reps = (int)parse_int(v, "--reps", 1);
        else if (!strcmp(o, "--seed")) a.seed = (uint64_t)parse_int(v, "--seed", 0);
        else if (!strcmp(o, "--sd")) {
            char *end;
            a.sd = strtod(v, &end);
            if (*end || !(a.sd >= 0.0)) usage();
        } else if (!strcmp(o, "--dtype")) {
            if (pc_dtype_parse(v, &a.dtype) != PC_OK) {
                fprintf(stderr, "tokenlp: %s\n", pc_last_error());
                exit(2);
            }
        } else if (!strcmp(o, "--kernel")) {
            if (pc_lse_kernel_parse(v, &a.kernel) != PC_OK) {
                fprintf(stderr, "tokenlp: %s\n", pc_last_error());
                exit(2);
            }
        } else usage();
    }
    if (!have_device || !a.rows || !a.vocab) usage();
    return a;
}

static pc_rng rng;
static double uniform01(void) { return pc_rng_open_unit(&rng); }

static void fill(const args *a, void *x, int64_t *targets) {
    pc_rng_init(&rng, a->seed);
    int64_t n = a->rows * a->vocab;
    for (int64_t i = 0; i < n; i++) {
        float v =
            (float)(a->sd * sqrt(-2.0 * log(uniform01())) * cos(6.283185307179586 * uniform01()));
        if (a->dtype == PC_F32) ((float *)x)[i] = v;
        else {
            uint32_t u;
            memcpy(&u, &v, sizeof u);
            ((uint16_t *)x)[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        }
    }
    for (int64_t r = 0; r < a->rows; r++)
        targets[r] = (int64_t)(uniform01() * (double)a->vocab) % a->vocab;
}

static int cmp_double(const void *p, const void *q) {
    double x = *(const double *)p, y = *(const double *)q;
    return (x > y) - (x < y);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* Prints the library's last error after what failed; returns exit status 1. */
static int call_failed(const char *what) {
    fprintf(stderr, "tokenlp: %s: %s\n", what, pc_last_error());
    return 1;
}

static int time_cpu(const args *a, const void *x, const int64_t *t, float *out, double *ms) {
    pc_lse_cpu_opts opts = {a->threads, PC_ISA_AUTO};
    if (pc_logprob_rows(a->kernel, a->dtype, x, a->rows, a->vocab, a->vocab, t, out, &opts) !=
        PC_OK)
        return call_failed("pc_logprob_rows");
    for (int i = 0; i < a->reps; i++) {
        double t0 = now_ms();
        pc_logprob_rows(a->kernel, a->dtype, x, a->rows, a->vocab, a->vocab, t, out, &opts);
        ms[i] = now_ms() - t0;
    }
    return 0;
}

/* Copies of the logits rotated between calls so that each call reads from DRAM. */
#define MAX_COPIES 8
static int time_cuda(const args *a, const void *x, const int64_t *t, float *out, double *ms,
                     char *name, size_t name_len) {
    size_t bytes = (size_t)(a->rows * a->vocab) * pc_dtype_size(a->dtype), scratch = 0;
    int copies = bytes >= ((size_t)256 << 20) ? 1 : (int)(((size_t)256 << 20) / bytes);
    copies = copies > MAX_COPIES ? MAX_COPIES : copies;
    void *d_x[MAX_COPIES] = {0}, *d_scratch = NULL;
    int64_t *d_t = NULL;
    float *d_out = NULL;
    pc_cuda_timer *timer = NULL;
    int rc = 1;
    if (pc_cuda_describe(name, name_len) != PC_OK) return call_failed("no GPU");
    for (int c = 0; c < copies; c++)
        if (pc_cuda_malloc(&d_x[c], bytes) != PC_OK ||
            pc_cuda_memcpy_h2d(d_x[c], x, bytes) != PC_OK)
            goto fail;
    if (pc_cuda_malloc((void **)&d_t, (size_t)a->rows * sizeof *t) != PC_OK ||
        pc_cuda_memcpy_h2d(d_t, t, (size_t)a->rows * sizeof *t) != PC_OK ||
        pc_cuda_malloc((void **)&d_out, (size_t)a->rows * sizeof *out) != PC_OK ||
        pc_logprob_rows_cuda(PC_LSE_FUSE, a->dtype, d_x[0], a->rows, a->vocab, a->vocab, d_t,
                             d_out, NULL, &scratch, NULL) != PC_OK ||
        pc_cuda_malloc(&d_scratch, scratch) != PC_OK || pc_cuda_timer_create(&timer) != PC_OK)
        goto fail;
    for (int i = -1; i < a->reps; i++) {
        float e = 0.0f;
        if (pc_cuda_timer_start(timer, NULL) != PC_OK ||
            pc_logprob_rows_cuda(PC_LSE_FUSE, a->dtype, d_x[(i + copies) % copies], a->rows,
                                 a->vocab, a->vocab, d_t, d_out, d_scratch, &scratch,
                                 NULL) != PC_OK ||
            pc_cuda_timer_stop(timer, NULL) != PC_OK ||
            pc_cuda_timer_elapsed_ms(timer, &e) != PC_OK)
            goto fail;
        if (i >= 0) ms[i] = e;
    }
    if (pc_cuda_memcpy_d2h(out, d_out, (size_t)a->rows * sizeof *out) != PC_OK) goto fail;
    rc = 0;
fail:
    if (rc) call_failed("CUDA run");
    for (int c = 0; c < copies; c++) pc_cuda_free(d_x[c]);
    pc_cuda_free(d_t), pc_cuda_free(d_out), pc_cuda_free(d_scratch);
    pc_cuda_timer_free(timer);
    return rc;
}

int main(int argc, char **argv) {
    args a = parse(argc, argv);
    size_t n = (size_t)(a.rows * a.vocab), bytes = n * pc_dtype_size(a.dtype);
    void *x = malloc(bytes);
    int64_t *t = malloc((size_t)a.rows * sizeof *t);
    float *out = malloc((size_t)a.rows * sizeof *out);
    double *ref = malloc((size_t)a.rows * sizeof *ref), *ms = malloc((size_t)a.reps * sizeof *ms);
    if (!x || !t || !out || !ref || !ms) {
        fprintf(stderr, "tokenlp: out of memory for %zu bytes of logits\n", bytes);
        return 1;
    }
    fill(&a, x, t);
    char name[256] = "cpu";
    int rc = a.cuda ? time_cuda(&a, x, t, out, ms, name, sizeof name) : time_cpu(&a, x, t, out, ms);
    if (rc) return rc;
    if (pc_logprob_rows_ref(a.dtype, x, a.rows, a.vocab, a.vocab, t, ref) != PC_OK)
        return call_failed("reference");
    double mean_err = 0.0, max_err = 0.0;
    for (int64_t r = 0; r < a.rows; r++) {
        double e = fabs((double)out[r] - ref[r]);
        mean_err += e / (double)a.rows;
        max_err = e > max_err ? e : max_err;
    }
    qsort(ms, (size_t)a.reps, sizeof *ms, cmp_double);
    double med = ms[a.reps / 2], gbps = (double)bytes / (med * 1e6);
    const char *kernel = a.cuda ? "fuse" : pc_lse_kernel_name(a.kernel);
    if (a.json)
        printf("{\"tool\":\"tokenlp\",\"device\":\"%s\",\"device_name\":\"%s\",\"kernel\":\"%s\","
               "\"dtype\":\"%s\",\"rows\":%" PRId64 ",\"vocab\":%" PRId64 ",\"threads\":%d,"
               "\"ms\":%.6g,\"ms_min\":%.6g,\"gbps\":%.6g,\"mean_abs_err\":%.3e,"
               "\"max_abs_err\":%.3e}\n",
               a.cuda ? "cuda" : "cpu", name, kernel, pc_dtype_name(a.dtype), a.rows, a.vocab,
               a.threads, med, ms[0], gbps, mean_err, max_err);
    else
        printf("%s %s %s rows %" PRId64 " vocab %" PRId64 ": %.4f ms (median of %d), %.1f GB/s, "
               "|err| vs FP64 mean %.2e max %.2e [%s]\n",
               a.cuda ? "cuda" : "cpu", kernel, pc_dtype_name(a.dtype), a.rows, a.vocab, med,
               a.reps, gbps, mean_err, max_err, name);
    free(x), free(t), free(out), free(ref), free(ms);
    return 0;
}
