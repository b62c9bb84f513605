/* The per-sample EM kernels of learn_em_kern.h compiled with the AVX2 flags (the build gives
 * *_avx2.c files those); learn_em.c calls them only when the CPU has AVX2. */
#define PC_EM_KERN_NAME avx2
#include "learn/learn_em_kern.h"
