/* Helpers shared by the cmocka test programs (see testutil.h). */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pc/cuda.h"

static uint64_t seed_value;
static int seed_ready;
static pc_rng shared_rng;

uint64_t pc_test_seed(void) {
    if (!seed_ready) {
        const char *env = getenv("PC_TEST_SEED");
        if (env && *env) {
            seed_value = strtoull(env, NULL, 10);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            seed_value = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
        }
        seed_ready = 1;
        pc_rng_init(&shared_rng, seed_value);
        fprintf(stderr, "test seed: %llu (replay with PC_TEST_SEED=%llu)\n",
                (unsigned long long)seed_value, (unsigned long long)seed_value);
    }
    return seed_value;
}

pc_rng *pc_test_rng(void) {
    pc_test_seed();
    return &shared_rng;
}

void pc_test_poison_f32(float *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
}

void pc_test_poison_f64(double *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
}

void pc_test_poison_bytes(void *p, size_t bytes) { memset(p, 0xff, bytes); }

double pc_test_tol_f32_conditional(int64_t num_latents) {
    return (double)(num_latents + 2) * 0x1p-24;
}

void *pc_test_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "test: out of memory allocating %zu bytes\n", bytes);
        abort();
    }
    return p;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t pc_test_f32_to_f16(float f) {
    uint32_t u = bits_of(f), sign = (u >> 16) & 0x8000u;
    float a = fabsf(f);
    if (isnan(f))
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 65520.0f)
        return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
    if (a < 0x1p-14f) {
        /* Subnormal half: a multiple of 2^-24; rint rounds half to even. */
        return (uint16_t)(sign | (uint32_t)rintf(a * 0x1p24f));
    }
    uint32_t v = bits_of(a);
    uint32_t exp = (v >> 23) - 112, man = v & 0x7fffffu;
    uint32_t h = (exp << 10) | (man >> 13), rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++; /* carry may bump the exponent */
    return (uint16_t)(sign | h);
}

float pc_test_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f)
        return float_of(sign | 0x7f800000u | (man << 13));
    if (exp == 0)
        return sign ? -(float)man * 0x1p-24f : (float)man * 0x1p-24f;
    return float_of(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t pc_test_f32_to_bf16(float f) {
    uint32_t u = bits_of(f);
    if (isnan(f))
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflow rounds to inf */
    return (uint16_t)(u >> 16);
}

float pc_test_bf16_to_f32(uint16_t b) { return float_of((uint32_t)b << 16); }

int16_t pc_test_nats_to_q10_6(double nats) {
    if (nats == -INFINITY)
        return INT16_MIN;
    if (isnan(nats))
        return 0; /* q10.6 has no NaN */
    double q = nearbyint(nats / 0.6931471805599453 * 64.0);
    return (int16_t)(q < -32767.0 ? -32767.0 : q > 32767.0 ? 32767.0 : q);
}

int pc_test_gpu_present(void) { return pc_cuda_available(); }

void pc_test_require_gpu_or_exit(const char *program) {
    if (pc_test_gpu_present())
        return;
    fprintf(stderr, "%s: skipped, no usable GPU in this build or machine\n", program);
    exit(77);
}
