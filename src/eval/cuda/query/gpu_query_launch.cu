/* The launch of the GPU query kernels (gpu_query.cuh): their shared memory and grid. */
#include "eval/cuda/query/gpu_query.cuh"

#include "base/cuda_check.cuh"

size_t pc_gq_smem_bytes(const pc_gq_launch *l, const pc_gq_args *a, int teams) {
    return (teams ? l->shape.smem : 0) +
           (a->z_shared ? (size_t)a->rows * a->G * sizeof(int32_t) : 0);
}

pc_status pc_gq_launch_kernel(const void *kernel, const pc_gq_launch *l, const pc_gq_args *a,
                              int teams, cudaStream_t stream) {
    pc_status st = PC_OK;
    const unsigned blocks = (unsigned)((a->n + a->rows - 1) / a->rows);
    const size_t smem = pc_gq_smem_bytes(l, a, teams);
    void *args[] = {(void *)a};
    if (smem > 48 * 1024)
        PC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)smem));
    PC_CUDA_CHECK(cudaLaunchKernel(kernel, dim3(blocks),
                                   dim3(teams ? l->shape.threads : PC_GQ_FLAT_THREADS), args,
                                   smem, stream));
fail:
    return st;
}
