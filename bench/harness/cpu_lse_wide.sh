#!/bin/sh
# fuse on wide-range inputs, one thread, every instruction set: lsebench rows (f32 1 x 10^6,
# f16/bf16 1 x 10^6 and f32 512 x 128 on the best path) and the lab's cpu_lse_wide (the
# weighted form and the backward, bench/lab/cpu_lse_wide.c). Appends JSON lines to OUT.
#
#   bench/harness/cpu_lse_wide.sh LABEL BUILD_DIR OUT.json
# BUILD_DIR holds lsebench and lab/cpu_lse_wide (make build BUILD=...).
set -eu
label=$1 build=$2 out=$3
tag() { sed "s/^{/{\"label\": \"$label\", /"; }
for isa in avx512 avx2 scalar; do
    for lo in -10 -80 -100 -200 -2000; do
        "$build/lsebench" --device cpu --kernel fuse --rows 1 --cols 1000000 --range "$lo,0" \
            --isa "$isa" --json | tag >>"$out"
    done
done
for lo in -10 -2000; do
    for dt in f16 bf16; do
        "$build/lsebench" --device cpu --kernel fuse --dtype "$dt" --rows 1 --cols 1000000 \
            --range "$lo,0" --json | tag >>"$out"
    done
    "$build/lsebench" --device cpu --kernel fuse --rows 512 --cols 128 --range "$lo,0" --json |
        tag >>"$out"
done
"$build/lab/cpu_lse_wide" all "$label" -10 -100 -200 -2000 >>"$out"
