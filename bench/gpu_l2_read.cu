/* How fast the GPU's SMs can read a buffer that stays in L2, the way the tile strategy reads
 * exp(w): every block reads the whole buffer once (16-byte loads, 512 threads, one block per SM
 * or more), each block starting at its own offset so that the blocks spread over the buffer.
 * Prints, per buffer size and blocks per SM, the median time of 20 launches and the bytes the
 * SMs read per second.
 *   build: nvcc -O3 -arch=sm_90 bench/gpu_l2_read.cu -o gpu_l2_read
 *   usage: gpu_l2_read  (no arguments; one line per point on stdout) */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#define THREADS 512
#define IN_FLIGHT 8 /* 16-byte loads per thread issued before their sum */

#define CHECK(x)                                                                               \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                           \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

/* buf: n quads; out: one float per block (keeps the loads alive). */
static __global__ void __launch_bounds__(THREADS) read_all(const float4 *buf, size_t n,
                                                           float *out) {
    const size_t start = (size_t)blockIdx.x * (n / gridDim.x);
    float acc = 0.0f;
    for (size_t i0 = threadIdx.x; i0 < n; i0 += (size_t)THREADS * IN_FLIGHT) {
        float4 v[IN_FLIGHT];
#pragma unroll
        for (int u = 0; u < IN_FLIGHT; u++) {
            size_t i = i0 + (size_t)u * THREADS;
            i = i < n ? start + i : start; /* past the end: a repeat, not counted below */
            v[u] = __ldg(buf + (i >= n ? i - n : i));
        }
#pragma unroll
        for (int u = 0; u < IN_FLIGHT; u++) acc += v[u].x + v[u].y + v[u].z + v[u].w;
    }
    if (acc == 12345.0f) out[blockIdx.x] = acc; /* never true for the zeros read */
}

int main() {
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("# %s, %d SMs, L2 %d MiB\n", prop.name, sms, prop.l2CacheSize >> 20);
    printf("# MiB per block | blocks | ms (median of 20) | TB/s read by the SMs\n");
    const size_t most = (size_t)48 << 20;
    float4 *buf = nullptr;
    float *out = nullptr;
    CHECK(cudaMalloc(&buf, most));
    CHECK(cudaMemset(buf, 0, most));
    CHECK(cudaMalloc(&out, sizeof(float) * 8 * sms));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (size_t mib : {2, 9, 16, 36, 48})
        for (int per_sm : {1, 2}) {
            const size_t n = (mib << 20) / sizeof(float4);
            const int grid = sms * per_sm;
            std::vector<float> ms;
            for (int r = 0; r < 23; r++) {
                CHECK(cudaEventRecord(a));
                read_all<<<grid, THREADS>>>(buf, n, out);
                CHECK(cudaEventRecord(b));
                CHECK(cudaEventSynchronize(b));
                float t = 0.0f;
                CHECK(cudaEventElapsedTime(&t, a, b));
                if (r >= 3) ms.push_back(t);
            }
            std::sort(ms.begin(), ms.end());
            const double med = ms[ms.size() / 2];
            printf("%zu | %d | %.4f | %.2f\n", mib, grid, med,
                   (double)grid * (double)(mib << 20) / (med * 1e-3) / 1e12);
        }
    return 0;
}
