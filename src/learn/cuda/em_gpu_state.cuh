/* The state of GPU EM (internal to src/learn/cuda): em_gpu.cu creates it, uploads the
 * parameters and data and runs the M-step; em_gpu_pass.cu runs the passes (em_plan.h) as CUDA
 * graphs. */
#ifndef PC_LEARN_EM_GPU_STATE_CUH
#define PC_LEARN_EM_GPU_STATE_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "base/cuda_check.cuh"
#include "learn/cuda/em_blas.h"
#include "learn/cuda/em_gpu.h"
#include "learn/cuda/em_kernels.cuh"
#include "learn/cuda/em_plan.h"

/* Graphs of passes, one per (rows, source, mask or not), least recently used replaced. */
#define PC_EM_GRAPHS 4

typedef struct pc_em_graph {
    int64_t n;
    int staged, has_missing, used;
    cudaGraphExec_t exec;
} pc_em_graph;

/* Where a pass's rows come from: the attached copy (gathered by index) or the staging buffer
 * the host filled (rows in order). */
typedef struct pc_em_source {
    const uint8_t *values, *missing; /* device; missing NULL without a mask */
    const int64_t *rows;             /* device indices, NULL for rows in order */
} pc_em_source;

struct pc_em_gpu {
    pc_em_plan *plan;
    int f32;  /* compute type float (else double) */
    int elem; /* its bytes */
    int dev;  /* device id */
    cudaStream_t stream;
    const pc_em_blas *blas;
    cublasHandle_t handle;
    void *d_ws;
    /* structure: the circuit's CSR arrays, each variable's group, the plan's chains' strands,
     * each group's parent, the plan's paths (em_plan.h) */
    int32_t *d_var_start, *d_vars, *d_child_start, *d_children, *d_var_group;
    int32_t *d_strand_start, *d_strand_groups, *d_parent;
    int32_t *d_path_start, *d_path_groups, *d_path_of;
    /* FP64 parameters (em_plan.h layouts) and their copies in the compute type for the GEMM
     * path (the same arrays when the compute type is double or the path fused) */
    double *d_root, *d_trans, *d_input;
    void *d_trans_c, *d_input_c;
    /* fixed-point counts: root [K], trans [G - 1][K][K], input [V][C][K] */
    long long *d_n_root, *d_n_trans, *d_n_input;
    /* a pass's buffers; buf[PC_EM_BUF_W] is d_trans_c; the fused path (K <= 16) reads d_trans,
     * has no U and F but the tiles' flows P and the wavefront's tickets and counters */
    void *d_buf[PC_EM_BUFS];
    double *d_partial;
    int32_t *d_wave;
    int fused;
    int32_t *d_off;
    uint16_t *d_xc, *d_xct;
    double *d_logp, *d_scale;
    int64_t *d_rows;
    /* pinned host buffers for one pass */
    int64_t *h_rows;
    double *h_logp, *h_scale;
    /* the attached data, and what it was when attached */
    const pc_data *attached;
    int64_t attached_count;
    int32_t attached_width;
    const uint8_t *attached_values, *attached_missing;
    uint8_t *d_values, *d_missing;
    /* staging for data that is not attached: [chunk][V] */
    uint8_t *d_stage_values, *d_stage_missing, *h_stage_values, *h_stage_missing;
    /* the last pass, for pc_em_gpu_time_pass */
    int64_t last_n;
    int last_staged, last_missing;
    pc_em_graph graphs[PC_EM_GRAPHS];
    int clock;
};

/* Device allocation; PC_ERR_DEVICE_MEMORY naming `what`. */
pc_status pc_em_gpu_alloc(void **ptr, size_t bytes, const char *what);

/* Makes the state's device current; *prev gets the caller's. */
pc_status pc_em_gpu_enter(const pc_em_gpu *g, int *prev);
void pc_em_gpu_leave(const pc_em_gpu *g, int prev);

/* The kernels' arguments for a pass. */
pc_em_args pc_em_gpu_args(const pc_em_gpu *g);

/* Drops the captured graphs (they name buffers that are about to change). */
void pc_em_gpu_drop_graphs(pc_em_gpu *g);

#endif
