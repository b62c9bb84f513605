/* pc_parallel_for: CPU work spread over plain threads, for library code outside the evaluators
 * (which use OpenMP across a batch). Internal to the library. */
#ifndef PC_BASE_PARALLEL_H
#define PC_BASE_PARALLEL_H

#include <stdint.h>

/* Runs fn(ctx, lo, hi) over [0, count) in pieces of `grain` (the last one shorter), on up to
 * one thread per CPU this process may run on, the calling thread among them; returns when every
 * piece is done. Pieces run in any order and at the same time: fn must only write what its
 * piece owns. Plain threads started per call, not OpenMP, so that it works in a child forked
 * after OpenMP ran (libgomp cannot start its threads there); a thread that cannot be started
 * leaves its pieces to the others. count <= grain runs on the calling thread alone. */
void pc_parallel_for(int64_t count, int64_t grain, void (*fn)(void *ctx, int64_t lo, int64_t hi),
                     void *ctx);

#endif
