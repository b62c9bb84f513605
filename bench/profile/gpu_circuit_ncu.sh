#!/bin/sh
# Profiles one forward-pass kernel of the GPU circuit engine with Nsight Compute: where the warps
# of the kernel wait (warp state statistics), how busy the SMs and memory are, occupancy.
#   usage: bench/profile/gpu_circuit_ncu.sh BUILD_DIR OUT_FILE K BATCH KERNEL_REGEX
# BUILD_DIR holds BUILD_DIR/gpu_circuit_bench (the CMake target of the same name); the kernel
# profiled is the third launch matching KERNEL_REGEX (after two warm-up replays), e.g.
# tile_kernel or fuse_kernel. Run from the repository root.
set -eu
build=$1 out=$2 k=$3 batch=$4 regex=$5
ncu --kernel-name "regex:$regex" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis \
    "$build/gpu_circuit_bench" /tmp/gpu_circuit_ncu.json --ks "$k" --batches "$batch" --reps 1 \
    --acc-k 0 --stream-copies 1 > "$out" 2>&1
