#!/bin/bash
# PyJuice's queries on the GPU machine (bench/harness/query_pyjuice.py), each in a process of
# its own under a timeout: sampling 1,000 images at K = 16 and 100 at K = 64, the MPE forward
# pass, the conditionals and conditional sampling at batch 512, K = 16 (left half missing).
# Leaves $OUT/query_pyjuice_<gpu>.json and one log per point.
#   usage: OUT=DIR bench/device/query_pyjuice_device.sh
# Carried with the checkout: .devdata/pyjuice (PyJuice 2.6.3's wheel, unzipped) and
# .devdata/mnist (the MNIST .gz files).
set -u
OUT=${OUT:-build-device/query-pyjuice}
mkdir -p "$OUT"
. bench/device/device_env.sh
gpu=$(python3 bench/machine.py --gpu 2>/dev/null || echo gpu)
json="$OUT/query_pyjuice_$gpu.json"
point() { # NAME LIMIT ARGS...
    local name=$1 limit=$2 t
    shift 2
    t=$(date +%s)
    timeout "$limit" python3 bench/harness/query_pyjuice.py "$json" --pyjuice .devdata/pyjuice \
        --mnist-train datasets/mnist/train-images-idx3-ubyte.gz \
        --mnist-test datasets/mnist/t10k-images-idx3-ubyte.gz "$@" > "$OUT/$name.log" 2>&1
    echo "$name: rc=$?, $(($(date +%s) - t)) s: $(tail -1 "$OUT/$name.log")"
}
point sample_k16 60 --query sample --k 16 --n 1000 --reps 3
point mpe_k16 45 --query mpe --k 16 --n 512
point conditional_k16 45 --query conditional --k 16 --n 512
point sample_conditional_k16 45 --query sample_conditional --k 16 --n 512
point sample_k64 60 --query sample --k 64 --n 100 --reps 2
