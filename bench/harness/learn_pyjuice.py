#!/usr/bin/env python3
"""PyJuice's mini-batch EM step on an MNIST HCLT, the peer of bench/harness/learn_gpu_bench.c:
forward + backward (parameter flows) + mini_batch_em, eager and with CUDA graphs recorded
(forward and backward), median of CUDA-event timings after a warm-up, for one K per call (a
failure in PyJuice can leave the CUDA context unusable, so the device script runs each K in a
process of its own). PyJuice is not a dependency: its wheel is unpacked into a folder given by
--pyjuice (pip download --no-deps pyjuice==2.6.3, then unzip).

usage: learn_pyjuice.py OUT.json --k K [--batches 512,4096] [--reps 20] --pyjuice DIR
       --mnist train-images-idx3-ubyte.gz
Adds this K's points to OUT.json (created if missing), as {"K", "batch", "mode", "ms"}.
"""

import argparse
import gzip
import json
import os
import sys
import time

import numpy as np


def load_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[4:8], "big")
    return np.frombuffer(raw[16:], dtype=np.uint8).reshape(n, -1)


def merge_results(out, points, replaces, torch):
    """Adds points to the JSON file out (created if missing), dropping the old points for
    which replaces(point) holds; written to a temporary file, then renamed over out."""
    old = []
    if os.path.exists(out):
        with open(out) as f:
            old = json.load(f)["results"]
    data = {"peer": "pyjuice 2.6.3", "torch": torch.__version__,
            "results": [p for p in old if not replaces(p)] + points}
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, out)


def timed(fn, reps, torch, warmup=1):
    """Median ms of fn() over reps calls (CUDA events around each), after warmup calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return float(np.median(times))


def time_step(pc, x, graph, reps, torch):
    """Median ms of forward + backward + mini_batch_em on batch x (a fixed device tensor)."""

    def step():
        pc(x, record_cudagraph=graph, apply_cudagraph=graph)
        pc.backward(x, flows_memory=0.0, record_cudagraph=graph, apply_cudagraph=graph)
        pc.mini_batch_em(step_size=0.5, pseudocount=0.1)

    return timed(step, reps, torch, warmup=3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--k", type=int, required=True)
    ap.add_argument("--batches", default="512,4096")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--pyjuice", required=True)
    ap.add_argument("--mnist", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.pyjuice)
    import torch
    import pyjuice as juice

    x_all = torch.from_numpy(load_idx(a.mnist).astype(np.int64))
    dev = torch.device("cuda")
    t0 = time.time()
    ns = juice.structures.HCLT(x_all[:20000].float().to(dev), num_latents=a.k)
    pc = juice.compile(ns)
    pc.to(dev)
    compile_s = time.time() - t0
    points = []
    for b in [int(s) for s in a.batches.split(",")]:
        x = x_all[:b].to(dev)
        for graph in (False, True):
            mode = "graph" if graph else "eager"
            try:
                ms = time_step(pc, x, graph, a.reps, torch)
            except Exception as e:  # noqa: BLE001 - recorded, the other points still run
                print(f"pyjuice K={a.k} b={b} {mode}: {e}", file=sys.stderr)
                continue
            print(f"pyjuice K={a.k} b={b} {mode}: {ms:.3f} ms", file=sys.stderr)
            points.append({"K": a.k, "batch": b, "mode": mode, "ms": ms,
                           "compile_s": round(compile_s, 2)})
    merge_results(a.out, points, lambda p: p["K"] == a.k, torch)


if __name__ == "__main__":
    main()
