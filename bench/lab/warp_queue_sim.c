/* Lists the fuse warp strategy's chains of a model, in the plan's (queue) order, for
 * bench/warp_queue_sim.py: one line per chain,
 *   <groups> | <children:variables of each group, bottom first> | <chains its bottom reads>
 *   usage: warp_queue_sim MODEL.h5 [MAX_LEN]   (MAX_LEN: groups per chain, default 4, the
 *   engine's short chains, PC_GPU_CHAIN_SHORT) */
#include <stdio.h>
#include <stdlib.h>

#include "eval/cuda/gpu_plan.h"
#include "pc/circuit.h"
#include "pc/hclt.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.h5 [MAX_LEN]\n", argv[0]);
        return 2;
    }
    pc_hclt *model = NULL;
    pc_circuit *c = NULL;
    pc_gpu_chains ch = {0};
    pc_status st = pc_hclt_load(argv[1], &model);
    if (st == PC_OK) st = pc_circuit_compile(model, &c);
    if (st == PC_OK) st = pc_gpu_chain_plan(c, argc > 2 ? atoi(argv[2]) : PC_GPU_CHAIN_SHORT,
                                            PC_GPU_CHAIN_WINDOW_VARS, &ch);
    if (st != PC_OK) {
        fprintf(stderr, "%s: %s\n", argv[1], pc_last_error());
        return 1;
    }
    for (int32_t i = 0; i < ch.num_chains; i++) {
        printf("%d |", ch.begin[i + 1] - ch.begin[i]);
        for (int32_t m = ch.begin[i]; m < ch.begin[i + 1]; m++) {
            const int32_t g = ch.groups[m];
            printf(" %d:%d", c->child_start[g + 1] - c->child_start[g],
                   c->var_start[g + 1] - c->var_start[g]);
        }
        printf(" |");
        const int32_t b = ch.groups[ch.begin[i]];
        for (int32_t k = c->child_start[b]; k < c->child_start[b + 1]; k++)
            printf(" %d", ch.child_chain[k]);
        printf("\n");
    }
    pc_gpu_chains_free(&ch);
    pc_circuit_free(c);
    pc_hclt_free(model);
    return 0;
}
