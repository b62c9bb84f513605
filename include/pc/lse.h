/* pcinfer log-sum-exp library: row-wise LSE, the weighted form used by circuit sum layers, and
 * the backward (softmax) pass, on the CPU and on CUDA GPUs.
 *
 *   LSE(x) = log sum_i exp(x_i), natural log, one value per row of a [rows, cols] array whose
 *   rows start `stride` elements apart (stride >= cols).
 *
 * Kernels (docs/kernels.md has the details and measured accuracy):
 *   PC_LSE_REF   FP64 max-shift with a pairwise sum: the ground truth for every test.
 *   PC_LSE_FUSE  FP32, one pass, online (max, sum) with exp2 of a pre-scaled input, one log
 *                per row. Inputs: f32, f16, bf16 (FP32 math).
 *   PC_LSE_INT   IntLSE: base-2 Q16.16 fixed point, pairwise LSE with integer adds, shifts and
 *                an interpolated correction table (src/lse/lse_int.h), combined as a tree.
 *                Inputs: f32 (shifted by the row max before conversion, so any finite input
 *                works) and q10.6.
 *
 * Input types (pc_dtype):
 *   PC_F32    float
 *   PC_F16    IEEE half, stored as uint16_t
 *   PC_BF16   bfloat16, stored as uint16_t
 *   PC_Q10_6  int16_t fixed point holding a BASE-2 logarithm with 6 fraction bits:
 *             x = q / 64 * ln 2 nats, range [-512, 512) in log2 units.
 *             INT16_MIN stands for -inf (log 0); every other value is finite.
 *
 * Edge cases, identical in every kernel, input type and path:
 *   cols == 0 -> -inf; all -inf -> -inf; -inf elements contribute nothing; any NaN -> NaN;
 *   else any +inf -> +inf; finite values up to +-FLT_MAX never overflow.
 *
 * Every function checks its arguments and returns PC_ERR_ARG with a message naming the argument
 * (NULL pointer, negative size, stride < cols, unknown kernel or dtype, a kernel/dtype pair that
 * does not exist); outputs are untouched on error.
 */
#ifndef PC_LSE_H
#define PC_LSE_H

#include <stddef.h>
#include <stdint.h>

#include "pc/export.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pc_lse_kernel { PC_LSE_REF = 0, PC_LSE_FUSE = 1, PC_LSE_INT = 2 } pc_lse_kernel;

typedef enum pc_dtype { PC_F32 = 0, PC_F16 = 1, PC_BF16 = 2, PC_Q10_6 = 3 } pc_dtype;

/* Instruction set of the CPU paths. PC_ISA_AUTO picks the best one the CPU reports. */
typedef enum pc_isa { PC_ISA_AUTO = 0, PC_ISA_SCALAR = 1, PC_ISA_AVX2 = 2, PC_ISA_AVX512 = 3 } pc_isa;

/* Names as the tools spell them: "ref", "fuse", "int"; "f32", "f16", "bf16", "q10.6";
 * "auto", "scalar", "avx2", "avx512". Parsers return PC_ERR_ARG for an unknown name. */
PC_API const char *pc_lse_kernel_name(pc_lse_kernel kernel);
PC_API const char *pc_dtype_name(pc_dtype dtype);
PC_API const char *pc_isa_name(pc_isa isa);
PC_API pc_status pc_lse_kernel_parse(const char *name, pc_lse_kernel *kernel);
PC_API pc_status pc_dtype_parse(const char *name, pc_dtype *dtype);
PC_API pc_status pc_isa_parse(const char *name, pc_isa *isa);

/* Bytes per element of a dtype (4 or 2). */
PC_API size_t pc_dtype_size(pc_dtype dtype);

/* ------------------------------------------------------------------------------------------
 * CPU. All pointers are host pointers; calls are synchronous.
 * ------------------------------------------------------------------------------------------ */

/* The best instruction set this CPU supports (as reported by cpuid and the OS). */
PC_API pc_isa pc_cpu_best_isa(void);

/* Options of the CPU calls; NULL means { threads = 1, isa = PC_ISA_AUTO }.
 * threads <= 1 runs on the calling thread; more splits rows across OpenMP threads.
 * Asking for an isa the CPU lacks returns PC_ERR_UNSUPPORTED. */
typedef struct pc_lse_cpu_opts {
    int threads;
    pc_isa isa;
} pc_lse_cpu_opts;

