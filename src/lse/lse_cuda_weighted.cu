/* The weighted form of a circuit sum layer, out[b, j] = LSE_k (w[j, k] + x[b, k]), and the LSE
 * backward (softmax) on the GPU: pc_lse_weighted_cuda and pc_lse_backward_cuda.
 *
 * fuse (exp-once): a block owns a 64 x 64 tile of (b, j). It first finds the maxima mx[b] of
 * its x rows and mw[j] of its w rows, then streams k in tiles of 16, exponentiating each x and
 * w value once on its way into shared memory, and accumulates
 *     acc[b, j] = sum_k 2^((x[b,k] - mx[b]) log2e) * 2^((w[j,k] - mw[j]) log2e)
 * with one FFMA per (b, j, k) (a 4 x 4 register tile per thread). out = mx + mw + ln acc.
 * The product form drops terms whose factors underflow (below e^-87 each); they matter only
 * when acc itself is tiny, so an output with acc < 2^-60, or whose rows hold NaN or +-inf,
 * is recomputed exactly with the online (max, sum) over k. Results are then exact to FP32
 * rounding for every input the contract allows.
 *
 * int: a block owns a 16 x 16 tile, one output per thread; k streams through shared memory in
 * tiles of 32 and each thread adds chunks of 8 sums w + x to its IntLSE state (chunk max, tree
 * of 8, merge: the same arithmetic as the row kernels). */
#include "base/cuda_check.cuh"
#include "base/fail.h"
#include "lse/lse_cuda.cuh"
#include "pc/lse.h"

using namespace pclse;

namespace {

constexpr int kTile = 64, kTileK = 16, kPad = 4;
constexpr int kIntTile = 16, kIntTileK = 32;

/* Exact fallback of one output: online (max, sum) over k of w[j, k] + x[b, k]. */
__device__ float weighted_exact(const float *wj, const float *xb, int64_t ins) {
    FuseState st = fuse_init();
    for (int64_t k = 0; k < ins; k++) {
        float v[1] = {wj[k] + xb[k]};
        fuse_add<1>(st, v);
    }
    return fuse_final(st);
}

/* Max of one row of length n for a whole warp; `ok` = finite max and no NaN. */
__device__ void warp_row_max(const float *row, int64_t n, float *mx, int *ok) {
    float m = -INFINITY;
    int nan = 0;
    for (int64_t k = threadIdx.x % 32; k < n; k += 32) {
        float v = row[k];
        m = fmaxf(m, v);
        nan |= v != v;
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        nan |= __shfl_xor_sync(0xffffffffu, nan, off);
    }
    *mx = m;
    *ok = !nan && m > -INFINITY && m < INFINITY;
}

/* w is [outs, ins], x is [batch, x_stride], out is [batch, outs]. grid.x: batch tiles,
 * grid.y: output tiles (grid-stride). 256 threads: thread (ty, tx) = (tid / 16, tid % 16) owns
 * b = b0 + 4 ty + i, j = j0 + 4 tx + jj. */
__global__ void __launch_bounds__(256) weighted_fuse(const float *w, const float *x, int64_t batch, int64_t outs,
                                                     int64_t ins, int64_t x_stride, float *out) {
    __shared__ __align__(16) float ex[kTileK][kTile + kPad];
    __shared__ __align__(16) float ew[kTileK][kTile + kPad];
    __shared__ float smax[2 * kTile];
    __shared__ int sok[2 * kTile];
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16, warp = tid / 32;
    const int64_t b0 = (int64_t)blockIdx.x * kTile;
    const int64_t jtiles = (outs + kTile - 1) / kTile;
    for (int64_t jt = blockIdx.y; jt < jtiles; jt += gridDim.y) {
        const int64_t j0 = jt * kTile;
        /* rows 0..63: x[b0 + r], rows 64..127: w[j0 + r - 64] */
        for (int r = warp; r < 2 * kTile; r += 8) {
            const bool is_x = r < kTile;
            const int64_t idx = is_x ? b0 + r : j0 + r - kTile;
            float m = 0.0f;
            int ok = 0;
            if (idx < (is_x ? batch : outs))
                warp_row_max(is_x ? x + idx * x_stride : w + idx * ins, ins, &m, &ok);
            if (tid % 32 == 0) smax[r] = m, sok[r] = ok;
        }
        __syncthreads();
        float acc[4][4] = {};
        for (int64_t k0 = 0; k0 < ins; k0 += kTileK) {
            for (int e = tid; e < kTile * kTileK; e += 256) {
                const int r = e / kTileK, kk = e % kTileK;
                const int64_t k = k0 + kk;
                float vx = 0.0f, vw = 0.0f;
                if (k < ins && b0 + r < batch && sok[r])
                    vx = exp2f((x[(b0 + r) * x_stride + k] - smax[r]) * kLog2e);
                if (k < ins && j0 + r < outs && sok[kTile + r])
                    vw = exp2f((w[(j0 + r) * ins + k] - smax[kTile + r]) * kLog2e);
                ex[kk][r] = vx;
                ew[kk][r] = vw;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < kTileK; kk++) {
                const float4 a = *reinterpret_cast<const float4 *>(&ex[kk][4 * ty]);
                const float4 c = *reinterpret_cast<const float4 *>(&ew[kk][4 * tx]);
                const float av[4] = {a.x, a.y, a.z, a.w}, cv[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int jj = 0; jj < 4; jj++) acc[i][jj] = fmaf(av[i], cv[jj], acc[i][jj]);
            }
            __syncthreads();
        }
        /* Fully unrolled with guards (no break) so that acc stays in registers. */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int rb = 4 * ty + i;
            const int64_t b = b0 + rb;
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                const int rj = 4 * tx + jj;
                const int64_t j = j0 + rj;
                if (b >= batch || j >= outs) continue;
                float r;
                if (sok[rb] && sok[kTile + rj] && acc[i][jj] >= 0x1p-60f)
                    r = smax[rb] + smax[kTile + rj] + __log2f(acc[i][jj]) * kLn2;
                else
                    r = weighted_exact(w + j * ins, x + b * x_stride, ins);
                out[b * outs + j] = r;
            }
        }
        __syncthreads();
    }
}

