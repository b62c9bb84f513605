/* Where the tools look for MNIST: a place for the command line, not for the library, which
 * opens only the paths it is given. */
#ifndef PC_TOOLS_MNIST_FIND_H
#define PC_TOOLS_MNIST_FIND_H

#include <stddef.h>

#include "pc/status.h"

/* Finds an MNIST file such as "t10k-images-idx3-ubyte.gz": in `dir` when it is not NULL, else
 * in ./datasets/mnist, then ../shared/datasets/mnist (relative to the working directory and to
 * the source tree). Writes the path found into path_out and returns PC_OK; when none exists,
 * returns PC_ERR_IO (PC_ERR_ARG for a NULL argument) with the message in path_out, listing
 * every place looked at. The library's error text is left alone: tools only read it. */
pc_status pc_tool_find_mnist(const char *dir, const char *file_name, char *path_out,
                             size_t path_len);

#endif
