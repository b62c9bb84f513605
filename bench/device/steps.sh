# shellcheck shell=bash
# Sourced by the device scripts that run their steps under one deadline (learn_gpu_device.sh,
# mpi_score_device.sh): note, budget and step. The script sets OUT, start (date +%s at its
# beginning), deadline (seconds from start after which no step begins) and summary (the file
# that note appends to).

note() { echo "$*" | tee -a "$summary"; }
# budget NAME LIMIT: prints min(LIMIT, the time left), or notes that NAME does not run.
budget() {
    local left=$((deadline - ($(date +%s) - start)))
    if [ "$left" -lt 15 ]; then
        note "$1: not run, no time left"
        return 1
    fi
    echo $(($2 < left ? $2 : left))
}
# step NAME LIMIT CMD...: CMD's stdout and stderr into $OUT/NAME.log, under the budget.
step() {
    local name=$1 limit t rc
    limit=$(budget "$name" "$2") || return 99
    shift 2
    t=$(date +%s)
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    note "$name: rc=$rc, $(($(date +%s) - t)) s (limit $limit s)"
    return $rc
}
