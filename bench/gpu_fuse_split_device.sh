#!/bin/bash
# One call on the GPU machine that measures how the persistent fuse kernel's wide/narrow split
# depends on FUSE_WIDE_GAIN (src/layers/cuda_fuse.cu: how much faster a wide item does its work
# than narrow items do): builds the library once per value given and times fuse alone at
# K = 64, 128, 256 and batches 512, 4096 on the MNIST structure.
#   usage: OUT=DIR bench/gpu_fuse_split_device.sh GAIN [GAIN ...]
# FUSE_WIDE_GAIN replaces every shape's own gain. Writes DIR/gain_GAIN.json per value and
# DIR/split.md (one table). Run from the repository root with .devdata/mnist carried.
set -u
OUT=${OUT:-bench/results/gpu-split}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
if [ -d .devdata/mnist ]; then mkdir -p datasets/mnist && cp -n .devdata/mnist/* datasets/mnist/; fi
for gain in "$@"; do
    build=build-split-$gain
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPC_TESTS=OFF \
        -DCMAKE_CUDA_FLAGS="-DFUSE_WIDE_GAIN=$gain" > /tmp/split-$gain.log 2>&1 &&
        cmake --build "$build" -j "$(nproc)" --target pc >> /tmp/split-$gain.log 2>&1 ||
        { tail -20 /tmp/split-$gain.log; continue; }
    sh bench/gpu_circuit_bench.sh "$build" "/tmp/split-$gain" --ks 64,128,256 --batches 512,4096 \
        --acc-k 0 --model none --only fuse > /dev/null 2>> /tmp/split-$gain.log
    cp "/tmp/split-$gain/gpu_circuit.json" "$OUT/gain_$gain.json"
done
python3 - "$OUT" "$@" > "$OUT/split.md" <<'PY'
import json, sys
out, gains = sys.argv[1], sys.argv[2:]
rows = {}
for g in gains:
    try:
        res = json.load(open(f"{out}/gain_{g}.json"))["results"]
    except (OSError, ValueError):
        continue
    for r in res:
        if r["kind"] == "timing":
            rows.setdefault((r["K"], r["batch"]), {})[g] = r["ms"]
print("| K | batch | " + " | ".join(f"gain {g} (ms)" for g in gains) + " |")
print("|---|---|" + "---|" * len(gains))
for (k, b), v in sorted(rows.items(), key=lambda x: (x[0][1], x[0][0])):
    print(f"| {k} | {b} | " + " | ".join(f"{v[g]:.4f}" if g in v else "-" for g in gains) + " |")
PY
cat "$OUT/split.md"
