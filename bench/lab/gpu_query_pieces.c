/* GPU queries through the API in pieces: does cutting a call into pieces, so that the host's
 * copies of one piece overlap the kernels of another, make pc_mpe and pc_sample_conditional
 * cheaper than one pass over the whole batch?
 *
 *   gpu_query_pieces VARIANT|all [--model models/mnist.h5] [--reps N]
 *
 * The query state stages piece i of a call through pinned buffer i % 2
 * (src/eval/cuda/query/gpu_query_ops.cu); pc_gpu_query_force_piece sets the rows per piece.
 * Variant p (1-5: 1, 2, 4, 8, 16 pieces; 6: the library's own choice) times pc_mpe (left half
 * missing, and each pixel missing with probability 1/2) and pc_sample_conditional (left half)
 * on the first n MNIST test images (repeated past 10,000), n = 4096 and 16384, in rounds that
 * alternate with pc_evaluate of the same rows and evidence on the same evaluator (the
 * marginal likelihood pass the queries are held against; gpu_query_bench's too) and without
 * the mask (all pixels observed: half the bytes in); medians of the rounds. Every variant's
 * completions and log-probabilities must equal one piece's byte for byte (checked before
 * timing; samples that differ are reported). The host floor: memcpy of the call's x and mask into pinned memory
 * and of the completions out of it. Markdown on stdout, progress on stderr. */
#include <cuda_runtime.h>

#include "common.h"
#include "eval/cuda/query/gpu_query.h"
#include "eval/evaluator.h"
#include "mnist_find.h"
#include "pc/circuit.h"
#include "pc/data.h"
#include "pc/eval.h"
#include "pc/hclt.h"
#include "pc/query.h"

#define V 784

static const char *const variants[] = {"1 piece",  "2 pieces",  "4 pieces",
                                       "8 pieces", "16 pieces", "the library's choice"};

static void die(const char *what) {
    fprintf(stderr, "gpu_query_pieces: %s: %s\n", what, pc_last_error());
    exit(1);
}

enum query { Q_MPE, Q_SAMPLE, Q_COUNT };

static void call(pc_evaluator *e, enum query q, const uint8_t *x, const uint8_t *missing,
                 int64_t n, uint8_t *out, double *logp) {
    const pc_status st = q == Q_MPE ? pc_mpe(e, x, missing, n, V, out, logp)
                                    : pc_sample_conditional(e, x, missing, n, V, 7, 0, out);
    if (st != PC_OK) die(q == Q_MPE ? "pc_mpe" : "pc_sample_conditional");
}

/* Median ms of the query, of the likelihood of the same evidence and of the likelihood
 * without a mask, over reps alternating rounds. */
static void rounds(pc_evaluator *e, enum query q, const uint8_t *x, const uint8_t *missing,
                   int64_t n, int reps, uint8_t *out, double *logp, double *query_ms,
                   double *lik_ms, double *full_ms) {
    double tq[64], tl[64], tf[64];
    call(e, q, x, missing, n, out, logp);
    if (pc_evaluate(e, x, missing, n, V, logp) != PC_OK || pc_evaluate(e, x, NULL, n, V, logp))
        die("pc_evaluate");
    for (int r = 0; r < reps; r++) {
        double t0 = lab_now_s();
        if (pc_evaluate(e, x, missing, n, V, logp) != PC_OK) die("pc_evaluate");
        tl[r] = 1e3 * (lab_now_s() - t0);
        t0 = lab_now_s();
        if (pc_evaluate(e, x, NULL, n, V, logp) != PC_OK) die("pc_evaluate");
        tf[r] = 1e3 * (lab_now_s() - t0);
        t0 = lab_now_s();
        call(e, q, x, missing, n, out, logp);
        tq[r] = 1e3 * (lab_now_s() - t0);
    }
    *query_ms = lab_median(tq, reps), *lik_ms = lab_median(tl, reps);
    *full_ms = lab_median(tf, reps);
}

/* memcpy of in_bytes into pinned memory plus out_bytes out of it (ms, median of reps). */
static double host_floor(const uint8_t *src, size_t in_bytes, uint8_t *dst, size_t out_bytes,
                         int reps) {
    uint8_t *pinned = NULL;
    double t[64];
    const size_t most = in_bytes > out_bytes ? in_bytes : out_bytes;
    if (cudaMallocHost((void **)&pinned, most) != cudaSuccess) die("pinned buffer");
    for (int r = 0; r <= reps; r++) {
        const double t0 = lab_now_s();
        memcpy(pinned, src, in_bytes);
        memcpy(dst, pinned, out_bytes);
        if (r > 0) t[r - 1] = 1e3 * (lab_now_s() - t0);
    }
    cudaFreeHost(pinned);
    return lab_median(t, reps);
}

