/* CHECK(x) for the standalone GPU benchmarks (bench/gpu_*.cu, each built by nvcc alone): a CUDA
 * call that fails prints the call and the error and ends the program with status 1. */
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                               \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                           \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
