/* Helpers of the learning tests (learn_models.h). */
#include "learn_models.h"

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
