/* Inside the data module: the IDX reader opened for any range of dimensions (images: 2 or
 * more, labels: exactly 1, whose rows are one byte). */
#ifndef PC_DATA_IDX_INTERNAL_H
#define PC_DATA_IDX_INTERNAL_H

#include "pc/data.h"

pc_status pc_idx_open(const char *path, int min_dims, int max_dims, pc_data_reader **out);

/* Reads up to max_bytes of the payload into buf, whole rows or not, so that a caller can read
 * a file whose rows are larger than what it holds so far; *got = bytes read. Errors as
 * pc_data_reader_read's. */
pc_status pc_idx_read_bytes(pc_data_reader *r, uint8_t *buf, int64_t max_bytes, int64_t *got);

#endif
