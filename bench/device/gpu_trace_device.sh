#!/bin/bash
# One call on the GPU machine that traces fuse's warp and tile strategies:
#   warp:K:BATCH, tile:K:BATCH  bench/trace/kernel_trace.patch: timestamps per phase of a
#       warp-strategy chain item of sample tile 0, and per unit of the tile strategy's block 0
#       (WARP_TRACE, TILE_TRACE), analysed by bench/trace/warp_trace.py and tile_trace.py;
#   items:K:BATCH  bench/trace/warp_items.patch: start, gather done and end of every item of
#       the warp strategy (WARP_ITEMS), analysed and plotted by bench/trace/warp_items.py.
# Each patch goes to its own copy of the tree, built with its switches; the circuit benchmark
# then runs at each point with the strategy forced, and the stamps are printed when the
# evaluator is destroyed, written to a device buffer during the pass (no printf in kernels).
#   usage: OUT=DIR bench/gpu_trace_device.sh [warp:K:BATCH | tile:K:BATCH | items:K:BATCH ...]
#   e.g.   OUT=/tmp/t bench/gpu_trace_device.sh warp:16:16 tile:32:512 items:64:4096
# Writes DIR/trace.txt (every point's analysis) and DIR/items_K_BATCH.png. A patch is made
# against the kernels of the tree it was committed with; when they have moved on it no longer
# applies, and this says so. Needs .device-deps and .devdata/mnist carried (bench/device_env.sh).
set -u
OUT=${OUT:-bench/results/gpu-trace}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
points=("$@")
[ ${#points[@]} -gt 0 ] || points=(warp:16:16 tile:16:512)
src=$(pwd)
# build NAME PATCH FLAGS: a copy of the tree with PATCH applied, built with FLAGS, in
# /tmp/pc-trace-NAME/build.
build() {
    local copy=/tmp/pc-trace-$1
    rm -rf "$copy" && mkdir -p "$copy"
    (cd "$src" && tar --exclude='./build*' -cf - .) | (cd "$copy" && tar xf -)
    cd "$copy" || exit 1
    patch -p1 -s --dry-run < "$2" > /dev/null ||
        { echo "$2 does not apply to these kernels: remake it"; exit 1; }
    patch -p1 -s < "$2"
    . bench/device_env.sh
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPC_TESTS=OFF -DCMAKE_CUDA_FLAGS="$3" \
        > "$copy.log" 2>&1 && cmake --build build -j "$(nproc)" --target pc >> "$copy.log" 2>&1 ||
        { tail -20 "$copy.log"; exit 1; }
    cd "$src" || exit 1
}
case " ${points[*]}" in *" warp:"* | *" tile:"*)
    build trace bench/trace/kernel_trace.patch "-DWARP_TRACE -DTILE_TRACE" ;;
esac
case " ${points[*]}" in *" items:"*) build items bench/trace/warp_items.patch -DWARP_ITEMS ;; esac
: > "$OUT/trace.txt"
for p in "${points[@]}"; do
    kind=${p%%:*} rest=${p#*:}
    k=${rest%%:*} b=${rest##*:}
    run=/tmp/pc-trace-run-$kind-$k-$b
    copy=/tmp/pc-trace-trace only=fuse-$kind
    [ "$kind" = items ] && copy=/tmp/pc-trace-items only=fuse-warp
    (cd "$copy" && sh bench/gpu_circuit_bench.sh build "$run" --ks "$k" --batches "$b" \
        --reps 5 --acc-k 0 --model none --only "$only" > /dev/null 2> "$run.log")
    {
        echo "==== $kind, K = $k, batch $b"
        sed -n 's/.*"ms": \([0-9.]*\).*/traced run: \1 ms/p' "$run/gpu_circuit.json"
        if [ "$kind" = items ]; then
            python3 bench/trace/warp_items.py "$run.log" "$OUT/items_${k}_$b.png"
        else
            python3 "bench/trace/${kind}_trace.py" "$run.log"
        fi
        echo
    } | tee -a "$OUT/trace.txt"
done
