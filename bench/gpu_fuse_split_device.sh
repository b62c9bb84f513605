#!/bin/bash
# One call on the GPU machine that measures how the persistent fuse kernel's wide/narrow split
# depends on FUSE_WIDE_GAIN (src/layers/cuda_fuse.cu: how much faster a wide item does its work
# than narrow items do): one build per value given (bench/gpu_fuse_variants_device.sh, which
# also runs test_cuda_eval on each), fuse timed at K = 64, 128, 256 and batches 512, 4096 on the
# MNIST structure.
#   usage: OUT=DIR bench/gpu_fuse_split_device.sh GAIN [GAIN ...]
# FUSE_WIDE_GAIN replaces every shape's own gain. Writes DIR/gain_GAIN.json per value and
# DIR/split.md (one table). Run from the repository root with .device-deps and .devdata/mnist
# carried.
set -u
OUT=${OUT:-bench/results/gpu-split}
specs=()
for gain in "$@"; do specs+=("gain_$gain=-DFUSE_WIDE_GAIN=$gain"); done
OUT=$OUT KS=64,128,256 ONLY=fuse bash bench/gpu_fuse_variants_device.sh "${specs[@]}" > /dev/null
cp "$OUT/variants.md" "$OUT/split.md"
cat "$OUT/split.md"
