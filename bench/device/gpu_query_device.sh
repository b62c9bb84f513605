#!/bin/bash
# The GPU queries on a GPU machine, in one call: builds their tests and benchmark, runs the
# tests (test_cuda_query_plan, test_cuda_query, test_cuda_query_mnist, and test_query_api and
# test_query_enum, which run GPU cases where there is a GPU) and
# bench/harness/gpu_query_bench.c, each under a timeout, and leaves in
# $OUT two files: gpu_query.tar.gz (every log, the benchmark's JSON lines gpu_query_M.jsonl and
# table.md, M the GPU's name from bench/machine.py) and summary.txt, which it also prints.
#   usage: OUT=DIR bench/device/gpu_query_device.sh
# Run from the repository root. Needs, carried with the checkout: .device-deps (the cmocka
# .deb files) and .devdata/mnist (the four MNIST .gz files). TEST_TIMEOUT and BENCH_TIMEOUT
# (seconds) bound each test and the benchmark, DEADLINE (seconds from the start) the whole
# call: a step gets at most what is left of it.
set -u
OUT=${OUT:-build-device/gpu-query}
BUILD=${BUILD:-build-gpuquery-dev}
mkdir -p "$OUT"
logs=$(mktemp -d)
summary="$logs/summary.txt"
. bench/device/device_env.sh
machine=$(python3 bench/machine.py --gpu 2>/dev/null || echo gpu)
tests="test_cuda_query_plan test_cuda_query test_cuda_query_mnist test_query_api test_query_enum"

finish() {
    cp "$summary" "$OUT/summary.txt"
    tar czf "$OUT/gpu_query.tar.gz" -C "$logs" .
    cat "$summary"
}

t0=$(date +%s)
# Seconds a step may take: its own limit, or what is left before the deadline.
limit() {
    local left=$(( ${DEADLINE:-170} - ($(date +%s) - t0) ))
    (( left < 1 )) && left=1
    echo $(( $1 < left ? $1 : left ))
}
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    grep -m1 "model name" /proc/cpuinfo
    echo "cores: $(nproc); $(nvcc --version | tail -1)"
} > "$summary" 2>&1
# shellcheck disable=SC2086
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/tmp/deps/usr &&
       cmake --build "$BUILD" -j "$(nproc)" --target $tests gpu_query_bench; } \
        > "$logs/build.log" 2>&1; then
    { echo "BUILD FAILED"; grep -E "error|Error" "$logs/build.log" | head -30; } >> "$summary"
    finish
    exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s" >> "$summary"

# Through ctest, which sets the environment the tests read (PC_SOURCE_DIR for the model).
for t in $tests; do
    t1=$(date +%s)
    ctest --test-dir "$BUILD" -R "^$t\$" -V --timeout "$(limit "${TEST_TIMEOUT:-60}")" \
        > "$logs/$t.log" 2>&1
    rc=$?
    verdict=$(grep -E "tests passed|Skipped|Not Run|Timeout" "$logs/$t.log" | tail -1)
    echo "$t: rc $rc, $(( $(date +%s) - t1 )) s: $verdict" >> "$summary"
    # The failures' messages and the tests' own measurements (print_message lines).
    grep -E "^[0-9]+:   [^ ]|FAILED|rror|test seed" "$logs/$t.log" | sed 's/^[0-9]*: //' |
        head -25 >> "$summary"
done

t1=$(date +%s)
timeout "$(limit "${BENCH_TIMEOUT:-120}")" "$BUILD/gpu_query_bench" \
    "$logs/gpu_query_$machine.jsonl" > "$logs/table.md" 2> "$logs/bench.log"
echo "gpu_query_bench: rc $?, $(( $(date +%s) - t1 )) s" >> "$summary"
{ tail -5 "$logs/bench.log"; cat "$logs/table.md"; } >> "$summary"
finish
