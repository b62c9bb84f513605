/* lsebench: times the row-wise log-sum-exp kernels (pc/lse.h) and reports their error against
 * the FP64 reference.
 *
 *   lsebench --device cpu|cuda [--kernel ref|fuse|int] [--dtype f32|f16|bf16|q10.6]
 *            [--rows B] [--cols N] [--range lo,hi | --normal sd] [--threads T] [--isa NAME]
 *            [--repeats R] [--seed S] [--json]
 *
 * With --kernel: one measurement of that kernel on a B x N input (default 512 x 8192).
 * Without: the table over the paper's shapes, B = 512 with N in {128, 1024, 8192, 32768,
 * 128256}, and 1 x 2^20, for ref, fuse (f32, f16, bf16) and int (f32, q10.6); the GPU has no
 * ref. Inputs are U(-10, 0) unless --range or --normal says otherwise.
 *
 * Method: one warm-up call (on the CPU, one per input copy), then up to R timed calls (default
 * 25; fewer when a call is slow, so that a configuration takes about a quarter second, but never
 * fewer than 3), median reported. Inputs that fit in cache are copied to several buffers and the
 * calls rotate over them. CPU calls are timed with clock_gettime(CLOCK_MONOTONIC), GPU calls
 * with CUDA events. The reference is computed once per input on the host, in FP64, on the same
 * encoded values the kernel reads, so the error is the kernel's own.
 *
 * Output: a text table, or with --json one object per line with device, kernel, dtype, isa,
 * threads, rows, cols, ns_per_elem, ms, repeats, mean_abs_err, max_abs_err, input, seed.
 * Exit status: 0 done (or --help), 1 a call failed, 2 usage error.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lsedata.h"
#include "pc/cuda.h"
#include "pc/lse.h"

#define MAX_ROTATE 8
/* Inputs under these sizes rotate over up to MAX_ROTATE copies: on the CPU, 64 MB is far past
 * the per-core caches (2 MB L2 here), so no call finds its input left in L1/L2 by the call
 * before; a shared last-level cache may still hold it. */
#define CPU_ROTATE_BYTES (64u << 20)
#define GPU_ROTATE_BYTES (256u << 20) /* several times the H200's 60 MB L2 */
#define TIME_BUDGET_S 0.25

typedef struct options {
    int cuda, json, threads, repeats, have_kernel, have_dtype;
    pc_lse_kernel kernel;
    pc_dtype dtype;
    pc_isa isa;
    int64_t rows, cols;
    double lo, hi, sd;
    uint64_t seed;
} options;

typedef struct result {
    double ms, ns_per_elem, mean_abs, max_abs;
    int repeats;
} result;

static const char usage_text[] =
    "usage: lsebench --device cpu|cuda [--kernel ref|fuse|int] [--dtype f32|f16|bf16|q10.6]\n"
    "                [--rows B] [--cols N] [--range lo,hi | --normal sd] [--threads T]\n"
    "                [--isa auto|scalar|avx2|avx512] [--repeats R] [--seed S] [--json]\n"
    "\n"
    "Times the row-wise log-sum-exp kernels and reports their error against the FP64 reference.\n"
    "Without --kernel: the table over the paper's shapes (512 x {128, 1024, 8192, 32768,\n"
    "128256} and 1 x 2^20) for every kernel and input type.\n"
    "  --device D      cpu or cuda (required)\n"
    "  --kernel K      measure only kernel ref, fuse or int (ref: CPU only) on one shape\n"
    "  --dtype T       input type with --kernel (default f32); fuse takes f32, f16, bf16,\n"
    "                  int takes f32, q10.6, ref any\n"
    "  --rows B        rows with --kernel (default 512)\n"
    "  --cols N        values per row with --kernel (default 8192)\n"
    "  --range lo,hi   inputs U(lo, hi) (default -10,0)\n"
    "  --normal sd     inputs N(0, sd^2) in place of --range\n"
    "  --threads T     CPU threads (default 1)\n"
    "  --isa NAME      CPU path: auto (the best this CPU has), scalar, avx2 or avx512\n"
    "  --repeats R     timed calls, median reported (default 25; fewer, at least 3, when a\n"
    "                  call is slow)\n"
    "  --seed S        input seed (default 1)\n"
    "  --json          one JSON object per measurement instead of the text table\n"
    "  -h, --help      print this help and exit\n";

