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

/* The order in which the lane-layout block kernels (cpu-fuse, cpu) visit the groups, with node
 * values in recycled slots instead of one row per group: a post-order of the group tree whose
 * children come in decreasing order of the slots their subtrees need, so that every message
 * waits for its parent as briefly as possible. msg_g lives in slot[g] from its computation
 * until its parent has read it; num_slots is the most in use at once (5 for the MNIST HCLTs,
 * whose Chow-Liu trees are deep, about 40 levels, but narrow), so a block's node values take
 * num_slots x K x B values however many groups the circuit has. */
typedef struct pc_cpu_schedule {
    int32_t *order; /* [G] groups in evaluation order (the root last) */
    int32_t *slot;  /* [G] */
    int32_t num_slots;
} pc_cpu_schedule;

/* Fills s (0 when memory runs out; pc_cpu_schedule_free takes a zeroed or filled struct). */
int pc_cpu_schedule_make(const pc_circuit *c, pc_cpu_schedule *s);
void pc_cpu_schedule_free(pc_cpu_schedule *s);

/* Samples of a lane-layout block: a multiple of PC_CPU_LANE_BLOCK, as many as keep a thread's
 * scratch (bytes_per_sample each: slots and temporaries) within about 512 KiB (a quarter of
 * this machine class's L2), at most 4 x PC_CPU_LANE_BLOCK. */
#define PC_CPU_LANE_BLOCK 16
int64_t pc_cpu_lane_block_size(size_t bytes_per_sample);

/* Memory for a large table that the block kernels read at random rows (the input relatives:
 * 13 MB at K = 16, 52 MB at K = 64; their FP64 offsets, 1.6 MB): 64-byte aligned, so rows
 * start on cache lines, and from 1 MiB up in whole 2 MiB huge pages where the system has them,
 * since with 4 KiB pages nearly every row read would miss the TLB. free()d as usual; NULL when memory runs out. */
void *pc_cpu_alloc_table(size_t bytes);

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
