#!/bin/sh
# Prints a short hash of the engine's sources (src, include, tests, tools, bench/*.c, the build
# files) as they are on disk, so that a result made from a copy of a working tree (where git's
# view may be missing or stale) names the exact sources it was built from; the same command on
# a checkout gives the same hash for the same files.
#   usage: bench/device/source_hash.sh [ROOT]
cd "${1:-.}" || exit 1
find src include tests tools bench -maxdepth 3 -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name 'CMakeLists.txt' \) \
    | LC_ALL=C sort \
    | { cat CMakeLists.txt Makefile; while read -r f; do echo "$f"; cat "$f"; done; } \
    | sha256sum | cut -c1-12
