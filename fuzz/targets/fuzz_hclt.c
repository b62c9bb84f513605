/* Fuzz target: the HDF5 model reader in process (pc_hclt_read from an in-memory image, then
 * pc_hclt_validate), the code the reader program of pc_hclt_load_isolated runs.
 *
 * libhdf5 1.10 itself crashes, loops or allocates without bound on some inputs (that is why
 * the tools parse model files in a separate process); fuzz/run.sh tells those findings, whose
 * first frame is in libhdf5, from ours. Sizes are capped at 64 MiB so that a valid claim does
 * not look like a runaway allocation. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model/hclt_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pc_hclt *m = NULL;
    if (pc_hclt_read("fuzz.h5", data, size, (int64_t)64 << 20, NULL, &m) == PC_OK) {
        if (!m) abort();
        (void)pc_hclt_validate(m, "fuzz.h5");
        pc_hclt_free(m);
    } else if (m) {
        abort();
    }
    return 0;
}
