#!/bin/bash
# One call on the GPU machine that traces fuse's warp and tile strategies through the engine's
# trace points, compiled in with the CMake option -DPC_TRACE=ON (off in every other build):
#   warp:K:BATCH   timestamps per phase of the warp strategy's chain items of sample tile 0
#                  ("TR" records), analysed by bench/profile/warp_trace.py;
#   tile:K:BATCH   timestamps per unit of the tile strategy's block 0 ("TT" records),
#                  analysed by bench/profile/tile_trace.py;
#   items:K:BATCH  start, gather done and end of every item of the warp strategy ("IT" and "CH"
#                  records), tabulated and plotted by bench/profile/warp_items.py.
# One traced build serves every point; the circuit benchmark then runs at each point with the
# strategy forced, and the records, written to a device buffer during the pass (no printf in
# kernels), are printed to stderr when its evaluator is freed.
#   usage: OUT=DIR bench/device/gpu_trace_device.sh [warp:K:B | tile:K:B | items:K:B ...]
#   e.g.   OUT=/tmp/t bench/device/gpu_trace_device.sh warp:16:16 tile:32:512 items:64:4096
# Writes DIR/trace.txt (every point's analysis), DIR/items_K_BATCH.png and DIR/build.log. Needs
# .devdata/mnist carried (bench/device/device_env.sh).
set -u
OUT=${OUT:-build-device/gpu-trace}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
points=("$@")
[ ${#points[@]} -gt 0 ] || points=(warp:16:16 tile:16:512)
. bench/device/device_env.sh
build="build-trace-dev"
rm -rf "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPC_TESTS=OFF -DPC_TRACE=ON \
    > "$OUT/build.log" 2>&1 &&
    cmake --build "$build" -j "$(nproc)" --target gpu_circuit_bench >> "$OUT/build.log" 2>&1 ||
    { tail -20 "$OUT/build.log"; exit 1; }
: > "$OUT/trace.txt"
for p in "${points[@]}"; do
    kind=${p%%:*} rest=${p#*:}
    k=${rest%%:*} b=${rest##*:}
    run=/tmp/pc-trace-run-$kind-$k-$b
    only=fuse-$kind records="^TR "
    case $kind in
        tile) records="^TT " ;;
        items) only=fuse-warp records="^IT " ;;
        warp) ;;
        *) echo "$p: the kind is warp, tile or items"; exit 2 ;;
    esac
    bench/harness/gpu_circuit_bench.sh "$build" "$run" --ks "$k" --batches "$b" --reps 5 \
        --acc-k 0 --model none --only "$only" > /dev/null 2> "$run.log"
    {
        echo "==== $kind, K = $k, batch $b"
        sed -n 's/.*"ms": \([0-9.]*\).*/traced run: \1 ms/p' "$run"/gpu_circuit_*.json
        if ! grep -q "$records" "$run.log"; then
            echo "no trace records in the run's output: was the engine built with PC_TRACE?"
            tail -5 "$run.log"
        elif [ "$kind" = items ]; then
            python3 bench/profile/warp_items.py "$run.log" "$OUT/items_${k}_$b.png"
        else
            python3 "bench/profile/${kind}_trace.py" "$run.log"
        fi
        echo
    } | tee -a "$OUT/trace.txt"
done
