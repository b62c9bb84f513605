/* Input data for the log-sum-exp tools (see lsedata.h). */
#include "lsedata.h"

#include <math.h>
#include <string.h>

#include "pc/rng.h"

void pc_lsedata_fill(uint64_t seed, double lo, double hi, double normal_sd, float *v, size_t n) {
    pc_rng r = {seed};
    for (size_t i = 0; i < n; i++) {
        if (normal_sd > 0) {
            double u1 = 1.0 - pc_rng_unit(&r), u2 = pc_rng_unit(&r);
            v[i] = (float)(normal_sd * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        } else {
            v[i] = (float)(lo + (hi - lo) * pc_rng_unit(&r));
        }
    }
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint16_t to_f16(float f) {
    uint32_t sign = (bits(f) >> 16) & 0x8000u;
    float a = fabsf(f);
    if (isnan(f))
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 65520.0f)
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x1p-14f)
        return (uint16_t)(sign | (uint32_t)rintf(a * 0x1p24f));
    uint32_t v = bits(a), h = (((v >> 23) - 112) << 10) | ((v & 0x7fffffu) >> 13);
    uint32_t rest = v & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

static uint16_t to_bf16(float f) {
    uint32_t u = bits(f);
    if (isnan(f))
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static int16_t to_q10_6(float x) {
    if (x == -INFINITY)
        return INT16_MIN;
    if (isnan(x))
        return 0; /* q10.6 has no NaN */
    double q = nearbyint((double)x / 0.6931471805599453 * 64.0);
    return (int16_t)(q < -32767.0 ? -32767.0 : q > 32767.0 ? 32767.0 : q);
}

void pc_lsedata_encode(pc_dtype dtype, const float *v, size_t n, void *dst) {
    switch (dtype) {
    case PC_F32:
        memcpy(dst, v, n * sizeof(float));
        break;
    case PC_F16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = to_f16(v[i]);
        break;
    case PC_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = to_bf16(v[i]);
        break;
    case PC_Q10_6:
        for (size_t i = 0; i < n; i++)
            ((int16_t *)dst)[i] = to_q10_6(v[i]);
        break;
    }
}
