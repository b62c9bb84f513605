/* Where the tools look for a named data set of IDX files ("mnist", "fashion-mnist"): a place
 * for the command line, not for the library, which opens only the paths it is given. */
#ifndef PC_TOOLS_DATASET_FIND_H
#define PC_TOOLS_DATASET_FIND_H

#include <stddef.h>

#include "pc/status.h"

/* Finds `file_name` of the data set `dataset` in ./datasets/<dataset>, then
 * ../shared/datasets/<dataset> (relative to the working directory, then to the source tree),
 * then /usr/share/datasets/<dataset> (where Debian's dataset-* packages install, e.g.
 * dataset-fashion-mnist). Writes the path into path_out and returns PC_OK; when no place has
 * the file, returns PC_ERR_IO with a message in path_out that lists every place looked at
 * (PC_ERR_ARG for a bad argument). The library's error text is left alone. */
pc_status pc_tool_find_dataset(const char *dataset, const char *file_name, char *path_out,
                               size_t path_len);

#endif
