/* CUDA LSE kernels (pc_lse_rows_cuda, pc_lse_weighted_cuda, pc_lse_backward_cuda) against an
 * FP64 reference computed here from the exact values the GPU reads (after f16/bf16/q10.6
 * encoding), for every kernel/dtype pair and every mapping class the launcher picks: 2 and 8
 * threads per row, a warp per row, a block per row, rows split over blocks (B = 8, N = 128256)
 * and B = 1 with N = 4M. Outputs are poisoned with 0xFF bytes (NaN) before every call.
 * Without a GPU the program exits 77 (skipped). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "pc/cuda.h"
#include "pc/lse.h"
#include "testutil.h"

/* A library call that must succeed; on failure the message names the failing CUDA call. */
#define CHECK_OK(call)                                                                         \
    do {                                                                                       \
        pc_status check_st_ = (call);                                                          \
        if (check_st_ != PC_OK) fail_msg("%s: %s (%s)", #call, pc_status_str(check_st_), pc_last_error()); \
    } while (0)

/* Bounds, relative to max(1, |ref|) (the CPU kernels use the same ones). */
#define FUSE_ROW_TOL 1e-5
#define FUSE_MEAN_TOL 1e-6
#define INT_ROW_TOL 2e-3
#define INT_MEAN_TOL 1e-3
#define BACKWARD_TOL 1e-5

/* ---- random numbers (xorshift64*, seeded from the clock and printed) ----------------------- */

static uint64_t rng_state;

static uint64_t rng_u64(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}
static double rng_uniform(double lo, double hi) {
    return lo + (hi - lo) * (double)(rng_u64() >> 11) * 0x1p-53;
}
static double rng_normal(double sd) {
    double u = rng_uniform(0x1p-53, 1.0), v = rng_uniform(0.0, 1.0);
    return sd * sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
static int64_t rng_int(int64_t n) { return (int64_t)(rng_u64() % (uint64_t)n); }

/* ---- encoding into the input types, and back ----------------------------------------------- */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* IEEE half, round to nearest even; overflow to inf, NaN kept. */
static uint16_t to_f16(float f) {
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504 */
    if (a < 0x38800000u) {                                   /* subnormal half */
        float h = bits_f32(a) * 0x1p24f;                      /* exact scaling to half ulps */
        return (uint16_t)(sign | (uint32_t)lrintf(h));
    }
    uint32_t e = ((a >> 23) - 112) << 10, m = a & 0x7fffffu;
    uint32_t h = e | (m >> 13), rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}
static double from_f16(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 31) return m ? NAN : s * INFINITY;
    if (e == 0) return s * ldexp(m, -24);
    return s * ldexp(1024 + m, e - 25);
}
static uint16_t to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
static double from_bf16(uint16_t b) { return bits_f32((uint32_t)b << 16); }
/* NaN (only in row padding, which the kernels must not read) becomes the largest value. */
static int16_t to_q10_6(double nats) {
    if (nats == -INFINITY) return INT16_MIN;
    if (nats != nats) return INT16_MAX;
    double q = nearbyint(nats / 0.6931471805599453 * 64.0);
    return (int16_t)(q < -32767 ? -32767 : q > 32767 ? 32767 : q);
}
static double from_q10_6(int16_t q) { return q == INT16_MIN ? -INFINITY : q / 64.0 * 0.6931471805599453; }

/* v[0:n] (nats) into dst as dtype; dec[0:n] receives the value each element really holds. */
static void encode(pc_dtype dtype, const double *v, size_t n, void *dst, double *dec) {
    for (size_t i = 0; i < n; i++) {
        switch (dtype) {
        case PC_F32: ((float *)dst)[i] = (float)v[i], dec[i] = (float)v[i]; break;
        case PC_F16: ((uint16_t *)dst)[i] = to_f16((float)v[i]), dec[i] = from_f16(((uint16_t *)dst)[i]); break;
        case PC_BF16: ((uint16_t *)dst)[i] = to_bf16((float)v[i]), dec[i] = from_bf16(((uint16_t *)dst)[i]); break;
        case PC_Q10_6: ((int16_t *)dst)[i] = to_q10_6(v[i]), dec[i] = from_q10_6(((int16_t *)dst)[i]); break;
        }
    }
}

/* ---- FP64 reference ------------------------------------------------------------------------ */

static double lse_ref(const double *x, int64_t n, int64_t step) {
    double m = -INFINITY, s = 0.0;
    int nan = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i * step];
        if (v != v) nan = 1;
        else if (v > m) m = v;
    }
    if (nan) return NAN;
    if (m == INFINITY || m == -INFINITY) return m;
    for (int64_t i = 0; i < n; i++) s += exp(x[i * step] - m);
    return m + log(s);
}