static void usage(const char *why) {
    if (why)
        fprintf(stderr, "lsebench: %s\n", why);
    fputs(usage_text, stderr);
    exit(2);
}

static int64_t parse_int(const char *s, const char *name, int64_t lo) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo) {
        fprintf(stderr, "lsebench: %s must be an integer >= %lld, got '%s'\n", name, (long long)lo,
                s);
        exit(2);
    }
    return v;
}

static void parse(int argc, char **argv, options *o) {
    *o = (options){.threads = 1,
                   .repeats = 25,
                   .isa = PC_ISA_AUTO,
                   .rows = 512,
                   .cols = 8192,
                   .lo = -10.0,
                   .hi = 0.0,
                   .seed = 1};
    int have_device = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage_text, stdout);
            exit(0);
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "lsebench: %s needs a value\n", a);
            usage(NULL);
        }
        const char *v = argv[++i];
        if (strcmp(a, "--device") == 0) {
            if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0)
                usage("--device is cpu or cuda");
            o->cuda = strcmp(v, "cuda") == 0;
            have_device = 1;
        } else if (strcmp(a, "--kernel") == 0) {
            if (pc_lse_kernel_parse(v, &o->kernel) != PC_OK)
                usage(pc_last_error());
            o->have_kernel = 1;
        } else if (strcmp(a, "--dtype") == 0) {
            if (pc_dtype_parse(v, &o->dtype) != PC_OK)
                usage(pc_last_error());
            o->have_dtype = 1;
        } else if (strcmp(a, "--isa") == 0) {
            if (pc_isa_parse(v, &o->isa) != PC_OK)
                usage(pc_last_error());
        } else if (strcmp(a, "--rows") == 0) {
            o->rows = parse_int(v, "--rows", 1);
        } else if (strcmp(a, "--cols") == 0) {
            o->cols = parse_int(v, "--cols", 0);
        } else if (strcmp(a, "--threads") == 0) {
            o->threads = (int)parse_int(v, "--threads", 1);
        } else if (strcmp(a, "--repeats") == 0) {
            o->repeats = (int)parse_int(v, "--repeats", 1);
        } else if (strcmp(a, "--seed") == 0) {
            o->seed = (uint64_t)parse_int(v, "--seed", 0);
        } else if (strcmp(a, "--range") == 0) {
            char *end;
            o->lo = strtod(v, &end);
            if (*end != ',')
                usage("--range is lo,hi");
            o->hi = strtod(end + 1, &end);
            if (*end != '\0' || !(o->lo < o->hi) || !isfinite(o->lo) || !isfinite(o->hi))
                usage("--range is lo,hi with finite lo < hi");
            o->sd = 0.0;
        } else if (strcmp(a, "--normal") == 0) {
            char *end;
            o->sd = strtod(v, &end);
            if (*end != '\0' || !(o->sd > 0.0) || !isfinite(o->sd))
                usage("--normal takes sd > 0");
        } else {
            fprintf(stderr, "lsebench: unknown option '%s'\n", a);
            usage(NULL);
        }
    }
    if (!have_device)
        usage("--device is required");
    if (o->have_dtype && !o->have_kernel)
        usage("--dtype needs --kernel");
    if (o->cuda && o->have_kernel && o->kernel == PC_LSE_REF)
        usage("the GPU has no ref kernel");
    if (o->have_kernel &&
        ((o->kernel == PC_LSE_FUSE && o->dtype == PC_Q10_6) ||
         (o->kernel == PC_LSE_INT && (o->dtype == PC_F16 || o->dtype == PC_BF16))))
        usage("kernel/dtype pairs: ref with any dtype; fuse with f32, f16, bf16; int with f32, "
              "q10.6");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Prints the library's last error after what failed; returns exit status 1. */
static int call_failed(const char *what) {
    fprintf(stderr, "lsebench: %s: %s\n", what, pc_last_error());
    return 1;
}

/* How many timed calls: R, or fewer when a warm-up call shows R would take too long. */
static int plan_repeats(int max_repeats, double first_s) {
    int r = first_s > 0 ? (int)(TIME_BUDGET_S / first_s) : max_repeats;
    r = r < 3 ? 3 : r;
    return r < max_repeats ? r : max_repeats;
}

