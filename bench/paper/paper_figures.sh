#!/usr/bin/env bash
# Regenerates the paper's kernel figures on this machine: LSE time vs N at B = 512 (CPU; GPU when
# present: every variant, torch where installed) and accuracy against FP64 across input
# distributions, including the reduced-bit variants. Results (JSON, PNG, Markdown, named after
# the machine, bench/machine.py) go to bench/results/current/.
#
#   bench/paper/paper_figures.sh [build-dir] [--cpu | --gpu]
#
# The build folder must hold lsebench and src/libpcinfer.so (make build BUILD=...).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
part=${2:-}
for f in "$build/lsebench" "$build/src/libpcinfer.so"; do
  [ -e "$f" ] || {
    echo "paper_figures: $f is missing; build first (make build BUILD=$build)" >&2
    exit 1
  }
done
python3 "$here/paper_timing.py" "$build" $part
python3 "$here/paper_accuracy.py" "$build" $part
results=$(dirname "$here")/results/current
ls -1 "$results"/paper_* | sed "s|^$(dirname "$(dirname "$here")")/||"
