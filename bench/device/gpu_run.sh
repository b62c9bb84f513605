#!/usr/bin/env bash
# The GPU LSE benchmark on a GPU machine: builds the library and the GPU LSE test, runs the
# test, the torch comparison (bench/harness/gpu_lse_compare.py: gpu_lse_M.json, .png, .md, M
# the GPU's name) and, when ncu is present, one profile of the 512 x 128256 fuse kernel.
# Everything lands in $OUT; a short summary is printed last. Run from the repository root:
# `OUT=/some/dir bench/device/gpu_run.sh`. .device-deps (the cmocka .deb files) are used when
# carried.
set -u
OUT=${OUT:-build-device/gpu-run}
BUILD=${BUILD:-build-gpu-lse} # its own folder: a warm machine may hold another build-gpu
mkdir -p "$OUT"
. bench/device/device_env.sh

t0=$(date +%s)
rm -rf "$BUILD" # a fresh configure: cached pkg-config results of an earlier run may be stale
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release &&
       cmake --build "$BUILD" -j "$(nproc)" --target pcinfer test_cuda_lse; } \
        >"$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    echo "BUILD FAILED"
    exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"

t0=$(date +%s)
timeout 180 "$BUILD/test_cuda_lse" >"$OUT/test_cuda_lse.log" 2>&1
test_rc=$?
echo "test_cuda_lse: rc $test_rc, $(( $(date +%s) - t0 )) s"

t0=$(date +%s)
timeout 360 python3 bench/harness/gpu_lse_compare.py --lib "$BUILD/src/libpcinfer.so" \
    --out "$OUT" >"$OUT/bench.log" 2>&1
bench_rc=$?
echo "gpu_lse_compare: rc $bench_rc, $(( $(date +%s) - t0 )) s"

if [ "${PC_NCU:-1}" = 1 ] && command -v ncu >/dev/null 2>&1; then
    metrics=dram__bytes_read.sum,gpu__time_duration.sum
    metrics=$metrics,dram__throughput.avg.pct_of_peak_sustained_elapsed
    timeout 120 ncu --clock-control none --kernel-name regex:rows_block --launch-skip 2 \
        --launch-count 1 --metrics "$metrics" \
        python3 bench/profile/gpu_lse_ncu.py --lib "$BUILD/src/libpcinfer.so" >"$OUT/ncu.log" 2>&1
    echo "ncu: rc $?"
    grep -E "dram__|gpu__time" "$OUT/ncu.log" | head -5
fi

echo "---- test (last lines) ----"
grep -E "max|FAILED|PASSED|skipped|seed" "$OUT/test_cuda_lse.log" | tail -25
echo "---- benchmark ----"
tail -15 "$OUT/bench.log"
cat "$OUT"/gpu_lse_*.md 2>/dev/null
exit $(( test_rc != 0 || bench_rc != 0 ))
