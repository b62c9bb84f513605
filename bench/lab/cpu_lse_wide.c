/* Times the CPU weighted form (fuse) and the backward pass on inputs of U(lo, 0), one thread,
 * for each instruction set: the two forms lsebench does not time. Used by cpu_lse_wide.sh.
 *
 *   cpu_lse_wide LABEL LO...   prints one JSON object per (form, isa, lo)
 *
 * weighted: batch 64, 256 outputs x 1024 inputs, w and x of U(lo, 0), ns per term
 * (batch * outs * ins); backward: one row of 2^20, ns per element. Median of 7 calls after one
 * warm-up; the inputs (1 MB and 4 MB) are not rotated. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pc/lse.h"

#define REPEATS 7

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fill(float *v, int64_t n, double lo, unsigned *state) {
    for (int64_t i = 0; i < n; i++) {
        *state = *state * 1664525u + 1013904223u;
        v[i] = (float)(lo * (double)(*state >> 8) / 16777216.0);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: cpu_lse_wide LABEL LO...\n");
        return 2;
    }
    const int64_t batch = 64, outs = 256, ins = 1024, n = 1 << 20;
    float *w = malloc(sizeof(float) * outs * ins), *x = malloc(sizeof(float) * batch * ins);
    float *out = malloc(sizeof(float) * batch * outs), *bx = malloc(sizeof(float) * n);
    float *g = malloc(sizeof(float) * n), lse;
    if (!w || !x || !out || !bx || !g)
        return 1;
    pc_isa best = pc_cpu_best_isa();
    for (int a = 2; a < argc; a++) {
        double lo = atof(argv[a]);
        unsigned state = 1;
        fill(w, outs * ins, lo, &state);
        fill(x, batch * ins, lo, &state);
        fill(bx, n, lo, &state);
        for (int isa = PC_ISA_SCALAR; isa <= best; isa++) {
            pc_lse_cpu_opts opts = {1, (pc_isa)isa};
            if (pc_lse_rows(PC_LSE_REF, PC_F32, bx, 1, n, n, &lse, &opts) != PC_OK)
                return 1;
            for (int form = 0; form < 2; form++) {
                double t[REPEATS];
                for (int r = -1; r < REPEATS; r++) {
                    double t0 = now_s();
                    pc_status st = form == 0 ? pc_lse_weighted(PC_LSE_FUSE, w, x, batch, outs, ins,
                                                               ins, out, &opts)
                                             : pc_lse_backward(bx, &lse, 1, n, n, g, n, &opts);
                    if (st != PC_OK) {
                        fprintf(stderr, "cpu_lse_wide: %s\n", pc_last_error());
                        return 1;
                    }
                    if (r >= 0)
                        t[r] = now_s() - t0;
                }
                qsort(t, REPEATS, sizeof t[0], cmp_double);
                double per = form == 0 ? (double)(batch * outs * ins) : (double)n;
                printf("{\"label\": \"%s\", \"form\": \"%s\", \"isa\": \"%s\", \"range\": [%g, 0], "
                       "\"ns_per_%s\": %.4f}\n",
                       argv[1], form == 0 ? "weighted_fuse" : "backward", pc_isa_name((pc_isa)isa),
                       lo, form == 0 ? "term" : "elem", t[REPEATS / 2] * 1e9 / per);
            }
        }
    }
    return 0;
}