/* out[r] = LSE(x[r, 0:cols]) for r < rows. x is [rows, stride] of `dtype`; out is [rows].
 * Kernel/dtype pairs: ref with any dtype; fuse with f32, f16, bf16; int with f32, q10.6. */
PC_API pc_status pc_lse_rows(pc_lse_kernel kernel, pc_dtype dtype, const void *x, int64_t rows,
                             int64_t cols, int64_t stride, float *out, const pc_lse_cpu_opts *opts);

/* The FP64 reference of pc_lse_rows for any dtype, with double output. */
PC_API pc_status pc_lse_rows_ref(pc_dtype dtype, const void *x, int64_t rows, int64_t cols,
                                 int64_t stride, double *out);

/* Weighted form (a circuit sum layer):
 *   out[b, j] = LSE_k ( w[j, k] + x[b, k] ),  b < batch, j < outs, k < ins.
 * w is [outs, ins] (row-major, contiguous), x is [batch, x_stride], out is [batch, outs]
 * (contiguous). fuse uses the exp-once form: shift x[b, :] by its max, exponentiate each x once,
 * multiply-add with exp(w), one log per output. int runs IntLSE pairwise over k. */
PC_API pc_status pc_lse_weighted(pc_lse_kernel kernel, const float *w, const float *x,
                                 int64_t batch, int64_t outs, int64_t ins, int64_t x_stride,
                                 float *out, const pc_lse_cpu_opts *opts);

/* The FP64 reference of pc_lse_weighted. */
PC_API pc_status pc_lse_weighted_ref(const float *w, const float *x, int64_t batch, int64_t outs,
                                     int64_t ins, int64_t x_stride, double *out);

/* Backward: grad[r, i] = exp(x[r, i] - lse[r]) (the softmax), given the saved lse[r] of the
 * forward pass; one fused pass. x is [rows, stride] f32, grad is [rows, grad_stride] f32
 * (grad_stride >= cols); a row whose lse is -inf or NaN gets NaN. */
PC_API pc_status pc_lse_backward(const float *x, const float *lse, int64_t rows, int64_t cols,
                                 int64_t stride, float *grad, int64_t grad_stride,
                                 const pc_lse_cpu_opts *opts);

/* ------------------------------------------------------------------------------------------
 * CUDA. Pointers named d_* are device pointers; calls are asynchronous on `stream` (NULL is the
 * legacy default stream) and return once the work is queued. Argument errors are found before
 * anything is queued. Every call runs on the calling thread's current CUDA device, which must
 * hold the pointers and the stream. In a build without CUDA every call returns
 * PC_ERR_UNSUPPORTED (pc_cuda_available() in pc/cuda.h returns 0).
 * ------------------------------------------------------------------------------------------ */

typedef struct CUstream_st *pc_stream; /* the same type as cudaStream_t */

/* Row-wise LSE on the GPU, same contract as pc_lse_rows (ref is not offered on the GPU).
 * Scratch (CUB style): with d_scratch == NULL the call only stores the bytes it needs in
 * *scratch_bytes and returns PC_OK; otherwise d_scratch must hold *scratch_bytes bytes of
 * device memory that stays untouched by others until the queued work finishes. The shape
 * decides the mapping (sub-warp, warp, block, or several blocks per row); no recompilation. */
PC_API pc_status pc_lse_rows_cuda(pc_lse_kernel kernel, pc_dtype dtype, const void *d_x,
                                  int64_t rows, int64_t cols, int64_t stride, float *d_out,
                                  void *d_scratch, size_t *scratch_bytes, pc_stream stream);

/* Weighted form on the GPU, same contract as pc_lse_weighted (kernels fuse and int). */
PC_API pc_status pc_lse_weighted_cuda(pc_lse_kernel kernel, const float *d_w, const float *d_x,
                                      int64_t batch, int64_t outs, int64_t ins, int64_t x_stride,
                                      float *d_out, pc_stream stream);

/* Backward on the GPU, same contract as pc_lse_backward. */
PC_API pc_status pc_lse_backward_cuda(const float *d_x, const float *d_lse, int64_t rows,
                                      int64_t cols, int64_t stride, float *d_grad,
                                      int64_t grad_stride, pc_stream stream);

#ifdef __cplusplus
}
#endif

#endif