static void errors(const float *out, const double *ref, int64_t rows, result *res) {
    double sum = 0.0, mx = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        double e = fabs((double)out[r] - ref[r]);
        if (out[r] == ref[r])
            e = 0.0; /* matching infinities */
        if (isnan(e))
            e = INFINITY;
        sum += e;
        mx = e > mx ? e : mx;
    }
    res->mean_abs = rows ? sum / (double)rows : 0.0;
    res->max_abs = mx;
}

static int run_cpu(const options *o, void *const *bufs, int nbufs, const double *ref, result *res) {
    pc_lse_cpu_opts opts = {o->threads, o->isa};
    float *out = malloc(sizeof(float) * (size_t)o->rows);
    double *times = malloc(sizeof(double) * (size_t)o->repeats);
    if (!out || !times) {
        free(out), free(times);
        fprintf(stderr, "lsebench: out of memory\n");
        return 1;
    }
    /* Warm-up: one call on every copy, the last one timed. The first pass over a freshly
     * written copy is slower than the later ones (measured here: 512 x 1024 fuse, 8 copies,
     * 0.29 ns per value as the median of 25 calls after a single warm-up call, 0.17 after 200
     * calls or after one call per copy). */
    pc_status st = PC_OK;
    double t0 = now_s(), first = 0.0;
    for (int b = 0; st == PC_OK && b < nbufs; b++) {
        t0 = now_s();
        st = pc_lse_rows(o->kernel, o->dtype, bufs[b], o->rows, o->cols, o->cols, out, &opts);
        first = now_s() - t0;
    }
    int reps = plan_repeats(o->repeats, first);
    for (int r = 0; st == PC_OK && r < reps; r++) {
        t0 = now_s();
        st = pc_lse_rows(o->kernel, o->dtype, bufs[r % nbufs], o->rows, o->cols, o->cols, out,
                         &opts);
        times[r] = now_s() - t0;
    }
    if (st == PC_OK) {
        qsort(times, (size_t)reps, sizeof(double), cmp_double);
        res->ms = 1e3 * times[reps / 2];
        res->repeats = reps;
        errors(out, ref, o->rows, res);
    }
    free(out), free(times);
    return st == PC_OK ? 0 : call_failed("pc_lse_rows");
}

static int run_cuda(const options *o, void *const *bufs, int nbufs, size_t bytes, const double *ref,
                    result *res) {
    void *d_x[MAX_ROTATE] = {0}, *d_scratch = NULL;
    float *d_out = NULL, *out = malloc(sizeof(float) * (size_t)o->rows);
    double *times = malloc(sizeof(double) * (size_t)o->repeats);
    pc_cuda_timer *timer = NULL;
    size_t scratch = 0;
    int rc = 1;
    const char *what = "pc_cuda_malloc";
    if (!out || !times)
        goto fail;
    for (int b = 0; b < nbufs; b++) {
        if (pc_cuda_malloc(&d_x[b], bytes) != PC_OK)
            goto fail;
        what = "pc_cuda_memcpy_h2d";
        if (pc_cuda_memcpy_h2d(d_x[b], bufs[b], bytes) != PC_OK)
            goto fail;
        what = "pc_cuda_malloc";
    }
    if (pc_cuda_malloc((void **)&d_out, sizeof(float) * (size_t)o->rows) != PC_OK)
        goto fail;
    what = "pc_lse_rows_cuda";
    if (pc_lse_rows_cuda(o->kernel, o->dtype, d_x[0], o->rows, o->cols, o->cols, d_out, NULL,
                         &scratch, NULL) != PC_OK)
        goto fail;
    what = "pc_cuda_malloc";
    if (scratch && pc_cuda_malloc(&d_scratch, scratch) != PC_OK)
        goto fail;
    what = "pc_cuda_timer_create";
    if (pc_cuda_timer_create(&timer) != PC_OK)
        goto fail;
    what = "pc_lse_rows_cuda";
    double t0 = now_s();
    if (pc_lse_rows_cuda(o->kernel, o->dtype, d_x[0], o->rows, o->cols, o->cols, d_out, d_scratch,
                         &scratch, NULL) != PC_OK ||
        pc_cuda_synchronize() != PC_OK)
        goto fail;
    int reps = plan_repeats(o->repeats, now_s() - t0);
    for (int r = 0; r < reps; r++) {
        float ms;
        if (pc_cuda_timer_start(timer, NULL) != PC_OK ||
            pc_lse_rows_cuda(o->kernel, o->dtype, d_x[r % nbufs], o->rows, o->cols, o->cols, d_out,
                             d_scratch, &scratch, NULL) != PC_OK ||
            pc_cuda_timer_stop(timer, NULL) != PC_OK ||
            pc_cuda_timer_elapsed_ms(timer, &ms) != PC_OK)
            goto fail;
        times[r] = ms;
    }
    what = "pc_cuda_memcpy_d2h";
    if (pc_cuda_memcpy_d2h(out, d_out, sizeof(float) * (size_t)o->rows) != PC_OK)
        goto fail;
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    res->ms = times[reps / 2];
    res->repeats = reps;
    errors(out, ref, o->rows, res);
    rc = 0;
fail:
    if (rc) {
        if (!out || !times)
            fprintf(stderr, "lsebench: out of memory\n");
        else
            call_failed(what);
    }
    pc_cuda_timer_free(timer);
    for (int b = 0; b < nbufs; b++)
        pc_cuda_free(d_x[b]);
    pc_cuda_free(d_out), pc_cuda_free(d_scratch);
    free(out), free(times);
    return rc;
}

