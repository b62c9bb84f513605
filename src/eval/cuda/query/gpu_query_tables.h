/* The host side of the GPU queries' tables (internal; plain C): built once per evaluator on a
 * query's first call, uploaded, then freed. The MPE and sampling tables are the CPU queries'
 * own (src/eval/query/query_tables.c), so that the GPU's MPE adds the same numbers and its
 * samplers search the same cumulative sums; the sum-product ones are laid out for the GPU.
 * Every array is malloc'ed; free them with free(), also after a failure (which leaves the
 * arrays it did not get NULL). */
#ifndef PC_GPU_QUERY_TABLES_H
#define PC_GPU_QUERY_TABLES_H

#include <stdint.h>

#include "pc/circuit.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MPE: in [V][C + 1][K] input_logp[v, k, c] (row C: max_c), w_t [T][K (k)][K (j)]
 * trans_logw[t, j, k], arg [V][K] the lowest argmax_c input_logp[v, k, c]. */
typedef struct pc_gpu_query_mpe_tables {
    double *in, *w_t;
    uint8_t *arg;
} pc_gpu_query_mpe_tables;

/* Sampling: x_cdf [V][K][C] cumulative p(X_v = c | Z = k), root_cdf [K], prior_cdf [G][K][K]
 * cumulative p(Z_g = k | Z_parent(g) = j) at [g][j][k] (from the upward pass with every
 * variable missing). */
typedef struct pc_gpu_query_sampling_tables {
    double *x_cdf, *root_cdf, *prior_cdf;
} pc_gpu_query_sampling_tables;

/* Sum-product in FP64: in [V][C + 1][K] input_logp[v, k, c] (row C: LSE_c, the input term of
 * a missing value), wexp [T][K (j)][K (k)] exp(trans_logw[t, j, k]) and wexp_t the same at
 * [t][k][j], root_exp [K] exp(root_logw). */
typedef struct pc_gpu_query_sp_tables {
    double *in, *wexp, *wexp_t, *root_exp;
} pc_gpu_query_sp_tables;

pc_status pc_gpu_query_mpe_tables_make(const pc_circuit *c, pc_gpu_query_mpe_tables *t);
pc_status pc_gpu_query_sampling_tables_make(const pc_circuit *c, pc_gpu_query_sampling_tables *t);
pc_status pc_gpu_query_sp_tables_make(const pc_circuit *c, pc_gpu_query_sp_tables *t);
/* cond [V][K][C] = p(X_v = c | Z_v = k) = exp(input_logp[v, k, c] - LSE_c'), as double. */
pc_status pc_gpu_query_cond_table_make(const pc_circuit *c, double **cond);

#ifdef __cplusplus
}
#endif

#endif
