#!/bin/bash
# One call on the GPU machine that compares compile-time variants of the fuse kernels: builds the
# library and test_cuda_eval once per variant (NAME=FLAGS, the flags passed to nvcc), runs the
# test (a variant that fails it is marked in the table), then times fuse alone at
# K = 16 ... 256 and batches 512, 4096 on the MNIST structure (ONLY=fuse,fuse-warp,... picks
# the benchmark's variants; KS and BATCHES the points).
#   usage: OUT=DIR bench/gpu_fuse_variants_device.sh NAME=FLAGS [NAME=FLAGS ...]
#   e.g.   OUT=/tmp/v bench/gpu_fuse_variants_device.sh base= gain4=-DFUSE_WIDE_GAIN=4
# Writes DIR/NAME.json per variant, DIR/tests.log and DIR/variants.md (one table, ms, and each
# variant's ratio to the first). Needs .device-deps (cmocka) and .devdata/mnist carried.
set -u
OUT=${OUT:-bench/results/gpu-variants}
KS=${KS:-16,32,64,128,256}
BATCHES=${BATCHES:-512,4096}
mkdir -p "$OUT"
. bench/device_env.sh
: > "$OUT/tests.log"
names=()
for spec in "$@"; do
    name=${spec%%=*} flags=${spec#*=}
    names+=("$name")
    build=build-variant-$name
    log=/tmp/variant-$name.log
    { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/tmp/deps/usr \
        -DCMAKE_CUDA_FLAGS="$flags" && cmake --build "$build" -j "$(nproc)" --target pc \
        test_cuda_eval; } > "$log" 2>&1 || { echo "$name: build failed"; tail -20 "$log"; continue; }
    echo "==== $name ($flags)" >> "$OUT/tests.log"
    (cd "$build" && timeout 120 ./test_cuda_eval) >> "$OUT/tests.log" 2>&1
    rc=$?
    echo "$name: test_cuda_eval rc $rc" | tee -a "$OUT/tests.log"
    # A variant that fails its test is still timed (to see what an idea would buy), but its
    # row in the table says so.
    [ $rc -eq 0 ] || echo "$name" >> "$OUT/failed.txt"
    sh bench/gpu_circuit_bench.sh "$build" "/tmp/variant-$name" --ks "$KS" --batches "$BATCHES" \
        --acc-k 0 --model none --only "${ONLY:-fuse}" > /dev/null 2>> "$log"
    cp "/tmp/variant-$name/gpu_circuit.json" "$OUT/$name.json"
done
python3 - "$OUT" "${names[@]}" > "$OUT/variants.md" <<'PY'
import json, sys
out, names = sys.argv[1], sys.argv[2:]
rows = {}
for n in names:
    try:
        res = json.load(open(f"{out}/{n}.json"))["results"]
    except (OSError, ValueError):
        continue
    for r in res:
        if r["kind"] == "timing":
            rows.setdefault((r["backend"], r["K"], r["batch"]), {})[n] = r["ms"]
try:
    failed = set(open(f"{out}/failed.txt").read().split())
except OSError:
    failed = set()
print("| backend | K | batch | " + " | ".join(
    f"{n} (ms){' FAILED its test' if n in failed else ''}" for n in names) + " |")
print("|---|---|---|" + "---|" * len(names))
for (be, k, b), v in sorted(rows.items(), key=lambda x: (x[0][0], x[0][2], x[0][1])):
    base = v.get(names[0])
    cells = []
    for n in names:
        if n not in v:
            cells.append("-")
        elif base and n != names[0]:
            cells.append(f"{v[n]:.4f} ({base / v[n]:.2f}x)")
        else:
            cells.append(f"{v[n]:.4f}")
    print(f"| {be} | {k} | {b} | " + " | ".join(cells) + " |")
PY
cat "$OUT/variants.md"
