#!/bin/bash
# Sharded scoring on the GPU machine, in one call: builds pcinfer (with MPI when the machine
# has OpenMPI), tiles the MNIST test set to 10^6 images, runs
#   mpirun -np R pcinfer --kernel fuse --json --output ... models/mnist.h5
# for R = 1, 2, 4, 8 where R is at most the number of GPUs (every R with ALLOW_SHARED_GPU=1:
# then ranks share GPUs, which still checks that the results are the same), and checks that
# each run's output file and figures are those of R = 1. Leaves in $OUT: mpi_score_<gpu>.json
# (each run's pcinfer JSON, end-to-end time, images/s and scaling efficiency), its note
# mpi_score_<gpu>.md, summary.txt, device.txt, source_hash.txt and one log per step.
#   usage: OUT=DIR [ALLOW_SHARED_GPU=1] [ROWS=1000000] [RANKS="1 2 4 8"] [KERNEL=fuse] \
#          [MNIST=datasets/mnist/t10k-images-idx3-ubyte.gz] bench/device/mpi_score_device.sh
# (KERNEL=cpu-fuse, a smaller ROWS and ALLOW_SHARED_GPU=1 try the script on a machine without
# a GPU.)
# Run from the repository root. Needs, carried with the checkout: .device-deps (the cmocka
# .deb files) and .devdata/mnist (the four MNIST .gz files); mpirun and the MPI headers
# (Debian: openmpi-bin, libopenmpi-dev) on the machine, else only the one-process run is
# made. Every step runs under a timeout and none starts later than DEADLINE seconds (default
# 570) after the script began.
set -u
OUT=${OUT:-build-device/mpi-score}
BUILD=${BUILD:-build-mpiscore-dev}
ROWS=${ROWS:-1000000}
KERNEL=${KERNEL:-fuse}
MNIST=${MNIST:-datasets/mnist/t10k-images-idx3-ubyte.gz}
RANKS=${RANKS:-1 2 4 8}
mkdir -p "$OUT"
. bench/device/device_env.sh
start=$(date +%s)
deadline=${DEADLINE:-570}
summary="$OUT/summary.txt"
: > "$summary"
work="$BUILD/mpi-score"
mkdir -p "$work"

. bench/device/steps.sh

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
    | tee "$OUT/device.txt"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
bench/device/source_hash.sh > "$OUT/source_hash.txt"
gpu=$(python3 bench/machine.py --gpu 2>/dev/null || echo gpu)
note "GPUs: $gpus; mpirun: $(command -v mpirun || echo none)"
step configure 120 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH=/tmp/deps/usr || { tail -30 "$OUT/configure.log"; exit 1; }
grep -q '^PC_MPI:BOOL=ON' "$BUILD/CMakeCache.txt" && mpi=1 || mpi=0
command -v mpirun > /dev/null || mpi=0
step build 330 cmake --build "$BUILD" -j "$(nproc)" --target pcinfer_tool \
    || { grep -m 20 -B 2 -A 6 "error" "$OUT/build.log"; exit 1; }

data="$work/mnist_test_x$ROWS.idx"
[ -f "$data" ] || step tile 120 python3 bench/harness/tile_idx.py "$MNIST" "$ROWS" "$data" \
    || exit 1

# OpenMPI refuses to start as root (the machine's user) without these two.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
runs="$OUT/runs.tsv"
printf 'ranks\trc\tend_to_end_s\tjson\tsame_output\n' > "$runs"
# score R: one run of R ranks (R = 0: one process without mpirun); its JSON into
# $OUT/score_R.json, stderr into $OUT/score_R.log, the output file in $work.
score() {
    local r=$1 limit t0 t1 rc same=-
    limit=$(budget "score_$r" 120) || return 99
    local launch=()
    [ "$r" -gt 0 ] && launch=(mpirun --oversubscribe --bind-to none -np "$r")
    t0=$(date +%s.%N)
    timeout "$limit" "${launch[@]}" "$BUILD/pcinfer" --kernel "$KERNEL" --json --data "$data" \
        --output "$work/out_$r.txt" models/mnist.h5 > "$OUT/score_$r.json" 2> "$OUT/score_$r.log"
    rc=$?
    t1=$(date +%s.%N)
    if [ $rc -eq 0 ] && [ -f "$work/out_1.txt" ] && [ "$r" -ne 1 ]; then
        cmp -s "$work/out_1.txt" "$work/out_$r.txt" && same=1 || same=0
    fi
    local e2e
    e2e=$(python3 -c "print(f'{$t1 - $t0:.3f}')")
    printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$rc" "$e2e" "score_$r.json" "$same" >> "$runs"
    note "score R=$r: rc=$rc, $e2e s end to end, output same as R=1: $same"
}

if [ $mpi -eq 1 ]; then
    for r in $RANKS; do
        if [ "$r" -gt "$gpus" ] && [ "${ALLOW_SHARED_GPU:-0}" != 1 ]; then
            note "score R=$r: skipped, $gpus GPU(s) (ALLOW_SHARED_GPU=1 runs it)"
            continue
        fi
        score "$r"
    done
    score 0 # one process without mpirun: the same file again
    if [ -f "$work/out_0.txt" ] && [ -f "$work/out_1.txt" ]; then
        cmp -s "$work/out_0.txt" "$work/out_1.txt" && note "without mpirun: same output as R=1" \
            || note "without mpirun: output DIFFERS from R=1"
    fi
else
    note "no MPI build or no mpirun: only the one-process run"
    score 0
fi

python3 bench/harness/mpi_score_summary.py "$OUT" "$gpu" "$gpus" "${ALLOW_SHARED_GPU:-0}" \
    2> "$OUT/summary_py.log" || cat "$OUT/summary_py.log"
rm -f "$work"/out_*.txt
echo "---- summary ($(($(date +%s) - start)) s)"
cat "$summary"
[ -f "$OUT/mpi_score_$gpu.md" ] && cat "$OUT/mpi_score_$gpu.md"
exit 0
