#!/usr/bin/env python3
"""Reads the runs of bench/device/mpi_score_device.sh (OUT/runs.tsv and each run's pcinfer
--json) and writes OUT/mpi_score_<GPU>.json and its note OUT/mpi_score_<GPU>.md: per number of
ranks R, images/s (over the slowest rank's evaluator time, over its whole scoring loop, and end
to end), the scaling efficiency against R = 1 (rate / (R x rate at R = 1)), and whether the
output file and the figures are those of R = 1.

    usage: mpi_score_summary.py OUT GPU_NAME GPUS ALLOW_SHARED_GPU
"""
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from machine import nvidia_smi  # noqa: E402

FIGURES = ("mean_ll_nats", "bits_per_dim", "images")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    out, gpu, gpus, shared = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    runs = []
    with open(os.path.join(out, "runs.tsv")) as f:
        next(f)
        for line in f:
            ranks, rc, e2e, name, same = line.rstrip("\n").split("\t")
            run = {"ranks": int(ranks), "mpirun": int(ranks) > 0, "exit": int(rc),
                   "end_to_end_seconds": float(e2e),
                   "same_output_as_r1": None if same == "-" else same == "1"}
            try:
                with open(os.path.join(out, name)) as j:
                    run["pcinfer"] = json.loads(j.read())
            except (OSError, ValueError):
                run["pcinfer"] = None
            runs.append(run)
    one = next((r for r in runs if r["ranks"] == 1 and r["pcinfer"]), None)
    for r in runs:
        p = r["pcinfer"]
        if not p:
            continue
        n = p["images"]
        r["images_per_second"] = p["images_per_second"]
        r["images_per_second_wall"] = n / p["wall_seconds"] if p.get("wall_seconds") else None
        r["images_per_second_end_to_end"] = n / r["end_to_end_seconds"]
        if one and r["mpirun"]:
            o, k = one["pcinfer"], r["ranks"]
            r["efficiency"] = p["images_per_second"] / (k * o["images_per_second"])
            r["efficiency_wall"] = (o["wall_seconds"] / p["wall_seconds"]) / k
            r["efficiency_end_to_end"] = one["end_to_end_seconds"] / r["end_to_end_seconds"] / k
            r["same_figures_as_r1"] = all(p.get(f) == o.get(f) for f in FIGURES)
    smi = nvidia_smi(["name", "driver_version"]) or ["", ""]
    kernel = one["pcinfer"]["kernel"] if one else "fuse"
    result = {"date": datetime.date.today().isoformat(), "gpu": smi[0], "driver": smi[1],
              "gpus": gpus, "cpus": os.cpu_count(), "allow_shared_gpu": shared,
              "command": f"mpirun -np R pcinfer --kernel {kernel} --json --data <the MNIST "
                         "test set tiled> --output FILE models/mnist.h5", "runs": runs}
    with open(os.path.join(out, f"mpi_score_{gpu}.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")

    rows = ["| R | GPUs used | images/s (eval) | eff. | images/s (loop) | eff. | end to end s "
            "| eff. | output = R 1 | figures = R 1 |", "|---|---|---|---|---|---|---|---|---|---|"]

    def fmt(v, spec):
        return "" if v is None else format(v, spec)

    for r in runs:
        if not r["pcinfer"]:
            rows.append(f"| {r['ranks'] or '1 (no mpirun)'} | | failed (exit {r['exit']}) "
                        "| | | | | | | |")
            continue
        k = r["ranks"]
        same = {None: "", True: "yes", False: "**no**"}
        rows.append(
            f"| {k if k else '1 (no mpirun)'} | {min(max(k, 1), gpus)} "
            f"| {r['images_per_second']:,.0f} | {fmt(r.get('efficiency'), '.2f')} "
            f"| {fmt(r['images_per_second_wall'], ',.0f')} "
            f"| {fmt(r.get('efficiency_wall'), '.2f')} | {r['end_to_end_seconds']:.2f} "
            f"| {fmt(r.get('efficiency_end_to_end'), '.2f')} "
            f"| {same[r['same_output_as_r1']]} | {same[r.get('same_figures_as_r1')]} |")
    n = one["pcinfer"]["images"] if one else None
    note = [f"# Sharded scoring: mpirun -np R pcinfer --kernel {kernel} ({smi[0] or gpu})", "",
            f"{result['date']}; {gpus} GPU(s), {os.cpu_count()} CPUs; "
            f"{n:,} images (the MNIST test set tiled), models/mnist.h5 (K = 16)." if n else
            f"{result['date']}; {gpus} GPU(s); no R = 1 run.", "",
            "images/s (eval): over the slowest rank's evaluator time, pcinfer's images_per_second; "
            "(loop): over the slowest rank's scoring loop, reading the data included "
            "(wall_seconds); end to end: the whole mpirun command, start-up, model loading and "
            "the gather included. eff. = rate / (R x rate at R = 1). "
            + ("Ranks beyond the GPUs share them (ALLOW_SHARED_GPU=1)." if shared else ""),
            "", *rows, ""]
    with open(os.path.join(out, f"mpi_score_{gpu}.md"), "w") as f:
        f.write("\n".join(note))


if __name__ == "__main__":
    main()
