/* Long rows of a row-wise LSE (fuse, f32) when the rows alone do not fill the GPU's block
 * slots (512 x 128256: 512 rows, 1056 slots of 256-thread blocks on an H200): is cutting each
 * row into segments worth its second launch, and can a thread-block cluster merge the
 * segments in the same launch?
 *
 * One block of 256 threads per (row, segment), each reading its share of the row with 4
 * 16-byte loads in flight per thread and folding them with the library's fuse state
 * (src/lse/lse_cuda.cuh); the segments then merge:
 *   1  two launches: partial states to global memory, a second kernel merges them (one thread
 *      per row, segments in order), segs = min(slots / rows, nvec / 512) whenever rows <
 *      slots (the library's plan before this lab);
 *   2  one launch, no segments (a block per row);
 *   3  one launch, the segments of a row in one cluster: each block leaves its state in its
 *      shared memory, block 0 of the cluster reads them through distributed shared memory in
 *      rank order (the segs of 1, at most 8);
 *   4  as 1 with at most 8 segments (what 3 gains by its segment count alone);
 *   5  as 2 with streaming loads (ld.global.cs: evict first, the data is read once);
 *   6  as 2 with 8 loads in flight per thread.
 * Per shape: the median event time of one call (the launches between two events, host time of
 * the launches included, as a caller sees it) over 200 calls, and the GPU time per call of 20
 * calls captured in a CUDA graph; inputs rotate over at least 256 MiB. Each variant's results
 * are checked against a CPU FP64 LSE first (relative 2e-6).
 *
 *   usage: gpu_lse_split VARIANT|all   (a markdown table on stdout)
 * Results: bench/notebook/gpu_lse_split_h200.md. */
#include <cooperative_groups.h>

#include "common.h"
#include "lse/lse_cuda.cuh"

namespace cg = cooperative_groups;
using namespace pclse;

#define THREADS 256
#define MAX_CLUSTER 8

enum { TWO_LAUNCH, NO_SPLIT, CLUSTER, TWO_LAUNCH_8, NO_SPLIT_CS, NO_SPLIT_8, VARIANTS };
static const char *const variants[VARIANTS] = {
    "two launches: partial states in global memory, merged by a second kernel",
    "one launch, a block per row (no segments)",
    "one launch, a row's segments in one cluster, merged through distributed shared memory",
    "two launches, at most 8 segments",
    "one launch, a block per row, streaming loads",
    "one launch, a block per row, 8 loads in flight"};

/* The block's state over vectors [v0, v1) of a row (16-byte aligned, cols a multiple of 4);
 * thread 0 returns it. */
template <int IN_FLIGHT, bool STREAM>
static __device__ FuseState block_state(const float *row, int64_t v0, int64_t v1) {
    __shared__ FuseState s_warp[THREADS / 32];
    const uint4 *vec = reinterpret_cast<const uint4 *>(row);
    FuseState st = fuse_init();
    int64_t c = v0 + threadIdx.x;
    for (; c + (IN_FLIGHT - 1) * THREADS < v1; c += IN_FLIGHT * THREADS) {
        uint4 u[IN_FLIGHT];
#pragma unroll
        for (int k = 0; k < IN_FLIGHT; k++)
            u[k] = STREAM ? __ldcs(vec + c + k * THREADS) : __ldg(vec + c + k * THREADS);
        float v[4 * IN_FLIGHT];
#pragma unroll
        for (int k = 0; k < IN_FLIGHT; k++) unpack(u[k], v + 4 * k, (const float *)nullptr);
        fuse_add<4 * IN_FLIGHT>(st, v);
    }
    for (; c < v1; c += THREADS) {
        float v[4];
        unpack(__ldg(vec + c), v, (const float *)nullptr);
        fuse_add<4>(st, v);
    }
    for (int off = 16; off > 0; off /= 2) {
        const FuseState o = {__shfl_xor_sync(~0u, st.m, off), __shfl_xor_sync(~0u, st.o, off),
                             __shfl_xor_sync(~0u, st.s, off)};
        st = fuse_merge(st, o);
    }
    if (threadIdx.x % 32 == 0) s_warp[threadIdx.x / 32] = st;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < THREADS / 32; w++) st = fuse_merge(st, s_warp[w]);
    return st;
}

