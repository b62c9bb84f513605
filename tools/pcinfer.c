/* pcinfer: scores a data set with an HCLT model on one backend and reports the mean
 * log-likelihood, bits per dimension, throughput and (with --compare ref) the error against the
 * FP64 path. Results go to stdout, progress and notices to stderr. Exit status: 0 success,
 * 1 any error, 2 usage. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pc/circuit.h"
#include "pc/cuda.h"
#include "pc/data.h"
#include "pc/eval.h"
#include "pc/hclt.h"
#include "pc/lse.h"

#include "mnist_find.h"

#define MNIST_TEST_IMAGES "t10k-images-idx3-ubyte.gz"

static const char usage_text[] =
    "usage: pcinfer [--kernel ref|cpu|cpu-fuse|fuse|int|gemm] [--data FILE] [--limit N]\n"
    "               [--batch N] [--threads T] [--output FILE] [--compare ref] [--json] MODEL.h5\n"
    "\n"
    "Scores every image of an IDX file (default: the MNIST test set, " MNIST_TEST_IMAGES ")\n"
    "and prints the mean log-likelihood in nats, bits per dimension and images per second.\n"
    "  --kernel K     backend; default fuse with a GPU, else cpu-fuse (a GPU kernel without a\n"
    "                 GPU runs cpu-fuse, with a notice)\n"
    "  --data FILE    IDX image file, plain or .gz; its width must equal the model's num_vars\n"
    "  --limit N      score only the first N images\n"
    "  --batch N      images per evaluation call (default 16384 on a GPU, 1024 on the CPU)\n"
    "  --threads T    CPU threads (default: all cores)\n"
    "  --output FILE  write log p(x) per image, one per line, in data order\n"
    "  --compare ref  also run the FP64 reference and report mean and max |delta| in nats\n"
    "  --json         print one JSON object instead of text\n";

typedef struct args {
    const char *kernel, *data, *output, *compare, *model;
    int64_t limit, batch;
    int threads, json;
} args;

static int usage_error(const char *fmt, const char *what) {
    fprintf(stderr, "pcinfer: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n%s", usage_text);
    return 2;
}

static int parse_count(const char *flag, const char *text, int64_t lo, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || !end || *end || end == text || v < lo) {
        fprintf(stderr, "pcinfer: %s needs an integer >= %lld, not '%s'\n%s", flag, (long long)lo,
                text, usage_text);
        return 2;
    }
    *out = v;
    return 0;
}

/* Returns 0, or 2 for a usage error (already reported), or -1 for --help. */
static int parse_args(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->batch = 0; /* 0: batch_for() picks by kernel */
    a->limit = -1;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char **text = NULL;
        int64_t *count = NULL, lo = 1;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) return -1;
        if (!strcmp(s, "--json")) {
            a->json = 1;
            continue;
        }
        if (!strcmp(s, "--kernel")) text = &a->kernel;
        else if (!strcmp(s, "--data")) text = &a->data;
        else if (!strcmp(s, "--output")) text = &a->output;
        else if (!strcmp(s, "--compare")) text = &a->compare;
        else if (!strcmp(s, "--limit")) count = &a->limit;
        else if (!strcmp(s, "--batch")) count = &a->batch;
        else if (!strcmp(s, "--threads")) count = NULL, lo = 0;
        else if (s[0] == '-' && s[1] != '\0') return usage_error("unknown option '%s'", s);
        else {
            if (a->model) return usage_error("more than one model given ('%s')", s);
            a->model = s;
            continue;
        }
        if (i + 1 >= argc) return usage_error("%s needs a value", s);
        const char *value = argv[++i];
        if (text) {
            *text = value;
        } else if (count) {
            if (parse_count(s, value, lo, count)) return 2;
        } else {
            int64_t t;
            if (parse_count(s, value, 0, &t)) return 2;
            if (t > 4096) return usage_error("--threads %s is more than 4096", value);
            a->threads = (int)t;
        }
    }
    if (!a->model) return usage_error("%s", "no model file given");
    if (a->compare && strcmp(a->compare, "ref") != 0)
        return usage_error("--compare supports only 'ref', not '%s'", a->compare);
    if (a->batch > (1 << 24)) return usage_error("%s", "--batch is larger than 16777216");
    return 0;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Images per evaluation call: --batch, or by kernel. A GPU kernel takes large calls: the
 * engine streams them in chunks and fuse picks its fastest strategy for large batches (H200,
 * shipped model: 5.7 M images/s end to end at 16384 per call against 2.7 M at 1024); the CPU
 * kernels' buffers grow with the batch. */
