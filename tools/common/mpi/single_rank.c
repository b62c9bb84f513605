/* The tools' processes in a build without MPI (mpi_ranks.h): always rank 0 of 1. */
#include "mpi_ranks.h"

#include <stdlib.h>
#include <string.h>

void pc_tool_mpi_init(int *argc, char ***argv, pc_tool_mpi *mpi) {
    (void)argc, (void)argv;
    *mpi = (pc_tool_mpi){.rank = 0, .size = 1, .local_rank = 0, .local_size = 1, .active = 0};
}

void pc_tool_mpi_finalize(const pc_tool_mpi *mpi) { (void)mpi; }

void pc_tool_mpi_abort(const pc_tool_mpi *mpi, int code) {
    (void)mpi;
    exit(code);
}

pc_status pc_tool_mpi_sum(void *ctx, int64_t *values, int64_t count) {
    (void)ctx, (void)values, (void)count;
    return PC_OK;
}

void pc_tool_mpi_shard(const pc_tool_mpi *mpi, int64_t n, int64_t unit, int64_t *lo,
                       int64_t *hi) {
    (void)mpi, (void)unit;
    *lo = 0;
    *hi = n;
}

void pc_tool_mpi_gather(const pc_tool_mpi *mpi, const double *mine, double *all, int64_t n,
                        int64_t unit) {
    (void)mpi, (void)unit;
    if (mine != all) memcpy(all, mine, (size_t)n * sizeof *all);
}

void pc_tool_mpi_barrier(const pc_tool_mpi *mpi) { (void)mpi; }

double pc_tool_mpi_max(const pc_tool_mpi *mpi, double value) {
    (void)mpi;
    return value;
}

int pc_tool_mpi_first_failed(const pc_tool_mpi *mpi, int failed) {
    (void)mpi;
    return failed ? 0 : -1;
}
