#!/bin/bash
# One call on the GPU machine: build the library and test_cuda_eval, run the test, run the
# benchmark, leave everything in $OUT (build.log, test.log, bench.log, table.md,
# gpu_circuit.json, gpu_circuit.png) and print a summary.
# Needs, carried with the checkout: .device-deps (the cmocka .deb files) and .devdata/mnist
# (the four MNIST .gz files). Extra arguments go to the benchmark.
# Debian's cmocka.pc names /usr/include and /usr/lib directly (no ${prefix}): rewrite those.
set -u
for f in .device-deps/*.deb; do dpkg -x "$f" /tmp/deps; done
sed -i 's#-I/usr/include#-I/tmp/deps/usr/include#; s#-L/usr/lib#-L/tmp/deps/usr/lib#' \
    /tmp/deps/usr/lib/x86_64-linux-gnu/pkgconfig/cmocka.pc
export PKG_CONFIG_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu/pkgconfig
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu
mkdir -p datasets/mnist && cp .devdata/mnist/* datasets/mnist/
build=build-gpucircuit-dev
t0=$(date +%s)
(cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/tmp/deps/usr &&
    cmake --build $build -j "$(nproc)" --target pc) > "$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
cmake --build $build -j "$(nproc)" --target test_cuda_eval >> "$OUT/build.log" 2>&1 ||
    tail -20 "$OUT/build.log"
echo "build $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
grep -m1 "model name" /proc/cpuinfo; grep -m1 "^flags" /proc/cpuinfo | cut -c1-400; nproc
nvcc --version | tail -1
(cd $build && timeout "${TEST_TIMEOUT:-120}" ./test_cuda_eval) > "$OUT/test.log" 2>&1
echo "test rc=$? $(( $(date +%s) - t0 )) s"
OMP_NUM_THREADS=$(nproc) timeout "${BENCH_TIMEOUT:-240}" bench/gpu_circuit_bench.sh $build "$OUT" \
    "$@" > "$OUT/table.md" 2> "$OUT/bench.log"
echo "bench rc=$? $(( $(date +%s) - t0 )) s"
grep -v "^\[ *OK\|RUN" "$OUT/test.log" | tail -40
tail -45 "$OUT/bench.log"
cat "$OUT/table.md"