#define PCINFER_GPU_BATCH 16384
#define PCINFER_CPU_BATCH 1024
static int64_t batch_for(const args *a, pc_backend backend) {
    if (a->batch) return a->batch;
    return pc_backend_is_gpu(backend) ? PCINFER_GPU_BATCH : PCINFER_CPU_BATCH;
}

/* Scores all n samples in batches; progress on stderr every few seconds of a long run. */
static pc_status score_all(const pc_circuit *c, pc_backend backend, const args *a,
                           const pc_data *d, int64_t n, double *logp, double *seconds) {
    const int64_t batch = batch_for(a, backend);
    pc_eval_opts opts = {backend, batch < n ? batch : n, a->threads};
    pc_evaluator *e = NULL;
    pc_status st = pc_evaluator_create(c, &opts, &e);
    if (st != PC_OK) return st;
    const double t0 = now_seconds();
    double last = t0;
    for (int64_t i = 0; i < n && st == PC_OK; i += opts.max_batch) {
        int64_t nb = n - i < opts.max_batch ? n - i : opts.max_batch;
        size_t at = (size_t)i * (size_t)d->width;
        st = pc_evaluate(e, d->values + at, d->missing ? d->missing + at : NULL, nb, logp + i);
        double t = now_seconds();
        if (t - last >= 3.0 && i + nb < n) {
            fprintf(stderr, "pcinfer: %s: %lld / %lld images, %.0f images/s\n",
                    pc_backend_name(backend), (long long)(i + nb), (long long)n,
                    (double)(i + nb) / (t - t0));
            last = t;
        }
    }
    *seconds = now_seconds() - t0;
    pc_evaluator_free(e);
    return st;
}

/* Writes one value per line (%.17g) to a temporary file and renames it into place. */
static int write_output(const char *path, const double *logp, int64_t n) {
    size_t len = strlen(path) + 32;
    char *tmp = malloc(len);
    if (!tmp) return fprintf(stderr, "pcinfer: out of memory\n"), 1;
    snprintf(tmp, len, "%s.tmp-%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "pcinfer: %s: cannot create: %s\n", path, strerror(errno));
        free(tmp);
        return 1;
    }
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) ok = fprintf(f, "%.17g\n", logp[i]) > 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "pcinfer: %s: writing failed: %s\n", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return 1;
    }
    free(tmp);
    return 0;
}

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20) printf("\\u%04x", ch);
        else putchar(ch);
    }
    putchar('"');
}

/* JSON has no inf or NaN: those print as null. */
static void json_number(double v) {
    if (isfinite(v)) printf("%.17g", v);
    else printf("null");
}

typedef struct results {
    const char *kernel, *data;
    char device[256]; /* "NVIDIA H200, ..." for GPU kernels, "CPU, T threads" otherwise */
    int64_t n, batch;
    double mean_ll, bpd, seconds, mean_delta, max_delta, ref_seconds;
    int compared, threads;
} results;

static void print_results(const args *a, const pc_circuit *c, const results *r) {
    if (a->json) {
        printf("{\"model\": ");
        json_string(a->model);
        printf(", \"data\": ");
        json_string(r->data);
        printf(", \"kernel\": \"%s\", \"images\": %lld, \"num_vars\": %d, \"num_latents\": %d, "
               "\"threads\": %d, \"batch\": %lld, \"device\": ",
               r->kernel, (long long)r->n, c->num_vars, c->num_latents, r->threads,
               (long long)r->batch);
        json_string(r->device);
        printf(", \"mean_ll_nats\": ");
        json_number(r->mean_ll);
        printf(", \"bits_per_dim\": ");
        json_number(r->bpd);
        printf(", \"seconds\": %.6f, \"images_per_second\": %.1f", r->seconds,
               (double)r->n / r->seconds);
        if (r->compared) {
            printf(", \"compare\": {\"kernel\": \"ref\", \"mean_abs_delta_nats\": ");
            json_number(r->mean_delta);
            printf(", \"max_abs_delta_nats\": ");
            json_number(r->max_delta);
            printf(", \"ref_images_per_second\": %.1f}", (double)r->n / r->ref_seconds);
        }
        printf("}\n");
        return;
    }
    printf("model           %s (V = %d, K = %d, C = %d, %d groups, %d layers)\n", a->model,
           c->num_vars, c->num_latents, c->num_cats, c->num_groups, c->num_layers);
    printf("data            %s (%lld images)\n", r->data, (long long)r->n);
    printf("kernel          %s (%s)\n", r->kernel, r->device);
    printf("mean LL         %.6f nats\n", r->mean_ll);
    printf("bits/dim        %.6f\n", r->bpd);
    printf("throughput      %.1f images/s (%.3f s)\n", (double)r->n / r->seconds, r->seconds);
    if (r->compared) {
        printf("vs ref (FP64)   mean |delta| %.3e nats, max |delta| %.3e nats (ref: %.1f "
               "images/s)\n",
               r->mean_delta, r->max_delta, (double)r->n / r->ref_seconds);
    }
}

