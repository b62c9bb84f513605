/* The plan of GPU EM (internal; plain C, so that CI tests it on machines without a GPU).
 *
 * GPU EM runs the compiled circuit (pc/circuit.h) layer by layer (on the fused path, group by
 * group in dependency order) over a pass of n <= chunk gathered rows, keeping every group's
 * values for the downward pass. Buffers, all of the compute type (float or double), row-major,
 * a group's block `chunk` rows apart:
 *   W [G - 1][K][K]  W_g[j][k] = p(Z_g = k | Z_parent = j), groups in circuit order
 *   E [G][chunk][K]  forward: e_g(b, k) = P_g(b, k) 2^-off_g(b), max_k in [0.5, 1); after a
 *                    fused downward pass: the posterior q_g(b, k) = p(Z_g = k | x_b)
 *   S [G - 1][chunk][K]  forward: the message s_g(b, j) = sum_k W_g[j][k] e_g(b, k);
 *                    downward: a_g(b, j) = q_parent(b, j) / s_g(b, j) (0 where s_g = 0); on
 *                    the fused path only for the tops of its paths, the others' in registers
 *   U [G][chunk][K]  (steps only) u_g(b, k) = sum_j a_g(b, j) W_g[j][k], then in place the
 *                    posterior q_g(b, k)
 *   F [G - 1][K][K]  (steps only) F_g[j][k] = sum_b a_g(b, j) e_g(b, k); the edge's expected
 *                    counts are W_g[j][k] F_g[j][k]
 * The root is the last group and alone in the last layer.
 *
 * One pass of steps (pc_em_plan_pass): forward, layer by layer from the leaves, the product of
 * each group (inputs times children's messages, scaled by a power of two; the root also gives
 * log p(x)) and one strided-batched GEMM per layer for its messages, S_g = E_g W_g^T; then
 * from the root down, per layer, the posterior GEMM U_g = A_g W_g and the posteriors
 * q_g = e_g u_g (the root: w e / sum w e) over U, which also turn every child's message into
 * its ratio a_c = q_g / s_c in place; last, one GEMM for the flows of every edge,
 * F_g = A_g^T E_g. E keeps e_g for it: per layer, the flow GEMMs of the MNIST tree's 23
 * two-group layers were [K, n] x [n, K] products too small to fill the GPU, and in FP32 they
 * took the downward pass to twice FP64's time. Each GEMM is described in cuBLAS's
 * column-major terms: a row-major [rows][K] block is a K x rows matrix with ld = K. */
#ifndef PC_LEARN_EM_PLAN_H
#define PC_LEARN_EM_PLAN_H

#include <stdint.h>

#include "pc/circuit.h"
#include "pc/hclt.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pc_em_buf {
    PC_EM_BUF_W,
    PC_EM_BUF_E,
    PC_EM_BUF_S,
    PC_EM_BUF_U,
    PC_EM_BUF_F
} pc_em_buf;
#define PC_EM_BUFS 5

/* Threads of a block of the row kernels. */
#define PC_EM_ROW_THREADS 256
/* Small K (<= 16) runs each direction of a pass as one persistent launch (em_fused.cuh) instead
 * of products, GEMMs and posteriors per layer: its items are (path, tile of rows), a path as
 * below, a tile iter subtiles of PC_EM_FUSED_ROWS rows (the FP64 tensor cores' 16-row tile),
 * one item to a warp, taken in dependency order from a ticket counter, each waiting on the
 * counters of the items it reads. A downward item leaves its tile's flows in
 * P [G - 1][tiles][K][K] (FP64), which the pass's end sums in tile order. iter grows with the pass's
 * rows so that a layer of average width has about PC_EM_FUSED_ITEMS (group, tile) pairs: few
 * rows an item keep the tree's critical path (42 layers up, 42 down for MNIST) short, more keep
 * P small (4,096: one subtile a tile up to ~5,000 rows on the MNIST tree; H200, K = 16, FP64
 * step at 4,096 rows: 1.16 ms against 1.38 with 2,048, whose tiles of 2 subtiles made too few
 * items). It depends on the model and n only, not on the GPU or the schedule, so the sums'
 * order does not either. Why one launch: launched a layer at a time (and the narrow layers a
 * chain at a time, as on the GEMM path), the step at K = 16 on an H200 took 0.606 ms at batch
 * 512 (FP64), 0.843 at 1,024 and 2.340 at 4,096; the layers' launches and their tails were 81 %
 * of it at 512 (now 0.477, 0.558, 1.16). Up to K = 16 only: at K = 32 the cuBLAS path's step
 * was faster (H200, step ms fused per layer -> GEMMs: FP64 1.77 -> 1.35 at batch 512, 8.85 ->
 * 5.02 at 4096). */
