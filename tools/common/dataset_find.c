/* Where the tools look for a named data set (see dataset_find.h). */
#include "dataset_find.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

pc_status pc_tool_find_dataset(const char *dataset, const char *file_name, char *path_out,
                               size_t path_len) {
    if (!path_out || path_len == 0) return PC_ERR_ARG;
    if (!dataset || !file_name || !*dataset || strchr(dataset, '/')) {
        snprintf(path_out, path_len, "pc_tool_find_dataset: bad data set or file name");
        return PC_ERR_ARG;
    }
    const char *roots[5];
    int n = 0;
    roots[n++] = "datasets";
    roots[n++] = "../shared/datasets";
#ifdef PC_SOURCE_DIR
    roots[n++] = PC_SOURCE_DIR "/datasets";
    roots[n++] = PC_SOURCE_DIR "/../shared/datasets";
#endif
    roots[n++] = "/usr/share/datasets";
    char looked[2048] = "";
    for (int i = 0; i < n; i++) {
        const int w = snprintf(path_out, path_len, "%s/%s/%s", roots[i], dataset, file_name);
        if (w > 0 && (size_t)w < path_len && is_file(path_out)) return PC_OK;
        const size_t used = strlen(looked);
        snprintf(looked + used, sizeof looked - used, "%s%s/%s/%s", i ? ", " : "", roots[i],
                 dataset, file_name);
    }
    snprintf(path_out, path_len, "%s file %s not found; looked at: %s (datasets/README.md says "
             "how to get it)", dataset, file_name, looked);
    return PC_ERR_IO;
}
