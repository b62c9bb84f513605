/* What one level of a circuit costs when a thread-block cluster runs it together: the floor of a
 * design for small batches in which the SMs of a cluster split each layer's groups (so each
 * SM reads only its share of exp(w)) and hand messages to each other between layers, instead
 * of every block reading all of exp(w) (the tile strategy) or waiting on counters in L2 (the
 * persistent and warp strategies, 0.7-0.9 us from a child's publish to the parent seeing it).
 *
 * Per cluster size C (2, 4, 8, 16; 16 is beyond the portable limit and allowed explicitly), as
 * many clusters as fit at one block (256 threads, 150 KB of shared memory held) per SM run
 * 2000 rounds (levels) of, per block, one of the variants:
 *   1  sync:   cluster.sync() alone;
 *   2  dsmem:  write MSG floats of its own message to shared memory, cluster.sync(), read the
 *              message of block (rank + 1) % C from that block's shared memory and fold it in,
 *              cluster.sync() (the buffer is free again): a level whose messages stay on chip;
 *   3  global: the same with the messages in global memory (st.cg, then ld.cg after the
 *              barrier, whose release/acquire order covers global memory too): through L2.
 * Before each point is timed, 4 rounds are checked: every thread's message sums against the
 * same recurrence in double on the host (small integers, exact in FP32). Prints the median time
 * per round of 10 launches after one, in microseconds, and how many clusters ran at once
 * (cudaOccupancyMaxActiveClusters).
 *
 *   usage: gpu_cluster_level VARIANT|all   (a markdown table on stdout)
 * Results: bench/notebook/steps/gpu_circuit_h200/181_a455c1c_cluster_level.md (the
 * twenty-first round: a level through distributed shared memory 0.9 us). */
#include <cooperative_groups.h>

#include "common.h"

namespace cg = cooperative_groups;

#define THREADS 256
#define LEVELS 2000
#define CHECK_LEVELS 4
#define MSG 2048 /* floats per block and level: 32 samples x 64 outputs */
/* Unused dynamic shared memory that keeps one block per SM, as the design would run. */
#define PAD_SMEM (150 * 1024)

enum { SYNC, DSMEM, GLOBAL, MODES };
static const char *const variants[MODES] = {"sync: the cluster barrier alone",
                                            "dsmem: messages through distributed shared memory",
                                            "global: messages through L2"};

/* msgs: MSG floats per block (GLOBAL); out: one float per thread, the sum of its accumulator. */
template <int MODE>
static __global__ void __launch_bounds__(THREADS)
    level_rounds(float *msgs, float *out, int levels) {
    __shared__ float4 own[MSG / 4];
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned rank = cluster.block_rank(), next = (rank + 1) % cluster.num_blocks();
    float4 *mine = reinterpret_cast<float4 *>(msgs) + (size_t)blockIdx.x * (MSG / 4);
    float4 *theirs = reinterpret_cast<float4 *>(msgs) +
                     (size_t)(blockIdx.x - rank + next) * (MSG / 4);
    const float4 *peer = cluster.map_shared_rank(own, next);
    float4 acc = make_float4(threadIdx.x, 0.0f, 0.0f, 0.0f);
    for (int level = 0; level < levels && MODE == SYNC; level++) cluster.sync();
    for (int level = 0; level < levels && MODE != SYNC; level++) {
        for (int i = threadIdx.x; i < MSG / 4; i += THREADS) {
            const float4 v = make_float4(acc.x + i, acc.y, acc.z, acc.w + level);
            if constexpr (MODE == DSMEM) own[i] = v;
            else __stcg(mine + i, v);
        }
        cluster.sync();
        for (int i = threadIdx.x; i < MSG / 4; i += THREADS) {
            const float4 v = MODE == DSMEM ? peer[i] : __ldcg(theirs + i);
            acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
        }
        cluster.sync();
    }
    out[(size_t)blockIdx.x * THREADS + threadIdx.x] = acc.x + acc.y + acc.z + acc.w;
}

typedef void (*kernel)(float *, float *, int);

