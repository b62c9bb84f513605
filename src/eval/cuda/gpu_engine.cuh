/* The GPU circuit engine shared by the fuse, int and gemm backends (internal).
 *
 * Message format. Every sum node group g (all groups but the root) sends its parent
 *     msg_g(j) = off_g[b] + rel_g[b, j]
 * with off_g in FP64 ([slots][chunk]) and rel_g in FP32 ([slots][chunk][K]). The product layer
 * of a group splits into an FP64 part and a part near 0:
 *     P_g(b, k) = O(b) + p(b, k),  O(b) = sum_c off_c[b]                  (FP64),
 *     p(b, k)   = sum_v input[v, x_bv, k] + sum_c rel_c[b, k]   (summed in FP64, kept in FP32),
 * and the sum layer shifts by m(b) ~ max_k p(b, k), so FP32 only holds numbers near 0 and the
 * magnitudes (~ -700 nats for an MNIST image) stay in FP64:
 *     msg_g(j) = (O(b) + m(b)) + log sum_k exp(w[j, k]) exp(p(b, k) - m(b)).
 *
 * Memory reuse. A message lives in a slot only until its parent has read it (gpu_plan.h). The
 * persistent kernels honour the slots' waits through counters done[g][tile] (a tile of bm
 * samples), the tile kernel through flags in shared memory, the layered (gemm) path by running
 * layers in order.
 *
 * Shape of the engine. A backend is a pc_gpu_impl: a strategy with a state of its own
 * (s->strategy) over this common core, which holds the plan, the parameters every kernel reads
 * (input rows, root weights), the message slots, the staging buffers and the CUDA graphs, one
 * per (batch size, buffer, mask or not). Batches stream through pinned buffers on two streams
 * (copies on one, the graph on the other), so that the next chunk's upload overlaps compute.
 *
 * Device. An evaluator runs on the calling thread's current device at its creation
 * (cudaGetDevice), which it remembers and makes current around each of its calls. */
#ifndef PC_GPU_ENGINE_CUH
#define PC_GPU_ENGINE_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "base/cuda_check.cuh"
#include "eval/backend.h"
#include "eval/cuda/gpu_plan.h"
#include "eval/cuda/tuning/gpu_tuning.h"
#include "pc/status.h"

/* Everything a kernel reads, by value (device pointers): the common fields and each
 * strategy's own, which its enqueue fills (NULL elsewhere). One layout for every kernel, in
 * this order: kernels take it by value from the constant bank, and ptxas allocates their
 * registers by where each field lies (a layout per strategy cost spills, tuning.md#args). */
struct pc_gpu_args {
    const pc_gpu_group *groups; /* [G] */
    const int32_t *vars;        /* [V] */
    const int32_t *children;    /* [G - 1] child group ids */
    const int32_t *child_slot;  /* [G - 1] their slots */
    const float *input;         /* [V][C + 1][K]; row C is the marginal (missing value) */
    const float *wexp;          /* persistent: [G][K][K] exp(trans_logw[t_g, j, k]) at [g][k][j] */
    const float *wf;            /* warp: [G][KP][KP] exp(trans_logw), PC_GPU_W_ROWS */
    const float *wt;            /* tile: [G][KP / 4][KP][4] exp(trans_logw), PC_GPU_W_QUADS */
    const int32_t *wq;          /* int: [G][K][K] Q16.16 base-2 trans_logw at [g][k][j] */
    const int32_t *table;       /* int: [PC_INT_TABLE_LEN] IntLSE correction table */
    const double *root_logw;    /* [K] */
    const int32_t *chain_begin;  /* warp: [chains + 1] the pass's chain plan (gpu_chains.h) */
    const int32_t *chain_groups; /* warp: [G] */
    const int32_t *chain_child;  /* warp: [G - 1] chain (= slot) of each child entry */
    const int32_t *chain_vb;     /* warp: [G + 1] chain_groups[m]'s variables: chain_vars[vb[m]
                                    .. vb[m + 1]), so a chain's are contiguous */
    const int32_t *chain_vars;   /* warp: [V] the variables in chain order */
    const int32_t *chain_queue;  /* warp: [chains] the order the queue hands them out in */
    const float *in_lin;         /* warp: [V][C + 1][KP] exp(input - in_max), 0 past K */
    const double *in_max;        /* warp: [V][C + 1] max_k input[v][c][k] */
    const double *root_wexp;     /* warp: [KP] exp(root_logw), 0 past K */
    const uint8_t *x;           /* [n][V] */
    const uint8_t *missing;     /* [n][V] or NULL */
    double *off;                /* [slots][chunk] */
    float *rel;                 /* [slots][chunk][K] */
    double *logp;               /* [n] */
    int32_t *done;              /* [G][tiles] the persistent kernels' counters per (group, tile) */
    int32_t *queue;             /* next work item of the persistent kernels */
    int64_t chunk;              /* samples per slot row block */
    int32_t n;                  /* samples in this forward */
    int32_t V, C, K, G;
    int32_t tiles, jtiles;      /* batch tiles of bm samples in n; jtiles unused (layout) */
};

