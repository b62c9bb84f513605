#!/bin/bash
# One call on the GPU machine: build the circuit benchmark and test_cuda_eval, run the test, run
# the benchmark, leave everything in $OUT (build.log, test.log, bench.log, table.md,
# gpu_circuit_M.json, gpu_circuit_M.png; M names the GPU, bench/machine.py) and print a summary.
#   usage: OUT=DIR bench/device/gpu_circuit_device.sh [bench options]
# Needs, carried with the checkout: .device-deps (the cmocka .deb files) and .devdata/mnist
# (the four MNIST .gz files). Extra arguments go to the benchmark; TEST_TIMEOUT and
# BENCH_TIMEOUT (seconds) bound the two runs.
set -u
OUT=${OUT:-build-device/gpu-circuit}
mkdir -p "$OUT"
. bench/device/device_env.sh
build="build-gpucircuit-dev"
t0=$(date +%s)
cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/tmp/deps/usr \
    > "$OUT/build.log" 2>&1 &&
    cmake --build $build -j "$(nproc)" --target gpu_circuit_bench >> "$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
cmake --build $build -j "$(nproc)" --target test_cuda_eval >> "$OUT/build.log" 2>&1 ||
    tail -20 "$OUT/build.log"
echo "build $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
grep -m1 "model name" /proc/cpuinfo; grep -m1 "^flags" /proc/cpuinfo | cut -c1-400; nproc
nvcc --version | tail -1
(cd $build && timeout "${TEST_TIMEOUT:-120}" ./test_cuda_eval) > "$OUT/test.log" 2>&1
echo "test rc=$? $(( $(date +%s) - t0 )) s"
OMP_NUM_THREADS=$(nproc) timeout "${BENCH_TIMEOUT:-240}" bench/harness/gpu_circuit_bench.sh $build \
    "$OUT" "$@" > "$OUT/table.md" 2> "$OUT/bench.log"
echo "bench rc=$? $(( $(date +%s) - t0 )) s"
grep -v "^\[ *OK\|RUN" "$OUT/test.log" | tail -40
tail -45 "$OUT/bench.log"
cat "$OUT/table.md"
