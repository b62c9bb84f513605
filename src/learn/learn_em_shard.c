/* Data-parallel EM: the sums over processes of a step's counts (pc_em_set_shard).
 *
 * Each process counts the rows of its run of 32-row chunks. Counts are 64-bit fixed point and
 * a chunk's contribution does not depend on which process computes it, so their integer sum
 * over the processes equals one process's counts exactly, whatever `ranks` and whatever order
 * the sum adds in. Two sums per step: first [failures, touched (v, c) input rows], so that
 * every process fails alike and learns which input rows any process touched (a mini-batch
 * touches a few percent of the V x C rows); then [root, transitions, the touched input rows,
 * the chunks' log-likelihood sums]. A chunk's sum is a double that exactly one process holds
 * (the others hold 0): its bits, summed as integers, arrive unchanged, and the total is taken
 * over the chunks in order, as in one process. */
#include <stdlib.h>
#include <string.h>

#include "base/fail.h"
#include "learn/cuda/em_gpu.h"
#include "learn/learn_em_internal.h"

pc_status pc_em_set_shard(pc_em *em, int rank, int ranks, pc_em_sum_fn sum, void *ctx) {
    if (!em) return pc_fail(PC_ERR_ARG, "EM shard: NULL state");
    if (ranks < 1 || rank < 0 || rank >= ranks)
        return pc_fail(PC_ERR_ARG, "EM shard: rank %d of %d", rank, ranks);
    if (ranks > 1 && !sum) return pc_fail(PC_ERR_ARG, "EM shard: %d ranks and no sum", ranks);
    if (em->gpu && ranks > 1 && !em->host_counts) {
        const int64_t k = em->num_latents, rows = (int64_t)em->num_vars * em->num_cats;
        const int64_t count = k + (int64_t)em->num_trans * k * k + rows * k;
        em->host_counts = malloc((size_t)count * sizeof(int64_t));
        em->host_touched = malloc((size_t)rows);
        if (!em->host_counts || !em->host_touched) {
            free(em->host_counts), free(em->host_touched);
            em->host_counts = NULL, em->host_touched = NULL;
            return pc_fail(PC_ERR_NOMEM, "EM shard: host copy of %lld counts", (long long)count);
        }
    }
    em->rank = rank, em->ranks = ranks, em->sum = sum, em->sum_ctx = ctx;
    return PC_OK;
}

/* GPU states: marks the input rows of positions [lo, hi) in touched (the CPU marks them as it
 * counts). */
static void mark_touched(const pc_em *em, const pc_data *data, const int64_t *rows, int64_t lo,
                         int64_t hi, uint8_t *touched) {
    const int64_t V = em->num_vars, C = em->num_cats;
    for (int64_t i = lo; i < hi; i++) {
        const int64_t r = rows ? rows[i] : i;
        const uint8_t *x = data->values + r * V;
        const uint8_t *miss = data->missing ? data->missing + r * V : NULL;
        for (int64_t v = 0; v < V; v++)
            if (!(miss && miss[v])) touched[v * C + x[v]] = 1;
    }
}

/* First sum, in buf [V C + 1]: failures and touched rows. Sets touched to the union of the
 * processes' and *union_rows to its count. */
static pc_status sum_touched(pc_em *em, pc_status local, uint8_t *touched, int64_t *buf,
                             int64_t *union_rows) {
    const int64_t rows = (int64_t)em->num_vars * em->num_cats;
    buf[0] = local != PC_OK;
    for (int64_t r = 0; r < rows; r++) buf[r + 1] = touched[r];
    const pc_status st = em->sum(em->sum_ctx, buf, rows + 1);
    if (st != PC_OK) return st;
    if (local != PC_OK) return local;
    if (buf[0] > 0)
        return pc_fail(PC_ERR_INTERNAL, "EM step: %lld other process(es) failed this step",
                       (long long)buf[0]);
    *union_rows = 0;
    for (int64_t r = 0; r < rows; r++) {
        touched[r] = buf[r + 1] > 0;
        *union_rows += touched[r];
    }
    return PC_OK;
}

/* Copies n int64 values between the counts and the buffer: out = 1 packs, 0 unpacks. */
static void move(int64_t *counts, int64_t *buf, int64_t n, int out) {
    if (out)
        memcpy(buf, counts, (size_t)n * sizeof *buf);
    else
        memcpy(counts, buf, (size_t)n * sizeof *buf);
}

/* Packs (out = 1) or unpacks (out = 0) the second sum's buffer. */
static void pack(const pc_em *em, const pc_em_counts *c, double *sums, int64_t chunks,
                 int64_t *buf, int out) {
    const int64_t k = em->num_latents, rows = (int64_t)em->num_vars * em->num_cats;
    const int64_t trans = (int64_t)em->num_trans * k * k;
    int64_t at = 0;
    move(c->root, buf + at, k, out), at += k;
    move(c->trans, buf + at, trans, out), at += trans;
    for (int64_t r = 0; r < rows; r++)
        if (c->touched[r]) move(c->input + r * k, buf + at, k, out), at += k;
    if (out)
        memcpy(buf + at, sums, (size_t)chunks * sizeof *sums);
    else
        memcpy(sums, buf + at, (size_t)chunks * sizeof *sums);
}

pc_status pc_em_shard_sum(pc_em *em, const pc_data *data, const int64_t *rows, int64_t lo,
                          int64_t hi, pc_status local, const pc_em_counts *counts, double *sums,
                          int64_t chunks) {
    const int64_t k = em->num_latents, rows_vc = (int64_t)em->num_vars * em->num_cats;
    const int64_t most = k + (int64_t)em->num_trans * k * k + rows_vc * k + chunks;
    /* one buffer for both sums, as large as the second can be: a process that cannot have it
     * fails before any sum (a tool then ends the whole run, as MPI programs do on an error) */
    int64_t *buf = malloc((size_t)(most > rows_vc + 1 ? most : rows_vc + 1) * sizeof *buf);
    if (!buf) return pc_fail(PC_ERR_NOMEM, "EM shard: %lld counts", (long long)most);
    if (em->gpu) {
        memset(counts->touched, 0, (size_t)rows_vc);
        if (local == PC_OK) mark_touched(em, data, rows, lo, hi, counts->touched);
    }
    int64_t union_rows = 0;
    pc_status st = sum_touched(em, local, counts->touched, buf, &union_rows);
    if (st == PC_OK) {
        const int64_t count = k + (int64_t)em->num_trans * k * k + union_rows * k + chunks;
        pack(em, counts, sums, chunks, buf, 1);
        st = em->sum(em->sum_ctx, buf, count);
        if (st == PC_OK) pack(em, counts, sums, chunks, buf, 0);
    }
    free(buf);
    return st;
}
