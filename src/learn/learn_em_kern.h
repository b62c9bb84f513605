/* Per-sample EM kernels (forward pass, backward flows); included by learn_em_kern.c,
 * learn_em_kern_avx2.c and learn_em_kern_avx512.c with PC_EM_KERN_NAME set, so one source is
 * compiled for each instruction set. The math is described in learn_em.c.
 *
 * forward_k / backward_k serve any K; forward_vec / backward_vec serve K = 16 and 32 with
 * explicit vectors. Every inner loop runs over contiguous K entries with a fixed order of
 * additions per entry, so nothing is reassociated and every path rounds alike.
 */
#include <math.h>
#include <string.h>

#include "learn/learn_em_internal.h"

#define PC_EM_LN2 0.693147180559945309417232121458176568 /* ln 2 */

/* Scaling by a power of two is exact: m = f 2^ex with f in [0.5, 1); returns ex and sets
 * inv1 * inv2 = 2^-ex (two factors, so that a subnormal m, ex down to -1073, does not overflow
 * one factor). The log of the scale is ex ln 2, taken once per sample at the root. */
static inline int64_t pow2_scale(double m, double *inv1, double *inv2) {
    int ex;
    frexp(m, &ex);
    *inv1 = ldexp(1.0, -ex / 2);
    *inv2 = ldexp(1.0, -ex - (-ex / 2));
    return ex;
}

/* The steps that forward_k / forward_vec and backward_k / backward_vec share, operation for
 * operation (so every path still rounds alike). */

/* e[v] = the input row of x[v] (ones where x[v] is missing) and off[v] = 0, for every v. */
static inline __attribute__((always_inline)) void load_inputs(const pc_em *em, double *e,
                                                              int64_t *off, const uint8_t *x,
                                                              const uint8_t *miss,
                                                              const int32_t k) {
    const int32_t nv = em->num_vars, c = em->num_cats;
    for (int32_t v = 0; v < nv; v++) {
        const double *src =
            (miss && miss[v]) ? em->ones : em->input_w + ((int64_t)v * c + x[v]) * k;
        memcpy(e + (int64_t)v * k, src, (size_t)k * sizeof(double));
        off[v] = 0;
    }
}

/* The scale of ev[0:k] (pow2_scale of its max, exponent added to *off); 0 when the max is not
 * positive and finite (the sample has probability 0, or a value overflowed). */
static inline __attribute__((always_inline)) int max_scale(const double *ev, const int32_t k,
                                                           int64_t *off, double *inv1,
                                                           double *inv2) {
    double m = 0;
    for (int32_t j = 0; j < k; j++) m = ev[j] > m ? ev[j] : m;
    if (!(m > 0) || !isfinite(m)) return 0;
    *off += pow2_scale(m, inv1, inv2);
    return 1;
}

/* log p(x) at the root: off ln 2 + log sum_j root_w[j] ev[j] (-inf when the sum is 0). */
static inline __attribute__((always_inline)) double root_logp(const pc_em *em, const double *ev,
                                                              int64_t off, const int32_t k) {
    double z = 0;
    for (int32_t j = 0; j < k; j++) z += em->root_w[j] * ev[j];
    return z > 0 ? (double)off * PC_EM_LN2 + log(z) : -INFINITY;
}

/* The root's flows q[root][j] = root_w[j] e[root][j] / z, counted into n_root. */
static inline __attribute__((always_inline)) void root_flows(const pc_em *em, const double *e,
                                                             double *q, int64_t *n_root,
                                                             double scale, const int32_t k) {
    const int32_t root = em->order[0];
    const double *er = e + (int64_t)root * k;
    double *qr = q + (int64_t)root * k;
    double z = 0;
    for (int32_t j = 0; j < k; j++) z += em->root_w[j] * er[j];
    for (int32_t j = 0; j < k; j++) {
        qr[j] = em->root_w[j] * er[j] / z;
        n_root[j] += (int64_t)(qr[j] * scale + 0.5);
    }
}

