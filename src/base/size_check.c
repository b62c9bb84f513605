#include "base/size_check.h"

#include <stdio.h>

int pc_size_mul(int64_t a, int64_t b, int64_t *out) {
    int64_t p;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &p)) {
        *out = INT64_MAX;
        return 0;
    }
    *out = p;
    return 1;
}

int pc_size_add(int64_t a, int64_t b, int64_t *out) {
    int64_t s;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &s)) {
        *out = INT64_MAX;
        return 0;
    }
    *out = s;
    return 1;
}

int pc_size_product(const int64_t *sizes, int n, int64_t *out) {
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (!pc_size_mul(p, sizes[i], &p)) {
            *out = INT64_MAX;
            return 0;
        }
    *out = p;
    return 1;
}

const char *pc_bytes_text(int64_t bytes, char *text, size_t len) {
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes == INT64_MAX) {
        snprintf(text, len, "more than 2^63 bytes");
        return text;
    }
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 6) v /= 1024.0, u++;
    if (u == 0)
        snprintf(text, len, "%lld bytes", (long long)bytes);
    else
        snprintf(text, len, "%lld bytes (%.3g %s)", (long long)bytes, v, units[u]);
    return text;
}
