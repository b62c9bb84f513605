#!/bin/sh
# Builds and runs the query benchmark (query_bench.c) on the CPU backends.
#   usage: bench/harness/query_bench.sh BUILD_DIR OUT.jsonl [batch] [reps] [threads]
# BUILD_DIR holds a build of the library (BUILD_DIR/src/libpcinfer.so); run from the
# repository root. Times every query on the first `batch` MNIST test images with the shipped
# model; writes one JSON line per (backend, evidence, query) to OUT.jsonl and a Markdown table,
# headed by the machine, to stdout.
set -eu
build=$1 out=$2
shift 2
images=t10k-images-idx3-ubyte.gz
mnist=$(ls datasets/mnist/$images ../shared/datasets/mnist/$images 2>/dev/null | head -n 1)
[ -n "$mnist" ] || { echo "query_bench.sh: MNIST test images not found" >&2; exit 1; }
cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Iinclude bench/harness/query_bench.c \
    -L"$build/src" -lpcinfer -Wl,-rpath,"$(cd "$build/src" && pwd)" -o "$build/query_bench"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "Machine: $cpu, $(nproc) cores; $(date -u +%Y-%m-%d)"
echo
"$build/query_bench" models/mnist.h5 "$mnist" "$@" 2>&1 >"$out"
