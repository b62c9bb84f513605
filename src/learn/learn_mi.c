/* Mutual information between every pair of variables, for the Chow-Liu tree.
 *
 * A full joint table over 256 x 256 values per pair would cost 64k counters per pair for
 * 300k pairs (MNIST); instead the values are quantised into at most B bins and each pair gets
 * a (B+1) x (B+1) table, the extra bin holding missing values, which are left out. The bins
 * follow the values the sampled rows use, not the model's category count: with at most B
 * distinct values each gets a bin of its own (0/1 data keeps both values apart even in a model
 * of 256 categories), else a value x in 0..hi falls into bin x * B / (hi + 1), hi the largest
 * value used (x * 16 / 256 for 8-bit images that reach 255). The binned data is stored column
 * by column [V, M] so a pair's counting pass streams two columns while its table stays in L1.
 * Pairs are independent, so the result does not depend on the thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fail.h"
#include "learn/learn_internal.h"
#include "pc/rng.h"
#include "pc/learn.h"

/* Four interleaved tables per pair: images repeat the same (bin, bin) pair (background pixels)
 * and a single table would serialise on the store-to-load of one counter. */
#define MI_LANES 4

/* Picks max_rows distinct rows (a partial Fisher-Yates shuffle) or all of them, in increasing
 * order so the gather reads memory forwards. Writes the row count to *m. */
