/* How fast the GPU's SMs can read a buffer that stays in L2, the way the tile strategy reads
 * exp(w): every block reads the whole buffer once (16-byte loads, 512 threads, 1, 2 or 4 blocks
 * per SM, 4-16 loads per thread unrolled; the compiler keeps about 4 of them in flight), each
 * block starting at its own offset so that the blocks spread over the buffer. Prints, per buffer size, loads in flight and blocks per SM,
 * the median time of 20 launches and the bytes the SMs read per second.
 *   build: nvcc -O3 -arch=sm_90 bench/gpu_l2_read.cu -o gpu_l2_read
 *   usage: gpu_l2_read  (no arguments; one line per point on stdout) */
#include "gpu_check.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#define THREADS 512

/* buf: n quads, n a power of two and a multiple of THREADS x IN_FLIGHT; out: one float per
 * block (keeps the loads alive). IN_FLIGHT: 16-byte loads per thread issued before their sum. */
template <int IN_FLIGHT>
static __global__ void __launch_bounds__(THREADS) read_all(const float4 *buf, size_t n,
                                                           float *out) {
    const size_t start = (size_t)blockIdx.x * (n / gridDim.x), mask = n - 1;
    float acc = 0.0f;
    for (size_t i0 = threadIdx.x; i0 < n; i0 += (size_t)THREADS * IN_FLIGHT) {
        float4 v[IN_FLIGHT];
#pragma unroll
        for (int u = 0; u < IN_FLIGHT; u++)
            v[u] = __ldg(buf + ((start + i0 + (size_t)u * THREADS) & mask));
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
    printf("# MiB per block | loads in flight per thread | blocks | ms (median of 20) | TB/s read "
           "by the SMs\n");
    const size_t most = (size_t)32 << 20;
    float4 *buf = nullptr;
    float *out = nullptr;
    CHECK(cudaMalloc(&buf, most));
    CHECK(cudaMemset(buf, 0, most));
    CHECK(cudaMalloc(&out, sizeof(float) * 8 * sms));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    typedef void (*kernel)(const float4 *, size_t, float *);
    const kernel kernels[] = {read_all<4>, read_all<8>, read_all<16>};
    const int depths[] = {4, 8, 16};
    for (size_t mib : {2, 8, 32})
        for (int d = 0; d < 3; d++)
        for (int per_sm : {1, 2, 4}) {
            const size_t n = (mib << 20) / sizeof(float4);
            const int grid = sms * per_sm;
            std::vector<float> ms;
            for (int r = 0; r < 23; r++) {
                CHECK(cudaEventRecord(a));
                kernels[d]<<<grid, THREADS>>>(buf, n, out);
                CHECK(cudaEventRecord(b));
                CHECK(cudaEventSynchronize(b));
                float t = 0.0f;
                CHECK(cudaEventElapsedTime(&t, a, b));
                if (r >= 3) ms.push_back(t);
            }
            std::sort(ms.begin(), ms.end());
            const double med = ms[ms.size() / 2];
            printf("%zu | %d | %d | %.4f | %.2f\n", mib, depths[d], grid, med,
                   (double)grid * (double)(mib << 20) / (med * 1e-3) / 1e12);
        }
    return 0;
}
