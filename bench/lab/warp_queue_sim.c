/* Simulates the fuse warp strategy's work queue on a model's chains (the engine's chain plan,
 * src/eval/cuda/gpu_plan.h), to compare queue orders before a kernel is written for one.
 *
 * Model: `blocks` resident blocks take gangs (one chain, one run of sample tiles: `gangs` per
 * chain) from the queue in order; a gang starts when its block is free and its chain's children
 * have finished the same gang (the block waits, held, until then), and takes a fixed time: a
 * chain's bottom 1 + SRC per source (child or variable), each group above it LINK x (1 + SRC
 * per variable). For gangs per chain 8-64 and nine cost models (SRC 0.05, 0.15, 0.3; LINK 0.3,
 * 0.6, 1.0) it prints the makespan next to the two lower bounds (the critical path of item
 * times, and all work spread evenly over the blocks).
 *
 * Variants (queue orders):
 *   1  the plan's order: chains by the step at which each could start (the engine's default)
 *   2  by path: chains by their longest path of plan costs to the root, longest first (the
 *      engine's second order, pc_gpu_chains.by_path)
 * Each simulated schedule is checked before its makespan is printed: every gang starts after
 * its children's gangs end and after its block's previous gang, and the makespan is no shorter
 * than either bound (computed separately, in double).
 *
 *   usage: warp_queue_sim VARIANT|all MODEL.h5 [BLOCKS [GANGS,...]]
 *          (BLOCKS: resident blocks, default 660 = an H200's 132 SMs x 5 at K <= 32;
 *           GANGS: gangs per chain, batch / 64, default 8,16,32,64)
 * Results: bench/notebook/gpu_circuit_h200.md, tenth round (the prediction behind the path
 * order from 18 waves of gangs; steps 81-83). */
#include "eval/cuda/gpu_chains.h"
#include "eval/cuda/tuning/gpu_tuning.h"
#include "pc/circuit.h"
#include "pc/hclt.h"

#include "common.h"

static const char *const variants[] = {"the plan's order (by start step)",
                                       "by longest path to the root (by_path)"};

typedef struct sim {
    const pc_circuit *c;
    const pc_gpu_chains *ch;
    int32_t *kid_start; /* [chains + 1] CSR offsets into kids */
    int32_t *kids;      /* the chains each chain's bottom reads (its children's chains) */
} sim;

static void sim_kids(sim *s) {
    const pc_circuit *c = s->c;
    const int32_t n = s->ch->num_chains;
    s->kid_start = lab_malloc(sizeof(int32_t) * (n + 1));
    s->kids = lab_malloc(sizeof(int32_t) * (c->num_groups > 1 ? c->num_groups - 1 : 1));
    s->kid_start[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t g = s->ch->groups[s->ch->begin[i]];
        int32_t m = s->kid_start[i];
        for (int32_t k = c->child_start[g]; k < c->child_start[g + 1]; k++)
            s->kids[m++] = s->ch->child_chain[k];
        s->kid_start[i + 1] = m;
    }
}

/* A chain's item time under the cost model (src per source, link per group above the bottom). */
static double item_time(const sim *s, int32_t chain, double src, double link) {
    const pc_circuit *c = s->c;
    double t = 0.0;
    for (int32_t m = s->ch->begin[chain]; m < s->ch->begin[chain + 1]; m++) {
        const int32_t g = s->ch->groups[m];
        const int32_t nv = c->var_start[g + 1] - c->var_start[g];
        const int32_t nc = c->child_start[g + 1] - c->child_start[g];
        t += m == s->ch->begin[chain] ? 1.0 + src * (nc + nv) : link * (1.0 + src * nv);
    }
    return t;
}