static inline __attribute__((always_inline)) double forward_k(const pc_em *em, pc_em_thread *t,
                                                              const uint8_t *x, const uint8_t *miss,
                                                              const int32_t k) {
    const int32_t nv = em->num_vars;
    double *restrict e = t->e;
    load_inputs(em, e, t->off, x, miss, k);
    for (int32_t i = nv - 1; i >= 0; i--) {
        const int32_t v = em->order[i];
        double *restrict ev = e + (int64_t)v * k;
        double inv1, inv2;
        if (!max_scale(ev, k, &t->off[v], &inv1, &inv2)) return -INFINITY;
        for (int32_t j = 0; j < k; j++) ev[j] = ev[j] * inv1 * inv2;
        const int32_t p = em->parent[v];
        if (p < 0) return root_logp(em, ev, t->off[v], k);
        double *restrict ep = e + (int64_t)p * k;
        t->off[p] += t->off[v];
        const int32_t tr = em->trans[v];
        if (tr < 0) {
            for (int32_t j = 0; j < k; j++) ep[j] *= ev[j];
            continue;
        }
        /* s = W e as a sum of columns: s[j] = ((0 + W[j,0] e[0]) + W[j,1] e[1]) + ... */
        const double *restrict wt = em->trans_wt + (int64_t)tr * k * k;
        double *restrict s = t->s + (int64_t)v * k;
        for (int32_t j = 0; j < k; j++) s[j] = 0;
        for (int32_t l = 0; l < k; l++) {
            const double el = ev[l];
            for (int32_t j = 0; j < k; j++) s[j] += wt[l * k + j] * el;
        }
        for (int32_t j = 0; j < k; j++) ep[j] *= s[j];
    }
    return -INFINITY; /* not reached: the root is visited last */
}

static inline __attribute__((always_inline)) void backward_k(const pc_em *em, pc_em_thread *t,
                                                             const uint8_t *x, const uint8_t *miss,
                                                             double scale, const int32_t k) {
    const int32_t nv = em->num_vars, c = em->num_cats;
    const double *restrict e = t->e;
    double *restrict q = t->q;
    root_flows(em, e, q, t->n_root, scale, k);
    for (int32_t i = 0; i < nv; i++) {
        const int32_t v = em->order[i];
        double *restrict qv = q + (int64_t)v * k;
        if (i > 0) {
            const double *restrict qp = q + (int64_t)em->parent[v] * k;
            const int32_t tr = em->trans[v];
            if (tr < 0) {
                memcpy(qv, qp, (size_t)k * sizeof(double));
            } else {
                const double *restrict w = em->trans_w + (int64_t)tr * k * k;
                const double *restrict s = t->s + (int64_t)v * k;
                const double *restrict ev = e + (int64_t)v * k;
                double *restrict acc = t->tacc + (int64_t)tr * k * k;
                for (int32_t l = 0; l < k; l++) qv[l] = 0;
                for (int32_t j = 0; j < k; j++) {
                    const double r = s[j] > 0 ? qp[j] / s[j] : 0;
                    if (r == 0) continue;
                    for (int32_t l = 0; l < k; l++) {
                        qv[l] += r * w[j * k + l];
                        acc[j * k + l] += r * ev[l];
                    }
                }
                for (int32_t l = 0; l < k; l++) qv[l] *= ev[l];
            }
        }
        if (miss && miss[v]) continue;
        t->touched[(int64_t)v * c + x[v]] = 1;
        int64_t *restrict n = t->n_input + ((int64_t)v * c + x[v]) * k;
        for (int32_t l = 0; l < k; l++) n[l] += (int64_t)(qv[l] * scale + 0.5); /* q >= 0 */
    }
}

/* K = 8 NV with GCC vector types of 8 doubles (one AVX-512 register, or 2 AVX2 / 4 SSE2 ones):
 * the transition products of a K-vector are kept in registers. Element by element these do the
 * same IEEE operations in the same order as forward_k / backward_k, so results are identical. */
typedef double pc_v8d __attribute__((vector_size(64), aligned(8)));
typedef int64_t pc_v8l __attribute__((vector_size(64), aligned(8)));

static inline __attribute__((always_inline)) double forward_vec(const pc_em *em, pc_em_thread *t,
                                                                const uint8_t *x,
                                                                const uint8_t *miss,
                                                                const int nvec) {
    const int32_t nv = em->num_vars, k = 8 * nvec;
    double *restrict e = t->e;
    load_inputs(em, e, t->off, x, miss, k);
    for (int32_t i = nv - 1; i >= 0; i--) {
        const int32_t v = em->order[i];
        double *restrict ev = e + (int64_t)v * k;
        double inv1, inv2;
        if (!max_scale(ev, k, &t->off[v], &inv1, &inv2)) return -INFINITY;
        pc_v8d *evv = (pc_v8d *)ev;
        for (int b = 0; b < nvec; b++) evv[b] = evv[b] * inv1 * inv2;
        const int32_t p = em->parent[v];
        if (p < 0) return root_logp(em, ev, t->off[v], k);
        pc_v8d *epv = (pc_v8d *)(e + (int64_t)p * k);
        t->off[p] += t->off[v];
        const int32_t tr = em->trans[v];
        if (tr < 0) {
            for (int b = 0; b < nvec; b++) epv[b] = epv[b] * evv[b];
            continue;
        }
        const pc_v8d *wt = (const pc_v8d *)(em->trans_wt + (int64_t)tr * k * k);
        pc_v8d s[4] = {{0}, {0}, {0}, {0}};
        for (int32_t l = 0; l < k; l++) {
            const double el = ev[l];
            for (int b = 0; b < nvec; b++) s[b] = s[b] + wt[l * nvec + b] * el;
        }
        pc_v8d *sv = (pc_v8d *)(t->s + (int64_t)v * k);
        for (int b = 0; b < nvec; b++) {
            sv[b] = s[b];
            epv[b] = epv[b] * s[b];
        }
    }
    return -INFINITY; /* not reached: the root is visited last */
}

