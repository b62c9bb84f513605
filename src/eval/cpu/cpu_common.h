/* Helpers shared by the CPU backends (ref, cpu-fuse, cpu): input rows split into an offset and
 * a relative part, thread counts, sample blocks, per-thread buffers, and the parallel driver
 * over blocks. */
#ifndef PC_LAYERS_CPU_COMMON_H
#define PC_LAYERS_CPU_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "pc/circuit.h"
#include "pc/lse.h"
#include "pc/status.h"

/* Input row of variable v for category cat (cat == C means "missing": LSE over the C
 * categories). Writes rel[k] = input_logp[v, k, cat] - off for k < K and returns
 * off = max_k input_logp[v, k, cat] in FP64. When every k is -inf, off = -inf and rel = 0, so
 * no NaN can arise from -inf - -inf. */
double pc_cpu_input_row(const pc_circuit *c, int32_t v, int32_t cat, double *rel);

/* Instruction set of the block kernels: the best this CPU has, or less when the environment
 * variable PC_CPU_ISA names one ("scalar", "avx2", "avx512"; tests use it to cover every
 * path). A name the CPU cannot run, or an unknown one, is ignored. */
pc_isa pc_cpu_eval_isa(void);

/* OpenMP threads to use: requested, or all cores when requested <= 0. */
int pc_cpu_threads(int requested);

/* Samples per block so that one block's node values (G x K x bytes_per_value per sample) stay
 * within about 1 MiB (half this machine class's L2): at least 1, at most 64. */
int64_t pc_cpu_block_size(const pc_circuit *c, size_t bytes_per_value);

/* Per-thread buffers of the block kernels that keep values relative to FP64 offsets (cpu-fuse,
 * cpu): for thread t, scratch[t] holds the node values msg [G, B, K] and the kernel's
 * temporaries, offsets[t] the offsets moff [G, B], wide[t] the product sums P [K]. The element
 * types are each kernel's own, hence void. */
typedef struct pc_cpu_thread_bufs {
    void **scratch;
    double **offsets;
    void **wide;
} pc_cpu_thread_bufs;

/* Allocates each of `threads` threads scratch_bytes, num_offsets doubles and wide_bytes; 0 when
 * memory runs out (what was had is then freed by pc_cpu_thread_bufs_free, which takes a
 * zeroed or partly filled struct). */
int pc_cpu_thread_bufs_alloc(pc_cpu_thread_bufs *b, int threads, size_t scratch_bytes,
                             size_t num_offsets, size_t wide_bytes);
void pc_cpu_thread_bufs_free(pc_cpu_thread_bufs *b, int threads);

/* peak_device_bytes of the CPU backends: they use no device memory. */
size_t pc_cpu_peak_device_bytes(const void *state);

/* Scores n samples block by block across `threads` OpenMP threads. fn(state, t, ...) scores
 * one block of nb <= block samples with thread t's scratch. Blocks cannot fail: data and
 * buffers are checked before. */
typedef void (*pc_cpu_block_fn)(void *state, int thread, const uint8_t *x,
                                const uint8_t *missing, int64_t nb, double *logp);
void pc_cpu_run_blocks(void *state, pc_cpu_block_fn fn, int threads, int64_t block,
                       int32_t width, const uint8_t *x, const uint8_t *missing, int64_t n,
                       double *logp);

#endif
