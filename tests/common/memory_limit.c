/* Memory bounds for test children (memory_limit.h). */
#include "memory_limit.h"

#include <sys/resource.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));

static size_t limit;

static void on_malloc(const volatile void *ptr, size_t size) {
    (void)ptr;
    if (size > limit) _exit(PC_TEST_TOO_BIG);
}

static void on_free(const volatile void *ptr) { (void)ptr; }

void pc_test_limit_memory(size_t bytes) {
    limit = bytes;
    __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}
#else
void pc_test_limit_memory(size_t bytes) {
    struct rlimit lim = {bytes, bytes};
    setrlimit(RLIMIT_AS, &lim);
}
#endif
