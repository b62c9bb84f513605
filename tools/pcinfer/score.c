/* pcinfer: scores a data set with an HCLT model on one backend and reports the mean
 * log-likelihood, bits per dimension, throughput and (with --compare ref) the error against the
 * FP64 path. Results go to stdout, progress and notices to stderr. Exit status: 0 success,
 * 1 any error, 2 usage.
 *
 * The model file is read by the isolated loader (a malformed file cannot crash or hang the
 * program), the data is streamed a batch at a time (memory does not grow with the file), and
 * --output goes through a pc_file_writer: complete or not at all, never over an input. */
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
#include "pc/file.h"
#include "pc/hclt.h"

#include "mnist_find.h"

#define MNIST_TEST_IMAGES "t10k-images-idx3-ubyte.gz"

static const char usage_text[] =
    "usage: pcinfer [--kernel ref|cpu|cpu-fuse|fuse|int|gemm] [--data FILE] [--limit N]\n"
    "               [--batch N] [--threads T] [--output FILE] [--compare ref] [--json] MODEL.h5\n"
    "\n"
    "Scores every image of an IDX file (default: the MNIST test set, " MNIST_TEST_IMAGES ")\n"
    "and prints the mean log-likelihood in nats, bits per dimension and images per second.\n"
    "  --kernel K     backend; default fuse with a GPU, else cpu (a GPU kernel without a GPU\n"
    "                 runs cpu, with a notice)\n"
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

typedef struct results {
    const char *kernel, *data;
    char device[256]; /* "NVIDIA H200, ..." for GPU kernels, "CPU, T threads" otherwise */
    int64_t n, batch;
    double mean_ll, bpd, seconds, mean_delta, max_delta, ref_seconds;
    int compared, threads;
} results;

/* The evaluators and one batch's buffers: values [batch, V], logp and ref [batch]. */
typedef struct scorer {
    pc_evaluator *e, *ref_e;
    uint8_t *values;
    double *logp, *ref;
} scorer;

static void scorer_free(scorer *s) {
    pc_evaluator_free(s->e);
    pc_evaluator_free(s->ref_e);
    free(s->values);
    free(s->logp);
    free(s->ref);
}

static pc_status scorer_init(scorer *s, const pc_circuit *c, pc_backend backend, const args *a,
                             int64_t batch) {
    memset(s, 0, sizeof *s);
    pc_eval_opts opts = {backend, batch, a->threads};
    pc_eval_opts ref_opts = {PC_BACKEND_REF, batch, a->threads};
    pc_status st = pc_evaluator_create(c, &opts, &s->e);
    if (st == PC_OK && a->compare) st = pc_evaluator_create(c, &ref_opts, &s->ref_e);
    if (st != PC_OK) return st;
    s->values = malloc((size_t)batch * (size_t)c->num_vars);
    s->logp = malloc((size_t)batch * sizeof *s->logp);
    s->ref = a->compare ? malloc((size_t)batch * sizeof *s->ref) : NULL;
    return s->values && s->logp && (s->ref || !a->compare) ? PC_OK : PC_ERR_NOMEM;
}

/* Folds one batch of nb results into the running figures and the output file. */
static pc_status take_batch(const scorer *s, int64_t nb, results *r, pc_file_writer *out) {
    pc_status st = PC_OK;
    for (int64_t i = 0; i < nb; i++) {
        r->mean_ll += s->logp[i] / (double)r->n;
        if (s->ref) {
            /* Equal infinities (a zero-probability image in both) differ by 0. */
            double d = s->logp[i] == s->ref[i] ? 0.0 : fabs(s->logp[i] - s->ref[i]);
            r->mean_delta += d / (double)r->n;
            r->max_delta = d > r->max_delta || isnan(d) ? d : r->max_delta;
        }
        if (out && st == PC_OK) st = pc_file_writer_printf(out, "%.17g\n", s->logp[i]);
    }
    return st;
}

/* Scores the first r->n images of the reader in batches, timing each backend's evaluations
 * only; progress on stderr every few seconds of a long run. */
