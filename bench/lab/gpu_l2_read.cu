/* How fast the GPU's SMs can read a buffer that stays in L2, the way the tile strategy reads
 * exp(w): every block reads the whole buffer once (16-byte loads, 512 threads), each block
 * starting at its own offset so that the blocks spread over the buffer. Per buffer of 2, 8 and
 * 32 MiB and 1, 2 or 4 blocks per SM: the median time of 20 launches after 3 and the bytes the
 * SMs read per second.
 *
 * Variants (loads per thread issued before their sum, unrolled; the compiler keeps about 4 of
 * them in flight):
 *   1  4 loads      2  8 loads      3  16 loads
 * Before each point is timed, every block's sum of what it read (per-thread FP32 sums of small
 * integers, exact) must equal the buffer's sum in double.
 *
 *   usage: gpu_l2_read VARIANT|all   (a markdown table on stdout)
 * Results: bench/notebook/steps/gpu_circuit_h200/112_h200_l2_read.txt and 115_h200_l2_read.txt
 * (the thirteenth round: why every tile block reading all of exp(w) from L2 costs it little). */
#include "common.h"

#define THREADS 512

static const char *const variants[] = {"4 loads per thread before their sum",
                                       "8 loads per thread before their sum",
                                       "16 loads per thread before their sum"};

/* buf: n quads, n a power of two and a multiple of THREADS x IN_FLIGHT; out: one float per
 * thread, its sum of what it read. */
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
    out[(size_t)blockIdx.x * THREADS + threadIdx.x] = acc;
}

/* Small integers, so that every per-thread FP32 sum is exact. */
static __host__ __device__ float4 quad(size_t i) {
    return make_float4((float)(i & 3), (float)((i >> 2) & 3), 1.0f, 0.0f);
}

static __global__ void fill(float4 *buf, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        buf[i] = quad(i);
}

typedef void (*kernel)(const float4 *, size_t, float *);

/* Every block reads each of the n quads once, whatever its start: its threads' sums add up to
 * the sum of the n quads. */
static void check(kernel k, int grid, const float4 *buf, size_t n, float *out, const char *what) {
    lab_poison(out, (size_t)grid * THREADS);
    k<<<grid, THREADS>>>(buf, n, out);
    LAB_CUDA_CHECK(cudaGetLastError());
    double *sums = lab_to_host(out, (size_t)grid * THREADS);
    double want = 0.0, *ref = (double *)lab_malloc(sizeof(double) * grid);
    for (size_t i = 0; i < n; i++) {
        const float4 q = quad(i);
        want += (double)q.x + q.y + q.z + q.w;
    }
    for (int b = 0; b < grid; b++) {
        double s = 0.0;
        for (int t = 0; t < THREADS; t++) s += sums[(size_t)b * THREADS + t];
        sums[b] = s, ref[b] = want;
    }
    lab_check(what, ref, sums, grid, 0.0, 0.0);
    free(sums), free(ref);
}

int main(int argc, char **argv) {
    int first, last;
    lab_pick(argc, argv, variants, 3, &first, &last);
    const cudaDeviceProp prop = lab_device();
    const int sms = prop.multiProcessorCount;
    const size_t most = (size_t)32 << 20;
    float4 *buf = nullptr;
    float *out = nullptr;
    LAB_CUDA_CHECK(cudaMalloc(&buf, most));
    LAB_CUDA_CHECK(cudaMalloc(&out, sizeof(float) * 4 * sms * THREADS));
    fill<<<1024, 256>>>(buf, most / sizeof(float4));
    LAB_CUDA_CHECK(cudaGetLastError());
    const kernel kernels[] = {read_all<4>, read_all<8>, read_all<16>};
    printf("| variant | MiB per block | blocks | ms (median of 20) | TB/s read by the SMs |\n"
           "|---|---|---|---|---|\n");
    for (int v = first; v <= last; v++)
        for (size_t mib : {2, 8, 32})
            for (int per_sm : {1, 2, 4}) {
                const size_t n = (mib << 20) / sizeof(float4);
                const int grid = sms * per_sm;
                char what[96];
                snprintf(what, sizeof what, "%s, %zu MiB, %d blocks", variants[v - 1], mib, grid);
                check(kernels[v - 1], grid, buf, n, out, what);
                const double ms = lab_time_ms(
                    [&] { kernels[v - 1]<<<grid, THREADS>>>(buf, n, out); }, 3, 20);
                printf("| %d | %zu | %d | %.4f | %.2f |\n", v, mib, grid, ms,
                       (double)grid * (double)(mib << 20) / (ms * 1e-3) / 1e12);
            }
    LAB_CUDA_CHECK(cudaFree(buf));
    LAB_CUDA_CHECK(cudaFree(out));
    return 0;
}