/* |got - ref| / max(1, |ref|); matching NaN or infinities give 0, other mismatches +inf. */
static double rel_err(double got, double ref) {
    if (ref != ref) return got != got ? 0.0 : INFINITY;
    if (isinf(ref)) return got == ref ? 0.0 : INFINITY;
    if (!isfinite(got)) return INFINITY;
    return fabs(got - ref) / fmax(1.0, fabs(ref));
}

static void *xalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    assert_non_null(p);
    return p;
}

static void *dev_alloc(size_t bytes) {
    void *d = NULL;
    CHECK_OK(pc_cuda_malloc(&d, bytes ? bytes : 16));
    return d;
}

/* ---- row-wise runs ------------------------------------------------------------------------- */

typedef struct errs {
    double max, mean;
} errs;

/* Runs one kernel on x (host bytes, [rows, stride]) and compares with ref[rows]. */
static errs run_rows(pc_lse_kernel k, pc_dtype d, const void *x, int64_t rows, int64_t cols, int64_t stride,
                     const double *ref) {
    size_t bytes = (size_t)(rows * stride) * pc_dtype_size(d), scratch = 0;
    void *d_x = dev_alloc(bytes), *d_scratch = NULL;
    float *d_out = dev_alloc((size_t)rows * 4), *out = xalloc((size_t)rows * 4);
    CHECK_OK(pc_cuda_memcpy_h2d(d_x, x, bytes));
    CHECK_OK(pc_lse_rows_cuda(k, d, d_x, rows, cols, stride, d_out, NULL, &scratch, NULL));
    assert_true(scratch > 0);
    d_scratch = dev_alloc(scratch);
    CHECK_OK(pc_cuda_memset(d_out, 0xFF, (size_t)rows * 4));
    CHECK_OK(pc_lse_rows_cuda(k, d, d_x, rows, cols, stride, d_out, d_scratch, &scratch, NULL));
    CHECK_OK(pc_cuda_synchronize());
    CHECK_OK(pc_cuda_memcpy_d2h(out, d_out, (size_t)rows * 4));
    errs e = {0, 0};
    for (int64_t r = 0; r < rows; r++) {
        double er = rel_err(out[r], ref[r]);
        if (er == INFINITY)
            fail_msg("%s/%s rows %lld cols %lld stride %lld: row %lld got %.9g, ref %.9g", pc_lse_kernel_name(k),
                     pc_dtype_name(d), (long long)rows, (long long)cols, (long long)stride, (long long)r,
                     (double)out[r], ref[r]);
        e.max = fmax(e.max, er);
        e.mean += er / (double)rows;
    }
    pc_cuda_free(d_x);
    pc_cuda_free(d_scratch);
    pc_cuda_free(d_out);
    free(out);
    return e;
}

typedef struct pair {
    pc_lse_kernel k;
    pc_dtype d;
} pair;
static const pair pairs[] = {
    {PC_LSE_FUSE, PC_F32}, {PC_LSE_FUSE, PC_F16}, {PC_LSE_FUSE, PC_BF16}, {PC_LSE_INT, PC_F32}, {PC_LSE_INT, PC_Q10_6},
};
#define NPAIRS 5

/* Encodes v ([rows, stride], nats) for the pair, runs it and checks the bounds. */
static void check_rows(const pair *p, const double *v, int64_t rows, int64_t cols, int64_t stride, const char *what) {
    size_t n = (size_t)(rows * stride);
    double *dec = xalloc(n * sizeof(double)), *ref = xalloc((size_t)rows * sizeof(double));
    void *x = xalloc(n * 4);
    encode(p->d, v, n, x, dec);
    for (int64_t r = 0; r < rows; r++) ref[r] = lse_ref(dec + r * stride, cols, 1);
    errs e = run_rows(p->k, p->d, x, rows, cols, stride, ref);
    const int fuse = p->k == PC_LSE_FUSE;
    printf("  %-4s %-5s %-22s %7lld x %-8lld max %.2e mean %.2e\n", pc_lse_kernel_name(p->k), pc_dtype_name(p->d),
           what, (long long)rows, (long long)cols, e.max, e.mean);
    if (e.max > (fuse ? FUSE_ROW_TOL : INT_ROW_TOL) || e.mean > (fuse ? FUSE_MEAN_TOL : INT_MEAN_TOL))
        fail_msg("%s/%s %s %lld x %lld: max %.3e mean %.3e over the bound", pc_lse_kernel_name(p->k),
                 pc_dtype_name(p->d), what, (long long)rows, (long long)cols, e.max, e.mean);
    free(dec);
    free(ref);
    free(x);
}

