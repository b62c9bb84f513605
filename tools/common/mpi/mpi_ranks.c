/* The tools' processes under MPI (mpi_ranks.h), over MPI_COMM_WORLD. */
#include "mpi_ranks.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* Elements per MPI call: counts are int. */
#define PC_MPI_PIECE (1 << 28)

/* Whether a launcher started this process (OpenMPI, MPICH/Hydra, PMIx set these). */
static int launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

void pc_tool_mpi_init(int *argc, char ***argv, pc_tool_mpi *mpi) {
    *mpi = (pc_tool_mpi){.rank = 0, .size = 1, .local_rank = 0, .local_size = 1, .active = 0};
    if (!launched()) return;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi->size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &mpi->local_rank);
    MPI_Comm_size(local, &mpi->local_size);
    MPI_Comm_free(&local);
    mpi->active = 1;
}

void pc_tool_mpi_finalize(const pc_tool_mpi *mpi) {
    if (mpi->active) MPI_Finalize();
}

void pc_tool_mpi_abort(const pc_tool_mpi *mpi, int code) {
    if (mpi->active && mpi->size > 1) MPI_Abort(MPI_COMM_WORLD, code);
    pc_tool_mpi_finalize(mpi);
    exit(code);
}

pc_status pc_tool_mpi_sum(void *ctx, int64_t *values, int64_t count) {
    (void)ctx;
    int on = 0;
    MPI_Initialized(&on);
    if (!on) return PC_OK; /* one process: its values are the sum */
    for (int64_t at = 0; at < count; at += PC_MPI_PIECE) {
        const int n = (int)(count - at < PC_MPI_PIECE ? count - at : PC_MPI_PIECE);
        if (MPI_Allreduce(MPI_IN_PLACE, values + at, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD) !=
            MPI_SUCCESS)
            return PC_ERR_IO;
    }
    return PC_OK;
}


void pc_tool_mpi_shard(const pc_tool_mpi *mpi, int64_t n, int64_t unit, int64_t *lo,
                       int64_t *hi) {
    const int64_t units = (n + unit - 1) / unit;
    const int64_t a = units * mpi->rank / mpi->size * unit;
    const int64_t b = units * (mpi->rank + 1) / mpi->size * unit;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

void pc_tool_mpi_gather(const pc_tool_mpi *mpi, const double *mine, double *all, int64_t n,
                        int64_t unit) {
    int64_t lo = 0, hi = n;
    pc_tool_mpi_shard(mpi, n, unit, &lo, &hi);
    if (!mpi->active) {
        if (mine != all) memcpy(all, mine, (size_t)n * sizeof *all);
        return;
    }
    int *counts = NULL, *starts = NULL;
    if (mpi->rank == 0) {
        counts = malloc((size_t)mpi->size * sizeof *counts);
        starts = malloc((size_t)mpi->size * sizeof *starts);
        if (!counts || !starts) pc_tool_mpi_abort(mpi, 1);
        for (int r = 0; r < mpi->size; r++) {
            const pc_tool_mpi other = {.rank = r, .size = mpi->size};
            int64_t a = 0, b = 0;
            pc_tool_mpi_shard(&other, n, unit, &a, &b);
            counts[r] = (int)(b - a), starts[r] = (int)a;
        }
    }
    MPI_Gatherv(mine, (int)(hi - lo), MPI_DOUBLE, all, counts, starts, MPI_DOUBLE, 0,
                MPI_COMM_WORLD);
    free(counts), free(starts);
}

void pc_tool_mpi_barrier(const pc_tool_mpi *mpi) {
    if (mpi->active) MPI_Barrier(MPI_COMM_WORLD);
}

double pc_tool_mpi_max(const pc_tool_mpi *mpi, double value) {
    if (mpi->active) MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return value;
}

int pc_tool_mpi_first_failed(const pc_tool_mpi *mpi, int failed) {
    int first = failed ? mpi->rank : INT_MAX;
    if (mpi->active) MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return first == INT_MAX ? -1 : first;
}