static int score_stream(const pc_circuit *c, pc_backend backend, const args *a,
                        pc_data_reader *data, pc_file_writer *out, results *r) {
    const int64_t batch = batch_for(a, backend) < r->n ? batch_for(a, backend) : r->n;
    scorer s;
    pc_status st = scorer_init(&s, c, backend, a, batch);
    if (st == PC_ERR_NOMEM) {
        fprintf(stderr, "pcinfer: out of memory for a batch of %lld images\n", (long long)batch);
        scorer_free(&s);
        return 1;
    }
    const double t_start = now_seconds();
    double last = t_start;
    for (int64_t i = 0, nb = 0; i < r->n && st == PC_OK; i += nb) {
        int64_t want = r->n - i < batch ? r->n - i : batch;
        if ((st = pc_data_reader_read(data, s.values, want, &nb)) != PC_OK) break;
        double t0 = now_seconds();
        st = pc_evaluate(s.e, s.values, NULL, nb, c->num_vars, s.logp);
        r->seconds += now_seconds() - t0;
        if (st == PC_OK && s.ref_e) {
            t0 = now_seconds();
            st = pc_evaluate(s.ref_e, s.values, NULL, nb, c->num_vars, s.ref);
            r->ref_seconds += now_seconds() - t0;
        }
        if (st == PC_OK) st = take_batch(&s, nb, r, out);
        double t = now_seconds();
        if (st == PC_OK && t - last >= 3.0 && i + nb < r->n) {
            fprintf(stderr, "pcinfer: %s: %lld / %lld images, %.0f images/s\n",
                    pc_backend_name(backend), (long long)(i + nb), (long long)r->n,
                    (double)(i + nb) / (t - t_start));
            last = t;
        }
    }
    /* The evaluator names the sample and variable of a bad value; the file is named here. */
    if (st == PC_ERR_DATA && !strstr(pc_last_error(), r->data))
        fprintf(stderr, "pcinfer: %s: %s\n", r->data, pc_last_error());
    else if (st != PC_OK)
        fprintf(stderr, "pcinfer: %s\n", pc_last_error());
    r->compared = a->compare != NULL;
    scorer_free(&s);
    return st == PC_OK ? 0 : 1;
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

    pc_backend backend = pc_cuda_available() ? PC_BACKEND_FUSE : PC_BACKEND_CPU;
    if (a.kernel && pc_backend_parse(a.kernel, &backend) != PC_OK)
        return usage_error("%s", pc_last_error());
    if (pc_backend_is_gpu(backend) && !pc_cuda_available()) {
        fprintf(stderr, "pcinfer: no GPU available: running kernel 'cpu' instead of '%s'\n",
                pc_backend_name(backend));
        backend = PC_BACKEND_CPU;
    }

    pc_hclt *model = NULL;
    pc_circuit *circuit = NULL;
    pc_data_reader *data = NULL;
    pc_file_writer *out = NULL;
    char found[4096];
    results r;
    memset(&r, 0, sizeof r);
    rc = 1;
    if (a.data) {
        r.data = a.data;
    } else if (pc_tool_find_mnist(NULL, MNIST_TEST_IMAGES, found, sizeof found) == PC_OK) {
        r.data = found;
    } else {
        fail_with(found);
        goto fail;
    }
    /* The output is checked (and its temporary file made) before any work. */
    const char *inputs[2] = {a.model, r.data};
    if (a.output && pc_file_writer_open(a.output, inputs, 2, &out) != PC_OK) {
        fail_with(pc_last_error());
        goto fail;
    }
    if (pc_hclt_load_isolated(a.model, NULL, &model) != PC_OK ||
        pc_data_reader_open(r.data, &data) != PC_OK) {
        fail_with(pc_last_error());
        goto fail;
    }
    if (pc_data_reader_width(data) != model->num_vars) {
        fprintf(stderr, "pcinfer: %s: images have %d values but the model %s has num_vars = %d\n",
                r.data, pc_data_reader_width(data), a.model, model->num_vars);
        goto fail;
    }
    const int64_t count = pc_data_reader_count(data);
    r.n = a.limit >= 0 && a.limit < count ? a.limit : count;
    if (r.n == 0) {
        fprintf(stderr, "pcinfer: %s: no images to score\n", r.data);
        goto fail;
    }
    if (pc_circuit_compile(model, &circuit) != PC_OK) {
        fail_with(pc_last_error());
        goto fail;
    }
    r.kernel = pc_backend_name(backend);
    r.batch = batch_for(&a, backend);
    r.threads = a.threads > 0 ? a.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (!pc_backend_is_gpu(backend) || pc_cuda_describe(r.device, sizeof r.device) != PC_OK)
        snprintf(r.device, sizeof r.device, "CPU, %d threads", r.threads);
    if (score_stream(circuit, backend, &a, data, out, &r) != 0) goto fail;
    r.bpd = -r.mean_ll / ((double)model->num_vars * log(2.0));
    if (out) {
        pc_status st = pc_file_writer_commit(out);
        out = NULL;
        if (st != PC_OK) {
            fail_with(pc_last_error());
            goto fail;
        }
    }
    print_results(&a, circuit, &r);
    rc = fflush(stdout) == 0 ? 0 : 1;
fail:
    pc_file_writer_abort(out);
    pc_data_reader_close(data);
    pc_circuit_free(circuit);
    pc_hclt_free(model);
    return rc;
}