/* Values for a row-wise run; elements between cols and stride are NaN, which the kernels must
 * never read. */
static double *gen_rows(int64_t rows, int64_t cols, int64_t stride, double lo, double hi, int normal) {
    double *v = xalloc((size_t)(rows * stride) * sizeof(double));
    for (int64_t i = 0; i < rows * stride; i++)
        v[i] = i % stride >= cols ? NAN : normal ? rng_normal(hi) : rng_uniform(lo, hi);
    return v;
}

/* Every mapping class, with odd strides (rows start off 16-byte boundaries). */
static void test_rows_mappings(void **state) {
    (void)state;
    static const struct {
        int64_t rows, cols, stride;
        const char *what;
    } shapes[] = {
        {257, 3, 5, "2 threads/row"},    {300, 16, 16, "2 threads/row"}, {129, 61, 67, "8 threads/row"},
        {77, 1000, 1003, "warp/row"},    {700, 5000, 5001, "block/row"}, {8, 128256, 128256, "split rows"},
        {3, 100003, 100005, "split rows"}, {1, 4194304, 4194304, "B=1 huge N"}, {5, 0, 3, "empty rows"},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        double *v = gen_rows(shapes[s].rows, shapes[s].cols, shapes[s].stride, -10.0, 2.0, 0);
        for (int p = 0; p < NPAIRS; p++)
            check_rows(&pairs[p], v, shapes[s].rows, shapes[s].cols, shapes[s].stride, shapes[s].what);
        free(v);
    }
}

/* The int accuracy bound at N = 128256 on the paper's ranges; fuse on the same data. */
static void test_rows_ranges(void **state) {
    (void)state;
    static const struct {
        const char *what;
        double lo, hi;
        int normal;
    } ranges[] = {{"U(-1,0)", -1, 0, 0}, {"U(-10,0)", -10, 0, 0}, {"U(-100,0)", -100, 0, 0}, {"N(0,4^2)", 0, 4, 1}};
    for (int g = 0; g < 4; g++) {
        double *v = gen_rows(24, 128256, 128256, ranges[g].lo, ranges[g].hi, ranges[g].normal);
        for (int p = 0; p < NPAIRS; p++) check_rows(&pairs[p], v, 24, 128256, 128256, ranges[g].what);
        free(v);
    }
}

/* Edge rows, each pattern at random positions: empty contributions, NaN, +-inf, huge finite. */
enum { E_ALL_NEGINF, E_SOME_NEGINF, E_NAN, E_POSINF, E_POSINF_NAN, E_HUGE, E_NEG_HUGE, E_ONE_FINITE, E_COUNT };

static double *gen_edges(int64_t rows, int64_t cols, pc_dtype d) {
    double *v = gen_rows(rows, cols, cols, -5.0, 5.0, 0);
    const double huge = d == PC_F16 ? 60000.0 : d == PC_Q10_6 ? 350.0 : 3.0e38;
    for (int64_t r = 0; r < rows; r++) {
        double *row = v + r * cols;
        int kind = (int)(r % E_COUNT);
        if (d == PC_Q10_6 && (kind == E_NAN || kind == E_POSINF || kind == E_POSINF_NAN)) kind = E_SOME_NEGINF;
        switch (kind) {
        case E_ALL_NEGINF:
            for (int64_t i = 0; i < cols; i++) row[i] = -INFINITY;
            break;
        case E_SOME_NEGINF:
            for (int64_t i = 0; i < cols; i++)
                if (rng_int(3) == 0) row[i] = -INFINITY;
            break;
        case E_NAN: row[rng_int(cols)] = NAN; break;
        case E_POSINF: row[rng_int(cols)] = INFINITY; break;
        case E_POSINF_NAN:
            row[rng_int(cols)] = INFINITY;
            row[rng_int(cols)] = NAN;
            break;
        case E_HUGE:
            for (int64_t i = 0; i < cols; i++) row[i] = rng_int(2) ? huge : -huge;
            break;
        case E_NEG_HUGE:
            for (int64_t i = 0; i < cols; i++) row[i] = -huge * rng_uniform(0.5, 1.0);
            break;
        case E_ONE_FINITE:
            for (int64_t i = 0; i < cols; i++) row[i] = -INFINITY;
            row[rng_int(cols)] = 1.5;
            break;
        }
    }
    return v;
}

