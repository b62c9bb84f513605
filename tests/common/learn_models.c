/* Helpers of the learning tests (learn_models.h). */
#include "learn_models.h"

#include "mnist_find.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pc_hclt *pc_lm_same_shape(const pc_hclt *m) {
    pc_hclt *out = NULL;
    if (pc_hclt_create(m->num_vars, m->num_cats, m->num_latents, m->num_trans, &out) != PC_OK) {
        fprintf(stderr, "pc_lm_same_shape: %s\n", pc_last_error());
        abort();
    }
    memcpy(out->parent, m->parent, (size_t)m->num_vars * sizeof(int32_t));
    memcpy(out->trans_index, m->trans_index, (size_t)m->num_vars * sizeof(int32_t));
    return out;
}

int pc_lm_shipped(pc_hclt **model, pc_data **train) {
    char path[4096], model_path[4096];
    const char *src = getenv("PC_SOURCE_DIR");
    snprintf(model_path, sizeof model_path, "%s/models/mnist.h5", src ? src : ".");
    *model = NULL, *train = NULL;
    if (pc_hclt_load(model_path, model) != PC_OK ||
        pc_tool_find_mnist(NULL, "train-images-idx3-ubyte.gz", path, sizeof path) != PC_OK ||
        pc_data_load_idx(path, train) != PC_OK) {
        printf("the shipped model or MNIST is missing: %s\n", pc_last_error());
        pc_hclt_free(*model);
        *model = NULL;
        return 0;
    }
    return 1;
}