#define PC_EM_FUSED_MAX_K 16
#define PC_EM_FUSED_ROWS 16
#define PC_EM_FUSED_MAX_ITER 8
#define PC_EM_FUSED_ITEMS 4096

/* Paths (fused path): a fused item is (path, tile), a path being a run of groups, bottom to top,
 * each above the bottom with one child, the group below, and at most PC_EM_PATH_MAX of them; the
 * root is a path of its own. A warp walks its path's groups with the messages (up) and the
 * ratios (down) handed on in registers, so only the bottom waits on other items up, and only
 * the top down: most HCLT groups have one child (387 of the MNIST model's 549 sum groups). The
 * paths are in increasing order of their tops, so a path's children's paths come before it. */
#define PC_EM_PATH_MAX 8

/* Chains (GEMM path): a run of at least two consecutive non-root layers of at most
 * PC_EM_CHAIN_WIDTH groups each runs as one forward and one downward launch instead of one per
 * layer. The MNIST tree's top is two long branches: 23 of its 42 layers hold two groups, each
 * layer's launches carrying a few rows of work that wait on dependent round trips to memory. A
 * chain's groups fall into strands, the connected pieces of the run under parent-child edges
 * (two strands there, one per branch): a block per (tile, strand) walks its strand's groups in
 * layer order, up or down, so each group's children in the run come before it in the forward
 * and its parent before it in the downward. Every group gives a thread the same rows and
 * states, so what a group leaves for the next in the strand is read back by the thread that
 * wrote it. */
#define PC_EM_CHAIN_WIDTH 2

/* The GEMM path takes the chains up to K = PC_EM_STEP_CHAIN_MAX_K and passes of n rows with
 * n K <= PC_EM_STEP_CHAIN_MAX_ROW_STATES (em_chain.cuh): there a narrow layer costs two
 * launches up (products, a GEMM of two groups) and two down (a GEMM, posteriors), each a few
 * dependent round trips to memory. A chain's block keeps W_g in shared memory (K x K doubles,
 * 32 KB at K = 64) and gives a row to a warp (K / 32 states a lane), 8 rows a block; the flows
 * stay with the pass's one flow GEMM. H200, step ms, layers -> chain (FP64; FP32 alike):
 * K = 32: 1.08 -> 1.00 (n = 512), 1.46 -> 1.38 (1024), 2.28 -> 2.24 (2048), 3.98 -> 4.07
 * (4096); K = 64: 1.67 -> 1.64 (512), 2.42 -> 2.43 (1024; FP32 2.41 -> 2.38), 3.85 -> 4.04
 * (2048). Each block loads W_g for each of its groups, which more rows make the larger cost. */
#define PC_EM_STEP_CHAIN_MAX_K 64
#define PC_EM_STEP_CHAIN_MAX_ROW_STATES 65536

typedef struct pc_em_chain {
    int32_t l0, l1; /* layers [l0, l1) */
    int32_t s0, s1; /* strands [s0, s1) of the plan's strand lists */
} pc_em_chain;

typedef struct pc_em_plan {
    pc_circuit *circuit; /* owned */
    int32_t V, C, K, G, L;
    int32_t *var_group; /* [V] the group whose latent each variable has */
    int32_t *parent;    /* [G] each group's parent, -1 for the root */
    int64_t chunk;      /* rows per pass the buffers hold */
    int32_t num_chains;
    pc_em_chain *chains;    /* [num_chains] in layer order */
    int32_t *strand_start;  /* [strands + 1] CSR offsets into strand_groups */
    int32_t *strand_groups; /* each strand's groups in increasing order (children first) */
    int32_t num_paths;
    int32_t *path_start;  /* [num_paths + 1] CSR offsets into path_groups */
    int32_t *path_groups; /* [G] each path's groups, bottom to top */
    int32_t *path_of;     /* [G] the path of each group */
} pc_em_plan;

/* Compiles the model and derives the plan for passes of up to `chunk` rows. */
pc_status pc_em_plan_create(const pc_hclt *model, int64_t chunk, pc_em_plan **out);
void pc_em_plan_free(pc_em_plan *plan);

/* Elements of a buffer. */
int64_t pc_em_plan_elems(const pc_em_plan *plan, pc_em_buf buf);

/* The fused path: whether the plan takes it (K <= PC_EM_FUSED_MAX_K); lanes per row of the row
 * kernels (tw); subtiles per tile (iter) and tiles for a pass of n rows; the elements of P and
 * of the wavefront's counters (two tickets, then one counter per (path, tile)) for any pass of
 * up to `chunk` rows (0 when not fused). */