/* IntLSE of the weighted form: thread (ty, tx) = (tid / 16, tid % 16) owns out[b0 + ty, j0 + tx].
 * k beyond ins is padded with -inf, which contributes nothing. */
__global__ void __launch_bounds__(256) weighted_int(const float *w, const float *x, int64_t batch, int64_t outs,
                                                    int64_t ins, int64_t x_stride, float *out,
                                                    const int32_t *d_table) {
    __shared__ int32_t table[PC_INT_TABLE_LEN];
    __shared__ float xs[kIntTile][kIntTileK + 1];
    __shared__ float ws[kIntTile][kIntTileK + 1];
    load_table(table, d_table);
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int64_t b0 = (int64_t)blockIdx.x * kIntTile;
    const int64_t jtiles = (outs + kIntTile - 1) / kIntTile;
    for (int64_t jt = blockIdx.y; jt < jtiles; jt += gridDim.y) {
        const int64_t j0 = jt * kIntTile;
        IntState st = int_init();
        for (int64_t k0 = 0; k0 < ins; k0 += kIntTileK) {
            for (int e = tid; e < kIntTile * kIntTileK; e += 256) {
                const int r = e / kIntTileK, kk = e % kIntTileK;
                const int64_t k = k0 + kk;
                xs[r][kk] = k < ins && b0 + r < batch ? x[(b0 + r) * x_stride + k] : -INFINITY;
                ws[r][kk] = k < ins && j0 + r < outs ? w[(j0 + r) * ins + k] : -INFINITY;
            }
            __syncthreads();
#pragma unroll
            for (int kc = 0; kc < kIntTileK; kc += 8) {
                float z[8];
#pragma unroll
                for (int i = 0; i < 8; i++) z[i] = ws[tx][kc + i] + xs[ty][kc + i];
                int_add<8>(st, z, table);
            }
            __syncthreads();
        }
        if (b0 + ty < batch && j0 + tx < outs) out[(b0 + ty) * outs + j0 + tx] = int_final(st);
    }
}

/* grad[r, c] = exp(x[r, c] - lse[r]); a row whose lse is -inf or NaN gets NaN. Block (tpr, 256 /
 * tpr): tpr threads per row, grid-stride in both directions. */
__global__ void __launch_bounds__(256) backward_rows(const float *x, const float *lse, int64_t rows, int64_t cols,
                                                     int64_t stride, float *grad, int64_t grad_stride) {
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += (int64_t)gridDim.y * blockDim.y) {
        const float l = lse[r];
        const bool bad = !(l > -INFINITY);
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols;
             c += (int64_t)gridDim.x * blockDim.x)
            grad[r * grad_stride + c] = bad ? NAN : exp2f((x[r * stride + c] - l) * kLog2e);
    }
}

} // namespace

