/* The state of the GPU queries of one evaluator (internal): its device, the plan and the
 * tables on the device (each uploaded on the first query that needs it), and the chunk
 * buffers. Made by the first query (pc_query_gpu_ops.create_with) on the device of the GPU
 * backend's state; gpu_query_state.cu builds it, gpu_query_ops.cu runs the queries. */
#ifndef PC_GPU_QUERY_STATE_CUH
#define PC_GPU_QUERY_STATE_CUH

#include <cuda_runtime.h>

#include "eval/cuda/query/gpu_query.cuh"
#include "pc/eval.h"

/* Double-buffered staging: chunk i goes through buffer i % 2, so the host fills one while the
 * device runs the other. Pinned host memory, so that the copies are asynchronous. */
struct pc_gq_stage {
    uint8_t *d_x[2], *d_missing[2], *d_out[2]; /* [chunk][V] */
    double *d_logp[2];                         /* [chunk] */
    uint8_t *h_x[2], *h_missing[2], *h_out[2];
    double *h_logp[2];
    cudaEvent_t done[2];
};

struct pc_gq_state {
    const pc_circuit *c;
    int device;
    pc_gq_launch launch;
    int32_t forced_rows;     /* > 0: samples per block of the tree kernels (benchmarks) */
    int64_t forced_piece;    /* > 0: rows per piece of an MPE or sampling call (benchmarks) */
    int64_t chunk;           /* samples per pass */
    int64_t cond_chunk;      /* samples per conditionals pass (their output buffer) */
    cudaStream_t stream;
    /* The plan (gpu_query_plan.h). */
    pc_gpu_query_group *groups;
    int32_t *layer_start, *vars, *children, *var_group, *var_draw;
    int32_t *range_start; /* [ranges + 1] the gather's ranges */
    int32_t ranges;
    /* Parameters: each set uploaded on first need (the ops below), then read-only. */
    double *logw, *root_logw;               /* [T][K][K], [K] */
    double *mpe_in, *mpe_logw_t;            /* MPE */
    uint8_t *mpe_arg;
    double *sp_in, *wexp, *wexp_t, *root_exp; /* sum-product */
    double *cond64;                         /* [V][K][C] conditionals' table, double */
    float *cond32;                          /* the same in float */
    double *x_cdf, *root_cdf, *prior_cdf;   /* samplers */
    /* Buffers of a chunk. */
    double *P, *M;      /* [chunk][G][K], on first need, with zarg and rank */
    uint16_t *zarg;     /* [chunk][G][K] */
    int32_t *rank;      /* [chunk][V] */
    int32_t *z, *draw;  /* [chunk][G] */
    unsigned long long *bad;
    void *probs;        /* [cond_chunk][V][C] doubles, on the first conditionals */
    pc_gq_stage stage;
};

/* pc_query_ops.create_with (backend_state: the GPU backend's pc_gpu_state) and destroy. */
pc_status pc_gq_create(const void *backend_state, const pc_circuit *c, const pc_eval_opts *opts,
                       void **state);
void pc_gq_destroy(void *state);

/* The parameter sets and buffers, each made once (PC_OK when already there). */
pc_status pc_gq_need_mpe(pc_gq_state *s);
pc_status pc_gq_need_sum_product(pc_gq_state *s);
pc_status pc_gq_need_cond(pc_gq_state *s, int f64);
pc_status pc_gq_need_sampling(pc_gq_state *s);
pc_status pc_gq_need_nodes(pc_gq_state *s);
pc_status pc_gq_need_probs(pc_gq_state *s);

/* Makes the state's device current; *prev gets the caller's, for pc_gq_leave. */
pc_status pc_gq_enter(const pc_gq_state *s, int *prev);
void pc_gq_leave(const pc_gq_state *s, int prev);

#endif