/* Free blocks as a binary min-heap of (time, block), ties by block as Python's heapq. */
typedef struct slot {
    double t;
    int32_t b;
} slot;
static int before(slot x, slot y) { return x.t < y.t || (x.t == y.t && x.b < y.b); }
static void sift_down(slot *h, int n, int i) {
    for (;;) {
        int m = i;
        const int l = 2 * i + 1, r = l + 1;
        if (l < n && before(h[l], h[m])) m = l;
        if (r < n && before(h[r], h[m])) m = r;
        if (m == i) return;
        const slot t = h[i];
        h[i] = h[m], h[m] = t, i = m;
    }
}

/* One gang's run: item (chain, gang) on `block` from `start` to `end`. */
typedef struct run {
    double start, end;
    int32_t block;
} run;

/* Runs the queue in `order`; runs is [chains][gangs]. Returns the makespan. */
static double simulate(const sim *s, const int32_t *order, int blocks, int gangs, double src,
                       double link, run *runs) {
    slot *heap = lab_malloc(sizeof(slot) * blocks);
    for (int b = 0; b < blocks; b++) heap[b] = (slot){0.0, b};
    double makespan = 0.0;
    for (int32_t i = 0; i < s->ch->num_chains; i++) {
        const int32_t c = order[i];
        const double d = item_time(s, c, src, link);
        for (int g = 0; g < gangs; g++) {
            double t = heap[0].t;
            for (int32_t k = s->kid_start[c]; k < s->kid_start[c + 1]; k++) {
                const double kid_end = runs[(size_t)s->kids[k] * gangs + g].end;
                t = kid_end > t ? kid_end : t;
            }
            runs[(size_t)c * gangs + g] = (run){t, t + d, heap[0].b};
            makespan = t + d > makespan ? t + d : makespan;
            heap[0].t = t + d;
            sift_down(heap, blocks, 0);
        }
    }
    free(heap);
    return makespan;
}

/* The two lower bounds: the longest path of item times through the chains (children come
 * first in chain order), and the total work over the blocks. */
static void bounds(const sim *s, int blocks, int gangs, double src, double link, double *path,
                   double *even) {
    const int32_t n = s->ch->num_chains;
    double *longest = lab_malloc(sizeof(double) * n), work = 0.0;
    *path = 0.0;
    for (int32_t c = 0; c < n; c++) {
        double below = 0.0;
        for (int32_t k = s->kid_start[c]; k < s->kid_start[c + 1]; k++)
            below = longest[s->kids[k]] > below ? longest[s->kids[k]] : below;
        const double t = item_time(s, c, src, link);
        longest[c] = t + below, work += t;
        *path = longest[c] > *path ? longest[c] : *path;
    }
    *even = work * gangs / blocks;
    free(longest);
}

static int by_block_start(const void *a, const void *b) {
    const run *x = a, *y = b;
    if (x->block != y->block) return x->block < y->block ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

/* Fails the program unless every gang starts after its children's gangs end and after its
 * block's previous gang, and the makespan beats neither bound. */
static void check(const sim *s, const char *name, int gangs, const run *runs, double makespan,
                  double path, double even) {
    const size_t items = (size_t)s->ch->num_chains * gangs;
    int64_t bad = 0;
    for (int32_t c = 0; c < s->ch->num_chains; c++)
        for (int g = 0; g < gangs; g++)
            for (int32_t k = s->kid_start[c]; k < s->kid_start[c + 1]; k++)
                bad += runs[(size_t)c * gangs + g].start < runs[(size_t)s->kids[k] * gangs + g].end;
    run *sorted = lab_malloc(sizeof(run) * items);
    memcpy(sorted, runs, sizeof(run) * items);
    qsort(sorted, items, sizeof(run), by_block_start);
    for (size_t i = 1; i < items; i++)
        bad += sorted[i].block == sorted[i - 1].block && sorted[i].start < sorted[i - 1].end;
    free(sorted);
    if (bad || makespan < path * (1.0 - 1e-12) || makespan < even * (1.0 - 1e-12)) {
        fprintf(stderr, "check %s: FAILED: %lld broken dependencies or overlapping gangs, "
                        "makespan %.6g against the bounds %.6g and %.6g\n", name,
                (long long)bad, makespan, path, even);
        exit(1);
    }
}

/* Order of the plan: chains 0 .. n-1. */
static int32_t *plan_order(int32_t n) {
    int32_t *o = lab_malloc(sizeof(int32_t) * n);
    for (int32_t i = 0; i < n; i++) o[i] = i;
    return o;
}

static int parse_gangs(const char *s, int *out, int most) {
    int n = 0;
    for (char *end = NULL; n < most; s = end + 1) {
        const long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 4096 || (*end && *end != ',')) return -1;
        out[n++] = (int)v;
        if (!*end) return n;
    }
    return -1;
}

