#!/usr/bin/env bash
# Builds the library and the GPU LSE test on a GPU machine, runs the test, the torch comparison
# (bench/gpu_lse_compare.py) and, when ncu is present, one profile of the 512 x 128256 fuse
# kernel. Everything lands in $OUT (default bench/results/gpu-run); a short summary is printed
# last. Run from the repository root: `OUT=/some/dir bench/gpu_run.sh`.
# Optional: .device-deps/*.deb (cmocka packages) are unpacked to /tmp/deps when present.
set -u
OUT=${OUT:-bench/results/gpu-run}
BUILD=${BUILD:-build-gpu-lse} # its own folder: a warm machine may hold another build-gpu
mkdir -p "$OUT"

if ls .device-deps/*.deb >/dev/null 2>&1; then
    for f in .device-deps/*.deb; do dpkg -x "$f" /tmp/deps; done
    # The packaged cmocka.pc names /usr directly: point it (and the compiler) at /tmp/deps.
    sed -i 's#^prefix=.*#prefix=/tmp/deps/usr#; s#-L/usr/#-L/tmp/deps/usr/#; s#-I/usr/include#-I/tmp/deps/usr/include#' \
        /tmp/deps/usr/lib/x86_64-linux-gnu/pkgconfig/cmocka.pc
    export CPATH=/tmp/deps/usr/include LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu
    export PKG_CONFIG_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu/pkgconfig
    export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export PATH=$PATH:/usr/local/cuda/bin

t0=$(date +%s)
rm -rf "$BUILD" # a fresh configure: cached pkg-config results of an earlier run may be stale
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release &&
       cmake --build "$BUILD" -j "$(nproc)" --target pcinfer test_cuda_lse; } >"$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    echo "BUILD FAILED"
    exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"

t0=$(date +%s)
timeout 180 "$BUILD/test_cuda_lse" >"$OUT/test_cuda_lse.log" 2>&1
test_rc=$?
echo "test_cuda_lse: rc $test_rc, $(( $(date +%s) - t0 )) s"

t0=$(date +%s)
timeout 360 python3 bench/gpu_lse_compare.py --lib "$BUILD/libpcinfer.so" --out "$OUT" >"$OUT/bench.log" 2>&1
bench_rc=$?
echo "gpu_lse_compare: rc $bench_rc, $(( $(date +%s) - t0 )) s"

if [ "${PC_NCU:-1}" = 1 ] && command -v ncu >/dev/null 2>&1 && [ -f bench/gpu_lse_ncu.py ]; then
    timeout 120 ncu --clock-control none --kernel-name regex:rows_block --launch-skip 2 --launch-count 1 \
        --metrics dram__bytes_read.sum,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
        python3 bench/gpu_lse_ncu.py --lib "$BUILD/libpcinfer.so" >"$OUT/ncu.log" 2>&1
    echo "ncu: rc $?"
    grep -E "dram__|gpu__time" "$OUT/ncu.log" | head -5
fi

echo "---- test (last lines) ----"
grep -E "max|FAILED|PASSED|skipped|seed" "$OUT/test_cuda_lse.log" | tail -25
echo "---- benchmark ----"
tail -15 "$OUT/bench.log"
cat "$OUT"/gpu_lse_*.md 2>/dev/null
exit $(( test_rc != 0 || bench_rc != 0 ))