int main(int argc, char **argv) {
    int first = 0, last = 0, reps = 9;
    const char *model_path = "models/mnist.h5";
    lab_pick(argc, argv, variants, 6, &first, &last);
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model_path = argv[i + 1];
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else return fprintf(stderr, "gpu_query_pieces: unknown option %s\n", argv[i]), 2;
    }
    if (reps < 1 || reps > 64) return fprintf(stderr, "gpu_query_pieces: --reps 1..64\n"), 2;
    pc_hclt *model = NULL;
    pc_circuit *c = NULL;
    if (pc_hclt_load(model_path, &model) != PC_OK || pc_circuit_compile(model, &c) != PC_OK)
        die(model_path);
    char path[4096];
    pc_data *test = NULL;
    if (pc_tool_find_mnist(NULL, "t10k-images-idx3-ubyte.gz", path, sizeof path) != PC_OK ||
        pc_data_load_idx(path, &test) != PC_OK)
        die("MNIST test images");
    const int64_t most = 16384;
    uint8_t *x = malloc((size_t)most * V), *masks[2], *ref = malloc((size_t)most * V);
    uint8_t *out = malloc((size_t)most * V);
    double *logp = malloc((size_t)most * sizeof(double));
    double *ref_logp = malloc((size_t)most * sizeof(double));
    masks[0] = malloc((size_t)most * V), masks[1] = malloc((size_t)most * V);
    if (!x || !ref || !out || !logp || !ref_logp || !masks[0] || !masks[1]) die("out of memory");
    for (int64_t i = 0; i < most * V; i++) { /* the test set repeated past its 10,000 images */
        x[i] = test->values[i % (test->count * V)];
        masks[0][i] = (i % V) % 28 < 14;
        masks[1][i] = (uint8_t)((i * 2654435761u >> 13) & 1);
    }
    const char *const mask_names[2] = {"left half", "random half"};
    printf("| n | query | evidence | pieces | API ms | pc_evaluate ms | x likelihood | "
           "pc_evaluate ms, no mask | host floor ms |\n|---|---|---|---|---|---|---|---|---|\n");
    const pc_eval_opts opts = {PC_BACKEND_FUSE, most, 0};
    pc_evaluator *e = NULL;
    if (pc_evaluator_create(c, &opts, &e) != PC_OK) die("evaluator");
    call(e, Q_MPE, x, masks[0], 1, out, logp); /* makes the query state */
    for (int64_t n = 4096; n <= most; n *= 4)
        for (int q = 0; q < Q_COUNT; q++)
            for (int m = 0; m < (q == Q_MPE ? 2 : 1); m++) {
                const uint8_t *mask = masks[m];
                pc_gpu_query_force_piece(e->query_state, n); /* one piece: the reference */
                call(e, (enum query)q, x, mask, n, ref, ref_logp);
                const double floor = host_floor(x, (size_t)n * V * 2, out, (size_t)n * V, reps);
                for (int v = first; v <= last; v++) {
                    const int64_t pieces = v <= 5 ? (int64_t)1 << (v - 1) : 0;
                    pc_gpu_query_force_piece(e->query_state, pieces ? n / pieces : 0);
                    memset(out, 0xa5, (size_t)n * V);
                    for (int64_t i = 0; i < n; i++) logp[i] = NAN;
                    call(e, (enum query)q, x, mask, n, out, logp);
                    const int same = !memcmp(out, ref, (size_t)n * V) &&
                                     (q != Q_MPE || !memcmp(logp, ref_logp, (size_t)n * 8));
                    if (!same && q == Q_MPE) {
                        fprintf(stderr, "gpu_query_pieces: MPE, %s, differs from one piece\n",
                                variants[v - 1]);
                        return 1;
                    }
                    if (!same) /* the samplers promise the distribution, not these bits */
                        fprintf(stderr, "gpu_query_pieces: samples, %s, differ from one "
                                        "piece's\n", variants[v - 1]);
                    double api = 0, lik = 0, full = 0;
                    rounds(e, (enum query)q, x, mask, n, reps, out, logp, &api, &lik, &full);
                    printf("| %lld | %s | %s | %s | %.3f | %.3f | %.2f | %.3f | %.3f |\n",
                           (long long)n, q == Q_MPE ? "mpe" : "sample_conditional",
                           mask_names[m], variants[v - 1], api, lik, api / lik, full, floor);
                    fflush(stdout);
                }
            }
    pc_evaluator_free(e);
    fprintf(stderr, "gpu_query_pieces: every variant equal to one piece\n");
    pc_data_free(test);
    free(x), free(ref), free(out), free(logp), free(ref_logp), free(masks[0]), free(masks[1]);
    pc_circuit_free(c);
    pc_hclt_free(model);
    return 0;
}
