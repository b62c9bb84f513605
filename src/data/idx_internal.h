/* Inside the data module: the IDX reader opened for any range of dimensions (images: 2 or
 * more, labels: exactly 1, whose rows are one byte). */
#ifndef PC_DATA_IDX_INTERNAL_H
#define PC_DATA_IDX_INTERNAL_H

#include "pc/data.h"

pc_status pc_idx_open(const char *path, int min_dims, int max_dims, pc_data_reader **out);

#endif