struct pc_gpu_state;

/* A backend's strategy. Every hook but plan may be called on a state whose configure failed
 * part of the way (release then frees what there is). */
struct pc_gpu_impl {
    pc_backend backend;
    /* The strategy a pass of n samples takes: "tile", "warp", "persistent" or "layered". */
    const char *(*strategy_for)(const pc_gpu_state *s, int64_t n);
    /* Creates s->strategy, checks that it takes the circuit (PC_ERR_UNSUPPORTED with a message
     * otherwise), sets its kernels' limits and s->bm, the samples per counter tile. */
    pc_status (*configure)(pc_gpu_state *s);
    /* Optional: message slots it needs beyond the plan's (raises s->num_slots). */
    pc_status (*plan)(pc_gpu_state *s);
    /* Device bytes of its own for chunks of `chunk` samples, before they are allocated. */
    size_t (*bytes)(const pc_gpu_state *s, int64_t chunk);
    /* Uploads its parameter forms and allocates its buffers (s->chunk is set). */
    pc_status (*upload)(pc_gpu_state *s);
    /* Queues one forward pass of a->n samples on `stream` (it is being captured as a graph),
     * including any counter resets the pass needs. */
    pc_status (*enqueue)(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream);
    /* Frees its device memory and s->strategy. */
    void (*release)(pc_gpu_state *s);
};

/* The device an evaluator runs on, queried once at its creation. */
struct pc_gpu_device {
    int id, sms;
    int max_smem; /* dynamic shared memory a block may opt into, bytes */
    int major, minor;
};

/* The plan and the parameters every kernel reads, on the device. */
struct pc_gpu_common {
    pc_gpu_group *groups;
    int32_t *vars, *children, *child_slot;
    float *input;
    double *root_logw;
    double *off; /* [slots][chunk] */
    float *rel;  /* [slots][chunk][K] */
    int32_t *done; /* [G * max_tiles + 1]: the last entry is the work queue */
};

/* Double-buffered staging: chunk i goes through buffer i % 2. */
struct pc_gpu_stage {
    uint8_t *d_x[2], *d_missing[2];
    double *d_logp[2];
    uint8_t *h_x[2], *h_missing[2]; /* pinned */
    double *h_logp[2];
    cudaStream_t compute, copy;
    cudaEvent_t ev_in[2], ev_out[2];
};

#define PC_GPU_GRAPHS 6

/* The CUDA graphs of forward passes, least recently used replaced. */
struct pc_gpu_graph {
    int64_t n;
    int buf, has_missing, used;
    const char *strategy;
    cudaGraphExec_t exec;
};
struct pc_gpu_graphs {
    pc_gpu_graph slot[PC_GPU_GRAPHS];
    int clock;
    const char *last_strategy; /* of the last pass run; NULL before any */
};

