/* pclearn: learns an HCLT from data (mutual information -> Chow-Liu tree -> EM) and writes it.
 *
 *   pclearn --latents K [--epochs E] [--batch N] [--full-epochs F] [--pseudocount A]
 *           [--smooth W] [--smooth-width S] [--step-start A0] [--step-end A1] [--bins B]
 *           [--mi-rows M] [--data FILE]
 *           [--valid FILE] [--seed S] [--threads T] [--f64] [--device cpu|cuda] [--em-f32]
 *           [--json] -o MODEL.h5
 *   mpirun -np R pclearn ...   data-parallel EM over R processes (one GPU each with --device
 *                              cuda), the same model as one process's; rank 0 writes it
 *
 * Progress (one line per epoch: step sizes, train LL, time) goes to stderr, the summary to
 * stdout (one JSON object with --json). Exit status: 0 done, 1 error, 2 usage. The output is
 * opened (checked, its temporary file made) before the data is read, so a bad -o fails at once
 * instead of after training; the model is written complete or not at all, never over an input.
 */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pc/data.h"
#include "pc/file.h"
#include "pc/hclt.h"
#include "pc/learn.h"
#include "pc/rng.h"

#include "learn_device.h"
#include "mpi_ranks.h"
#include "dataset_find.h"

typedef struct options {
    long latents, epochs, batch, full_epochs, bins, mi_rows, threads;
    double pseudocount, smooth, smooth_width, step_start, step_end;
    unsigned long long seed;
    const char *data, *valid, *out, *dataset;
    int f64, em_f32, json;
    int quiet; /* no progress lines: an MPI rank other than 0 */
    pc_em_device device;
} options;

/* One epoch's progress line, kept for --json. */
typedef struct epoch_stat {
    int full;
    double step_first, step_last, mean_ll, seconds;
} epoch_stat;

static const char usage_text[] =
    "usage: pclearn --latents K [options] -o MODEL.h5\n"
    "  --latents K        latent states per tree node (required, 1..4096)\n"
    "  --epochs E         mini-batch EM epochs (default 10)\n"
    "  --batch N          mini-batch size (default 512)\n"
    "  --full-epochs F    full-batch EM epochs after the mini-batch ones (default 1)\n"
    "  --pseudocount A    pseudocount per distribution (default 0.1; on MNIST 0.02 is\n"
    "                     better from K = 128 on)\n"
    "  --smooth W         after EM, move a share W of each input row's inner values\n"
    "                     1..C-2 to their neighbours (a Gaussian over the values, the end\n"
    "                     values 0 and C-1 kept); values must be ordered, as pixel\n"
    "                     intensities are (0..1, default 0.1; 0: off)\n"
    "  --smooth-width S   the Gaussian's width in values (default 8)\n"
    "  --step-start A0    mini-batch step size at the first batch (default 0.9)\n"
    "  --step-end A1      step size at the last batch, linear in between (default 0.1)\n"
    "  --bins B           value bins for the mutual information (default 16)\n"
    "  --mi-rows M        rows sampled for the mutual information, 0 = all (default 20000)\n"
    "  --dataset NAME     data set whose files are found by name: mnist (default) or\n"
    "                     fashion-mnist (datasets/README.md says where they are looked for)\n"
    "  --data FILE        training data, IDX (.gz) (default: the data set's training images)\n"
    "  --valid FILE       test data scored at the end (default: its test images, if\n"
    "                     found, when --data is not given)\n"
    "  --seed S           random seed (default 1)\n"
    "  --threads T        OpenMP threads (default: all cores)\n"
    "  --f64              store parameters as float64 (default float32)\n"
    "  --device D         where EM runs: cpu (default) or cuda (a GPU; scoring there too)\n"
    "  --em-f32           cuda: FP32 values and messages in EM (half the pass memory;\n"
    "                     parameters within about 2e-5 of FP64's after a step); default FP64\n"
    "  --json             print the summary as one JSON object\n"
    "  -o MODEL.h5        output model (written to a temporary name, then renamed)\n";

