/* The per-sample EM kernels of learn_em_kern.h compiled with the AVX512 flags (the build gives
 * *_avx512.c files those); learn_em.c calls them only when the CPU has AVX512. */
#define PC_EM_KERN_NAME avx512
#include "learn/learn_em_kern.h"
