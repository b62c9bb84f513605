#!/bin/sh
# Runs the GPU circuit benchmark and plots it.
#   usage: bench/harness/gpu_circuit_bench.sh BUILD_DIR OUT_DIR [bench options]
# BUILD_DIR holds a CUDA build with BUILD_DIR/gpu_circuit_bench (the CMake target of the same
# name); run from the repository root (the MNIST finder looks in ./datasets/mnist). Writes
# OUT_DIR/gpu_circuit_<machine>.json and .png (bench/machine.py names the GPU: h200) and prints
# gpu_circuit_plot.py's table.
set -eu
build=$1 out=$2
shift 2
machine=$(python3 bench/machine.py --gpu)
mkdir -p "$out"
"$build/gpu_circuit_bench" "$out/gpu_circuit_$machine.json" "$@"
python3 bench/harness/gpu_circuit_plot.py "$out/gpu_circuit_$machine.json" \
    "$out/gpu_circuit_$machine.png"
