/* The tools' processes under MPI (mpirun -np R pclearn|pcinfer ...): which rank this is, the
 * sums and gathers that keep R processes' results those of one process, and the shard of rows
 * each scores. Built with MPI (PC_MPI, tools/common/mpi/mpi_ranks.c) or without it
 * (single_rank.c, one process of rank 0). A tool started without mpirun runs as that one
 * process and never initialises MPI. Every collective call must be made by every rank. */
#ifndef PC_TOOLS_MPI_RANKS_H
#define PC_TOOLS_MPI_RANKS_H

#include <stdint.h>

#include "pc/status.h"

typedef struct pc_tool_mpi {
    int rank, size;             /* of all the processes */
    int local_rank, local_size; /* of those on this machine */
    int active;                 /* MPI initialised (started by mpirun, in a build with MPI) */
} pc_tool_mpi;

/* Joins the run when the process was started by an MPI launcher; else rank 0 of 1. */
void pc_tool_mpi_init(int *argc, char ***argv, pc_tool_mpi *mpi);
void pc_tool_mpi_finalize(const pc_tool_mpi *mpi);
/* Ends every process of the run with `code` (a tool's error path: no rank waits forever). */
void pc_tool_mpi_abort(const pc_tool_mpi *mpi, int code);

/* A pc_em_sum_fn (pc/learn.h): values [count] summed over the ranks, exactly (integers). */
pc_status pc_tool_mpi_sum(void *ctx, int64_t *values, int64_t count);

/* The rows [lo, hi) of n that this rank scores, in whole units of `unit` rows (the last unit
 * may be short): of the u = ceil(n / unit) units rank r takes [u r / R, u (r + 1) / R). With
 * unit = the batch of one process's run, every row is scored in the same batch, of the same
 * size and rows, as without mpirun: a GPU kernel that picks its strategy by the call's size
 * then gives the same bits too. */
void pc_tool_mpi_shard(const pc_tool_mpi *mpi, int64_t n, int64_t unit, int64_t *lo,
                       int64_t *hi);

/* Every rank's mine [hi - lo] (its shard of n rows in units of `unit`) into all [n] on rank 0,
 * in row order. */
void pc_tool_mpi_gather(const pc_tool_mpi *mpi, const double *mine, double *all, int64_t n,
                        int64_t unit);

/* Waits until every rank has called it (before a timed part, so that its clocks start
 * together). */
void pc_tool_mpi_barrier(const pc_tool_mpi *mpi);

/* The largest of every rank's value, on every rank (the slowest rank's time, say). */
double pc_tool_mpi_max(const pc_tool_mpi *mpi, double value);

/* The lowest rank whose `failed` is nonzero, on every rank; -1 when none failed. Every rank
 * stops at the same step on an error and the one that prints it is agreed. */
int pc_tool_mpi_first_failed(const pc_tool_mpi *mpi, int failed);

#endif