static cudaLaunchConfig_t config(int size, int blocks, cudaLaunchAttribute *attr) {
    cudaLaunchConfig_t cfg = {};
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = size, attr->val.clusterDim.y = 1, attr->val.clusterDim.z = 1;
    cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = PAD_SMEM, cfg.attrs = attr, cfg.numAttrs = 1;
    return cfg;
}

/* Launches `fn` on `clusters` clusters of `size` blocks. */
static void launch(kernel fn, int size, int clusters, float *msgs, float *out, int levels) {
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = config(size, size * clusters, &attr);
    LAB_CUDA_CHECK(cudaLaunchKernelEx(&cfg, fn, msgs, out, levels));
}

/* Clusters of `size` blocks that can run at once. */
static int active_clusters(kernel fn, int size) {
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = config(size, size, &attr);
    int n = 0;
    LAB_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, fn, &cfg));
    return n;
}

/* Thread t's sum after `levels` rounds. Every block starts alike, so thread t of the next block
 * (whose entries thread t reads) holds what thread t holds: per round and entry i of the
 * thread's, acc.x gains acc.x + i and acc.w gains acc.w + level, as the kernel folds them in. */
static double reference(int mode, int t, int levels) {
    double x = t, w = 0.0;
    for (int level = 0; level < levels && mode != SYNC; level++) {
        double nx = x, nw = w;
        for (int i = t; i < MSG / 4; i += THREADS) nx += x + i, nw += w + level;
        x = nx, w = nw;
    }
    return x + w;
}

static void check(int mode, kernel fn, int size, int clusters, float *msgs, float *out) {
    const int blocks = size * clusters;
    lab_poison(out, (size_t)blocks * THREADS);
    launch(fn, size, clusters, msgs, out, CHECK_LEVELS);
    LAB_CUDA_CHECK(cudaDeviceSynchronize());
    double *got = lab_to_host(out, (size_t)blocks * THREADS);
    double *ref = (double *)lab_malloc(sizeof(double) * blocks * THREADS);
    for (int b = 0; b < blocks; b++)
        for (int t = 0; t < THREADS; t++) ref[b * THREADS + t] = reference(mode, t, CHECK_LEVELS);
    char what[96];
    snprintf(what, sizeof what, "%s, clusters of %d", variants[mode], size);
    lab_check(what, ref, got, (int64_t)blocks * THREADS, 0.0, 0.0);
    free(got), free(ref);
}

int main(int argc, char **argv) {
    int first, last;
    lab_pick(argc, argv, variants, MODES, &first, &last);
    const cudaDeviceProp prop = lab_device();
    printf("%d rounds per launch, %d floats per block and round\n\n", LEVELS, MSG);
    printf("| variant | cluster size | clusters at once | blocks | us per round (median of 10) "
           "|\n|---|---|---|---|---|\n");
    const kernel fns[MODES] = {level_rounds<SYNC>, level_rounds<DSMEM>, level_rounds<GLOBAL>};
    float *msgs = nullptr, *out = nullptr;
    LAB_CUDA_CHECK(cudaMalloc(&msgs, sizeof(float) * MSG * prop.multiProcessorCount));
    LAB_CUDA_CHECK(cudaMalloc(&out, sizeof(float) * THREADS * prop.multiProcessorCount));
    for (int v = first; v <= last; v++) {
        const int m = v - 1;
        LAB_CUDA_CHECK(cudaFuncSetAttribute(fns[m], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            PAD_SMEM));
        LAB_CUDA_CHECK(
            cudaFuncSetAttribute(fns[m], cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        for (int size : {2, 4, 8, 16}) {
            const int clusters = active_clusters(fns[m], size);
            if (clusters < 1) {
                printf("| %d | %d | 0 | - | does not fit |\n", v, size);
                continue;
            }
            check(m, fns[m], size, clusters, msgs, out);
            const double ms = lab_time_ms(
                [&] { launch(fns[m], size, clusters, msgs, out, LEVELS); }, 1, 10);
            printf("| %d | %d | %d | %d | %.3f |\n", v, size, clusters, size * clusters,
                   ms * 1e3 / LEVELS);
        }
    }
    LAB_CUDA_CHECK(cudaFree(msgs));
    LAB_CUDA_CHECK(cudaFree(out));
    return 0;
}
