#!/usr/bin/env python3
"""Images per second of the CPU circuit backends (ref, cpu-fuse, cpu) on MNIST-shaped HCLTs.

For K = 16 and K = 32 a random HCLT of MNIST's shape is made (bench/harness/make_random_hclt.py: the
speed depends on V, K, C and the tree, not on the parameter values), then pcinfer scores the
first images of the MNIST test set with each backend on 1 thread and on all cores; the median
of --reps runs is kept. The shipped model (models/mnist.h5, K = 16) is also scored in full
with --compare ref, for its accuracy. Results: bench/results/current/cpu_circuit_<machine>.json
and .md (bench/machine.py names the machine).

usage: bench/harness/cpu_circuit_bench.py [--build DIR] [--reps N] [--images N] [--models DIR]
                                          [--data F]
(--models: take random_k16.h5 and random_k32.h5 from DIR instead of making them, for machines
without h5py; --data: the MNIST test images when pcinfer cannot find them itself)
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))  # bench/
from machine import cpu_name, current_base, read_cpuinfo  # noqa: E402


def cpu_info():
    model, have = read_cpuinfo()
    model = model or "unknown"
    flags = [x for x in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl") if x in have]
    cc = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    commit = subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "cpu": model,
        "cpu_flags": flags,
        "cores": os.cpu_count(),
        "compiler": cc,
        "os": platform.platform(),
        "commit": commit,
    }


def pcinfer(build, model, kernel, threads, limit=None, compare=False, data=None):
    cmd = [
        os.path.join(build, "pcinfer"),
        "--kernel",
        kernel,
        "--threads",
        str(threads),
        "--json",
        model,
    ]
    if data:
        cmd += ["--data", data]
    if limit:
        cmd += ["--limit", str(limit)]
    if compare:
        cmd += ["--compare", "ref"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        sys.exit("pcinfer failed: %s\n%s" % (" ".join(cmd), out.stderr))
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--images", type=int, default=4000)
    ap.add_argument("--models", default=None)
    ap.add_argument("--data", default=None)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    machine = cpu_info()
    machine["load_average_before"] = os.getloadavg()[0]
    cores = machine["cores"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for K in (16, 32):
            model = os.path.join(a.models or tmp, "random_k%d.h5" % K)
            if not a.models:
                subprocess.run(
                    [
                        sys.executable,
                        os.path.join(HERE, "make_random_hclt.py"),
                        "--latents",
                        str(K),
                        model,
                    ],
                    check=True,
                )
            for threads in sorted({1, cores}):
                for kernel in ("ref", "cpu-fuse", "cpu"):
                    runs = [
                        pcinfer(build, model, kernel, threads, a.images, data=a.data)
                        for _ in range(a.reps)
                    ]
                    ips = statistics.median(r["images_per_second"] for r in runs)
                    rows.append(
                        {
                            "model": "random MNIST-shaped HCLT",
                            "K": K,
                            "threads": threads,
                            "kernel": kernel,
                            "images": a.images,
                            "images_per_second": ips,
                            "runs_images_per_second": [r["images_per_second"] for r in runs],
                        }
                    )
                    print(
                        "K=%d threads=%d %-8s %9.1f images/s" % (K, threads, kernel, ips),
                        file=sys.stderr,
                    )
    machine["load_average_after_timing"] = os.getloadavg()[0]
    shipped = []
    model = os.path.join(ROOT, "models", "mnist.h5")
    if os.path.exists(model):
        for kernel in ("cpu-fuse", "cpu"):
            r = pcinfer(build, model, kernel, cores, compare=True, data=a.data)
            shipped.append(
                {
                    "kernel": kernel,
                    "threads": cores,
                    "images": r["images"],
                    "mean_ll_nats": r["mean_ll_nats"],
                    "bits_per_dim": r["bits_per_dim"],
                    "images_per_second": r["images_per_second"],
                    "ref_images_per_second": r["compare"]["ref_images_per_second"],
                    "mean_abs_delta_nats": r["compare"]["mean_abs_delta_nats"],
                    "max_abs_delta_nats": r["compare"]["max_abs_delta_nats"],
                }
            )
    base = current_base("cpu_circuit", cpu_name(machine["cpu"], cores))
    os.makedirs(os.path.dirname(base), exist_ok=True)
    with open(base + ".json.tmp", "w") as f:
        json.dump({"machine": machine, "timing": rows, "shipped_model": shipped}, f, indent=1)
    os.replace(base + ".json.tmp", base + ".json")

    lines = [
        "# CPU circuit backends: images per second on MNIST-shaped HCLTs",
        "",
        "Machine: %s (flags %s), %d cores, %s; commit %s."
        % (
            machine["cpu"],
            ", ".join(machine["cpu_flags"]),
            cores,
            machine["compiler"],
            machine["commit"],
        ),
        "Random HCLTs of MNIST's shape (V = 784, C = 256, 583 groups in 11 layers), the first "
        "%d MNIST test images, median of %d runs; time of the evaluation calls only "
        "(pcinfer's images/s). Ratios are against `ref` in the same setting. Load average "
        "(other jobs on the machine): %.1f before, %.1f after the timing runs."
        % (a.images, a.reps, machine["load_average_before"], machine["load_average_after_timing"]),
        "",
        (
            "Other jobs held part of the machine during these runs (load average >= 0.5): "
            "the all-core rows understate how the backends scale."
            if max(machine["load_average_before"], machine["load_average_after_timing"]) >= 0.5
            and cores <= 4
            else ""
        ),
        "",
        "| K | threads | ref | cpu-fuse | cpu (IntLSE) | cpu-fuse / ref | cpu / ref |",
        "|---|---|---|---|---|---|---|",
    ]
    for K in (16, 32):
        for threads in sorted({1, cores}):
            ips = {
                r["kernel"]: r["images_per_second"]
                for r in rows
                if r["K"] == K and r["threads"] == threads
            }
            lines.append(
                "| %d | %d | %.0f | %.0f | %.0f | %.2f | %.2f |"
                % (
                    K,
                    threads,
                    ips["ref"],
                    ips["cpu-fuse"],
                    ips["cpu"],
                    ips["cpu-fuse"] / ips["ref"],
                    ips["cpu"] / ips["ref"],
                )
            )
    if shipped:
        lines += [
            "",
            "Shipped model (models/mnist.h5, K = 16), whole test set, %d threads, "
            "against the FP64 path (`--compare ref`):" % cores,
            "",
            "| kernel | bits/dim | images/s | ref images/s | mean abs delta (nats) | "
            "max abs delta (nats) |",
            "|---|---|---|---|---|---|",
        ]
        for s in shipped:
            lines.append(
                "| %s | %.6f | %.0f | %.0f | %.2e | %.2e |"
                % (
                    s["kernel"],
                    s["bits_per_dim"],
                    s["images_per_second"],
                    s["ref_images_per_second"],
                    s["mean_abs_delta_nats"],
                    s["max_abs_delta_nats"],
                )
            )
    with open(base + ".md.tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(base + ".md.tmp", base + ".md")
    print(base + ".json")


if __name__ == "__main__":
    main()
