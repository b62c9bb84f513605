/* Bounds the memory of a test's child process, so that code that allocates what a file's
 * header claims fails even where allocation is lazy: RLIMIT_AS in a normal build; under
 * AddressSanitizer (which reserves terabytes of address space, so RLIMIT_AS breaks it) a hook
 * that ends the process with exit status PC_TEST_TOO_BIG on any single allocation above the
 * bound. Call it in a forked child only. */
#ifndef PC_TEST_MEMORY_LIMIT_H
#define PC_TEST_MEMORY_LIMIT_H

#include <stddef.h>

#define PC_TEST_TOO_BIG 86

void pc_test_limit_memory(size_t bytes);

#endif
