/* The message-slot plan of the GPU circuit engine (gpu_plan.h). */
#include "eval/cuda/gpu_plan.h"
#include "base/fail.h"

#include <stdlib.h>

pc_status pc_gpu_plan(const pc_circuit *c, pc_gpu_group *groups, int32_t *num_slots) {
    if (!c || !groups || !num_slots) return pc_fail(PC_ERR_ARG, "pc_gpu_plan: NULL argument");
    const int32_t G = c->num_groups;
    /* A FIFO of freed slots with their readers: every group but the root is read once. */
    int32_t *fifo_slot = malloc(sizeof(int32_t) * (size_t)(G + 1));
    int32_t *fifo_reader = malloc(sizeof(int32_t) * (size_t)(G + 1));
    int32_t *layer_of = malloc(sizeof(int32_t) * (size_t)(G + 1));
    if (!fifo_slot || !fifo_reader || !layer_of) {
        free(fifo_slot), free(fifo_reader), free(layer_of);
        return pc_fail(PC_ERR_NOMEM, "GPU plan for %d groups: out of host memory", G);
    }
    for (int32_t l = 0; l < c->num_layers; l++)
        for (int32_t g = c->layer_start[l]; g < c->layer_start[l + 1]; g++) layer_of[g] = l;
    int32_t head = 0, tail = 0, slots = 0;
    for (int32_t g = 0; g < G; g++) {
        pc_gpu_group *h = &groups[g];
        h->var_begin = c->var_start[g], h->var_end = c->var_start[g + 1];
        h->child_begin = c->child_start[g], h->child_end = c->child_start[g + 1];
        h->wait = -1;
        if (c->group_parent[g] < 0)
            h->slot = -1;
        else if (head < tail && layer_of[fifo_reader[head]] < layer_of[g])
            h->slot = fifo_slot[head], h->wait = fifo_reader[head], head++;
        else
            h->slot = slots++;
        /* g reads its children's messages: their slots are free once g has run. */
        for (int32_t i = h->child_begin; i < h->child_end; i++) {
            fifo_slot[tail] = groups[c->group_children[i]].slot;
            fifo_reader[tail] = g;
            tail++;
        }
    }
    free(fifo_slot), free(fifo_reader), free(layer_of);
    *num_slots = slots > 0 ? slots : 1;
    return PC_OK;
}

/* Waves of `grid` blocks that `items` take. */
static int64_t waves(int64_t items, int32_t grid) { return (items + grid - 1) / grid; }

int32_t pc_gpu_split_layers(const pc_circuit *c, int64_t wide_items, int64_t narrow_items,
                            double wide_cost, int64_t min_wide, int32_t grid) {
    const int32_t L = c->num_layers;
    if (L == 0 || (int64_t)(c->layer_start[1] - c->layer_start[0]) * wide_items < min_wide)
        return 0;
    /* Everything narrow first, then move the boundary up one layer at a time. */
    double t = 0.0;
    for (int32_t l = 0; l < L; l++) {
        const int64_t w = c->layer_start[l + 1] - c->layer_start[l];
        t += (double)waves(w * narrow_items, grid);
    }
    double best = t;
    int32_t split = 0;
    for (int32_t l = 0; l < L; l++) {
        const int64_t w = c->layer_start[l + 1] - c->layer_start[l];
        t += wide_cost * (double)waves(w * wide_items, grid);
        t -= (double)waves(w * narrow_items, grid);
        if (t < best) best = t, split = l + 1;
    }
    return split;
}

double pc_gpu_group_cost(const pc_gpu_tuning *t, int32_t sources) {
    return 1.0 + t->source_cost * sources;
}
