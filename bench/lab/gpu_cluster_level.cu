/* What one level of a circuit costs when a thread-block cluster runs it together: the floor of a
 * design for small batches in which the SMs of a cluster split each layer's groups (so each
 * SM reads only its share of exp(w)) and hand messages to each other between layers, instead
 * of every block reading all of exp(w) (the tile strategy) or waiting on counters in L2 (the
 * persistent and warp strategies, 0.7-0.9 us from a child's publish to the parent seeing it).
 *
 * Per cluster size C (2, 4, 8, 16; 16 is beyond the portable limit and allowed explicitly), as
 * many clusters as fit at one block (256 threads) per SM run LEVELS rounds of, per block:
 *   sync:    cluster.sync() alone;
 *   dsmem:   write MSG floats of its own message to shared memory, cluster.sync(), read the
 *            message of block (rank + 1) % C from that block's shared memory and fold it in,
 *            cluster.sync() (the buffer is free again) -- a level whose messages stay on chip;
 *   global:  the same with the messages in global memory (st, then ld.cg after the barrier,
 *            whose release/acquire order covers global memory too) -- messages through L2.
 * Prints the median time per round of 10 launches, in microseconds, and how many clusters ran
 * at once (cudaOccupancyMaxActiveClusters).
 *   build: nvcc -O3 -arch=sm_90 -std=c++17 bench/gpu_cluster_level.cu -o gpu_cluster_level
 *   usage: gpu_cluster_level  (no arguments; a markdown table on stdout) */
#include "gpu_check.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace cg = cooperative_groups;

#define THREADS 256
#define LEVELS 2000
#define MSG 2048 /* floats per block and level: 32 samples x 64 outputs */
/* Unused dynamic shared memory that keeps one block per SM, as the design would run. */
#define PAD_SMEM (150 * 1024)

enum { SYNC, DSMEM, GLOBAL, MODES };
static const char *mode_name[MODES] = {"sync", "dsmem", "global"};

/* msgs: MSG floats per block (GLOBAL); out: one float per block, keeps the work alive. */
template <int MODE>
static __global__ void __launch_bounds__(THREADS) level_rounds(float *msgs, float *out) {
    __shared__ float4 own[MSG / 4];
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned rank = cluster.block_rank(), next = (rank + 1) % cluster.num_blocks();
    float4 *mine = reinterpret_cast<float4 *>(msgs) + (size_t)blockIdx.x * (MSG / 4);
    float4 *theirs = reinterpret_cast<float4 *>(msgs) +
                     (size_t)(blockIdx.x - rank + next) * (MSG / 4);
    const float4 *peer = cluster.map_shared_rank(own, next);
    float4 acc = make_float4(threadIdx.x, 0.0f, 0.0f, 0.0f);
    for (int level = 0; level < LEVELS && MODE == SYNC; level++) cluster.sync();
    for (int level = 0; level < LEVELS && MODE != SYNC; level++) {
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
    if (acc.x + acc.y + acc.z + acc.w == 12345.0f) out[blockIdx.x] = acc.x;
}

/* Launches `fn` on `clusters` clusters of `size` blocks. */
static void launch(void (*fn)(float *, float *), int size, int clusters, float *msgs, float *out) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = size, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(size * clusters), cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = PAD_SMEM, cfg.attrs = attr, cfg.numAttrs = 1;
    CHECK(cudaLaunchKernelEx(&cfg, fn, msgs, out));
}

/* Clusters of `size` blocks that can run at once. */
static int active_clusters(void (*fn)(float *, float *), int size) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = size, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(size), cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = PAD_SMEM, cfg.attrs = attr, cfg.numAttrs = 1;
    int n = 0;
    CHECK(cudaOccupancyMaxActiveClusters(&n, fn, &cfg));
    return n;
}

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("# %s, %d SMs; %d rounds per launch, %d floats per block and round\n\n", prop.name,
           prop.multiProcessorCount, LEVELS, MSG);
    printf("| cluster size | clusters at once | blocks | round | us per round (median of 10) |\n"
           "|---|---|---|---|---|\n");
    void (*fns[MODES])(float *, float *) = {level_rounds<SYNC>, level_rounds<DSMEM>,
                                             level_rounds<GLOBAL>};
    float *msgs = nullptr, *out = nullptr;
    CHECK(cudaMalloc(&msgs, sizeof(float) * MSG * prop.multiProcessorCount));
    CHECK(cudaMalloc(&out, sizeof(float) * prop.multiProcessorCount));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int size : {2, 4, 8, 16}) {
        for (int m = 0; m < MODES; m++) {
            CHECK(cudaFuncSetAttribute(fns[m], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       PAD_SMEM));
            if (size > 8)
                CHECK(cudaFuncSetAttribute(fns[m], cudaFuncAttributeNonPortableClusterSizeAllowed,
                                           1));
            const int clusters = active_clusters(fns[m], size);
            if (clusters < 1) {
                printf("| %d | 0 | - | %s | does not fit |\n", size, mode_name[m]);
                continue;
            }
            std::vector<float> ms(10);
            launch(fns[m], size, clusters, msgs, out); /* warm-up */
            for (float &t : ms) {
                CHECK(cudaEventRecord(a));
                launch(fns[m], size, clusters, msgs, out);
                CHECK(cudaEventRecord(b));
                CHECK(cudaEventSynchronize(b));
                CHECK(cudaEventElapsedTime(&t, a, b));
            }
            CHECK(cudaGetLastError());
            std::sort(ms.begin(), ms.end());
            printf("| %d | %d | %d | %s | %.3f |\n", size, clusters, size * clusters,
                   mode_name[m], ms[5] * 1e3 / LEVELS);
        }
    }
    CHECK(cudaFree(msgs));
    CHECK(cudaFree(out));
    return 0;
}
