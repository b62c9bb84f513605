#!/bin/bash
# One call on the GPU machine that traces single work items of fuse's warp and tile strategies:
# applies bench/trace/kernel_trace.patch (timestamps per phase of a warp-strategy chain item of
# sample tile 0, and per unit of the tile strategy's block 0, written to a device buffer and
# printed when the evaluator is destroyed) to a copy of the tree, builds it with WARP_TRACE and
# TILE_TRACE, runs the circuit benchmark at the given points with the strategy forced, and
# analyses the output (bench/trace/warp_trace.py, tile_trace.py).
#   usage: OUT=DIR bench/gpu_trace_device.sh [warp:K:BATCH | tile:K:BATCH ...]
#   e.g.   OUT=/tmp/t bench/gpu_trace_device.sh warp:16:16 warp:32:4096 tile:32:512
# Writes DIR/trace.txt (every point's analysis). The patch is made against the kernels of the
# tree it was committed with; when they have moved on it no longer applies, and this says so.
# Needs .device-deps and .devdata/mnist carried (bench/device_env.sh).
set -u
OUT=${OUT:-bench/results/gpu-trace}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
points=("$@")
[ ${#points[@]} -gt 0 ] || points=(warp:16:16 tile:16:512)
copy=/tmp/pc-trace-src
rm -rf "$copy" && mkdir -p "$copy"
tar --exclude='./build*' -cf - . | (cd "$copy" && tar xf -)
cd "$copy" || exit 1
patch -p1 -s --dry-run < bench/trace/kernel_trace.patch > /dev/null ||
    { echo "bench/trace/kernel_trace.patch does not apply to these kernels: remake it"; exit 1; }
patch -p1 -s < bench/trace/kernel_trace.patch
. bench/device_env.sh
cmake -S . -B build-trace -DCMAKE_BUILD_TYPE=Release -DPC_TESTS=OFF \
    -DCMAKE_CUDA_FLAGS="-DWARP_TRACE -DTILE_TRACE" > /tmp/pc-trace-build.log 2>&1 &&
    cmake --build build-trace -j "$(nproc)" --target pc >> /tmp/pc-trace-build.log 2>&1 ||
    { tail -20 /tmp/pc-trace-build.log; exit 1; }
: > "$OUT/trace.txt"
for p in "${points[@]}"; do
    kind=${p%%:*} rest=${p#*:}
    k=${rest%%:*} b=${rest##*:}
    run=/tmp/pc-trace-$kind-$k-$b
    sh bench/gpu_circuit_bench.sh build-trace "$run" --ks "$k" --batches "$b" --reps 5 \
        --acc-k 0 --model none --only "fuse-$kind" > /dev/null 2> "$run.log"
    {
        echo "==== $kind strategy, K = $k, batch $b"
        sed -n 's/.*"ms": \([0-9.]*\).*/traced run: \1 ms/p' "$run/gpu_circuit.json"
        python3 "bench/trace/${kind}_trace.py" "$run.log"
        echo
    } | tee -a "$OUT/trace.txt"
done
