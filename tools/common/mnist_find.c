/* Where the tools look for MNIST (see mnist_find.h). */
#include "mnist_find.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

pc_status pc_tool_find_mnist(const char *dir, const char *file_name, char *path_out,
                             size_t path_len) {
    if (!path_out || path_len == 0) return PC_ERR_ARG;
    if (!file_name) {
        snprintf(path_out, path_len, "pc_tool_find_mnist: file_name is NULL");
        return PC_ERR_ARG;
    }
    const char *places[4];
    int n = 0;
    if (dir) {
        places[n++] = dir;
    } else {
        places[n++] = "datasets/mnist";
        places[n++] = "../shared/datasets/mnist";
#ifdef PC_SOURCE_DIR
        places[n++] = PC_SOURCE_DIR "/datasets/mnist";
        places[n++] = PC_SOURCE_DIR "/../shared/datasets/mnist";
#endif
    }
    char looked[2048] = "";
    for (int i = 0; i < n; i++) {
        int w = snprintf(path_out, path_len, "%s/%s", places[i], file_name);
        if (w > 0 && (size_t)w < path_len && is_file(path_out)) return PC_OK;
        size_t used = strlen(looked);
        snprintf(looked + used, sizeof looked - used, "%s%s/%s", i ? ", " : "", places[i],
                 file_name);
    }
    snprintf(path_out, path_len,
             "MNIST file %s not found; looked at: %s (datasets/find_mnist.sh explains how to get "
             "it)",
             file_name, looked);
    return PC_ERR_IO;
}