extern "C" pc_status pc_lse_weighted_cuda(pc_lse_kernel kernel, const float *d_w, const float *d_x, int64_t batch,
                                          int64_t outs, int64_t ins, int64_t x_stride, float *d_out,
                                          pc_stream stream) {
    pc_status st = PC_OK;
    const int32_t *table = nullptr;
    cudaStream_t s = (cudaStream_t)stream;
    dim3 grid;
    if (kernel != PC_LSE_FUSE && kernel != PC_LSE_INT)
        return pc_fail(PC_ERR_ARG, "pc_lse_weighted_cuda: kernel %s is not offered on the GPU (fuse, int)",
                       pc_lse_kernel_name(kernel));
    if (batch < 0 || outs < 0 || ins < 0)
        return pc_fail(PC_ERR_ARG, "pc_lse_weighted_cuda: negative size (batch %lld, outs %lld, ins %lld)",
                       (long long)batch, (long long)outs, (long long)ins);
    if (x_stride < ins)
        return pc_fail(PC_ERR_ARG, "pc_lse_weighted_cuda: x_stride = %lld is less than ins = %lld",
                       (long long)x_stride, (long long)ins);
    if (batch > 0 && outs > 0 && !d_out) return pc_fail(PC_ERR_ARG, "pc_lse_weighted_cuda: d_out is NULL");
    if (outs > 0 && ins > 0 && !d_w) return pc_fail(PC_ERR_ARG, "pc_lse_weighted_cuda: d_w is NULL");
    if (batch > 0 && ins > 0 && !d_x) return pc_fail(PC_ERR_ARG, "pc_lse_weighted_cuda: d_x is NULL");
    if (batch == 0 || outs == 0) return PC_OK;
    if (kernel == PC_LSE_FUSE) {
        const int64_t bt = (batch + kTile - 1) / kTile, jt = (outs + kTile - 1) / kTile;
        if (bt > 0x7fffffff) return pc_fail(PC_ERR_ARG, "pc_lse_weighted_cuda: batch = %lld is too large", (long long)batch);
        grid = dim3((unsigned)bt, (unsigned)(jt < 65535 ? jt : 65535));
        weighted_fuse<<<grid, 256, 0, s>>>(d_w, d_x, batch, outs, ins, x_stride, d_out);
    } else {
        const int64_t bt = (batch + kIntTile - 1) / kIntTile, jt = (outs + kIntTile - 1) / kIntTile;
        if (bt > 0x7fffffff) return pc_fail(PC_ERR_ARG, "pc_lse_weighted_cuda: batch = %lld is too large", (long long)batch);
        st = pc_lse_cuda_table(&table);
        if (st != PC_OK) return st;
        grid = dim3((unsigned)bt, (unsigned)(jt < 65535 ? jt : 65535));
        weighted_int<<<grid, 256, 0, s>>>(d_w, d_x, batch, outs, ins, x_stride, d_out, table);
    }
    PC_CUDA_CHECK(cudaGetLastError());
fail:
    return st;
}

extern "C" pc_status pc_lse_backward_cuda(const float *d_x, const float *d_lse, int64_t rows, int64_t cols,
                                          int64_t stride, float *d_grad, int64_t grad_stride, pc_stream stream) {
    pc_status st = PC_OK;
    int tpr = 1;
    int64_t gx = 0, gy = 0;
    if (rows < 0 || cols < 0)
        return pc_fail(PC_ERR_ARG, "pc_lse_backward_cuda: negative size (rows %lld, cols %lld)", (long long)rows,
                       (long long)cols);
    if (stride < cols || grad_stride < cols)
        return pc_fail(PC_ERR_ARG, "pc_lse_backward_cuda: stride %lld or grad_stride %lld is less than cols %lld",
                       (long long)stride, (long long)grad_stride, (long long)cols);
    if (rows > 0 && !d_lse) return pc_fail(PC_ERR_ARG, "pc_lse_backward_cuda: d_lse is NULL");
    if (rows > 0 && cols > 0 && (!d_x || !d_grad))
        return pc_fail(PC_ERR_ARG, "pc_lse_backward_cuda: d_x or d_grad is NULL");
    if (rows == 0 || cols == 0) return PC_OK;
    while (tpr < 256 && tpr < cols) tpr *= 2;
    gx = (cols + tpr - 1) / tpr;
    gx = gx < 4096 ? gx : 4096;
    gy = (rows + 256 / tpr - 1) / (256 / tpr);
    gy = gy < 65535 ? gy : 65535;
    backward_rows<<<dim3((unsigned)gx, (unsigned)gy), dim3(tpr, 256 / tpr), 0, (cudaStream_t)stream>>>(
        d_x, d_lse, rows, cols, stride, d_grad, grad_stride);
    PC_CUDA_CHECK(cudaGetLastError());
fail:
    return st;
}
