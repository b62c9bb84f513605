/* The per-sample EM kernels of learn_em_kern.h for the baseline instruction set. */
#define PC_EM_KERN_NAME generic
#include "learn/learn_em_kern.h"
