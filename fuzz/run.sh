#!/usr/bin/env bash
# Builds pcinfer's fuzz targets with clang (libFuzzer + ASan + UBSan) and runs each one given for
# a fixed time over its corpus; fuzz/README.md explains the targets and how to read a finding.
#
#   fuzz/run.sh [--time SECONDS] [--build DIR] [--jobs N] TARGET...
#   fuzz/run.sh --attribute REPORT EXECUTABLE_NAME
#
# TARGET: fuzz_idx, fuzz_hclt, fuzz_hclt_answer, fuzz_npy, or all. --time: per target (default 30);
# --build: the fuzz build folder (default build-fuzz), which also keeps the corpus grown by
# earlier runs (DIR/corpus/TARGET) and the findings (DIR/findings/TARGET); --jobs: parallel
# fuzzing processes per target (default 1).
#
# Exit 0 when no finding is ours, 1 when one is (its input is kept and its report printed),
# 2 for a usage error, 77 when clang with libFuzzer is not available (ctest: skipped).
# --attribute prints whose a saved report of a fuzz_hclt finding is (libhdf5 or ours) by the
# rule the triage uses, without fuzzing; the ctest fuzz_attribution runs it on fuzz/reports/.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)

# The first frame of a sanitizer or libFuzzer report that is either libhdf5's or ours: frames of
# the sanitizers, libFuzzer, the allocator, libc and any other shared library (zlib, libsz and
# the rest that libhdf5 loads; our code is linked into the executable) are skipped, so a fault
# inside such a library goes to whichever of the two called it. A frame inside the fuzz
# executable that has no source line is the sanitizer runtime too: an interceptor such as
# strdup or memcpy, reported under the libc name it replaces (pcinfer's own code is built with
# line tables, so its frames always name a file and line).
runtime='__asan|__lsan|__ubsan|__sanitizer|__interceptor|fuzzer::|LLVMFuzzer'
allocator='malloc|calloc|realloc|free|posix_memalign|aligned_alloc|operator'
libc='__libc|__GI_|raise|abort|_start|main'
first_frame() {
  local report=$1 exe_name=$2
  grep -E '^ *#[0-9]+ 0x[0-9a-f]+ ' "$report" |
    grep -vE " in ($runtime|$allocator|$libc)" |
    grep -vE "\\(([^ )]*/)?$exe_name\\+0x[0-9a-f]+\\)" |
    grep -vE 'sysdeps/|csu/' |
    awk '/libhdf5/ || !/\.so[.0-9]*\+0x[0-9a-f]+\)/ { print; exit }' || true
}

# Whose a report of a fuzz_hclt finding is: 0 for libhdf5's (its first frame, as above, is in
# libhdf5), 1 for ours (that frame is ours, or UBSan names one of our sources).
attribute() {
  local report=$1 exe_name=$2 frame
  if grep -qE '(src|fuzz)/[^ ]*:[0-9]+:[0-9]+: runtime error' "$report"; then return 1; fi
  frame=$(first_frame "$report" "$exe_name")
  case $frame in
    *libhdf5*) return 0 ;;
    *) return 1 ;;
  esac
}

if [ "${1:-}" = --attribute ]; then
  [ $# -eq 3 ] || { echo "usage: fuzz/run.sh --attribute REPORT EXECUTABLE_NAME" >&2; exit 2; }
  if attribute "$2" "$3"; then echo libhdf5; else echo ours; fi
  exit 0
fi

seconds=30 build=build-fuzz jobs=1
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --time) seconds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    all) targets+=(fuzz_idx fuzz_hclt fuzz_hclt_answer fuzz_npy); shift ;;
    fuzz_idx|fuzz_hclt|fuzz_hclt_answer|fuzz_npy) targets+=("$1"); shift ;;
    *) echo "usage: fuzz/run.sh [--time S] [--build DIR] [--jobs N] TARGET... (or all)" >&2
       exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || { echo "fuzz/run.sh: no target given" >&2; exit 2; }

