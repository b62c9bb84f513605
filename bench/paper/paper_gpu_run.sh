#!/usr/bin/env bash
# One GPU-machine run for the application benchmarks: the token log-probability tests
# (test_logprob_cuda, test_logprob), tokenlp on two shapes, bench/harness/logprob_bench.py, and
# the GPU part of the paper figures (paper_timing.py --gpu, paper_accuracy.py --gpu). The result
# files they write (bench/results/current/) and the logs are packed into $OUT/results.tar.gz; a
# summary is printed last.
#
#   OUT=/some/dir bench/paper/paper_gpu_run.sh [build-dir]
#
# The build folder may come prebuilt for sm_90 (lsebench, tokenlp, test_logprob*,
# src/libpcinfer.so);
# when its test binary cannot start here, the needed targets are built into it first.
# .device-deps (the cmocka .deb files) are used for the test binaries when carried
# (bench/device/device_env.sh).
set -u
OUT=${OUT:-build-device/gpu-run-apps}
build=${1:-build-apps-gpu}
mkdir -p "$OUT/logs"
. bench/device/device_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader |
    tee "$OUT/logs/gpu.txt"

step() { # step NAME TIMEOUT CMD...: runs CMD with its output in logs/NAME.log, reports rc and time
    local name=$1 limit=$2 t0=$SECONDS
    shift 2
    timeout "$limit" "$@" >"$OUT/logs/$name.log" 2>&1
    local rc=$?
    printf '%-18s rc %3d  %4d s\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$OUT/logs/steps.txt"
    return $rc
}

"$build/test_logprob_cuda" >/dev/null 2>&1
if [ $? -eq 127 ] || [ ! -e "$build/src/libpcinfer.so" ]; then
    step build 400 bash -c "cmake -S . -B '$build' -DCMAKE_BUILD_TYPE=Release &&
        cmake --build '$build' -j $(nproc) --target pcinfer lsebench_tool tokenlp_tool \
            test_logprob test_logprob_cuda"
fi

step test_logprob_cuda 120 "$build/test_logprob_cuda"
step test_logprob 60 "$build/test_logprob"
step tokenlp 60 bash -c "'$build/tokenlp' --device cuda --rows 512 --vocab 128256 --json &&
    '$build/tokenlp' --device cuda --rows 4 --vocab 50257 --dtype bf16 --json"
step logprob_bench 200 python3 bench/harness/logprob_bench.py "$build"
step paper_timing 150 python3 bench/paper/paper_timing.py "$build" --gpu
step paper_accuracy 150 python3 bench/paper/paper_accuracy.py "$build" --gpu

# Few files come back from a run: results and logs travel as one archive.
cp bench/results/current/logprob_bench_* bench/results/current/paper_*_cuda_* "$OUT/logs/" \
    2>/dev/null
tar czf "$OUT/results.tar.gz" -C "$OUT" logs
echo "==== steps"; cat "$OUT/logs/steps.txt"
echo "==== test_logprob_cuda"
grep -E "seed|rows|ERROR|FAILED|PASSED|SKIPPED" "$OUT/logs/test_logprob_cuda.log" | tail -26
echo "==== tokenlp"; cat "$OUT/logs/tokenlp.log"
echo "==== logprob_bench"; grep -E "rows|Error|error" "$OUT/logs/logprob_bench.log" | tail -45
echo "==== paper_timing"; tail -8 "$OUT/logs/paper_timing.log"
echo "==== paper_accuracy"; tail -8 "$OUT/logs/paper_accuracy.log"
rm -rf "$OUT/logs"
