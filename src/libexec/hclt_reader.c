/* pcinfer-hclt-reader: parses one model file for pc_hclt_load_isolated (src/model) and answers
 * on stdout in the format of src/model/hclt_wire.h. Not meant to be run by hand.
 *
 *   pcinfer-hclt-reader MAX_BYTES CPU_SECONDS MODEL.h5
 *
 * Before it touches the file it limits itself: no core files, CPU_SECONDS of CPU time and an
 * address space of PC_READER_BASE_BYTES for the file's structure. Once the sizes are checked
 * against the file it announces them and raises both limits to what the model's data needs
 * (the hard limits, set first, cap that at MAX_BYTES). It exits without running libhdf5's exit
 * handlers: after a malformed file those can crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/fail.h"
#include "model/hclt_internal.h"
#include "model/hclt_wire.h"

/* Address space for the program, libhdf5 and its caches, before the model: the program maps
 * about 40 MiB at start; libhdf5 decodes a chunk (at most 256 MiB) at a time. */
#define PC_READER_BASE_BYTES ((rlim_t)512 << 20)

#if defined(__SANITIZE_ADDRESS__)
#define PC_READER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PC_READER_ASAN 1
#endif
#endif

#ifdef PC_READER_ASAN
/* AddressSanitizer reserves terabytes of address space, so RLIMIT_AS cannot bound it: its own
 * limits do instead, fixed for the sanitizer build (768 MiB of RSS, allocations of at most
 * 512 MiB fail), and leak reports at exit would only hide the answer's status. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "hard_rss_limit_mb=768:max_allocation_size_mb=512:allocator_may_return_null=1:"
           "detect_leaks=0";
}
#endif

/* Lowers a limit to soft/hard; a caller's lower hard limit stays in force. */
static int set_limit(int resource, rlim_t soft, rlim_t hard) {
    struct rlimit now;
    if (getrlimit(resource, &now) != 0) return 0;
    if (now.rlim_max != RLIM_INFINITY && hard > now.rlim_max) hard = now.rlim_max;
    struct rlimit lim = {soft < hard ? soft : hard, hard};
    return setrlimit(resource, &lim) == 0;
}

/* Whole seconds for RLIMIT_CPU, rounded up. */
static rlim_t cpu_seconds(double seconds) {
    rlim_t s = (rlim_t)seconds;
    return (double)s < seconds ? s + 1 : s;
}

typedef struct limits {
    double header_seconds;
} limits;

/* The sizes passed the file checks: announce them, then allow the data its time and memory. */
static pc_status on_sizes(void *ctx, int32_t V, int32_t C, int32_t K, int32_t T) {
    const limits *lim = ctx;
    int64_t bytes = pc_hclt_model_bytes(V, C, K, T);
    struct rlimit hard;
    if (getrlimit(RLIMIT_CPU, &hard) == 0)
        set_limit(RLIMIT_CPU, cpu_seconds(pc_hclt_data_seconds(lim->header_seconds, bytes)),
                  hard.rlim_max);
#ifndef PC_READER_ASAN
    if (getrlimit(RLIMIT_AS, &hard) == 0)
        set_limit(RLIMIT_AS, PC_READER_BASE_BYTES + (rlim_t)bytes, hard.rlim_max);
#endif
    return pc_wire_send_sizes(STDOUT_FILENO, V, C, K, T);
}

int main(int argc, char **argv) {
    char *end1 = NULL, *end2 = NULL;
    long long max_bytes = argc == 4 ? strtoll(argv[1], &end1, 10) : 0;
    double seconds = argc == 4 ? strtod(argv[2], &end2) : 0;
    if (argc != 4 || *end1 || *end2 || max_bytes < 1 || !(seconds > 0 && seconds < 1e6)) {
        fprintf(stderr, "usage: pcinfer-hclt-reader MAX_BYTES CPU_SECONDS MODEL.h5 (started by "
                        "pc_hclt_load_isolated; it answers on stdout)\n");
        return 2;
    }
    limits lim = {seconds};
    rlim_t cpu_most = cpu_seconds(pc_hclt_data_seconds(seconds, max_bytes)) + 1;
    int ok = set_limit(RLIMIT_CORE, 0, 0) &&
             set_limit(RLIMIT_CPU, cpu_seconds(seconds), cpu_most);
#ifndef PC_READER_ASAN
    ok = ok && set_limit(RLIMIT_AS, PC_READER_BASE_BYTES,
                         PC_READER_BASE_BYTES + (rlim_t)max_bytes);
#endif
    pc_status st = PC_ERR_INTERNAL;
    pc_hclt *m = NULL;
    if (!ok) {
        pc_fail(PC_ERR_INTERNAL, "%s: the model reader cannot set its limits", argv[3]);
    } else {
        const pc_hclt_read_hook hook = {on_sizes, &lim};
        st = pc_hclt_read(argv[3], NULL, 0, max_bytes, &hook, &m);
    }
    if (st == PC_OK)
        st = pc_wire_send_model(STDOUT_FILENO, m);
    else
        pc_wire_send_error(STDOUT_FILENO, st, pc_last_error());
    _exit(st == PC_OK ? 0 : 1);
}