static inline __attribute__((always_inline)) void backward_vec(const pc_em *em, pc_em_thread *t,
                                                               const uint8_t *x,
                                                               const uint8_t *miss, double scale,
                                                               const int nvec) {
    const int32_t nv = em->num_vars, c = em->num_cats, k = 8 * nvec;
    const double *restrict e = t->e;
    double *restrict q = t->q;
    root_flows(em, e, q, t->n_root, scale, k);
    for (int32_t i = 0; i < nv; i++) {
        const int32_t v = em->order[i];
        double *restrict qv = q + (int64_t)v * k;
        if (i > 0) {
            const double *restrict qp = q + (int64_t)em->parent[v] * k;
            const int32_t tr = em->trans[v];
            if (tr < 0) {
                memcpy(qv, qp, (size_t)k * sizeof(double));
            } else {
                const pc_v8d *w = (const pc_v8d *)(em->trans_w + (int64_t)tr * k * k);
                const double *restrict s = t->s + (int64_t)v * k;
                const pc_v8d *evv = (const pc_v8d *)(e + (int64_t)v * k);
                pc_v8d *acc = (pc_v8d *)(t->tacc + (int64_t)tr * k * k);
                pc_v8d u[4] = {{0}, {0}, {0}, {0}};
                for (int32_t j = 0; j < k; j++) {
                    const double r = s[j] > 0 ? qp[j] / s[j] : 0;
                    if (r == 0) continue;
                    for (int b = 0; b < nvec; b++) {
                        u[b] = u[b] + r * w[j * nvec + b];
                        acc[j * nvec + b] = acc[j * nvec + b] + r * evv[b];
                    }
                }
                pc_v8d *qvv = (pc_v8d *)qv;
                for (int b = 0; b < nvec; b++) qvv[b] = u[b] * evv[b];
            }
        }
        if (miss && miss[v]) continue;
        t->touched[(int64_t)v * c + x[v]] = 1;
        pc_v8l *n = (pc_v8l *)(t->n_input + ((int64_t)v * c + x[v]) * k);
        const pc_v8d *qvv = (const pc_v8d *)qv;
        for (int b = 0; b < nvec; b++) /* q >= 0: truncating x + 0.5 rounds */
            n[b] = n[b] + __builtin_convertvector(qvv[b] * scale + 0.5, pc_v8l);
    }
}

#define PC_EM_CAT2(a, b) a##_##b
#define PC_EM_CAT(a, b) PC_EM_CAT2(a, b)

static double PC_EM_CAT(forward, PC_EM_KERN_NAME)(const pc_em *em, pc_em_thread *t,
                                                  const uint8_t *x, const uint8_t *miss) {
    switch (em->num_latents) {
    case 16: return forward_vec(em, t, x, miss, 2);
    case 32: return forward_vec(em, t, x, miss, 4);
    default: return forward_k(em, t, x, miss, em->num_latents);
    }
}

static void PC_EM_CAT(backward, PC_EM_KERN_NAME)(const pc_em *em, pc_em_thread *t, const uint8_t *x,
                                                 const uint8_t *miss, double scale) {
    switch (em->num_latents) {
    case 16: backward_vec(em, t, x, miss, scale, 2); break;
    case 32: backward_vec(em, t, x, miss, scale, 4); break;
    default: backward_k(em, t, x, miss, scale, em->num_latents); break;
    }
}

const pc_em_kernels PC_EM_CAT(pc_em_kernels, PC_EM_KERN_NAME) = {
    PC_EM_CAT(forward, PC_EM_KERN_NAME), PC_EM_CAT(backward, PC_EM_KERN_NAME)};
