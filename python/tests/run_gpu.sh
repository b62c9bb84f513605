#!/usr/bin/env bash
# The Python package on a GPU machine, in one call: installs it with pip from this checkout
# (offline: --no-build-isolation uses the machine's scikit-build-core), builds the tools the
# tests compare against in the same build folder, runs every Python test against the
# installed package (the GPU tests included; PyJuice's where it is found), then the overhead
# benchmark. Run from the repository root:
#
#     [PC_LIB=build/src/libpcinfer.so] python/tests/run_gpu.sh [OUT]
#     (OUT: where logs and results go; default $OUT or /tmp; PC_LIB: see the benchmark below)
#
# MNIST must be in datasets/mnist (the tests that score it skip otherwise). PyJuice 2.6.3 is
# used when its unpacked wheel is in .devdata/pyjuice, where the bench/device scripts carry it
# too (pip download --no-deps pyjuice==2.6.3, then unzip). Exit status: that of pytest, or the
# first failing step.
set -euo pipefail
out=${1:-${OUT:-/tmp}}
build=$PWD/build-gpu
site=$out/site
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin

step() {
  local name=$1
  shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" > "$out/$name.log" 2>&1 || { tail -40 "$out/$name.log"; echo "== $name failed"; exit 1; }
  echo "== $name: $((SECONDS - t0)) s"
}

python3 -c "import numpy, pytest, torch; print('python', __import__('sys').version.split()[0], \
'numpy', numpy.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
step pip python3 -m pip install --no-build-isolation --no-deps --target "$site" \
  -C build-dir="$build" ./python
step tools cmake --build "$build" -j "$(nproc)" --target pcinfer_tool pclearn_tool

pythonpath=$site
[ -d .devdata/pyjuice ] && pythonpath=$pythonpath:$PWD/.devdata/pyjuice
echo "== pytest"
set +e
PYTHONPATH=$pythonpath PC_SOURCE_DIR=$PWD PC_BINARY_DIR=$build \
  python3 -m pytest -rs -s -p no:cacheprovider python/tests 2>&1 | tee "$out/pytest.log" \
  | grep -E "passed|failed|SKIPPED|FAILED|Error|from_pyjuice:"
rc=${PIPESTATUS[0]}
set -e
echo "== benchmark"
# The benchmark's ctypes rows call the shared library of a full build (PC_LIB, e.g.
# build/src/libpcinfer.so): the package's own build makes only the static one.
lib=()
if [ -n "${PC_LIB:-}" ]; then lib=(--lib "$PC_LIB"); else echo "no PC_LIB: no ctypes rows"; fi
PYTHONPATH=$site python3 bench/harness/python_overhead.py --out "$out" "${lib[@]}" \
  | tee "$out/benchmark.log"
exit "$rc"
