#!/bin/bash
# One call on the GPU machine that checks every GPU part and re-runs the GPU circuit benchmark:
# a fresh build, the GPU test programs (test_cuda_lse, test_logprob_cuda, test_cuda_eval, and
# test_gpu_log for the device log), the circuit benchmark (bench/harness/gpu_circuit_bench.c) at
# K = 16, 32, 64, 128, 256 and batches 512, 4096 (with the accuracy of fuse, int and gemm
# against ref on the MNIST test set for the shipped model and a K = 64 model), the exact
# product alone in cuBLAS at the same points (the lab's gpu_product_floor, drawn and tabulated
# with the times), then `pcinfer --kernel fuse models/mnist.h5 --compare ref` on the full test
# set.
# Every step runs whatever the earlier ones did, under its own timeout; the summary printed last
# gives each step's exit status (0 = passed, 124 = timed out, 77 = skipped, "-" = not built).
# $OUT receives, under the names of bench/results/current (M = the GPU, bench/machine.py):
# gpu_circuit_M.json, gpu_circuit_M.png, gpu_product_floor_M.json, and the logs build.log,
# tests.log, bench.log, table.md (every timing point against its floors), product_floor.md,
# pcinfer.json, summary.txt.
# Needs, carried with the checkout: .device-deps (the cmocka .deb files) and .devdata/mnist
# (the four MNIST .gz files). Run from the repository root; about 4 minutes on an H200 host.
set -u
OUT=${OUT:-build-device/gpu-all}
mkdir -p "$OUT"
build="build-gpuall-dev"
summary="$OUT/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
T0=$(date +%s)
since() { echo "$(( $(date +%s) - T0 )) s"; }

. bench/device/device_env.sh
machine=$(python3 bench/machine.py --gpu) || machine=gpu

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nvcc --version | tail -1
    grep -m1 "model name" /proc/cpuinfo
    grep -m1 "^flags" /proc/cpuinfo | cut -c1-400
    # The copy of the tree this runs on may carry a stale git view: name the sources by content
    # (the same command on a checkout of the commit gives the same hash).
    echo "cores: $(nproc); sources: $(sh bench/device/source_hash.sh); results named $machine"
} | tee -a "$summary"

# ---- build (fresh folder: cached configure results of an earlier run may be stale) ----------
rm -rf "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/tmp/deps/usr \
    > "$OUT/build.log" 2>&1
note "configure: rc $? ($(since))"
# Programs are targets <name>_tool (the library holds the name pcinfer); lab programs lab_<name>.
for t in pcinfer_tool test_cuda_lse test_logprob_cuda test_cuda_eval test_gpu_log \
    gpu_circuit_bench lab_gpu_product_floor; do
    cmake --build "$build" -j "$(nproc)" --target "$t" >> "$OUT/build.log" 2>&1
    note "build $t: rc $? ($(since))"
done

# ---- GPU tests -------------------------------------------------------------------------------
: > "$OUT/tests.log"
for spec in test_cuda_lse:120 test_logprob_cuda:60 test_cuda_eval:150 test_gpu_log:60; do
    t=${spec%%:*} limit=${spec##*:}
    echo "==== $t (timeout $limit s) ====" >> "$OUT/tests.log"
    if [ -x "$build/$t" ]; then
        (cd "$build" && timeout "$limit" "./$t") >> "$OUT/tests.log" 2>&1
        note "$t: rc $? ($(since))"
    else
        note "$t: - (not built)"
    fi
done

# ---- circuit benchmark (times, accuracy of the shipped model, throughput) ---------------------
circuit="$OUT/gpu_circuit_$machine.json" floor="$OUT/gpu_product_floor_$machine.json"
if [ -x "$build/gpu_circuit_bench" ]; then
    OMP_NUM_THREADS=$(nproc) timeout 240 bench/harness/gpu_circuit_bench.sh "$build" "$OUT" \
        --ks 16,32,64,128,256 --batches 512,4096 --acc-k 64 > "$OUT/table.md" 2> "$OUT/bench.log"
    note "gpu_circuit_bench: rc $? ($(since))"
else
    note "gpu_circuit_bench: - (not built)"
fi

# ---- the exact product alone (cuBLAS) at the benchmark's points, then the plot again with it ----
if [ -s "$circuit" ] && [ -x "$build/lab/gpu_product_floor" ]; then
    # The K x K sum groups: sum_params = G K^2 + K (the root's K weights).
    groups=$(python3 -c 'import json, sys
r = [x for x in json.load(open(sys.argv[1]))["results"] if x["kind"] == "timing"][0]
print((r["sum_params"] - r["K"]) // (r["K"] * r["K"]))' "$circuit")
    timeout 150 "$build/lab/gpu_product_floor" all "$groups" "$floor" \
        > "$OUT/product_floor.md" 2>> "$OUT/bench.log"
    note "gpu_product_floor ($groups groups): rc $? ($(since))"
    [ -s "$floor" ] && python3 bench/harness/gpu_circuit_plot.py "$circuit" \
        "$OUT/gpu_circuit_$machine.png" "$floor" > "$OUT/table.md"
else
    note "gpu_product_floor: - (no benchmark results or not built)"
fi

# ---- pcinfer, fuse against ref on the full MNIST test set ------------------------------------
if [ -x "$build/pcinfer" ]; then
    timeout 90 "$build/pcinfer" --kernel fuse --compare ref --json models/mnist.h5 \
        > "$OUT/pcinfer.json" 2>&1
    note "pcinfer fuse --compare ref: rc $? ($(since))"
else
    note "pcinfer: - (not built)"
fi

# ---- summary ---------------------------------------------------------------------------------
echo "---- build errors (if any) ----"
grep -E "error|Error" "$OUT/build.log" | head -15
echo "---- tests: failures and key lines ----"
grep -E "^====|FAILED|PASSED|ERROR|skipped|seed|Failure|failed|got|ref -inf" "$OUT/tests.log" |
    head -60
echo "---- benchmark (last lines of its log) ----"
tail -25 "$OUT/bench.log"
cat "$OUT/table.md"
echo "---- pcinfer ----"
cat "$OUT/pcinfer.json"
echo "---- steps ----"
cat "$summary"
