#!/usr/bin/env bash
# Finds the MNIST IDX files where pcinfer and pclearn look for them, checks their MD5 sums, and
# with --fetch downloads missing ones into datasets/mnist/ (never committed: .gitignore).
#
#   datasets/find_mnist.sh            print the directory that holds all four files, or fail
#   datasets/find_mnist.sh --fetch    the same, downloading what is missing first
#
# Places, in the order the library looks (pc_tool_find_mnist): ./datasets/mnist and
# ../shared/datasets/mnist relative to the working directory, then the same two relative to the
# source tree.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
declare -A md5=(
  [train-images-idx3-ubyte.gz]=f68b3c2dcbeaaa9fbdd348bbdeb94873
  [train-labels-idx1-ubyte.gz]=d53e105ee54ea40749a09fcbcd1e9432
  [t10k-images-idx3-ubyte.gz]=9fb629c4189551a2d022fa330f9573f3
  [t10k-labels-idx1-ubyte.gz]=ec29112dd5afa0611ce80d1b7f02629c
)
mirrors=(https://ossci-datasets.s3.amazonaws.com/mnist https://storage.googleapis.com/cvdf-datasets/mnist)

complete() { # dir: 0 when all four files are there with the right sums
  local f
  for f in "${!md5[@]}"; do
    [[ -f "$1/$f" ]] || return 1
    [[ $(md5sum "$1/$f" | cut -d' ' -f1) == "${md5[$f]}" ]] || { echo "bad MD5: $1/$f" >&2; return 1; }
  done
}

places=(datasets/mnist ../shared/datasets/mnist "$src/datasets/mnist" "$src/../shared/datasets/mnist")
for d in "${places[@]}"; do
  if complete "$d" 2>/dev/null; then echo "$d"; exit 0; fi
done

if [[ ${1:-} != --fetch ]]; then
  echo "MNIST not found (looked in: ${places[*]}); run with --fetch to download it into" \
       "$src/datasets/mnist" >&2
  exit 1
fi
dest="$src/datasets/mnist"
mkdir -p "$dest"
for f in "${!md5[@]}"; do
  [[ -f "$dest/$f" && $(md5sum "$dest/$f" | cut -d' ' -f1) == "${md5[$f]}" ]] && continue
  ok=0
  for m in "${mirrors[@]}"; do
    if curl -fsSL "$m/$f" -o "$dest/$f.tmp" &&
       [[ $(md5sum "$dest/$f.tmp" | cut -d' ' -f1) == "${md5[$f]}" ]]; then
      mv "$dest/$f.tmp" "$dest/$f"
      ok=1
      break
    fi
    rm -f "$dest/$f.tmp"
  done
  [[ $ok == 1 ]] || { echo "could not download $f with the right MD5" >&2; exit 1; }
done
echo "$dest"
