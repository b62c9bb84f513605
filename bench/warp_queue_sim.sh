#!/bin/sh
# Lists a model's warp-strategy chains (bench/warp_queue_sim.c) and simulates the work queue
# in two orders (bench/warp_queue_sim.py). CPU only.
#   usage: bench/warp_queue_sim.sh BUILD_DIR MODEL.h5 [simulator options]
# BUILD_DIR holds a build of the library (libpc.a, with or without CUDA).
set -eu
build=$1 model=$2
shift 2
cuda=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
hdf5=$(ls -d /usr/lib/*/hdf5/serial 2>/dev/null | head -n 1)
cudalibs=""
[ -d "$cuda/lib64" ] && cudalibs="-L$cuda/lib64 -lcublas -lcudart -lstdc++"
cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Iinclude -Isrc bench/warp_queue_sim.c \
    "$build/libpc.a" -o "$build/warp_queue_sim" ${hdf5:+-L"$hdf5"} -lhdf5 -lz $cudalibs \
    -fopenmp -lm -lpthread
"$build/warp_queue_sim" "$model" > "$build/warp_queue_chains.txt"
python3 bench/warp_queue_sim.py "$build/warp_queue_chains.txt" "$@"