static void input_name(const options *o, char *text, size_t len) {
    if (o->sd > 0)
        snprintf(text, len, "N(0,%g^2)", o->sd);
    else
        snprintf(text, len, "U(%g,%g)", o->lo, o->hi);
}

static void report(const options *o, const result *res) {
    char input[64];
    input_name(o, input, sizeof input);
    const char *isa =
        o->cuda ? "cuda" : pc_isa_name(o->isa == PC_ISA_AUTO ? pc_cpu_best_isa() : o->isa);
    if (o->json) {
        printf("{\"device\": \"%s\", \"kernel\": \"%s\", \"dtype\": \"%s\", \"isa\": \"%s\", "
               "\"threads\": %d, \"rows\": %" PRId64 ", \"cols\": %" PRId64 ", "
               "\"ns_per_elem\": %.5g, \"ms\": %.5g, \"repeats\": %d, \"mean_abs_err\": %.3e, "
               "\"max_abs_err\": %.3e, \"input\": \"%s\", \"seed\": %" PRIu64 "}\n",
               o->cuda ? "cuda" : "cpu", pc_lse_kernel_name(o->kernel), pc_dtype_name(o->dtype),
               isa, o->cuda ? 0 : o->threads, o->rows, o->cols, res->ns_per_elem, res->ms,
               res->repeats, res->mean_abs, res->max_abs, input, o->seed);
    } else {
        printf("%-5s %-6s %-6s %-7s %3d %6" PRId64 " %8" PRId64 " %10.4f %10.4f %10.2e %10.2e\n",
               o->cuda ? "cuda" : "cpu", pc_lse_kernel_name(o->kernel), pc_dtype_name(o->dtype),
               isa, o->cuda ? 0 : o->threads, o->rows, o->cols, res->ns_per_elem, res->ms,
               res->mean_abs, res->max_abs);
    }
    fflush(stdout);
}

/* One shape: generate once, then for each (kernel, dtype) encode, reference, time, report. */
typedef struct pair {
    pc_lse_kernel kernel;
    pc_dtype dtype;
} pair;

