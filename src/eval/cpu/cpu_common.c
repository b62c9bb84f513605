/* Helpers shared by the CPU backends. */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) */
#endif
#include "eval/cpu/cpu_common.h"

#include <math.h>
#include <stdlib.h>

#include <omp.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

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

int pc_cpu_schedule_make(const pc_circuit *c, pc_cpu_schedule *s) {
    const int32_t G = c->num_groups;
    s->order = malloc((size_t)G * sizeof *s->order);
    s->slot = malloc((size_t)G * sizeof *s->slot);
    s->num_slots = 0;
    int32_t *need = malloc((size_t)G * sizeof *need), *kids = malloc((size_t)G * sizeof *kids);
    int32_t *stack = malloc((size_t)G * sizeof *stack), *next = calloc((size_t)G, sizeof *next);
    int32_t *free_slots = malloc((size_t)G * sizeof *free_slots);
    int ok = s->order && s->slot && need && kids && stack && next && free_slots;
    /* need[g]: slots to compute msg_g; children come before parents in group order. Each
     * group's children are sorted by need, largest first (insertion sort: at most a few). */
    for (int32_t g = 0; ok && g < G; g++) {
        const int32_t c0 = c->child_start[g], n = c->child_start[g + 1] - c0;
        for (int32_t i = 0; i < n; i++) {
            int32_t ch = c->group_children[c0 + i], at = i;
            for (; at > 0 && need[kids[c0 + at - 1]] < need[ch]; at--) kids[c0 + at] = kids[c0 + at - 1];
            kids[c0 + at] = ch;
        }
        need[g] = 1;
        for (int32_t i = 0; i < n; i++)
            if (need[kids[c0 + i]] + i > need[g]) need[g] = need[kids[c0 + i]] + i;
    }
    /* Post-order from the root (the last group), children in that order; a group takes a slot
     * its children just gave back, or a new one. */
    int32_t depth = 0, done = 0, nfree = 0;
    if (ok && G > 0) stack[depth++] = G - 1;
    while (ok && depth > 0) {
        const int32_t g = stack[depth - 1], c0 = c->child_start[g];
        if (next[g] < c->child_start[g + 1] - c0) {
            stack[depth++] = kids[c0 + next[g]++];
            continue;
        }
        depth--;
        for (int32_t i = c0; i < c->child_start[g + 1]; i++) free_slots[nfree++] = s->slot[kids[i]];
        s->slot[g] = nfree > 0 ? free_slots[--nfree] : s->num_slots++;
        s->order[done++] = g;
    }
    free(need), free(kids), free(stack), free(next), free(free_slots);
    return ok;
}

void pc_cpu_schedule_free(pc_cpu_schedule *s) {
    free(s->order);
    free(s->slot);
}

int64_t pc_cpu_lane_block_size(size_t bytes_per_sample) {
    int64_t b = 4 * PC_CPU_LANE_BLOCK;
    while (b > PC_CPU_LANE_BLOCK && bytes_per_sample * (size_t)b > (512u << 10))
        b -= PC_CPU_LANE_BLOCK;
    return b;
}

void *pc_cpu_alloc_table(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes < huge / 2) return aligned_alloc(64, (bytes + 64) / 64 * 64); /* 0: one line */
    void *p = aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
#if defined(MADV_HUGEPAGE)
    if (p) madvise(p, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE); /* a hint: may fail */
#endif
    return p;
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
