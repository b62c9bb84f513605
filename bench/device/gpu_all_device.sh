#!/bin/bash
# One call on the GPU machine that checks every GPU part: a fresh build, the GPU test programs
# (test_cuda_lse, test_logprob_cuda, test_cuda_eval, and test_gpu_log for the device log),
# the circuit benchmark at K = 16, 32, 64, 128, 256 and batches 512, 4096 (with the
# accuracy of fuse, int and gemm against ref on the MNIST test set for the shipped model and a
# K = 64 model), the exact product alone in cuBLAS at the same points (bench/gpu_product_floor.cu,
# drawn and tabulated with the times), then `pcinfer --kernel fuse models/mnist.h5 --compare ref`
# on the full test set.
# Every step runs whatever the earlier ones did, under its own timeout; the summary printed last
# gives each step's exit status (0 = passed, 124 = timed out, 77 = skipped, "-" = not built).
# $OUT receives 10 files: build.log, tests.log, bench.log, table.md, gpu_circuit.json,
# gpu_circuit.png, product_floor.json, product_floor.md, pcinfer.json, summary.txt.
# Needs, carried with the checkout: .device-deps (the cmocka .deb files) and .devdata/mnist
# (the four MNIST .gz files). Run from the repository root; about 3 minutes on an H200 host.
set -u
OUT=${OUT:-bench/results/gpu-all}
mkdir -p "$OUT"
build=build-gpuall-dev
summary="$OUT/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
T0=$(date +%s)
since() { echo "$(( $(date +%s) - T0 )) s"; }

. bench/device_env.sh

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nvcc --version | tail -1
    grep -m1 "model name" /proc/cpuinfo
    grep -m1 "^flags" /proc/cpuinfo | cut -c1-400
    # The copy of the tree this runs on may carry a stale git view: name the sources by content
    # (the same command on a checkout of the commit gives the same hash).
    echo "cores: $(nproc); sources: $(sh bench/source_hash.sh)"
} | tee -a "$summary"

# ---- build (fresh folder: cached configure results of an earlier run may be stale) ----------
rm -rf "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/tmp/deps/usr \
    > "$OUT/build.log" 2>&1
rc=$?
note "configure: rc $rc ($(since))"
cmake --build "$build" -j "$(nproc)" --target pc >> "$OUT/build.log" 2>&1
note "build pc: rc $? ($(since))"
# The program pcinfer is target pcinfer_program (the shared library holds the name pcinfer).
for t in pcinfer_program test_cuda_lse test_logprob_cuda test_cuda_eval test_gpu_log; do
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
if [ -f "$build/libpc.a" ]; then
    OMP_NUM_THREADS=$(nproc) timeout 240 bench/gpu_circuit_bench.sh "$build" "$OUT" \
        --ks 16,32,64,128,256 --batches 512,4096 --acc-k 64 > "$OUT/table.md" 2> "$OUT/bench.log"
    note "gpu_circuit_bench: rc $? ($(since))"
else
    note "gpu_circuit_bench: - (no library)"
fi

# ---- the exact product alone (cuBLAS) at the benchmark's points, then the plot again with it ----
if [ -s "$OUT/gpu_circuit.json" ]; then
    # The K x K sum groups: sum_params = G K^2 + K (the root's K weights).
    groups=$(python3 -c 'import json, sys
r = [x for x in json.load(open(sys.argv[1]))["results"] if x["kind"] == "timing"][0]
print((r["sum_params"] - r["K"]) // (r["K"] * r["K"]))' "$OUT/gpu_circuit.json")
    nvcc -O3 -arch=native bench/gpu_product_floor.cu -lcublas -o "$build/gpu_product_floor" \
        >> "$OUT/build.log" 2>&1 &&
        timeout 120 "$build/gpu_product_floor" "$groups" "$OUT/product_floor.json" \
            > "$OUT/product_floor.md" 2>> "$OUT/bench.log"
    note "gpu_product_floor ($groups groups): rc $? ($(since))"
    [ -s "$OUT/product_floor.json" ] && python3 bench/gpu_circuit_plot.py "$OUT/gpu_circuit.json" \
        "$OUT/gpu_circuit.png" "$OUT/product_floor.json" > "$OUT/table.md"
else
    note "gpu_product_floor: - (no benchmark results)"
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
grep -E "^====|FAILED|PASSED|ERROR|skipped|seed|Failure|failed|got|ref -inf" "$OUT/tests.log" | head -60
echo "---- benchmark (last lines of its log) ----"
tail -25 "$OUT/bench.log"
cat "$OUT/table.md"
echo "---- pcinfer ----"
cat "$OUT/pcinfer.json"
echo "---- steps ----"
cat "$summary"
