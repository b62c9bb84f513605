/* pcinfer: scores data with an HCLT model (the default command), and answers the queries
 * beyond likelihood: samples, MPE completions and conditionals, written as .npy, IDX or PNG
 * pictures. Results go to stdout, progress and notices to stderr. Exit status: 0 success,
 * 1 any error, 2 usage.
 *
 * The model file is read by the isolated loader (a malformed file cannot crash or hang the
 * program), the data is streamed a batch at a time (memory does not grow with the file), and
 * --output goes through a pc_file_writer: complete or not at all, never over an input.
 *
 * mpirun -np R pcinfer [score] ... shards the scoring: each rank reads and scores its part of
 * the rows (score.c) and rank 0 alone prints and writes, the same figures and file as one
 * process. Ranks on one machine share its cores and take its GPUs in turn. The queries run as
 * one process: with R > 1 they refuse to start. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pc/cuda.h"
#include "pc/eval.h"

#include "pcinfer.h"
#include "tool_error.h"

static const char usage_text[] =
    "usage: pcinfer [score] [--kernel K] [--data FILE] [--missing SPEC] [--limit N] [--batch N]\n"
    "               [--threads T] [--output FILE] [--compare ref] [--json] MODEL.h5\n"
    "       pcinfer sample --count N [--seed S] [--data FILE --missing SPEC] --output OUT\n"
    "               MODEL.h5\n"
    "       pcinfer mpe --missing SPEC [--data FILE] --output OUT MODEL.h5\n"
    "       pcinfer conditional --missing SPEC [--data FILE] --output OUT MODEL.h5\n"
    "\n"
    "score (the default) prints the mean log-likelihood in nats, bits per dimension and images\n"
    "per second over the images of a data file (default: the MNIST test set,\n"
    MNIST_TEST_IMAGES "); with --missing, log p(x_observed), the missing entries summed out.\n"
    "sample draws --count N images from p(x), or with --data and --missing one completion per\n"
    "image from p(x_missing | x_observed). mpe completes each image by its most probable\n"
    "explanation; conditional gives p(X_v = c | x_observed) for every entry v and value c.\n"
    "sample, mpe and conditional take --kernel, --threads, --batch, --limit and --json too.\n"
    "Under mpirun -np R, score shards the images over the ranks (rank 0 prints and writes the\n"
    "same results as one process); sample, mpe and conditional run as one process only.\n"
    "  --kernel K     ref|cpu|cpu-fuse|fuse|int|gemm; default fuse with a GPU, else cpu-fuse\n"
    "                 (a GPU kernel without a GPU, or one that does not answer the query, runs\n"
    "                 cpu-fuse, with a notice)\n"
    "  --data FILE    IDX, plain or .gz, or .npy (uint8 [n, V], C order); rows of num_vars\n"
    "  --missing SPEC left, right, top, bottom (halves of a square image), center (its centre\n"
    "                 square), random:P (each entry with probability P, seeded by --seed), or\n"
    "                 a FILE of masks (IDX or .npy, uint8, nonzero = missing; a row per image\n"
    "                 or one row for all)\n"
    "  --limit N      use only the first N images\n"
    "  --count N      sample: N images (with --data: the first N images, as --limit)\n"
    "  --seed S       seed of the samples and of random:P masks (default 0)\n"
    "  --batch N      images per call (default 16384 on a GPU, 1024 on the CPU; conditional:\n"
    "                 at most 64 MiB of probabilities per call)\n"
    "  --threads T    CPU threads (default: all cores)\n"
    "  --output FILE  score: log p(x) per image, one per line, in data order. Queries, by the\n"
    "                 extension: .npy (samples and completions uint8 [n, V], conditionals\n"
    "                 float32 [n, V, C]), .idx or .idx.gz (uint8 [n, s, s] for square images,\n"
    "                 else [n, V]), .png (square images: a grid of samples, or a row per image\n"
    "                 of original | evidence, missing part blue | completion or, for\n"
    "                 conditional, the expected value of each entry)\n"
    "  --compare ref  score: also run the FP64 reference and report mean and max |delta|\n"
    "  --json         print one JSON object instead of text\n";

static const char *const command_names[] = {"score", "sample", "mpe", "conditional"};

/* Under mpirun the ranks other than 0 parse the same command line silently. */
static int g_quiet;

static int usage_error(const char *fmt, const char *what) {
    if (g_quiet) return 2;
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
        if (g_quiet) return 2;
        fprintf(stderr, "pcinfer: %s needs an integer >= %lld, not '%s'\n%s", flag, (long long)lo,
                text, usage_text);
        return 2;
    }
    *out = v;
    return 0;
}

static int parse_seed(const char *text, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || !end || *end || end == text || text[0] == '-' || text[0] == '+')
        return usage_error("--seed needs an integer in [0, 2^64), not '%s'", text);
    *out = v;
    return 0;
}

/* The output format by extension, for the queries (score writes text whatever the name). */
static int parse_format(args *a) {
    const char *o = a->output;
    const size_t n = strlen(o);
#define ENDS_WITH(ext) (n > strlen(ext) && !strcmp(o + n - strlen(ext), ext))
    a->format = ENDS_WITH(".npy")      ? OUT_NPY
                : ENDS_WITH(".idx")    ? OUT_IDX
                : ENDS_WITH(".idx.gz") ? OUT_IDX_GZ
                : ENDS_WITH(".png")    ? OUT_PNG
                                       : OUT_NONE;
#undef ENDS_WITH
    if (a->format == OUT_NONE)
        return usage_error("--output %s: the extension says no format (.npy, .idx, .idx.gz or "
                           ".png)", o);
    if (a->command == PCINFER_CONDITIONAL && (a->format == OUT_IDX || a->format == OUT_IDX_GZ))
        return usage_error("--output %s: conditionals are float32 probabilities: write .npy or "
                           ".png", o);
    return 0;
}

