#!/bin/sh
# Builds and runs the GPU circuit benchmark, then plots it.
#   usage: bench/gpu_circuit_bench.sh BUILD_DIR OUT_DIR [bench options]
# BUILD_DIR holds a CUDA build of the library (libpc.a); run from the repository root (the MNIST
# finder looks in ./datasets/mnist). Writes OUT_DIR/gpu_circuit.json and gpu_circuit.png.
set -eu
build=$1 out=$2
shift 2
cuda=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
hdf5=$(ls -d /usr/lib/*/hdf5/serial 2>/dev/null | head -n 1)
mkdir -p "$out"
cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Iinclude -Isrc bench/gpu_circuit_bench.c \
    "$build/libpc.a" -o "$build/gpu_circuit_bench" -L"$cuda/lib64" ${hdf5:+-L"$hdf5"} \
    -lhdf5 -lz -lcublas -lcudart -lstdc++ -fopenmp -lm -lpthread
"$build/gpu_circuit_bench" "$out/gpu_circuit.json" "$@"
python3 bench/gpu_circuit_plot.py "$out/gpu_circuit.json" "$out/gpu_circuit.png"