int pc_em_plan_fused(const pc_em_plan *plan);
int32_t pc_em_plan_lanes(const pc_em_plan *plan);
int32_t pc_em_plan_fused_iter(const pc_em_plan *plan, int64_t n);
int64_t pc_em_plan_tiles(const pc_em_plan *plan, int64_t n);
int64_t pc_em_plan_partial_elems(const pc_em_plan *plan, int64_t chunk);
int64_t pc_em_plan_wave_elems(const pc_em_plan *plan, int64_t chunk);

/* Whether a pass of n rows whose ops have the chain steps takes them: on the GEMM path only,
 * as PC_EM_STEP_CHAIN_MAX_K and _MAX_ROW_STATES say. */
int pc_em_plan_chained(const pc_em_plan *plan, int fused, int64_t n);

/* Device bytes GPU EM needs for passes of `chunk` rows in a compute type of `elem` bytes: the
 * buffers (without U and F on the fused path, with P and the counters), the parameters and
 * counts, offsets, gathered rows and log-likelihoods. */
double pc_em_plan_bytes(const pc_em_plan *plan, int64_t chunk, int elem);

/* C = op(A) op(B) + beta C, column-major, `batch` times with the given strides (elements);
 * a, b, c are element offsets into buffers buf_a, buf_b, buf_c. */
typedef struct pc_em_gemm {
    int trans_a, trans_b;
    int32_t m, n, k;
    pc_em_buf buf_a, buf_b, buf_c;
    int64_t a, b, c;
    int32_t lda, ldb, ldc;
    int64_t stride_a, stride_b, stride_c;
    int32_t batch;
    double beta;
} pc_em_gemm;

/* Where a pass leaves the posteriors q_g: in E after a fused pass, in U after one of steps. */
static inline pc_em_buf pc_em_plan_posteriors(int fused) {
    return fused ? PC_EM_BUF_E : PC_EM_BUF_U;
}

/* The steps of a pass, done by an executor (the CUDA one, or a CPU one in the tests). */
typedef struct pc_em_ops {
    void *ctx;
    /* Products of groups [g0, g1) of one layer over n rows (the root also writes log p(x)). */
    pc_status (*product)(void *ctx, int64_t n, int32_t g0, int32_t g1);
    pc_status (*gemm)(void *ctx, const pc_em_gemm *op);
    /* Posteriors of groups [g0, g1) of one layer into U, children's ratios in place. */
    pc_status (*posterior)(void *ctx, int64_t n, int32_t g0, int32_t g1);
    /* The fused path, both or neither: the whole pass's products and messages (forward), and
     * its flows, posteriors and children's ratios (downward), in place of the three above;
     * the executor orders the groups (children first up, parents first down). */
    pc_status (*forward)(void *ctx, int64_t n);
    pc_status (*downward)(void *ctx, int64_t n);
    /* Optional (NULL: layer by layer): a whole chain of the plan, up or down; on the GEMM path
     * what the layers' products, GEMMs and posteriors do but the flows (em_plan.h). */
    pc_status (*forward_chain)(void *ctx, int64_t n, int32_t chain);
    pc_status (*downward_chain)(void *ctx, int64_t n, int32_t chain);
} pc_em_ops;

/* The batched GEMM of non-root groups [g0, g1) of a pass of n rows: which = 0 the messages
 * S = E W^T and 2 the downward U = A W (one layer's groups), 1 the flows F = A^T E. */
pc_em_gemm pc_em_plan_gemm(const pc_em_plan *plan, int64_t n, int32_t g0, int32_t g1, int which);

/* What a pass runs: the forward (up to log p(x)) and the downward step (posteriors, ratios and
 * what the flows read); a benchmark times them apart. */
#define PC_EM_PASS_FORWARD 1
#define PC_EM_PASS_DOWNWARD 2

/* Runs the `phases` of one pass over n (1 <= n <= chunk) gathered rows through ops: forward and
 * downward once each when ops has them, else products, GEMMs and posteriors per layer (per
 * chain where ops has the chain steps and pc_em_plan_chained says so), and the flows' GEMM
 * last. */
pc_status pc_em_plan_pass(const pc_em_plan *plan, int64_t n, int phases, const pc_em_ops *ops);

/* The model's parameters as probabilities in the plan's layouts: root [K]; trans [G - 1][K][K]
 * by group; input [V][C + 1][K], whose row C (a missing value) is all ones. */
void pc_em_plan_pack(const pc_em_plan *plan, const pc_hclt *model, double *root, double *trans,
                     double *input);
/* The inverse: natural logs into model (same shape and structure as the plan's). */
void pc_em_plan_unpack(const pc_em_plan *plan, const double *root, const double *trans,
                       const double *input, pc_hclt *model);

#ifdef __cplusplus
}
#endif

#endif
