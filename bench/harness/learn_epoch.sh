#!/bin/bash
# Times pclearn's EM on MNIST: one mini-batch epoch (batch 512) and one full-batch epoch per
# (K, threads), and prints one JSON object per run. The machine is named in the output.
# usage: bench/harness/learn_epoch.sh PCLEARN TRAIN_IDX "K..." "THREADS..."
set -eu
tool=$1 data=$2 ks=$3 threads=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu=$(grep -m1 "model name" /proc/cpuinfo | sed 's/.*: //')
flags=$(grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|fma)$' | tr '\n' ' ')
echo "{\"machine\": \"$cpu, $(nproc) cores, flags: ${flags% }\"}"
for k in $ks; do
  for t in $threads; do
    "$tool" --latents "$k" --epochs 1 --full-epochs 1 --threads "$t" --data "$data" \
      -o "$tmp/m.h5" > "$tmp/out" 2> "$tmp/err"
    mb=$(awk '/ batch /{print $(NF-1)}' "$tmp/err")
    full=$(awk '/ full /{print $(NF-1)}' "$tmp/err")
    mi=$(sed -n 's/.*MI \([0-9.]*\) s.*/\1/p' "$tmp/err")
    echo "{\"K\": $k, \"threads\": $t, \"mi_s\": $mi, \"minibatch_epoch_s\": $mb," \
        "\"full_epoch_s\": $full}"
  done
done