static void test_rows_edges(void **state) {
    (void)state;
    static const int64_t cols[] = {1, 5, 40, 700, 20000, 300000};
    for (int c = 0; c < 6; c++) {
        const int64_t rows = cols[c] >= 300000 ? E_COUNT : 4 * E_COUNT;
        for (int p = 0; p < NPAIRS; p++) {
            double *v = gen_edges(rows, cols[c], pairs[p].d);
            check_rows(&pairs[p], v, rows, cols[c], cols[c], "edge rows");
            free(v);
        }
    }
}

/* ---- weighted form ------------------------------------------------------------------------- */

static void check_weighted(pc_lse_kernel k, const float *w, const float *x, int64_t batch, int64_t outs, int64_t ins,
                           int64_t x_stride, const char *what) {
    float *d_w = dev_alloc((size_t)(outs * ins) * 4), *d_x = dev_alloc((size_t)(batch * x_stride) * 4);
    float *d_out = dev_alloc((size_t)(batch * outs) * 4), *out = xalloc((size_t)(batch * outs) * 4);
    double *z = xalloc((size_t)(ins ? ins : 1) * sizeof(double));
    CHECK_OK(pc_cuda_memcpy_h2d(d_w, w, (size_t)(outs * ins) * 4));
    CHECK_OK(pc_cuda_memcpy_h2d(d_x, x, (size_t)(batch * x_stride) * 4));
    CHECK_OK(pc_cuda_memset(d_out, 0xFF, (size_t)(batch * outs) * 4));
    CHECK_OK(pc_lse_weighted_cuda(k, d_w, d_x, batch, outs, ins, x_stride, d_out, NULL));
    CHECK_OK(pc_cuda_synchronize());
    CHECK_OK(pc_cuda_memcpy_d2h(out, d_out, (size_t)(batch * outs) * 4));
    double max = 0, mean = 0;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t j = 0; j < outs; j++) {
            for (int64_t i = 0; i < ins; i++) z[i] = (double)w[j * ins + i] + (double)x[b * x_stride + i];
            double ref = lse_ref(z, ins, 1), er = rel_err(out[b * outs + j], ref);
            if (er == INFINITY)
                fail_msg("weighted %s %s: out[%lld, %lld] = %.9g, ref %.9g", pc_lse_kernel_name(k), what,
                         (long long)b, (long long)j, (double)out[b * outs + j], ref);
            max = fmax(max, er);
            mean += er / (double)(batch * outs);
        }
    printf("  weighted %-4s %-18s %lld x %lld x %lld: max %.2e mean %.2e\n", pc_lse_kernel_name(k), what,
           (long long)batch, (long long)outs, (long long)ins, max, mean);
    if (k == PC_LSE_FUSE ? (max > FUSE_ROW_TOL || mean > FUSE_MEAN_TOL) : (max > INT_ROW_TOL || mean > INT_MEAN_TOL))
        fail_msg("weighted %s %s: max %.3e mean %.3e over the bound", pc_lse_kernel_name(k), what, max, mean);
    pc_cuda_free(d_w);
    pc_cuda_free(d_x);
    pc_cuda_free(d_out);
    free(out);
    free(z);
}

