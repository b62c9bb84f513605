#!/usr/bin/env bash
# The main job. Until the circuit engine lands: the CPU log-sum-exp benchmark table.
set -euo pipefail
build=${1:-build}
exec "$build/lsebench" --device cpu
