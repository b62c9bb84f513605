/* pc_parallel_for (parallel.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "base/parallel.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

/* The most threads one call starts (the size of its array of thread handles); the library's
 * callers have at most 64 pieces at a time (the writer's batch of chunks) or far more. */
#define PC_PARALLEL_MAX_THREADS 64

typedef struct job {
    int64_t count, grain;
    void (*fn)(void *ctx, int64_t lo, int64_t hi);
    void *ctx;
    atomic_llong next; /* the next piece's first index */
} job;

static void *run_pieces(void *arg) {
    job *j = arg;
    for (int64_t lo; (lo = atomic_fetch_add(&j->next, j->grain)) < j->count;)
        j->fn(j->ctx, lo, lo + j->grain < j->count ? lo + j->grain : j->count);
    return NULL;
}

/* CPUs in this process's affinity mask (taskset, cgroup cpusets), at least 1. */
static int usable_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void pc_parallel_for(int64_t count, int64_t grain, void (*fn)(void *ctx, int64_t lo, int64_t hi),
                     void *ctx) {
    if (count <= 0) return;
    if (grain < 1) grain = 1;
    job j = {.count = count, .grain = grain, .fn = fn, .ctx = ctx};
    atomic_init(&j.next, 0);
    const int64_t pieces = (count + grain - 1) / grain;
    int64_t want = usable_cpus();
    if (want > pieces) want = pieces;
    if (want > PC_PARALLEL_MAX_THREADS) want = PC_PARALLEL_MAX_THREADS;
    pthread_t helpers[PC_PARALLEL_MAX_THREADS];
    int started = 0;
    while (started < want - 1 && pthread_create(&helpers[started], NULL, run_pieces, &j) == 0)
        started++;
    run_pieces(&j);
    for (int i = 0; i < started; i++) pthread_join(helpers[i], NULL);
}