static void test_weighted(void **state) {
    (void)state;
    static const int64_t shapes[][4] = {{70, 33, 129, 131}, {512, 128, 128, 128}, {3, 200, 7, 9}, {65, 65, 0, 1}};
    for (int s = 0; s < 4; s++) {
        const int64_t batch = shapes[s][0], outs = shapes[s][1], ins = shapes[s][2], xs = shapes[s][3];
        float *w = xalloc((size_t)(outs * ins) * 4), *x = xalloc((size_t)(batch * xs) * 4);
        for (int64_t i = 0; i < outs * ins; i++) w[i] = (float)rng_uniform(-6.0, 0.0);
        for (int64_t i = 0; i < batch * xs; i++) x[i] = i % xs < ins ? (float)rng_normal(4.0) : NAN;
        /* Edge rows: x with NaN, x all -inf, x with +inf, w all -inf, w huge, and a pair whose
         * maxima sit at different k so that the product form underflows (exact fallback). */
        if (ins >= 4 && batch >= 6 && outs >= 3) {
            x[0 * xs + 1] = NAN;
            for (int64_t i = 0; i < ins; i++) x[1 * xs + i] = -INFINITY;
            x[2 * xs + 2] = INFINITY;
            for (int64_t i = 0; i < ins; i++) w[0 * ins + i] = -INFINITY;
            for (int64_t i = 0; i < ins; i++) w[1 * ins + i] = i == 0 ? 0.0f : -300.0f;
            for (int64_t i = 0; i < ins; i++) x[3 * xs + i] = i == 0 ? -300.0f : 0.0f;
            for (int64_t i = 0; i < ins; i++) x[4 * xs + i] = 3.0e38f;
            w[2 * ins + 3] = -3.0e38f;
        }
        check_weighted(PC_LSE_FUSE, w, x, batch, outs, ins, xs, "normal+edges");
        check_weighted(PC_LSE_INT, w, x, batch, outs, ins, xs, "normal+edges");
        free(w);
        free(x);
    }
}

/* ---- backward ------------------------------------------------------------------------------ */

static void test_backward(void **state) {
    (void)state;
    const int64_t rows = 37, cols = 1001, stride = 1003, gs = 1005;
    float *x = xalloc((size_t)(rows * stride) * 4), *lse = xalloc((size_t)rows * 4);
    float *g = xalloc((size_t)(rows * gs) * 4);
    double *row = xalloc((size_t)cols * sizeof(double));
    for (int64_t i = 0; i < rows * stride; i++) x[i] = (float)rng_normal(4.0);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < cols; i++) row[i] = x[r * stride + i];
        lse[r] = (float)lse_ref(row, cols, 1);
    }
    lse[3] = -INFINITY, lse[4] = NAN;
    float *d_x = dev_alloc((size_t)(rows * stride) * 4), *d_l = dev_alloc((size_t)rows * 4);
    float *d_g = dev_alloc((size_t)(rows * gs) * 4);
    CHECK_OK(pc_cuda_memcpy_h2d(d_x, x, (size_t)(rows * stride) * 4));
    CHECK_OK(pc_cuda_memcpy_h2d(d_l, lse, (size_t)rows * 4));
    CHECK_OK(pc_cuda_memset(d_g, 0xFF, (size_t)(rows * gs) * 4));
    CHECK_OK(pc_lse_backward_cuda(d_x, d_l, rows, cols, stride, d_g, gs, NULL));
    CHECK_OK(pc_cuda_synchronize());
    CHECK_OK(pc_cuda_memcpy_d2h(g, d_g, (size_t)(rows * gs) * 4));
    double max = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < gs; i++) {
            float got = g[r * gs + i];
            if (i >= cols) {
                assert_int_equal(f32_bits(got), 0xFFFFFFFFu); /* padding is never written */
            } else if (r == 3 || r == 4) {
                assert_true(got != got);
            } else {
                double ref = exp((double)x[r * stride + i] - (double)lse[r]);
                double er = fabs(got - ref) / fmax(ref, 1e-30);
                if (!(er <= BACKWARD_TOL)) fail_msg("grad[%lld, %lld] = %.9g, ref %.9g", (long long)r, (long long)i, got, ref);
                max = fmax(max, er);
            }
        }
    printf("  backward %lld x %lld: max relative error %.2e\n", (long long)rows, (long long)cols, max);
    pc_cuda_free(d_x);
    pc_cuda_free(d_l);
    pc_cuda_free(d_g);
    free(x), free(lse), free(g), free(row);
}

/* ---- argument errors: PC_ERR_ARG before anything is queued, outputs untouched --------------- */