static int run_shape(options o, const pair *pairs, int npairs) {
    size_t n = (size_t)o.rows * (size_t)o.cols;
    float *v = malloc(sizeof(float) * (n ? n : 1));
    double *ref = malloc(sizeof(double) * (size_t)o.rows);
    void *bufs[MAX_ROTATE] = {0};
    int rc = 0;
    if (!v || !ref) {
        fprintf(stderr, "lsebench: out of memory for a %" PRId64 " x %" PRId64 " input\n", o.rows,
                o.cols);
        free(v), free(ref);
        return 1;
    }
    pc_lsedata_fill(o.seed, o.lo, o.hi, o.sd, v, n);
    pc_dtype encoded = (pc_dtype)-1;
    int nbufs = 0;
    size_t bytes = 0;
    for (int p = 0; p < npairs && rc == 0; p++) {
        o.kernel = pairs[p].kernel;
        if (pairs[p].dtype != encoded) {
            for (int b = 0; b < nbufs; b++)
                free(bufs[b]), bufs[b] = NULL;
            o.dtype = encoded = pairs[p].dtype;
            bytes = n * pc_dtype_size(o.dtype);
            size_t limit = o.cuda ? GPU_ROTATE_BYTES : CPU_ROTATE_BYTES;
            nbufs = bytes && bytes < limit ? (int)(limit / bytes) : 1;
            nbufs = nbufs > MAX_ROTATE ? MAX_ROTATE : nbufs;
            for (int b = 0; b < nbufs; b++) {
                bufs[b] = malloc(bytes ? bytes : 1);
                if (!bufs[b]) {
                    nbufs = b;
                    break;
                }
                pc_lsedata_encode(o.dtype, v, n, bufs[b]);
            }
            if (nbufs == 0 ||
                pc_lse_rows_ref(o.dtype, bufs[0], o.rows, o.cols, o.cols, ref) != PC_OK) {
                rc = nbufs ? call_failed("pc_lse_rows_ref")
                           : (fprintf(stderr, "lsebench: out of memory\n"), 1);
                break;
            }
        }
        o.dtype = pairs[p].dtype;
        result res = {0};
        rc = o.cuda ? run_cuda(&o, bufs, nbufs, bytes, ref, &res)
                    : run_cpu(&o, bufs, nbufs, ref, &res);
        if (rc == 0) {
            res.ns_per_elem = n ? res.ms * 1e6 / (double)n : 0.0;
            report(&o, &res);
        }
    }
    for (int b = 0; b < nbufs; b++)
        free(bufs[b]);
    free(v), free(ref);
    return rc;
}

static void header(const options *o) {
    if (o->json)
        return;
    char model[256] = "unknown CPU", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    if (f)
        fclose(f);
    char input[64], dev[256] = "";
    input_name(o, input, sizeof input);
    if (o->cuda && pc_cuda_describe(dev, sizeof dev) != PC_OK)
        dev[0] = '\0';
    printf("# %s; best isa %s; input %s, seed %" PRIu64 "; median of up to %d calls\n",
           o->cuda ? dev : model, pc_isa_name(pc_cpu_best_isa()), input, o->seed, o->repeats);
    printf("%-5s %-6s %-6s %-7s %3s %6s %8s %10s %10s %10s %10s\n", "dev", "kernel", "dtype", "isa",
           "thr", "rows", "cols", "ns/elem", "ms", "mean_err", "max_err");
}

int main(int argc, char **argv) {
    options o;
    parse(argc, argv, &o);
    if (o.cuda && !pc_cuda_available()) {
        void *probe = NULL;
        pc_status st = pc_cuda_malloc(&probe, 1); /* says why: no CUDA in this build, no GPU */
        if (st == PC_OK)
            pc_cuda_free(probe);
        fprintf(stderr, "lsebench: --device cuda: %s\n",
                st == PC_OK ? "no usable GPU" : pc_last_error());
        return 1;
    }
    if (!o.cuda) {
        pc_lse_cpu_opts probe = {o.threads, o.isa};
        float dummy;
        if (pc_lse_rows(PC_LSE_FUSE, PC_F32, &dummy, 0, 0, 0, &dummy, &probe) != PC_OK)
            return call_failed("--isa");
    }
    header(&o);
    if (o.have_kernel) {
        pair p = {o.kernel, o.have_dtype ? o.dtype : PC_F32};
        return run_shape(o, &p, 1);
    }
    static const pair cpu_pairs[] = {{PC_LSE_REF, PC_F32},   {PC_LSE_FUSE, PC_F32},
                                     {PC_LSE_INT, PC_F32},   {PC_LSE_FUSE, PC_F16},
                                     {PC_LSE_FUSE, PC_BF16}, {PC_LSE_INT, PC_Q10_6}};
    const pair *pairs = o.cuda ? cpu_pairs + 1 : cpu_pairs;
    int npairs = o.cuda ? 5 : 6;
    static const int64_t shapes[][2] = {{512, 128},   {512, 1024},   {512, 8192},
                                        {512, 32768}, {512, 128256}, {1, 1 << 20}};
    for (int s = 0; s < 6; s++) {
        o.rows = shapes[s][0];
        o.cols = shapes[s][1];
        if (run_shape(o, pairs, npairs) != 0)
            return 1;
    }
    return 0;
}
