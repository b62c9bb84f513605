/* Data sets of discrete variables: uint8 values [count, width] with an optional missing mask.
 * Readers: IDX files (MNIST layout), plain or gzip-compressed, through zlib. */
#ifndef PC_DATA_H
#define PC_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "pc/export.h"
#include "pc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A data set is plain data without locks: several threads may read one at once, but none
 * may read it while another changes or frees it. */
typedef struct pc_data {
    int64_t count;    /* N samples */
    int32_t width;    /* V variables per sample (28 * 28 = 784 for MNIST) */
    uint8_t *values;  /* [count, width], row-major */
    uint8_t *missing; /* [count, width], 1 = unobserved (marginalised); NULL = all observed */
} pc_data;

/* Allocates count x width zeroed values (missing = NULL). */
PC_API pc_status pc_data_create(int64_t count, int32_t width, pc_data **out);
PC_API void pc_data_free(pc_data *data);

/* Reads an IDX image file (magic 0x00000803, uint8, any number of dimensions >= 1 after the
 * count; width = product of them), plain or .gz. Every header field and the payload length are
 * checked; a truncated or corrupt file gets a message naming the file. */
PC_API pc_status pc_data_load_idx(const char *path, pc_data **out);

/* Reads an IDX label file (magic 0x00000801) into a malloc'ed uint8 array of *count labels. */
PC_API pc_status pc_labels_load_idx(const char *path, uint8_t **labels, int64_t *count);

#ifdef __cplusplus
}
#endif

#endif
