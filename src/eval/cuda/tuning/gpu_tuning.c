/* The table for a compute capability (gpu_tuning.h). */
#include "eval/cuda/tuning/gpu_tuning.h"

const pc_gpu_tuning *pc_gpu_tuning_for(int major, int minor) {
    (void)minor; /* sm_90a shares sm_90's table */
    return major == 9 ? &pc_gpu_tuning_sm90 : &pc_gpu_tuning_default;
}
