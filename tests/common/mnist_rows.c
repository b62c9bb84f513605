/* The tests' MNIST fixture (mnist_rows.h). */
#include "mnist_rows.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mnist_find.h"
#include "pc/data.h"
#include "pc/status.h"

#define MNIST_PIXELS 784

int pc_test_mnist_rows(int64_t rows, pc_hclt **model, uint8_t *x) {
    char path[4096], mnist[4096];
    const char *src = getenv("PC_SOURCE_DIR");
    pc_data *test = NULL;
    *model = NULL;
    snprintf(path, sizeof path, "%s/models/mnist.h5", src ? src : ".");
    if (pc_hclt_load(path, model) != PC_OK ||
        pc_tool_find_mnist(NULL, "t10k-images-idx3-ubyte.gz", mnist, sizeof mnist) != PC_OK) {
        print_message("  skipped: %s\n", pc_last_error());
        pc_hclt_free(*model);
        *model = NULL;
        return -1;
    }
    if (pc_data_load_idx(mnist, &test) != PC_OK || test->width != MNIST_PIXELS ||
        test->count < rows) {
        print_message("  skipped: %s is not the MNIST test set\n", mnist);
        pc_data_free(test);
        pc_hclt_free(*model);
        *model = NULL;
        return -1;
    }
    memcpy(x, test->values, (size_t)rows * MNIST_PIXELS);
    pc_data_free(test);
    return 0;
}
