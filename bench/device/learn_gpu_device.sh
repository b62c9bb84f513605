#!/bin/bash
# One call on the GPU machine for EM on the GPU: builds, runs the learning tests, times a
# mini-batch EM step against the engine's forward pass and PyJuice, learns MNIST models at
# K = 32..256 and Fashion-MNIST models, and leaves everything in $OUT with a summary at the end.
#   usage: OUT=DIR bench/device/learn_gpu_device.sh [PHASE...]
# PHASE: test, bench, pyjuice, models, sweep, tuned, fashion (default: test bench pyjuice models
# fashion). MODEL_KS (default "32 64 128 256") and MODEL_LIMIT (seconds per model, default
# 150) set the models phase; SWEEP_K (128), SWEEP_PCS ("0.1 1 4") and SWEEP_FULLS ("2 5") the
# sweep of pseudocounts and full-batch epochs; tuned learns the recipes whose pseudocount and
# input smoothing were picked on held-out training images (bench/notebook/learn_smooth_h200.md),
# TUNED_KS ("128 256", and 512 if named) for MNIST, and Fashion-MNIST at K = 128. Every step runs under a timeout, and no step starts later than DEADLINE seconds
# (default 570) after the script began, so one call fits the machine's 600 s; the phases left
# over go into a second call (the build stays while the machine is warm). Carried with the
# checkout: .device-deps (the cmocka .deb files), .devdata/mnist and .devdata/fashion-mnist (the
# four IDX .gz files of each), .devdata/pyjuice (PyJuice 2.6.3's wheel, unzipped).
# Leaves: summary.txt, device.txt, source_hash.txt, one log per step, learn_gpu_<gpu>.json/.png,
# learn_pyjuice_<gpu>.json, learn_gpu_table.md, learn_models_<gpu>.json/.png/.md (pclearn's
# --json of every model); the models themselves stay in $BUILD/models (too large to return).
set -u
OUT=${OUT:-build-device/learn}
mkdir -p "$OUT"
. bench/device/device_env.sh
if [ -d .devdata/fashion-mnist ]; then
    mkdir -p datasets/fashion-mnist && cp -n .devdata/fashion-mnist/* datasets/fashion-mnist/
fi
build=${BUILD:-build-learn-dev}
start=$(date +%s)
deadline=${DEADLINE:-570}
phases=${*:-test bench pyjuice models fashion}
summary="$OUT/summary.txt"
: > "$summary"

. bench/device/steps.sh
want() { case " $phases " in *" $1 "*) return 0 ;; esac; return 1; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
    | tee "$OUT/device.txt"
bench/device/source_hash.sh > "$OUT/source_hash.txt"
gpu=$(python3 bench/machine.py --gpu)
step configure 120 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH=/tmp/deps/usr || { tail -30 "$OUT/configure.log"; exit 1; }
step build 330 cmake --build "$build" -j "$(nproc)" --target test_learn_cuda \
    test_learn_gpu_plan test_learn_cli pclearn_tool learn_gpu_bench \
    || { grep -m 20 -B 2 -A 6 "error" "$OUT/build.log"; exit 1; }
OMP_NUM_THREADS=$(nproc)
export PC_SOURCE_DIR=$PWD PC_BINARY_DIR=$PWD/$build OMP_NUM_THREADS

if want test; then
    step test_learn_cuda 150 "$build/test_learn_cuda"
    step test_learn_gpu_plan 60 "$build/test_learn_gpu_plan"
    step test_learn_cli 120 "$build/test_learn_cli"
fi

json="$OUT/learn_gpu_$gpu.json" pj="$OUT/learn_pyjuice_$gpu.json"
if want bench; then
    step bench 240 "$build/learn_gpu_bench" "$json" --reps 30
fi
if want pyjuice && [ -d .devdata/pyjuice ]; then
    for k in 16 32 64 128; do
        step "pyjuice_k$k" 120 python3 bench/harness/learn_pyjuice.py "$pj" --k "$k" \
            --pyjuice .devdata/pyjuice --mnist datasets/mnist/train-images-idx3-ubyte.gz
    done
fi
if [ -f "$json" ]; then
    args=("$json" "$OUT/learn_gpu_$gpu.png")
    [ -f "$pj" ] && args+=("$pj")
    python3 bench/harness/learn_gpu_plot.py "${args[@]}" > "$OUT/learn_gpu_table.md" \
        2> "$OUT/plot.log"
fi

# Models: pclearn on the GPU, one JSON line each (pclearn --json), the model files in $build.
mkdir -p "$build/models" "$OUT/models"
# learn NAME LIMIT ARGS...: one pclearn run; its JSON into $OUT/models/NAME.json, its progress
# into $OUT/NAME.log.
learn() {
    local name=$1 limit t rc
    limit=$(budget "$name" "$2") || return 99
    shift 2
    t=$(date +%s)
    timeout "$limit" "$build/pclearn" --device cuda --json -o "$build/models/$name.h5" "$@" \
        > "$OUT/models/$name.json" 2> "$OUT/$name.log"
    rc=$?
    note "$name: rc=$rc, $(($(date +%s) - t)) s (limit $limit s)"
    [ $rc -eq 0 ] || rm -f "$OUT/models/$name.json"
}
schedule=${SCHEDULE:---epochs 20 --full-epochs 3 --step-start 0.9 --step-end 0.05 --pseudocount 0.1}
if want models; then
    for k in ${MODEL_KS:-32 64 128 256}; do
        # shellcheck disable=SC2086
        learn "mnist_k$k" "${MODEL_LIMIT:-150}" --latents "$k" $schedule
    done
fi
if want sweep; then
    sk=${SWEEP_K:-128}
    for pc in ${SWEEP_PCS:-0.1 1 4}; do
        for full in ${SWEEP_FULLS:-2 5}; do
            learn "sweep_k${sk}_pc${pc}_full$full" 90 --latents "$sk" --epochs 15 \
                --full-epochs "$full" --step-end 0.05 --pseudocount "$pc"
        done
    done
fi
if want tuned; then
    tuned="--epochs 20 --full-epochs 3 --step-start 0.9 --step-end 0.05"
    for k in ${TUNED_KS:-128 256}; do
        share=0.2
        [ "$k" -le 128 ] && share=0.15
        # shellcheck disable=SC2086
        learn "tuned_k${k}_pc0.02_smooth${share}w32" 240 --latents "$k" $tuned \
            --pseudocount 0.02 --smooth "$share" --smooth-width 32
        # shellcheck disable=SC2086
        learn "tuned_k${k}_pc0.02" 240 --latents "$k" $tuned --pseudocount 0.02
    done
    # shellcheck disable=SC2086
    learn tuned_fashion_k128_smooth0.3w4 150 --latents 128 --dataset fashion-mnist $tuned \
        --smooth 0.3 --smooth-width 4
fi
if want fashion; then
    for k in 16 32 64 128; do
        # shellcheck disable=SC2086
        learn "fashion_k$k" 120 --latents "$k" --dataset fashion-mnist $schedule
    done
fi
if ls "$OUT"/models/*.json > /dev/null 2>&1; then
    python3 bench/harness/learn_models_plot.py "$OUT/learn_models_$gpu.png" "$OUT"/models/*.json \
        > "$OUT/learn_models_$gpu.md" 2>> "$OUT/plot.log"
fi

echo "---- summary ($(($(date +%s) - start)) s)"
cat "$summary"
for log in test_learn_cuda test_learn_gpu_plan test_learn_cli; do
    [ -f "$OUT/$log.log" ] && grep -E "one step|FAILED|PASSED|ERROR|skipped|LINE" "$OUT/$log.log" \
        | head -12
done
[ -f "$OUT/learn_gpu_table.md" ] && cat "$OUT/learn_gpu_table.md"
[ -f "$OUT/learn_models_$gpu.md" ] && cat "$OUT/learn_models_$gpu.md"
exit 0