static void usage(FILE *f) { fputs(usage_text, f); }

static int parse_long(const char *name, const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) {
        fprintf(stderr, "pclearn: %s '%s' is not an integer in %ld..%ld\n", name, text, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

static int parse_double(const char *name, const char *text, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "pclearn: %s '%s' is not a number in [%g, %g]\n", name, text, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

/* Returns 0 on success, 2 on a usage error (message printed). */
static int parse_args(int argc, char **argv, options *o) {
    *o = (options){.latents = 0,
                   .epochs = 10,
                   .batch = 512,
                   .full_epochs = 1,
                   .bins = 16,
                   .mi_rows = 20000,
                   .threads = 0,
                   .pseudocount = 0.1,
                   .smooth = 0.1,
                   .smooth_width = 8,
                   .step_start = 0.9,
                   .step_end = 0.1,
                   .seed = 1,
                   .dataset = "mnist"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--f64") || !strcmp(a, "--em-f32") || !strcmp(a, "--json")) {
            *(!strcmp(a, "--f64") ? &o->f64 : !strcmp(a, "--em-f32") ? &o->em_f32 : &o->json) = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "pclearn: %s needs a value (or is unknown)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        long seed = 0;
        int ok = 1;
        if (!strcmp(a, "--latents"))
            ok = parse_long(a, v, 1, 4096, &o->latents);
        else if (!strcmp(a, "--epochs"))
            ok = parse_long(a, v, 0, 100000, &o->epochs);
        else if (!strcmp(a, "--batch"))
            ok = parse_long(a, v, 1, 1L << 30, &o->batch);
        else if (!strcmp(a, "--full-epochs"))
            ok = parse_long(a, v, 0, 100000, &o->full_epochs);
        else if (!strcmp(a, "--bins"))
            ok = parse_long(a, v, 2, 64, &o->bins);
        else if (!strcmp(a, "--mi-rows"))
            ok = parse_long(a, v, 0, 1L << 40, &o->mi_rows);
        else if (!strcmp(a, "--threads"))
            ok = parse_long(a, v, 1, 1024, &o->threads);
        else if (!strcmp(a, "--pseudocount"))
            ok = parse_double(a, v, 0, 1e9, &o->pseudocount);
        else if (!strcmp(a, "--smooth"))
            ok = parse_double(a, v, 0, 1, &o->smooth);
        else if (!strcmp(a, "--smooth-width"))
            ok = parse_double(a, v, 0.01, 1e6, &o->smooth_width);
        else if (!strcmp(a, "--step-start"))
            ok = parse_double(a, v, 1e-9, 1, &o->step_start);
        else if (!strcmp(a, "--step-end"))
            ok = parse_double(a, v, 1e-9, 1, &o->step_end);
        else if (!strcmp(a, "--seed")) {
            ok = parse_long(a, v, 0, 0x7fffffffL, &seed);
            o->seed = (unsigned long long)seed;
        } else if (!strcmp(a, "--data"))
            o->data = v;
        else if (!strcmp(a, "--valid"))
            o->valid = v;
        else if (!strcmp(a, "-o"))
            o->out = v;
        else if (!strcmp(a, "--dataset"))
            o->dataset = v;
        else if (!strcmp(a, "--device")) {
            ok = pc_tool_em_device(v, &o->device);
            if (!ok) fprintf(stderr, "pclearn: --device '%s' is neither cpu nor cuda\n", v);
        }
        else {
            fprintf(stderr, "pclearn: unknown option %s\n", a);
            ok = 0;
        }
        if (!ok) return 2;
    }
    if (!o->latents || !o->out) {
        fprintf(stderr, "pclearn: --latents and -o are required\n");
        usage(stderr);
        return 2;
    }
    if (o->epochs == 0 && o->full_epochs == 0) {
        fprintf(stderr, "pclearn: --epochs and --full-epochs are both 0: nothing to learn\n");
        return 2;
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int call_failed(const char *what) {
    fprintf(stderr, "pclearn: %s: %s\n", what, pc_last_error());
    return 1;
}

/* The path of the data: `path`, or when it is NULL the file `file_name` of the data set
 * `dataset`, into used. */
static int find_data(const char *path, const char *dataset, const char *file_name, char *used,
                     size_t n) {
    if (path) {
        snprintf(used, n, "%s", path);
    } else if (pc_tool_find_dataset(dataset, file_name, used, n) != PC_OK) {
        fprintf(stderr, "pclearn: finding the data: %s\n", used);
        return 1;
    }
    return 0;
}

static int load_data(const char *path, pc_data **out) {
    return pc_data_load_idx(path, out) != PC_OK ? call_failed("reading the data") : 0;
}

/* Mean log p(x) in nats over the data. */
static int mean_loglik(const pc_tool_scorer *scorer, const pc_data *d, double *mean) {
    double *lp = malloc((size_t)d->count * sizeof *lp);
    if (!lp) {
        fprintf(stderr, "pclearn: out of memory for %lld log-likelihoods\n", (long long)d->count);
        return 1;
    }
    if (pc_tool_scorer_run(scorer, d, lp) != PC_OK) {
        free(lp);
        return call_failed("scoring");
    }
    double sum = 0;
    for (int64_t i = 0; i < d->count; i++) sum += lp[i];
    free(lp);
    *mean = sum / (double)d->count;
    return 0;
}

static double bits_per_dim(double mean_ll, int32_t width) {
    return -mean_ll / ((double)width * log(2.0));
}

/* Mini-batch epochs with a linearly decaying step, then full-batch epochs; each epoch's line
 * into stats [epochs + full_epochs]. */
static int train(const options *o, pc_em *em, const pc_data *d, epoch_stat *stats) {
    const int64_t n = d->count;
    int64_t *rows = malloc((size_t)n * sizeof *rows);
    if (!rows) {
        fprintf(stderr, "pclearn: out of memory for %lld row indices\n", (long long)n);
        return 1;
    }
    for (int64_t i = 0; i < n; i++) rows[i] = i;
    pc_rng rng = {o->seed ^ 0x5DEECE66Dull};
    const int64_t per_epoch = (n + o->batch - 1) / o->batch;
    const int64_t updates = per_epoch * o->epochs;
    int64_t u = 0;
    for (long ep = 1; ep <= o->epochs + o->full_epochs; ep++) {
        const double t0 = now_s();
        const int full = ep > o->epochs;
        double ll = 0, step = 1, step_first = 1;
        if (!full)
            for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates shuffle from the seed */
                int64_t j = pc_rng_below(&rng, i + 1), t = rows[i];
                rows[i] = rows[j];
                rows[j] = t;
            }
        for (int64_t b = 0; b < (full ? 1 : per_epoch); b++) {
            const int64_t begin = full ? 0 : b * o->batch;
            const int64_t count = full ? n : (begin + o->batch < n ? o->batch : n - begin);
            if (!full) {
                const double frac = updates > 1 ? (double)u / (double)(updates - 1) : 0;
                step = o->step_start + (o->step_end - o->step_start) * frac;
                u++;
            }
            if (b == 0) step_first = step;
            double part = 0;
            if (pc_em_step(em, d, full ? NULL : rows + begin, count, step, o->pseudocount, &part) !=
                PC_OK) {
                free(rows);
                return call_failed("EM");
            }
            ll += part;
        }
        const double mean = ll / (double)n;
        stats[ep - 1] = (epoch_stat){full, step_first, step, mean, now_s() - t0};
        if (!o->quiet)
            fprintf(
            stderr,
            "epoch %3ld/%ld %s  step %.3f..%.3f  train LL %.3f nats/image  %.4f bits/dim  %.1f s\n",
            ep, o->epochs + o->full_epochs, full ? "full " : "batch", step_first, step, mean,
            bits_per_dim(mean, d->width), now_s() - t0);
    }
    free(rows);
    return 0;
}

/* What the summary reports. */
typedef struct summary {
    const char *data, *test;
    int32_t vars, cats, used, trans, ranks;
    int64_t train_n, test_n;
    double structure_s, em_s, write_s, score_s, total_s, train_ll, test_ll;
} summary;

static void print_text(const options *o, const summary *s) {
    printf("model: %s (K = %ld, %d variables, %d categories, %d transition rows, %s)\n", o->out,
           o->latents, s->vars, s->cats, s->trans, o->f64 ? "float64" : "float32");
    printf("training: %.1f s in all (structure %.1f s, EM %.1f s on %s%s, writing %.1f s, scoring "
           "%.1f s), %ld mini-batch epochs of %ld, %ld full-batch epochs, %d threads x %d "
           "processes\n",
           s->total_s, s->structure_s, s->em_s, o->device == PC_EM_CUDA ? "cuda" : "cpu",
           o->device == PC_EM_CUDA ? (o->em_f32 ? ", FP32" : ", FP64") : "", s->write_s,
           s->score_s, o->epochs,
           o->batch, o->full_epochs, omp_get_max_threads(), s->ranks);
    printf("train: %lld samples, LL %.4f nats/image, %.4f bits/dim\n", (long long)s->train_n,
           s->train_ll, bits_per_dim(s->train_ll, s->vars));
    if (s->test)
        printf("test: %s, %lld samples, LL %.4f nats/image, %.4f bits/dim\n", s->test,
               (long long)s->test_n, s->test_ll, bits_per_dim(s->test_ll, s->vars));
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_string(const char *text) {
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if (*c < 0x20)
            printf("\\u%04x", *c);
        else
            putchar(*c);
    }
    putchar('"');
}

static void print_json(const options *o, const summary *s, const epoch_stat *stats) {
    printf("{\"model\": ");
    json_string(o->out);
    printf(", \"data\": ");
    json_string(s->data);
    printf(", \"latents\": %ld, \"variables\": %d, \"categories\": %d, "
           "\"categories_used\": %d, \"transition_rows\": %d, \"device\": \"%s\", "
           "\"em_precision\": \"%s\", \"processes\": %d, \"seed\": %llu, \"batch\": %ld, "
           "\"pseudocount\": %g, \"smooth\": %g, \"smooth_width\": %g, "
           "\"structure_s\": %.3f, \"em_s\": %.3f, \"write_s\": %.3f, \"score_s\": %.3f, "
           "\"total_s\": %.3f,\n \"epochs\": [",
           o->latents, s->vars, s->cats, s->used, s->trans,
           o->device == PC_EM_CUDA ? "cuda" : "cpu",
           o->device == PC_EM_CUDA && o->em_f32 ? "fp32" : "fp64", s->ranks, o->seed, o->batch,
           o->pseudocount, o->smooth, o->smooth_width, s->structure_s, s->em_s, s->write_s,
           s->score_s, s->total_s);
    for (long e = 0; e < o->epochs + o->full_epochs; e++)
        printf("%s\n  {\"epoch\": %ld, \"full_batch\": %s, \"step_first\": %.6g, "
               "\"step_last\": %.6g, \"train_ll\": %.6f, \"seconds\": %.3f}",
               e ? "," : "", e + 1, stats[e].full ? "true" : "false", stats[e].step_first,
               stats[e].step_last, stats[e].mean_ll, stats[e].seconds);
    printf("],\n \"train\": {\"samples\": %lld, \"ll\": %.6f, \"bits_per_dim\": %.6f}",
           (long long)s->train_n, s->train_ll, bits_per_dim(s->train_ll, s->vars));
    if (s->test) {
        printf(", \"test\": {\"file\": ");
        json_string(s->test);
        printf(", \"samples\": %lld, \"ll\": %.6f, \"bits_per_dim\": %.6f}",
               (long long)s->test_n, s->test_ll, bits_per_dim(s->test_ll, s->vars));
    }
    printf("}\n");
}

int main(int argc, char **argv) {
    pc_tool_mpi mpi;
    pc_tool_mpi_init(&argc, &argv, &mpi);
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc) {
        pc_tool_mpi_finalize(&mpi);
        return rc;
    }
    o.quiet = mpi.rank != 0;
    if (o.threads > 0)
        omp_set_num_threads((int)o.threads);
    else if (mpi.local_size > 1) /* ranks on one machine share its cores */
        omp_set_num_threads(omp_get_num_procs() > mpi.local_size
                                ? omp_get_num_procs() / mpi.local_size
                                : 1);

    const double t_start = now_s();
    char data_path[4096], valid_path[4096];
    pc_data *d = NULL, *test = NULL;
    pc_hclt *model = NULL, *saved = NULL;
    pc_em *em = NULL;
    pc_tool_scorer scorer = {0};
    pc_file_writer *w = NULL;
    double *mi = NULL;
    int32_t *parent = NULL;
    epoch_stat *stats = NULL;
    int streamed = 0;
    rc = 1;
    if (find_data(o.data, o.dataset, "train-images-idx3-ubyte.gz", data_path, sizeof data_path))
        goto fail;
    /* Without --valid and --data, the data set's test images are scored when they are found,
     * and skipped when not. */
    int want_test = o.valid != NULL;
    if (o.valid) {
        snprintf(valid_path, sizeof valid_path, "%s", o.valid);
    } else if (!o.data) {
        want_test = pc_tool_find_dataset(o.dataset, "t10k-images-idx3-ubyte.gz", valid_path,
                                         sizeof valid_path) == PC_OK;
        if (!want_test) fprintf(stderr, "pclearn: no test set scored: %s\n", valid_path);
    }
    const char *inputs[2] = {data_path, want_test ? valid_path : NULL};
    /* Rank 0 writes the model all the ranks learn. */
    if (mpi.rank == 0 && pc_file_writer_open(o.out, inputs, 2, &w) != PC_OK) {
        call_failed("writing the model");
        goto fail;
    }
    if (load_data(data_path, &d)) goto fail;
    if (d->count < 1) {
        fprintf(stderr, "pclearn: %s has no samples\n", data_path);
        goto fail;
    }
    const int32_t cats = 256, vars = d->width; /* IDX bytes: 256 categories */
    if (!o.quiet)
        fprintf(stderr, "data: %s, %lld samples x %d variables\n", data_path,
                (long long)d->count, vars);
    pc_category_use use;
    char warning[256];
    if (pc_learn_category_use(d, cats, &use) != PC_OK) {
        call_failed("reading the data");
        goto fail;
    }
    if (pc_learn_category_warning(&use, cats, warning, sizeof warning) && !o.quiet)
        fprintf(stderr, "pclearn: warning: %s\n", warning);
    /* The test data is read before learning, so a bad file fails at once. */
    if (want_test) {
        if (load_data(valid_path, &test)) goto fail;
        if (test->width != vars || test->count < 1) {
            fprintf(stderr, "pclearn: %s has %lld samples of %d variables; need >= 1 of %d\n",
                    valid_path, (long long)test->count, test->width, vars);
            goto fail;
        }
    }

    double t0 = now_s();
    mi = malloc((size_t)vars * (size_t)vars * sizeof *mi);
    parent = malloc((size_t)vars * sizeof *parent);
    if (!mi || !parent) {
        fprintf(stderr, "pclearn: out of memory for the %d x %d mutual information\n", vars, vars);
        goto fail;
    }
    if (pc_learn_mutual_info(d, cats, (int32_t)o.bins, o.mi_rows, o.seed, mi) != PC_OK) {
        call_failed("mutual information");
        goto fail;
    }
    const double t_mi = now_s() - t0;
    t0 = now_s();
    if (pc_learn_chow_liu(vars, mi, parent) != PC_OK) {
        call_failed("Chow-Liu tree");
        goto fail;
    }
    if (pc_learn_hclt_create(vars, parent, cats, (int32_t)o.latents, &model) != PC_OK) {
        call_failed("HCLT structure");
        goto fail;
    }
    const double t_tree = now_s() - t0;
    if (!o.quiet)
        fprintf(stderr,
            "structure: MI %.2f s (%ld bins), tree %.2f s, %d transition rows, %d leaves "
            "sharing a latent\n",
            t_mi, o.bins, t_tree, model->num_trans, vars - 1 - model->num_trans);
    stats = calloc((size_t)(o.epochs + o.full_epochs), sizeof *stats);
    if (!stats || pc_learn_init_params(model, d, o.seed) != PC_OK ||
        pc_tool_em_create(o.device, o.em_f32, mpi.local_rank, model, d, &em, &streamed) !=
            PC_OK ||
        (mpi.size > 1 &&
         pc_em_set_shard(em, mpi.rank, mpi.size, pc_tool_mpi_sum, NULL) != PC_OK)) {
        call_failed("initialising EM");
        goto fail;
    }
    if (streamed && !o.quiet)
        fprintf(stderr, "pclearn: the training data does not fit the GPU: streamed from the "
                        "host each step\n");
    t0 = now_s();
    if (train(&o, em, d, stats)) goto fail;
    const double t_em = now_s() - t0;
    if (pc_em_export(em, model) != PC_OK || pc_hclt_validate(model, "learned model") != PC_OK) {
        call_failed("learned model");
        goto fail;
    }
    if (mpi.rank != 0) { /* done: rank 0 writes and scores the model all the ranks learned */
        rc = 0;
        goto fail;
    }
    if (pc_learn_smooth_inputs(model, o.smooth, o.smooth_width) != PC_OK ||
        pc_hclt_validate(model, "smoothed model") != PC_OK) {
        call_failed("smoothing the inputs");
        goto fail;
    }
    if (!o.quiet && o.smooth > 0)
        fprintf(stderr, "inputs smoothed: a share %g of the inner values to their neighbours, "
                        "width %g (--smooth 0: off)\n", o.smooth, o.smooth_width);
    t0 = now_s();
    pc_status st = pc_hclt_write(model, o.f64 ? PC_HCLT_F64 : PC_HCLT_F32, w, o.out);
    if (st == PC_OK)
        st = pc_file_writer_commit(w);
    else
        pc_file_writer_abort(w);
    w = NULL;
    if (st != PC_OK) {
        call_failed("writing the model");
        goto fail;
    }
    /* Score the model as stored (float32 rounding included). The file is this run's own, so
     * it is read in this process: the isolated reader, for files that may be hostile, takes
     * about 1.5x as long for a K = 256 model (2.1-2.5 s against 1.4-1.6 s on a 2-core CPU). */
    if (pc_hclt_load(o.out, &saved) != PC_OK) {
        call_failed("reading the model back");
        goto fail;
    }
    summary sm = {.data = data_path, .test = test ? valid_path : NULL, .vars = vars,
                  .cats = cats, .used = use.used, .trans = model->num_trans,
                  .train_n = d->count, .test_n = test ? test->count : 0,
                  .structure_s = t_mi + t_tree, .em_s = t_em, .write_s = now_s() - t0,
                  .ranks = mpi.size};
    t0 = now_s();
    if (pc_tool_scorer_init(&scorer, saved, o.device) != PC_OK) {
        call_failed("preparing the scoring");
        goto fail;
    }
    if (mean_loglik(&scorer, d, &sm.train_ll) ||
        (test && mean_loglik(&scorer, test, &sm.test_ll)))
        goto fail;
    sm.score_s = now_s() - t0;
    sm.total_s = now_s() - t_start;
    if (o.json)
        print_json(&o, &sm, stats);
    else
        print_text(&o, &sm);
    rc = 0;
fail:
    pc_file_writer_abort(w);
    free(stats);
    pc_data_free(d);
    pc_data_free(test);
    pc_hclt_free(model);
    pc_tool_scorer_release(&scorer);
    pc_hclt_free(saved);
    pc_em_free(em);
    free(mi);
    free(parent);
    if (rc && mpi.size > 1) pc_tool_mpi_abort(&mpi, rc); /* no rank waits for a failed one */
    pc_tool_mpi_finalize(&mpi);
    return rc;
}