/* The options that only some commands take, and what each command needs. */
static int check_command(args *a) {
    const pcinfer_command cmd = a->command;
    const char *name = command_names[cmd];
    if (a->compare && cmd != PCINFER_SCORE)
        return usage_error("--compare is for score, not %s", name);
    if (a->count && cmd != PCINFER_SAMPLE)
        return usage_error("--count is for sample, not %s", name);
    if (cmd == PCINFER_SAMPLE) {
        if (!a->data && !a->count) return usage_error("%s", "sample needs --count N or --data");
        if (!a->data && (a->missing || a->limit >= 0))
            return usage_error("%s", "sample: --missing and --limit go with --data");
        if (a->data && !a->missing)
            return usage_error("%s", "sample --data needs --missing SPEC");
        if (a->data && a->count && a->limit >= 0)
            return usage_error("%s", "sample --data: give --count or --limit, not both");
        if (a->data && a->count) a->limit = a->count;
    }
    if ((cmd == PCINFER_MPE || cmd == PCINFER_CONDITIONAL) && !a->missing)
        return usage_error("%s needs --missing SPEC", name);
    if (a->missing && pc_tool_mask_parse(a->missing, &a->mask) != PC_OK)
        return usage_error("%s", pc_tool_last_error());
    if (a->output && cmd != PCINFER_SCORE) return parse_format(a);
    return 0;
}

/* Returns 0, or 2 for a usage error (already reported), or -1 for --help. */
static int parse_args(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->batch = 0; /* 0: batch_for() picks by kernel */
    a->limit = -1;
    int first = 1;
    for (int c = 0; c < 4 && argc > 1; c++)
        if (!strcmp(argv[1], command_names[c])) a->command = (pcinfer_command)c, first = 2;
    for (int i = first; i < argc; i++) {
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
        else if (!strcmp(s, "--missing")) text = &a->missing;
        else if (!strcmp(s, "--limit")) count = &a->limit;
        else if (!strcmp(s, "--batch")) count = &a->batch;
        else if (!strcmp(s, "--count")) count = &a->count;
        else if (!strcmp(s, "--threads") || !strcmp(s, "--seed")) count = NULL, lo = 0;
        else if (s[0] == '-' && s[1] != '\0') return usage_error("unknown option '%s'", s);
        else {
            /* A first word that is no command and no file, before the model. */
            if (a->model && a->model == argv[1] && access(a->model, F_OK) != 0)
                return usage_error("unknown command '%s' (score, sample, mpe, conditional)",
                                   a->model);
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
        } else if (!strcmp(s, "--seed")) {
            if (parse_seed(value, &a->seed)) return 2;
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
    return check_command(a);
}

/* Threads of a rank that shares its machine with local_size - 1 others: its share of the
 * cores it may run on (those mpirun bound it to, a core or a socket, or all of them). */
static int shared_threads(int local_size) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < cores)
        cores = CPU_COUNT(&set) < cores / local_size ? CPU_COUNT(&set) : cores / local_size;
    else
        cores /= local_size;
    return cores > 1 ? (int)cores : 1;
}

static int run(int argc, char **argv, const pc_tool_mpi *mpi) {
    args a;
    g_quiet = mpi->rank != 0;
    int rc = parse_args(argc, argv, &a);
    if (rc < 0) {
        if (mpi->rank == 0) fputs(usage_text, stdout);
        return 0;
    }
    if (rc) return rc;
    a.mpi = *mpi;
    if (mpi->size > 1 && a.command != PCINFER_SCORE) {
        if (mpi->rank == 0)
            fprintf(stderr, "pcinfer: %s runs as one process: under mpirun -np %d only scoring "
                            "is sharded (run %s without mpirun, or with -np 1)\n",
                    command_names[a.command], mpi->size, command_names[a.command]);
        return 1;
    }
    if (mpi->local_size > 1 && a.threads == 0) a.threads = shared_threads(mpi->local_size);
    /* Several ranks: every failure waits for the ranks to agree, one message for the run. */
    pcinfer_hold_messages(mpi->size > 1);

    /* The CPU backend that runs where no GPU is: the default without one, and the fallback
     * of a GPU kernel that cannot run here or cannot answer a query. cpu-fuse, not the
     * integer cpu: on the CPUs measured it is 7-11x faster and more exact (docs/kernels.md). */
    a.cpu_backend = PC_BACKEND_CPU_FUSE;
    pc_backend backend = pc_cuda_available() ? PC_BACKEND_FUSE : a.cpu_backend;
    if (a.kernel && pc_backend_parse(a.kernel, &backend) != PC_OK)
        return usage_error("%s", pc_last_error());
    if (pc_backend_is_gpu(backend) && !pc_cuda_available()) {
        if (mpi->rank == 0)
            fprintf(stderr, "pcinfer: no GPU available: running kernel '%s' instead of '%s'\n",
                    pc_backend_name(a.cpu_backend), pc_backend_name(backend));
        backend = a.cpu_backend;
    }
    return a.command == PCINFER_SCORE ? pcinfer_score(&a, backend) : pcinfer_query(&a, backend);
}

int main(int argc, char **argv) {
    pc_tool_mpi mpi;
    pc_tool_mpi_init(&argc, &argv, &mpi);
    const int rc = run(argc, argv, &mpi);
    pc_tool_mpi_finalize(&mpi);
    return rc;
}
