#!/bin/bash
# One call on the GPU machine that runs the GPU circuit tests (test_cuda_eval: every backend and
# fuse strategy on every shape) under NVIDIA's compute-sanitizer: memcheck (out-of-bounds and
# misaligned accesses, including cp.async copies) and racecheck (shared-memory hazards between
# the threads of a block), each under its own timeout, with a fixed test seed.
#   usage: OUT=DIR [KERNELS=NAME] bench/device/gpu_sanitize_device.sh [MEMCHECK_S [RACECHECK_S]]
# KERNELS limits the checks to kernels whose name contains NAME (the others run unchecked, at
# full speed), e.g. KERNELS=warp_kernel.
# Writes DIR/build.log, DIR/memcheck.log, DIR/racecheck.log and prints their summaries. Needs
# .device-deps (the cmocka .deb files) carried; run from the repository root.
set -u
OUT=${OUT:-build-device/gpu-sanitize}
mem_s=${1:-170} race_s=${2:-120}
only=()
[ -n "${KERNELS:-}" ] && only=(--kernel-name "kns=$KERNELS")
mkdir -p "$OUT"
. bench/device/device_env.sh
build="build-sanitize-dev"
out=$(cd "$OUT" && pwd)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/tmp/deps/usr \
    > "$out/build.log" 2>&1
cmake --build "$build" -j "$(nproc)" --target test_cuda_eval >> "$out/build.log" 2>&1 ||
    { tail -20 "$out/build.log"; exit 1; }
cd "$build" || exit 1
PC_TEST_SEED=12345 timeout "$mem_s" compute-sanitizer --tool memcheck "${only[@]}" \
    --print-limit 20 \
    ./test_cuda_eval > "$out/memcheck.log" 2>&1
echo "memcheck: rc $?"
PC_TEST_SEED=12345 timeout "$race_s" compute-sanitizer --tool racecheck "${only[@]}" \
    --racecheck-report hazard \
    --print-limit 20 ./test_cuda_eval > "$out/racecheck.log" 2>&1
echo "racecheck: rc $?"
for t in memcheck racecheck; do
    echo "==== $t"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Hazard|PASSED|FAILED" "$out/$t.log" |
        sort | uniq -c | head -20
    tail -3 "$out/$t.log"
done
