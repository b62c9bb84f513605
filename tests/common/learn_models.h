/* Helpers of the learning tests (test_learn_*.c). */
#ifndef PC_TEST_LEARN_MODELS_H
#define PC_TEST_LEARN_MODELS_H

#include "pc/hclt.h"

/* A model of m's shape and structure (parent, trans_index), parameters 0, for pc_em_export to
 * fill; aborts the program when it cannot be made. */
pc_hclt *pc_lm_same_shape(const pc_hclt *m);

#endif
