#!/bin/bash
# One call on the GPU machine that shows where a circuit kernel spends its time, instruction by
# instruction: builds the circuit benchmark, then for each "K:BATCH" point given profiles the
# third launch of KERNEL_REGEX with Nsight Compute (warp states, scheduler, source counters)
# and breaks the executed SASS down by opcode and basic block (bench/profile/ncu_sass_agg.py),
# with each block's share of the stall samples, and the stall reasons.
#   usage: OUT=DIR bench/device/gpu_circuit_sass_device.sh KERNEL_REGEX K:BATCH [K:BATCH ...]
# Writes DIR/sass_K_BATCH.txt per point and DIR/build.log. Needs .devdata/mnist carried; run
# from the repository root.
set -u
OUT=${OUT:-build-device/gpu-sass}
regex=$1
shift
mkdir -p "$OUT"
build="build-gpusass-dev"
. bench/device/device_env.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPC_TESTS=OFF > "$OUT/build.log" 2>&1
cmake --build "$build" -j "$(nproc)" --target gpu_circuit_bench >> "$OUT/build.log" 2>&1 || {
    tail -20 "$OUT/build.log"; exit 1; }
for point in "$@"; do
    k=${point%%:*} b=${point##*:}
    rep=/tmp/sass_${k}_${b}
    f="$OUT/sass_${k}_${b}.txt"
    ncu -f -o "$rep" --kernel-name "regex:$regex" --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section SchedulerStats --section SourceCounters --section InstructionStats \
        "$build/gpu_circuit_bench" /tmp/sass.json --ks "$k" --batches "$b" --reps 1 \
        --acc-k 0 --stream-copies 1 > /dev/null 2>&1
    ncu -i "$rep.ncu-rep" --print-summary none > "$f" 2>&1
    ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.csv" 2>>"$f"
    ncu -i "$rep.ncu-rep" --page raw --csv > "$rep.raw.csv" 2>>"$f"
    python3 bench/profile/ncu_sass_agg.py "$rep.csv" 30 "$rep.raw.csv" >> "$f" 2>&1
    echo "==== $point"; grep -E "Duration|Issued Warp|Warp Cycles Per Issued|Registers Per" "$f"
done
