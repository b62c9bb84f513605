/* Helpers shared by the CPU backends. */
#include "eval/cpu/cpu_common.h"

#include <math.h>
#include <stdlib.h>

#include <omp.h>

double pc_cpu_input_row(const pc_circuit *c, int32_t v, int32_t cat, double *rel) {
    const int32_t K = c->num_latents, C = c->num_cats;
    const double *p = c->input_logp + (size_t)v * K * C; /* [K, C] */
    for (int32_t k = 0; k < K; k++) {
        if (cat < C) {
            rel[k] = p[(size_t)k * C + cat];
        } else {
            /* Marginal: LSE over c of row k (0 for a normalised model, within 1e-3). */
            double m = -INFINITY, s = 0.0;
            for (int32_t i = 0; i < C; i++) m = fmax(m, p[(size_t)k * C + i]);
            if (m > -INFINITY)
                for (int32_t i = 0; i < C; i++) s += exp(p[(size_t)k * C + i] - m);
            rel[k] = m > -INFINITY ? m + log(s) : -INFINITY;
        }
    }
    double off = -INFINITY;
    for (int32_t k = 0; k < K; k++) off = fmax(off, rel[k]);
    for (int32_t k = 0; k < K; k++) rel[k] = off > -INFINITY ? rel[k] - off : 0.0;
    return off;
}

pc_isa pc_cpu_eval_isa(void) {
    pc_isa best = pc_cpu_best_isa(), asked;
    const char *name = getenv("PC_CPU_ISA");
    if (name && pc_isa_parse(name, &asked) == PC_OK && asked != PC_ISA_AUTO && asked < best)
        return asked;
    return best;
}

int pc_cpu_threads(int requested) {
    if (requested > 0) return requested;
    int n = omp_get_num_procs();
    return n > 0 ? n : 1;
}

int64_t pc_cpu_block_size(const pc_circuit *c, size_t bytes_per_value) {
    size_t per_sample = (size_t)c->num_groups * (size_t)c->num_latents * bytes_per_value;
    int64_t b = (int64_t)((1u << 20) / (per_sample > 0 ? per_sample : 1));
    return b < 1 ? 1 : b > 64 ? 64 : b;
}

int pc_cpu_thread_bufs_alloc(pc_cpu_thread_bufs *b, int threads, size_t scratch_bytes,
                             size_t num_offsets, size_t wide_bytes) {
    b->scratch = calloc((size_t)threads, sizeof *b->scratch);
    b->offsets = calloc((size_t)threads, sizeof *b->offsets);
    b->wide = calloc((size_t)threads, sizeof *b->wide);
    int ok = b->scratch && b->offsets && b->wide;
    for (int t = 0; ok && t < threads; t++) {
        b->scratch[t] = malloc(scratch_bytes);
        b->offsets[t] = malloc(num_offsets * sizeof(double));
        b->wide[t] = malloc(wide_bytes);
        ok = b->scratch[t] && b->offsets[t] && b->wide[t];
    }
    return ok;
}

void pc_cpu_thread_bufs_free(pc_cpu_thread_bufs *b, int threads) {
    for (int t = 0; t < threads; t++) {
        if (b->scratch) free(b->scratch[t]);
        if (b->offsets) free(b->offsets[t]);
        if (b->wide) free(b->wide[t]);
    }
    free(b->scratch);
    free(b->offsets);
    free(b->wide);
}

size_t pc_cpu_peak_device_bytes(const void *state) {
    (void)state;
    return 0;
}

void pc_cpu_run_blocks(void *state, pc_cpu_block_fn fn, int threads, int64_t block,
                       int32_t width, const uint8_t *x, const uint8_t *missing, int64_t n,
                       double *logp) {
    const int64_t nblocks = (n + block - 1) / block;
    if (threads > nblocks) threads = nblocks > 0 ? (int)nblocks : 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t i = 0; i < nblocks; i++) {
        const int64_t b0 = i * block, nb = n - b0 < block ? n - b0 : block;
        const size_t at = (size_t)b0 * (size_t)width;
        fn(state, omp_get_thread_num(), x + at, missing ? missing + at : NULL, nb, logp + b0);
    }
}
