#!/usr/bin/env bash
# The main job: score the whole MNIST test set with the shipped HCLT (models/mnist.h5) on the
# best backend available (fuse with a GPU, cpu-fuse without one) and report the error against the
# FP64 reference.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
exec "$build/pcinfer" --compare ref models/mnist.h5
