/* Checked size arithmetic for everything whose size comes from a file: element counts are
 * products of claimed dimensions, and a product that wraps (2^20 x 2^14 x 2^30 is 2^64, which
 * wraps to 0) would allocate a tiny buffer that later reads overrun. Every loader multiplies
 * through these and refuses a size that does not fit. */
#ifndef PC_BASE_SIZE_CHECK_H
#define PC_BASE_SIZE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The product of n sizes into *out; returns 1, or 0 (with *out = INT64_MAX) when a size is
 * negative or the product exceeds INT64_MAX. n = 0 gives 1. */
int pc_size_product(const int64_t *sizes, int n, int64_t *out);

/* a * b and a + b with the same rule. */
int pc_size_mul(int64_t a, int64_t b, int64_t *out);
int pc_size_add(int64_t a, int64_t b, int64_t *out);

/* "8589934592 bytes (8 GiB)" for a byte count, or "more than 2^63 bytes" for INT64_MAX (what a
 * failed product leaves), into text[len]; returns text, for messages. */
const char *pc_bytes_text(int64_t bytes, char *text, size_t len);

#ifdef __cplusplus
}
#endif

#endif
