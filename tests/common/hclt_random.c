/* Random HCLT models and data for the engine's tests. */
#include "hclt_random.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

uint64_t pc_hr_seed(void) { return pc_test_seed(); }

double pc_hr_unit(void) { return (double)(pc_rng_u64(pc_test_rng()) >> 11) * 0x1.0p-53; }

int64_t pc_hr_int(int64_t lo, int64_t hi) {
    return lo + (int64_t)(pc_rng_u64(pc_test_rng()) % (uint64_t)(hi - lo + 1));
}

/* A random distribution over n entries as natural logs; with zeros, some entries are -inf. */
static void random_dist(double *out, int64_t n, int zeros) {
    double sum = 0.0;
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        /* Spread over several orders of magnitude: exp of a normal-ish value. */
        double u = pc_hr_unit() + pc_hr_unit() + pc_hr_unit() - 1.5;
        out[i] = exp(3.0 * u);
        if (zeros && n > 1 && pc_hr_unit() < 0.125) out[i] = 0.0;
        if (out[i] > 0.0) kept++;
        sum += out[i];
    }
    if (kept == 0) {
        out[0] = 1.0;
        sum = 1.0;
    }
    for (int64_t i = 0; i < n; i++) out[i] = log(out[i] / sum);
}

pc_hclt *pc_hr_model(int32_t V, int32_t C, int32_t K, double share, int zeros) {
    if (V < 1) abort();
    int32_t *perm = malloc((size_t)V * sizeof *perm);
    int32_t *parent = malloc((size_t)V * sizeof *parent);
    int32_t *shares = malloc((size_t)V * sizeof *shares);
    if (!perm || !parent || !shares) abort();
    for (int32_t i = 0; i < V; i++) perm[i] = i;
    for (int32_t i = V - 1; i > 0; i--) {
        int32_t j = (int32_t)pc_hr_int(0, i), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int32_t T = 0;
    parent[perm[0]] = -1;
    shares[perm[0]] = 1;
    for (int32_t i = 1; i < V; i++) {
        parent[perm[i]] = perm[pc_hr_int(0, i - 1)];
        shares[perm[i]] = pc_hr_unit() < share;
        if (!shares[perm[i]]) T++;
    }
    pc_hclt *m = NULL;
    if (pc_hclt_create(V, C, K, T, &m) != PC_OK) abort();
    /* trans rows in a random order: a random permutation of 0..T-1 over the owning variables. */
    int32_t *rows = malloc((size_t)(T > 0 ? T : 1) * sizeof *rows);
    if (!rows) abort();
    for (int32_t t = 0; t < T; t++) rows[t] = t;
    for (int32_t t = T - 1; t > 0; t--) {
        int32_t j = (int32_t)pc_hr_int(0, t), x = rows[t];
        rows[t] = rows[j], rows[j] = x;
    }
    int32_t next = 0;
    for (int32_t v = 0; v < V; v++) {
        m->parent[v] = parent[v];
        m->trans_index[v] = shares[v] ? -1 : rows[next++];
    }
    random_dist(m->root_logw, K, zeros);
    for (int64_t r = 0; r < (int64_t)T * K; r++) random_dist(m->trans_logw + r * K, K, zeros);
    for (int64_t r = 0; r < (int64_t)V * K; r++) random_dist(m->input_logp + r * C, C, zeros);
    free(rows);
    free(perm);
    free(parent);
    free(shares);
    return m;
}

pc_hclt *pc_hr_two_branches(int32_t V, int32_t C, int32_t K, int zeros) {
    if (V < 3) abort();
    pc_hclt *m = pc_hr_model(V, C, K, 0.0, zeros); /* every non-root variable has a row */
    int32_t root = 0;
    for (int32_t v = 0; v < V; v++)
        if (m->parent[v] < 0) root = v;
    /* the others in index order, alternating between the branches */
    int32_t last[2] = {root, root}, i = 0;
    for (int32_t v = 0; v < V; v++) {
        if (v == root) continue;
        m->parent[v] = last[i % 2];
        last[i % 2] = v, i++;
    }
    return m;
}

uint8_t *pc_hr_data(int64_t n, int32_t V, int32_t C, double missing_rate, uint8_t **missing) {
    size_t bytes = (size_t)(n * V > 0 ? n * V : 1);
    uint8_t *x = malloc(bytes);
    if (!x) abort();
    for (int64_t i = 0; i < n * V; i++) x[i] = (uint8_t)pc_hr_int(0, C - 1);
    if (missing) {
        *missing = malloc(bytes);
        if (!*missing) abort();
        for (int64_t i = 0; i < n * V; i++) {
            (*missing)[i] = pc_hr_unit() < missing_rate;
            if ((*missing)[i]) x[i] = 255;
        }
    }
    return x;
}

char *pc_hr_tempdir(void) {
    const char *base = getenv("TMPDIR");
    char *dir = malloc(4096);
    if (!dir) abort();
    snprintf(dir, 4096, "%s/pctest-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) abort();
    return dir;
}

void pc_hr_rmdir(char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[8192];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                remove(path);
            }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

const char *pc_hr_path(const char *dir, const char *name) {
    static char p[64][4200];
    static int next;
    next = (next + 1) % 64;
    snprintf(p[next], sizeof p[next], "%s/%s", dir, name);
    return p[next];
}
