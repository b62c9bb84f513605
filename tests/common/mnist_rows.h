/* The shipped model and the first MNIST test images, for the tests that query real digits
 * (test_query_mnist.c, test_cuda_query_mnist.c). */
#ifndef PC_TEST_MNIST_ROWS_H
#define PC_TEST_MNIST_ROWS_H

#include <stdint.h>

#include "pc/hclt.h"

/* Loads models/mnist.h5 (under $PC_SOURCE_DIR, else .) into *model and the first `rows` MNIST
 * test images into x [rows, 784]. Returns 0, or -1 with *model NULL after printing why (the
 * model or MNIST is absent, or the file is not the MNIST test set): the caller skips. */
int pc_test_mnist_rows(int64_t rows, pc_hclt **model, uint8_t *x);

#endif