/* Grid rows * segs, block (row, seg) = (blockIdx.x / segs, blockIdx.x % segs). MODE: how the
 * segments merge (TWO_LAUNCH, NO_SPLIT or CLUSTER). */
template <int MODE, int IN_FLIGHT = 4, bool STREAM = false>
static __global__ void __launch_bounds__(THREADS)
    split_rows(const float *x, int64_t cols, int segs, float *out, FuseState *partial) {
    __shared__ FuseState s_block;
    const int64_t row = blockIdx.x / segs;
    const int seg = (int)(blockIdx.x % segs), nvec = (int)(cols / 4);
    const FuseState st = block_state<IN_FLIGHT, STREAM>(x + row * cols, (int64_t)nvec * seg / segs,
                                     (int64_t)nvec * (seg + 1) / segs);
    if (MODE == NO_SPLIT) {
        if (threadIdx.x == 0) out[row] = fuse_final(st);
    } else if (MODE == TWO_LAUNCH) {
        if (threadIdx.x == 0) partial[blockIdx.x] = st;
    } else {
        cg::cluster_group cluster = cg::this_cluster();
        if (threadIdx.x == 0) s_block = st;
        cluster.sync();
        if (cluster.block_rank() == 0 && threadIdx.x == 0) {
            FuseState all = s_block;
            for (unsigned r = 1; r < cluster.num_blocks(); r++)
                all = fuse_merge(all, *cluster.map_shared_rank(&s_block, r));
            out[row] = fuse_final(all);
        }
        cluster.sync(); /* the peers' shared memory lives until block 0 has read it */
    }
}

static __global__ void merge_segments(const FuseState *partial, int64_t rows, int segs, float *out) {
    const int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    FuseState st = partial[row * segs];
    for (int s = 1; s < segs; s++) st = fuse_merge(st, partial[row * segs + s]);
    out[row] = fuse_final(st);
}

struct Shape {
    int64_t rows, cols;
};

/* Queues one call of variant `mode` on stream s. */
static void launch(int mode, const float *x, Shape sh, int segs, float *out, FuseState *partial,
                   cudaStream_t s) {
    const unsigned blocks = (unsigned)(sh.rows * segs);
    if (mode == TWO_LAUNCH_8) mode = TWO_LAUNCH;
    if (mode == NO_SPLIT) {
        split_rows<NO_SPLIT><<<(unsigned)sh.rows, THREADS, 0, s>>>(x, sh.cols, 1, out, nullptr);
    } else if (mode == NO_SPLIT_CS) {
        split_rows<NO_SPLIT, 4, true><<<(unsigned)sh.rows, THREADS, 0, s>>>(x, sh.cols, 1, out, nullptr);
    } else if (mode == NO_SPLIT_8) {
        split_rows<NO_SPLIT, 8><<<(unsigned)sh.rows, THREADS, 0, s>>>(x, sh.cols, 1, out, nullptr);
    } else if (mode == TWO_LAUNCH) {
        split_rows<TWO_LAUNCH><<<blocks, THREADS, 0, s>>>(x, sh.cols, segs, out, partial);
        merge_segments<<<(unsigned)((sh.rows + 255) / 256), 256, 0, s>>>(partial, sh.rows, segs, out);
    } else {
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = (unsigned)segs, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(THREADS), cfg.stream = s;
        cfg.attrs = &attr, cfg.numAttrs = 1;
        LAB_CUDA_CHECK(cudaLaunchKernelEx(&cfg, split_rows<CLUSTER>, x, sh.cols, segs, out, partial));
    }
}

/* The library's rule for segments (src/lse/lse_cuda_rows.cu, plan_rows). */
static int plan_segs(Shape sh, int slots) {
    const int64_t nvec = sh.cols / 4;
    if (sh.rows >= slots) return 1;
    int64_t segs = slots / sh.rows, most = nvec / (2 * THREADS);
    segs = segs < most ? segs : most;
    return segs > 1 ? (int)segs : 1;
}

static double *reference(const float *h, Shape sh) {
    double *ref = (double *)lab_malloc(sizeof(double) * sh.rows);
    for (int64_t r = 0; r < sh.rows; r++) {
        const float *row = h + r * sh.cols;
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < sh.cols; c++) m = fmax(m, row[c]);
        for (int64_t c = 0; c < sh.cols; c++) s += exp((double)row[c] - m);
        ref[r] = m + log(s);
    }
    return ref;
}