static pc_status pick_rows(int64_t count, int64_t max_rows, uint64_t seed, int64_t **rows,
                           int64_t *m) {
    int64_t *idx = malloc((size_t)count * sizeof *idx);
    if (!idx)
        return pc_fail(PC_ERR_NOMEM, "mutual information: %lld row indices", (long long)count);
    for (int64_t i = 0; i < count; i++) idx[i] = i;
    int64_t take = (max_rows > 0 && max_rows < count) ? max_rows : count;
    if (take < count) {
        pc_rng state = {seed};
        for (int64_t i = 0; i < take; i++) {
            int64_t j = i + pc_rng_below(&state, count - i);
            int64_t t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
        /* back to increasing order: mark the chosen rows, then sweep */
        uint8_t *mark = calloc((size_t)count, 1);
        if (!mark) {
            free(idx);
            return pc_fail(PC_ERR_NOMEM, "mutual information: row marks");
        }
        for (int64_t i = 0; i < take; i++) mark[idx[i]] = 1;
        int64_t w = 0;
        for (int64_t i = 0; i < count; i++)
            if (mark[i]) idx[w++] = i;
        free(mark);
    }
    *rows = idx;
    *m = take;
    return PC_OK;
}

/* The bin of every value (lut [256]) from the observed values of the sampled rows (checked to
 * be below num_cats first): with at most num_bins distinct values, bin = the value's rank among
 * them and *bins_used = their count (at least 1); else bin = x * num_bins / (hi + 1), hi the
 * largest value, and *bins_used = num_bins. */
static pc_status bin_table(const pc_data *data, const int64_t *rows, int64_t m, int32_t num_cats,
                           int32_t num_bins, uint8_t *lut, int32_t *bins_used) {
    const int64_t width = data->width;
    uint8_t used[256] = {0};
    for (int64_t i = 0; i < m; i++) {
        const uint8_t *x = data->values + rows[i] * width;
        const uint8_t *miss = data->missing ? data->missing + rows[i] * width : NULL;
        for (int64_t v = 0; v < width; v++) {
            if (miss && miss[v]) continue;
            if (x[v] >= num_cats)
                return pc_fail(PC_ERR_DATA,
                               "mutual information: value %d at row %lld, variable %lld "
                               "is not below num_cats = %d",
                               x[v], (long long)rows[i], (long long)v, num_cats);
            used[x[v]] = 1;
        }
    }
    int32_t distinct = 0, hi = 0;
    for (int32_t x = 0; x < 256; x++)
        if (used[x]) {
            distinct++;
            hi = x;
        }
    if (distinct <= num_bins) {
        int32_t rank = 0;
        for (int32_t x = 0; x < 256; x++) lut[x] = (uint8_t)(used[x] ? rank++ : 0);
        *bins_used = distinct > 0 ? distinct : 1;
    } else {
        for (int32_t x = 0; x < 256; x++)
            lut[x] = (uint8_t)(x <= hi ? x * num_bins / (hi + 1) : num_bins - 1);
        *bins_used = num_bins;
    }
    return PC_OK;
}

/* MI of one pair from its (B+1)^2 table (row = bin of u, column = bin of v; bin B = missing). */
static double pair_mi(const uint32_t *table, int nb) {
    int stride = nb + 1;
    double row[65] = {0}, col[65] = {0}, total = 0;
    for (int a = 0; a < nb; a++)
        for (int b = 0; b < nb; b++) {
            double c = table[a * stride + b];
            row[a] += c;
            col[b] += c;
            total += c;
        }
    if (total <= 0) return 0;
    double mi = 0;
    for (int a = 0; a < nb; a++) {
        if (row[a] == 0) continue;
        for (int b = 0; b < nb; b++) {
            double c = table[a * stride + b];
            if (c > 0) mi += c * log(c * total / (row[a] * col[b]));
        }
    }
    mi /= total;
    return mi > 0 ? mi : 0; /* rounding can leave -1e-17 for independent columns */
}

pc_status pc_learn_mutual_info(const pc_data *data, int32_t num_cats, int32_t num_bins,
                               int64_t max_rows, uint64_t seed, double *mi) {
    if (!data || !mi || !data->values)
        return pc_fail(PC_ERR_ARG, "mutual information: NULL argument");
    if (data->count < 1 || data->width < 1)
        return pc_fail(PC_ERR_DATA, "mutual information: empty data (%lld rows, %d variables)",
                       (long long)data->count, data->width);
    if (num_cats < 2 || num_cats > 256)
        return pc_fail(PC_ERR_ARG, "mutual information: num_cats = %d is not in 2..256", num_cats);
    if (num_bins < 2 || num_bins > 64)
        return pc_fail(PC_ERR_ARG, "mutual information: num_bins = %d is not in 2..64", num_bins);
    const int64_t v_count = data->width;

    int64_t *rows = NULL, m = 0;
    pc_status st = pick_rows(data->count, max_rows, seed, &rows, &m);
    if (st != PC_OK) return st;
    uint8_t lut[256];
    st = bin_table(data, rows, m, num_cats, num_bins, lut, &num_bins);
    if (st != PC_OK) {
        free(rows);
        return st;
    }
    uint8_t *bins = malloc((size_t)(v_count * m));
    if (!bins) {
        free(rows);
        return pc_fail(PC_ERR_NOMEM, "mutual information: %lld x %lld binned values",
                       (long long)v_count, (long long)m);
    }
    for (int64_t i = 0; i < m; i++) {
        const uint8_t *x = data->values + rows[i] * v_count;
        const uint8_t *miss = data->missing ? data->missing + rows[i] * v_count : NULL;
        for (int64_t v = 0; v < v_count; v++)
            bins[v * m + i] = (miss && miss[v]) ? (uint8_t)num_bins : lut[x[v]];
    }
    free(rows);

    const int stride = num_bins + 1, cells = stride * stride;
    int oom = 0;
#pragma omp parallel
    {
        uint32_t table[MI_LANES * 65 * 65]; /* lane l holds cells [l * cells, (l + 1) * cells) */
        uint16_t *offs = malloc((size_t)m * sizeof *offs);
        if (!offs) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 4)
        for (int64_t u = 0; u < v_count; u++) {
            mi[u * v_count + u] = 0;
            if (!offs) continue;
            const uint8_t *bu = bins + u * m;
            for (int64_t i = 0; i < m; i++) offs[i] = (uint16_t)(bu[i] * stride);
            for (int64_t v = u + 1; v < v_count; v++) {
                const uint8_t *bv = bins + v * m;
                memset(table, 0, (size_t)(MI_LANES * cells) * sizeof table[0]);
                int64_t i = 0;
                for (; i + MI_LANES <= m; i += MI_LANES)
                    for (int l = 0; l < MI_LANES; l++) table[l * cells + offs[i + l] + bv[i + l]]++;
                for (; i < m; i++) table[offs[i] + bv[i]]++;
                for (int l = 1; l < MI_LANES; l++)
                    for (int c = 0; c < cells; c++) table[c] += table[l * cells + c];
                double value = pair_mi(table, num_bins);
                mi[u * v_count + v] = value;
                mi[v * v_count + u] = value;
            }
        }
        free(offs);
    }
    free(bins);
    if (oom) return pc_fail(PC_ERR_NOMEM, "mutual information: per-thread column buffer");
    return PC_OK;
}