static int fail_with(const char *what) {
    fprintf(stderr, "pcinfer: %s\n", what);
    return 1;
}

int main(int argc, char **argv) {
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc < 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (rc) return rc;

    pc_backend backend = pc_cuda_available() ? PC_BACKEND_FUSE : PC_BACKEND_CPU_FUSE;
    if (a.kernel && pc_backend_parse(a.kernel, &backend) != PC_OK)
        return usage_error("%s", pc_last_error());
    if (pc_backend_is_gpu(backend) && !pc_cuda_available()) {
        fprintf(stderr, "pcinfer: no GPU available: running kernel 'cpu-fuse' instead of '%s'\n",
                pc_backend_name(backend));
        backend = PC_BACKEND_CPU_FUSE;
    }

    pc_hclt *model = NULL;
    pc_circuit *circuit = NULL;
    pc_data *data = NULL;
    double *logp = NULL, *ref = NULL;
    char found[4096];
    results r;
    memset(&r, 0, sizeof r);
    rc = 1;
    if (pc_hclt_load(a.model, &model) != PC_OK) {
        fail_with(pc_last_error());
        goto done;
    }
    if (a.data) {
        r.data = a.data;
    } else if (pc_tool_find_mnist(NULL, MNIST_TEST_IMAGES, found, sizeof found) == PC_OK) {
        r.data = found;
    } else {
        fail_with(pc_last_error());
        goto done;
    }
    if (pc_data_load_idx(r.data, &data) != PC_OK) {
        fail_with(pc_last_error());
        goto done;
    }
    if (data->width != model->num_vars) {
        fprintf(stderr, "pcinfer: %s: images have %d values but the model %s has num_vars = %d\n",
                r.data, data->width, a.model, model->num_vars);
        goto done;
    }
    r.n = a.limit >= 0 && a.limit < data->count ? a.limit : data->count;
    if (r.n == 0) {
        fprintf(stderr, "pcinfer: %s: no images to score\n", r.data);
        goto done;
    }
    if (pc_circuit_compile(model, &circuit) != PC_OK) {
        fail_with(pc_last_error());
        goto done;
    }
    logp = malloc((size_t)r.n * sizeof *logp);
    ref = a.compare ? malloc((size_t)r.n * sizeof *ref) : NULL;
    if (!logp || (a.compare && !ref)) {
        fail_with("out of memory for the results");
        goto done;
    }
    r.kernel = pc_backend_name(backend);
    r.batch = batch_for(&a, backend);
    r.threads = a.threads > 0 ? a.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (!pc_backend_is_gpu(backend) || pc_cuda_describe(r.device, sizeof r.device) != PC_OK)
        snprintf(r.device, sizeof r.device, "CPU, %d threads", r.threads);
    if (score_all(circuit, backend, &a, data, r.n, logp, &r.seconds) != PC_OK) {
        fail_with(pc_last_error());
        goto done;
    }
    if (a.compare) {
        if (score_all(circuit, PC_BACKEND_REF, &a, data, r.n, ref, &r.ref_seconds) != PC_OK) {
            fail_with(pc_last_error());
            goto done;
        }
        r.compared = 1;
        for (int64_t i = 0; i < r.n; i++) {
            /* Equal infinities (a zero-probability image in both) differ by 0. */
            double d = logp[i] == ref[i] ? 0.0 : fabs(logp[i] - ref[i]);
            r.mean_delta += d / (double)r.n;
            r.max_delta = d > r.max_delta || isnan(d) ? d : r.max_delta;
        }
    }
    for (int64_t i = 0; i < r.n; i++) r.mean_ll += logp[i] / (double)r.n;
    r.bpd = -r.mean_ll / ((double)model->num_vars * log(2.0));
    if (a.output && write_output(a.output, logp, r.n) != 0) goto done;
    print_results(&a, circuit, &r);
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    free(logp);
    free(ref);
    pc_data_free(data);
    pc_circuit_free(circuit);
    pc_hclt_free(model);
    return rc;
}