struct pc_gpu_state {
    const pc_gpu_impl *impl;
    void *strategy;               /* the impl's own state */
    const pc_gpu_tuning *tuning;  /* the device's table */
    pc_gpu_device dev;
    const pc_circuit *circuit;    /* the caller's, or `padded` */
    pc_circuit *padded;           /* fuse: the circuit with pc_gpu_fuse_states(K) states */
    int32_t V, C, K, G, num_slots;
    int64_t chunk;                /* samples per forward pass (internal batch) */
    int32_t bm;                   /* samples per counter tile */
    int32_t max_tiles;            /* tiles of a full chunk */
    pc_gpu_group *h_groups;       /* the plan on the host */
    pc_gpu_common d;
    pc_gpu_stage stage;
    pc_gpu_graphs graphs;
    size_t bytes, peak_bytes;
};

/* Device allocation that keeps the byte count; fails with PC_ERR_DEVICE_MEMORY naming `what`.
 * pc_gpu_release takes the bytes it was given back (NULL does nothing). */
pc_status pc_gpu_alloc(pc_gpu_state *s, void **ptr, size_t bytes, const char *what);
void pc_gpu_release(pc_gpu_state *s, void *ptr, size_t bytes);
/* Allocates `bytes` on the device at *dst and copies src there. */
pc_status pc_gpu_upload(pc_gpu_state *s, void **dst, const void *src, size_t bytes,
                        const char *what);

/* Sets fn's dynamic shared memory to smem and its resident grid (blocks per SM x SMs, at
 * least one per SM) for blocks of `threads`; PC_ERR_UNSUPPORTED naming `who` when smem plus
 * static_smem exceeds what a block may have. */
pc_status pc_gpu_kernel_grid(const pc_gpu_state *s, const void *fn, int threads, size_t smem,
                             size_t static_smem, const char *who, int32_t *grid);

/* The backend ops for a strategy (fuse, int, gemm and fuse's forced strategies). */
pc_status pc_gpu_create(const pc_gpu_impl *impl, const pc_circuit *circuit,
                        const pc_eval_opts *opts, void **state);
pc_status pc_gpu_evaluate(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                          double *logp);
size_t pc_gpu_peak_bytes(const void *state);
void pc_gpu_destroy(void *state);
#define PC_GPU_OPS(create_fn)                                                                  \
    {.create = (create_fn), .evaluate = pc_gpu_evaluate, .peak_device_bytes = pc_gpu_peak_bytes, \
     .destroy = pc_gpu_destroy}

/* Fills the common args of a forward pass of n samples from buffer `buf`. */
void pc_gpu_fill_args(const pc_gpu_state *s, int64_t n, int buf, int has_missing,
                      pc_gpu_args *a);

/* Queues the reset of the persistent kernels' counters for a forward pass described by a. */
pc_status pc_gpu_reset_counters(const pc_gpu_args *a, cudaStream_t stream);

/* exp(trans_logw) of every group, FP32 [G][K][K] at [g][k][j] (persistent fuse, gemm). */
size_t pc_gpu_wexp_bytes(const pc_gpu_state *s);
pc_status pc_gpu_upload_wexp(pc_gpu_state *s, float **dst);

/* exp(trans_logw) of every group as the fuse tile and warp kernels read it: FP32, padded to
 * KP = pc_gpu_kp(K, layout) (K <= 128: 16, 32, 64 or 128; in the warp kernel's rows layout
 * above 64 K rounded up to a multiple of 16), zero outside K x K (a padded j has no output, a
 * padded k no input) and for the root. PC_GPU_W_ROWS: [g][j][k] (warp: a lane reads 16-byte
 * words of an output's row); PC_GPU_W_QUADS: [g][k / 4][j][k % 4] (tile: lane j reads its
 * row's quads, so a warp's 32 lanes read 512 consecutive bytes where the rows layout would have
 * every lane read its own cache line). FP32 rather than FP64: half the bytes read from L2
 * (tuning.md#weights-fp32). */
enum pc_gpu_w_layout { PC_GPU_W_ROWS, PC_GPU_W_QUADS };
int pc_gpu_kp(int K, pc_gpu_w_layout layout);
size_t pc_gpu_padded_w_bytes(const pc_gpu_state *s, pc_gpu_w_layout layout);
pc_status pc_gpu_upload_padded_w(pc_gpu_state *s, pc_gpu_w_layout layout, float **dst);

#endif