static void test_arguments(void **state) {
    (void)state;
    float *d_x = dev_alloc(4096), *d_out = dev_alloc(64), out[16];
    void *d_s = dev_alloc(1 << 16);
    size_t sb = 1 << 16, small = 0;
    CHECK_OK(pc_cuda_memset(d_out, 0xFF, 64));
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_FUSE, PC_F32, d_x, 4, 8, 8, d_out, d_s, NULL, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_FUSE, PC_F32, d_x, -1, 8, 8, d_out, d_s, &sb, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_FUSE, PC_F32, d_x, 4, -8, 8, d_out, d_s, &sb, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_FUSE, PC_F32, d_x, 4, 8, 7, d_out, d_s, &sb, NULL), PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "stride"));
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_REF, PC_F32, d_x, 4, 8, 8, d_out, d_s, &sb, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_FUSE, PC_Q10_6, d_x, 4, 8, 8, d_out, d_s, &sb, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_INT, PC_F16, d_x, 4, 8, 8, d_out, d_s, &sb, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_cuda((pc_lse_kernel)7, PC_F32, d_x, 4, 8, 8, d_out, d_s, &sb, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_FUSE, (pc_dtype)9, d_x, 4, 8, 8, d_out, d_s, &sb, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_FUSE, PC_F32, NULL, 4, 8, 8, d_out, d_s, &sb, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_FUSE, PC_F32, d_x, 4, 8, 8, NULL, d_s, &sb, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_FUSE, PC_F32, (char *)d_x + 2, 4, 8, 8, d_out, d_s, &sb, NULL),
                     PC_ERR_ARG);
    /* A split shape needs scratch; one byte less than it asked for is refused. */
    CHECK_OK(pc_lse_rows_cuda(PC_LSE_FUSE, PC_F32, NULL, 1, 1 << 22, 1 << 22, NULL, NULL, &small, NULL));
    assert_true(small > 16);
    small -= 1;
    assert_int_equal(pc_lse_rows_cuda(PC_LSE_FUSE, PC_F32, d_x, 1, 1 << 22, 1 << 22, d_out, d_s, &small, NULL),
                     PC_ERR_ARG);
    assert_non_null(strstr(pc_last_error(), "scratch"));
    assert_int_equal(pc_lse_weighted_cuda(PC_LSE_REF, d_x, d_x, 2, 2, 2, 2, d_out, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_weighted_cuda(PC_LSE_FUSE, d_x, d_x, -2, 2, 2, 2, d_out, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_weighted_cuda(PC_LSE_FUSE, d_x, d_x, 2, 2, 3, 2, d_out, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_weighted_cuda(PC_LSE_INT, NULL, d_x, 2, 2, 2, 2, d_out, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_weighted_cuda(PC_LSE_INT, d_x, d_x, 2, 2, 2, 2, NULL, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_backward_cuda(d_x, d_x, 2, 4, 3, d_out, 4, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_backward_cuda(d_x, d_x, 2, 4, 4, d_out, 3, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_backward_cuda(d_x, NULL, 2, 4, 4, d_out, 4, NULL), PC_ERR_ARG);
    assert_int_equal(pc_lse_backward_cuda(d_x, d_x, -2, 4, 4, d_out, 4, NULL), PC_ERR_ARG);
    CHECK_OK(pc_cuda_synchronize());
    CHECK_OK(pc_cuda_memcpy_d2h(out, d_out, 64));
    for (int i = 0; i < 16; i++) assert_int_equal(f32_bits(out[i]), 0xFFFFFFFFu);
    pc_cuda_free(d_x);
    pc_cuda_free(d_out);
    pc_cuda_free(d_s);
}

/* A failing CUDA call comes back as PC_ERR_CUDA naming the call. */
static void test_cuda_errors(void **state) {
    (void)state;
    void *d = NULL;
    assert_int_equal(pc_cuda_malloc(&d, (size_t)1 << 60), PC_ERR_DEVICE_MEMORY);
    /* Neither event of a fresh timer was recorded: cudaEventElapsedTime refuses. */
    pc_cuda_timer *t = NULL;
    float ms = 0;
    CHECK_OK(pc_cuda_timer_create(&t));
    assert_int_equal(pc_cuda_timer_elapsed_ms(t, &ms), PC_ERR_CUDA);
    assert_non_null(strstr(pc_last_error(), "cudaEvent"));
    pc_cuda_timer_free(t);
    char text[256];
    CHECK_OK(pc_cuda_describe(text, sizeof text));
    printf("  %s\n", text);
}

int main(void) {
    pc_test_require_gpu_or_exit("test_cuda_lse");
    const char *env = getenv("PC_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u + (uint64_t)clock();
    printf("test_cuda_lse: seed %llu (set PC_TEST_SEED to replay)\n", (unsigned long long)seed);
    rng_state = seed ? seed : 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arguments),   cmocka_unit_test(test_cuda_errors), cmocka_unit_test(test_rows_mappings),
        cmocka_unit_test(test_rows_ranges), cmocka_unit_test(test_rows_edges),  cmocka_unit_test(test_weighted),
        cmocka_unit_test(test_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
