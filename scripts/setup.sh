#!/usr/bin/env bash
# Installs the Debian packages pcinfer builds with, when any is missing. Idempotent; needs root
# (or sudo) only when something has to be installed.
set -euo pipefail
# binutils: nm and readelf, which the install tests read the shared library with.
# python3-dev, -numpy, -pytest: the Python package's module and tests (python/), for the
# system's python3; CMake takes the first python3 on PATH that has NumPy and pytest, else this.
# clang and libclang-rt-dev (libFuzzer): the fuzz tests (fuzz/README.md), skipped without them.
# libopenmpi-dev, openmpi-bin: data-parallel EM and scoring over MPI ranks (PC_MPI).
# dataset-fashion-mnist: the second data set, in /usr/share/datasets/fashion-mnist.
# libpng-dev: the PNG pictures that pcinfer writes.
packages=(cmake make gcc binutils pkg-config libhdf5-dev libcmocka-dev zlib1g-dev libpng-dev
  python3-dev python3-numpy python3-pytest clang libclang-rt-dev
  libopenmpi-dev openmpi-bin dataset-fashion-mnist)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