int main(int argc, char **argv) {
    int first, last;
    lab_pick(argc, argv, variants, VARIANTS, &first, &last);
    const cudaDeviceProp prop = lab_device();
    int bps = 0;
    LAB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, split_rows<TWO_LAUNCH>, THREADS, 0));
    const int slots = prop.multiProcessorCount * bps;
    printf("block slots: %d (%d per SM)\n\n", slots, bps);
    printf("| B x N | variant | segments | per call us | GPU us (graph) | GB/s (graph) |\n"
           "|---|---|---|---|---|---|\n");
    const Shape shapes[] = {{512, 128256}, {256, 128256}, {192, 128256}, {160, 128256},
                            {128, 128256}, {64, 128256},  {32, 128256},  {8, 128256},
                            {1, 128256},   {1, 1048576},  {512, 32768},  {512, 8192},
                            {1024, 4096}};
    cudaStream_t s;
    LAB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (const Shape sh : shapes) {
        const size_t n = (size_t)sh.rows * sh.cols, bytes = n * sizeof(float);
        const int copies = (int)((bytes >= (256u << 20)) ? 1 : ((256u << 20) + bytes - 1) / bytes);
        float *h = (float *)lab_malloc(bytes), *x = nullptr, *out = nullptr;
        FuseState *partial = nullptr;
        srand(7);
        for (size_t i = 0; i < n; i++) h[i] = 8.0f * ((float)rand() / (float)RAND_MAX) - 4.0f;
        LAB_CUDA_CHECK(cudaMalloc(&x, bytes * copies));
        for (int c = 0; c < copies; c++)
            LAB_CUDA_CHECK(cudaMemcpy(x + n * c, h, bytes, cudaMemcpyHostToDevice));
        LAB_CUDA_CHECK(cudaMalloc(&out, sizeof(float) * sh.rows));
        const int plan = plan_segs(sh, slots);
        LAB_CUDA_CHECK(cudaMalloc(&partial, sizeof(FuseState) * sh.rows * plan));
        double *ref = reference(h, sh);
        for (int v = first; v <= last; v++) {
            const int mode = v - 1;
            const int capped = mode == CLUSTER || mode == TWO_LAUNCH_8;
            const int whole = mode == NO_SPLIT || mode == NO_SPLIT_CS || mode == NO_SPLIT_8;
            const int segs = whole ? 1 : capped && plan > MAX_CLUSTER ? MAX_CLUSTER : plan;
            if (!whole && segs < 2) continue; /* nothing to merge */
            char what[96];
            snprintf(what, sizeof what, "variant %d at %lld x %lld", v, (long long)sh.rows, (long long)sh.cols);
            lab_poison(out, sh.rows);
            launch(mode, x, sh, segs, out, partial, s);
            LAB_CUDA_CHECK(cudaStreamSynchronize(s));
            double *got = lab_to_host(out, sh.rows);
            lab_check(what, ref, got, sh.rows, 0.0, 2e-6);
            free(got);
            int turn = 0;
            const double call = 1e3 * lab_time_ms_on(
                s, [&] { launch(mode, x + n * (turn++ % copies), sh, segs, out, partial, s); }, 5, 200);
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            LAB_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            for (int i = 0; i < 20; i++) launch(mode, x + n * (turn++ % copies), sh, segs, out, partial, s);
            LAB_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
            LAB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
            const double g =
                1e3 / 20 * lab_time_ms_on(s, [&] { LAB_CUDA_CHECK(cudaGraphLaunch(exec, s)); }, 1, 15);
            printf("| %lld x %lld | %d | %d | %.2f | %.2f | %.0f |\n", (long long)sh.rows, (long long)sh.cols, v,
                   segs, call, g, bytes / g * 1e-3);
            fflush(stdout);
            LAB_CUDA_CHECK(cudaGraphExecDestroy(exec));
            LAB_CUDA_CHECK(cudaGraphDestroy(graph));
        }
        free(h), free(ref);
        LAB_CUDA_CHECK(cudaFree(x));
        LAB_CUDA_CHECK(cudaFree(out));
        LAB_CUDA_CHECK(cudaFree(partial));
    }
    return 0;
}
