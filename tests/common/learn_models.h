/* Helpers of the learning tests (test_learn_*.c). */
#ifndef PC_TEST_LEARN_MODELS_H
#define PC_TEST_LEARN_MODELS_H

#include "pc/data.h"
#include "pc/hclt.h"

/* A model of m's shape and structure (parent, trans_index), parameters 0, for pc_em_export to
 * fill; aborts the program when it cannot be made. */
pc_hclt *pc_lm_same_shape(const pc_hclt *m);

/* The shipped model ($PC_SOURCE_DIR/models/mnist.h5, else ./models/mnist.h5) and the MNIST
 * training images: 1, or 0 with the reason printed when either is missing (a test skips). */
int pc_lm_shipped(pc_hclt **model, pc_data **train);

#endif