static void run_variant(const sim *s, int v, int blocks, const int *gangs, int ng) {
    const int32_t n = s->ch->num_chains;
    int32_t *order = v == 1 ? plan_order(n) : s->ch->by_path;
    printf("\n%d %s: %d chains, %d blocks\n\n", v, variants[v - 1], n, blocks);
    printf("| gangs | SRC | LINK | makespan | critical path | even spread | makespan / larger "
           "bound |\n|---|---|---|---|---|---|---|\n");
    static const double srcs[] = {0.05, 0.15, 0.3}, links[] = {0.3, 0.6, 1.0};
    for (int gi = 0; gi < ng; gi++) {
        const size_t items = (size_t)n * gangs[gi];
        run *runs = lab_malloc(sizeof(run) * items);
        for (int si = 0; si < 3; si++)
            for (int li = 0; li < 3; li++) {
                double path, even;
                const double ms =
                    simulate(s, order, blocks, gangs[gi], srcs[si], links[li], runs);
                bounds(s, blocks, gangs[gi], srcs[si], links[li], &path, &even);
                check(s, variants[v - 1], gangs[gi], runs, ms, path, even);
                printf("| %d | %g | %g | %.1f | %.1f | %.1f | %.3f |\n", gangs[gi], srcs[si],
                       links[li], ms, path, even, ms / (path > even ? path : even));
            }
        free(runs);
    }
    fprintf(stderr, "check %s: every schedule keeps its dependencies and blocks, no makespan "
                    "below a bound\n", variants[v - 1]);
    if (v == 1) free(order);
}

int main(int argc, char **argv) {
    int first, last, gangs[16] = {8, 16, 32, 64}, ng = 4;
    lab_pick(argc, argv, variants, 2, &first, &last);
    const int blocks = argc > 3 ? atoi(argv[3]) : 660;
    if (argc < 3 || blocks < 1 || (argc > 4 && (ng = parse_gangs(argv[4], gangs, 16)) < 0)) {
        fprintf(stderr, "usage: %s VARIANT|all MODEL.h5 [BLOCKS [GANGS,...]]\n", argv[0]);
        return 2;
    }
    pc_hclt *model = NULL;
    pc_circuit *c = NULL;
    pc_gpu_chains ch = {0};
    const pc_gpu_tuning *tuning = pc_gpu_tuning_for(9, 0); /* the H200's table */
    pc_status st = pc_hclt_load(argv[2], &model);
    if (st == PC_OK) st = pc_circuit_compile(model, &c);
    if (st == PC_OK)
        st = pc_gpu_chain_plan(c, tuning, tuning->chain_short, PC_GPU_CHAIN_WINDOW_VARS, &ch);
    if (st != PC_OK) {
        fprintf(stderr, "%s: %s\n", argv[2], pc_last_error());
        return 1;
    }
    sim s = {c, &ch, NULL, NULL};
    sim_kids(&s);
    for (int v = first; v <= last; v++) run_variant(&s, v, blocks, gangs, ng);
    free(s.kid_start), free(s.kids);
    pc_gpu_chains_free(&ch);
    pc_circuit_free(c);
    pc_hclt_free(model);
    return 0;
}