# clang and its libFuzzer runtime (Debian: clang, libclang-rt-dev).
cc=$(command -v clang || command -v clang-14 || true)
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' \
  >"$probe/probe.c"
if [ -z "$cc" ] || ! "$cc" -fsanitize=fuzzer,address "$probe/probe.c" -o "$probe/probe" \
    2>/dev/null; then
  echo "fuzz: skipped: clang with libFuzzer not found (Debian: apt-get install clang" \
       "libclang-rt-dev)"
  exit 77
fi

mkdir -p "$build"
build=$(cd "$build" && pwd)
# One build at a time: ctest runs the targets in parallel.
(
  flock 9
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$src/fuzz/targets" -B "$build" -DCMAKE_C_COMPILER="$cc" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  cmake --build "$build" -j "$(nproc)" >/dev/null
) 9>"$build/.build-lock"

# Seeds: the hostile samples of the kind the target reads, valid files, and for the answer
# target the reader program's answers to the model samples.
seed_corpus() {
  local target=$1 dir=$2 f name
  mkdir -p "$dir"
  for f in "$src"/tests/data/badinput/* "$src"/tests/data/*.h5; do
    name=$(basename "$f")
    case $name in README.md) continue ;; esac
    case $target:$name in
      fuzz_idx:*.idx.gz|fuzz_idx:C2_*|fuzz_idx:C3_*)
        { printf '\0'; cat "$f"; } >"$dir/seed-$name" ;;
      fuzz_idx:idx-*) cp "$f" "$dir/seed-$name" ;;
      fuzz_idx:*) ;;
      fuzz_hclt:*.idx.gz|fuzz_hclt:idx-*|fuzz_hclt:C2_*|fuzz_hclt:C3_*) ;;
      # Inputs that make libhdf5 loop cost a timeout in every fuzzing job: left out.
      fuzz_hclt:*-timeout-*|fuzz_hclt:cli-hang-*) ;;
      fuzz_hclt:*) cp "$f" "$dir/seed-$name" ;;
      fuzz_hclt_answer:*.idx.gz|fuzz_hclt_answer:idx-*|fuzz_hclt_answer:C2_*) ;;
      fuzz_hclt_answer:C3_*|fuzz_hclt_answer:*-timeout-*|fuzz_hclt_answer:cli-hang-*) ;;
      fuzz_hclt_answer:*)
        (timeout 10 "$build/pcinfer-hclt-reader" 67108864 1 "$f" >"$dir/seed-$name") \
          2>/dev/null || true ;;
      fuzz_npy:*) ;;
    esac
  done
  if [ "$target" = fuzz_npy ]; then
    # A uint8 2 x 3 file (version 1.0, its dict padded to 128 bytes), read in batches of 2;
    # the same as version 2.0; and a dict alone.
    local dict="{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }"
    { printf '\x02\x93NUMPY\x01\x00\x76\x00%-117s\n' "$dict"; printf 'abcdef'; } \
      >"$dir/seed-v1"
    { printf '\x00\x93NUMPY\x02\x00\x74\x00\x00\x00%-115s\n' "$dict"; printf 'abcdef'; } \
      >"$dir/seed-v2"
    printf "\x01{'shape': (4, 5, 6), 'descr': '<u1', 'fortran_order': False}" >"$dir/seed-dict"
  fi
  if [ "$target" = fuzz_idx ]; then
    # A 2 x 2 x 3 image file (streamed, whole) and a 3-label file.
    printf '\x00\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x03abcdefghijkl' \
      >"$dir/seed-images"
    printf '\x10\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x03abcdefghijkl' \
      >"$dir/seed-images-whole"
    printf '\x01\x00\x00\x08\x01\x00\x00\x00\x03\x01\x02\x03' >"$dir/seed-labels"
  fi
}

# Replays a finding of fuzz_hclt alone; returns 0 when it is libhdf5's (its first frame is in
# libhdf5, or it does not happen again alone: libhdf5's state after earlier inputs), 1 when it
# is ours. pcinfer parses model files in a separate process because of the first kind. The
# replay has a malloc limit (far above what our reader allocates for a fuzzing input of a few
# KB, whose claims are checked against its size) and twice the fuzzing's RSS limit, so that a
# single large allocation reports its own stack: an RSS report shows only the largest live
# allocations (libFuzzer's own, from main), which names no culprit. Seen: libhdf5 1.10.8 at
# 2.4 GB of RSS, then a malloc of 22 GB in H5T__conv_vlen under H5Aread, for a
# variable-length string attribute with a garbage length.
#
# A report that names no frame at all was cut short: the 3 s alarm fired while the stack was
# being symbolized (seen for that malloc-limit report under the sanitizer build on a busy
# machine, where it then counted as ours). Such a finding is replayed once more with a minute
# to spare; only those pay for it, not every hang that libhdf5 has.
replay() {
  local exe=$1 input=$2 report=$3 seconds=$4
  timeout $((seconds + 60)) "$exe" -runs=1 -timeout="$seconds" -rss_limit_mb=4096 \
    -malloc_limit_mb=2048 "$input" >"$report" 2>&1
}

triage() {
  local exe=$1 input=$2 report=$3 name
  name=$(basename "$exe")
  if replay "$exe" "$input" "$report" 3; then return 0; fi
  if [ -z "$(first_frame "$report" "$name")" ] && replay "$exe" "$input" "$report" 60; then
    return 0
  fi
  attribute "$report" "$name"
}

status=0
for target in "${targets[@]}"; do
  corpus=$build/corpus/$target findings=$build/findings/$target
  seed_corpus "$target" "$corpus"
  rm -rf "$findings"
  mkdir -p "$findings"
  opts=(-max_total_time="$seconds" -timeout=3 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$findings/")
  # libhdf5's findings are expected in fuzz_hclt: keep going past them (fork mode) and triage
  # afterwards; its leaks on malformed files are not ours to report.
  if [ "$target" = fuzz_hclt ]; then
    opts+=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -detect_leaks=0)
  elif [ "$jobs" -gt 1 ]; then
    opts+=(-fork="$jobs")
  fi
  echo "== fuzz: $target for $seconds s ($(ls "$corpus" | wc -l) inputs in the corpus)"
  log=$build/$target.log
  (cd "$findings" && ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1} \
    "$build/$target" "${opts[@]}" "$corpus" >"$log" 2>&1) || true
  grep -E '^(stat::|#[0-9]+ +(DONE|INITED))' "$log" | tail -3 || true
  ours=0 theirs=0
  for input in "$findings"/*; do
    [ -f "$input" ] || continue
    case $(basename "$input") in *.report) continue ;; esac
    # Only fuzz_hclt runs libhdf5: a finding of the others is always ours.
    if [ "$target" = fuzz_hclt ] && triage "$build/$target" "$input" "$input.report"; then
      theirs=$((theirs + 1))
      continue
    fi
    ours=$((ours + 1))
    echo "== fuzz: $target: a finding in pcinfer's code: $input"
    if [ -f "$input.report" ]; then
      sed -n '1,60p' "$input.report"
    else
      grep -A40 -m1 -E '^==[0-9]+==ERROR|runtime error|deadly signal' "$log" || true
    fi
  done
  echo "== fuzz: $target: $ours finding(s) in pcinfer's code, $theirs inside libhdf5"
  if [ "$ours" -gt 0 ]; then status=1; fi
  # A run that found nothing but did not run either (a broken build) is a failure too.
  if ! grep -qE '^(stat::number_of_executed_units|#[0-9]+ +DONE|#[0-9]+: cov:)' "$log"; then
    echo "== fuzz: $target did not run; its log:"
    tail -20 "$log"
    status=1
  fi
done
exit $status
