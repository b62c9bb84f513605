#!/usr/bin/env python3
"""Why offsets: the shipped model scored in plain FP32 (absolute log-values, every sum node a
max-shifted LSE in float32) against FP64, next to pcinfer's cpu-fuse and cpu backends.

numpy evaluates the circuit layer by layer over the whole batch in two precisions:
  fp64   every value float64 (agrees with pcinfer's ref to ~1e-12 nats, checked here);
  fp32   every value float32, each node's K-vector held as absolute log-values (about -700 nats
         at the root, where one float32 ulp is 6e-5), LSE per sum node with the max shift.
Then pcinfer --output gives the per-image values of cpu-fuse and cpu. Results:
bench/results/current/cpu_offsets_ablation_<machine>.json and .md.

usage: bench/harness/cpu_offsets_ablation.py [--build DIR] [--limit N]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
from machine import current_base, machine_name, read_cpuinfo  # noqa: E402


def load_images(limit):
    found = subprocess.run([os.path.join(ROOT, "datasets", "find_mnist.sh")], cwd=ROOT,
                           capture_output=True, text=True)
    if found.returncode:
        sys.exit(found.stderr)
    path = os.path.join(ROOT, found.stdout.strip(), "t10k-images-idx3-ubyte.gz")
    with gzip.open(path) as f:
        raw = f.read()
    n = int.from_bytes(raw[4:8], "big")
    x = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, 784)
    return path, x[:limit]


def groups_of(parent, trans):
    """Owner latent of every variable, and owners in an order with children first."""
    V = len(parent)
    kids = [[] for _ in range(V)]
    root = int(np.where(parent < 0)[0][0])
    for v in range(V):
        if parent[v] >= 0:
            kids[parent[v]].append(v)
    order, owner = [root], {}
    for v in order:
        order.extend(kids[v])
    for v in order:
        owner[v] = v if (v == root or trans[v] >= 0) else owner[int(parent[v])]
    return root, order, owner


def forward(model, x, dtype):
    parent = model["parent"]
    trans = model["trans"]
    root, order, owner = groups_of(parent, trans)
    inp = model["input"].astype(dtype)           # [V, K, C]
    tw = model["trans_logw"].astype(dtype)       # [T, K, K]
    rw = model["root"].astype(dtype)             # [K]
    N, K = x.shape[0], rw.shape[0]
    P = {}                                       # products of the groups still open
    for v in reversed(order):                    # every descendant before its ancestors
        g = owner[v]
        P.setdefault(g, np.zeros((N, K), dtype=dtype))
        P[g] += inp[v][:, x[:, v]].T             # input term of v into its latent's product
        if v == root or g != v:
            continue
        p = P.pop(v)                             # complete: all of v's subtree is in
        m = p.max(axis=1, keepdims=True)
        w = tw[trans[v]]                         # [j, k]
        s = np.exp(p - m) @ np.exp(w).T          # [N, j]
        msg = m + np.log(s)
        pg = owner[int(parent[v])]
        P.setdefault(pg, np.zeros((N, K), dtype=dtype))
        P[pg] += msg.astype(dtype)
    p = P[root] + rw
    m = p.max(axis=1, keepdims=True)
    return (m[:, 0] + np.log(np.exp(p - m).sum(axis=1))).astype(np.float64)


def pcinfer_values(build, model_path, data_path, kernel, limit, tmp):
    out = os.path.join(tmp, kernel + ".txt")
    subprocess.run([os.path.join(build, "pcinfer"), "--kernel", kernel, "--data", data_path,
                    "--limit", str(limit), "--output", out, model_path], check=True,
                   capture_output=True, cwd=ROOT)
    return np.loadtxt(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--limit", type=int, default=10000)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    model_path = os.path.join(ROOT, "models", "mnist.h5")
    with h5py.File(model_path, "r") as f:
        model = {"parent": f["structure/parent"][()], "trans": f["structure/trans_index"][()],
                 "root": f["params/root_logw"][()].astype(np.float64),
                 "trans_logw": f["params/trans_logw"][()].astype(np.float64),
                 "input": f["params/input_logp"][()].astype(np.float64)}
    data_path, x = load_images(a.limit)
    n = x.shape[0]
    f64 = forward(model, x, np.float64)
    f32 = forward(model, x, np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        values = {k: pcinfer_values(build, model_path, data_path, k, n, tmp)
                  for k in ("ref", "cpu-fuse", "cpu")}
    values["numpy fp32 (absolute values)"] = f32
    ref = values["ref"]
    rows = {"numpy fp64 vs pcinfer ref (check)": float(np.abs(f64 - ref).max())}
    table = []
    for name in ("numpy fp32 (absolute values)", "cpu-fuse", "cpu"):
        d = np.abs(values[name] - ref)
        table.append({"path": name, "mean_abs_delta_nats": float(d.mean()),
                      "max_abs_delta_nats": float(d.max()),
                      "mean_delta_nats": float((values[name] - ref).mean())})
    cpu = read_cpuinfo()[0] or "unknown"
    base = current_base("cpu_offsets_ablation", machine_name())
    os.makedirs(os.path.dirname(base), exist_ok=True)
    result = {"cpu": cpu, "images": n, "model": "models/mnist.h5",
              "mean_ll_nats_ref": float(ref.mean()), "check": rows, "paths": table}
    with open(base + ".json.tmp", "w") as f:  # renamed when whole: never half a file
        json.dump(result, f, indent=1)
    os.replace(base + ".json.tmp", base + ".json")
    lines = ["# FP32 with and without per-group offsets (shipped MNIST model)", "",
             "CPU: %s. The first %d MNIST test images; mean log p(x) %.4f nats (FP64). "
             "|delta| against pcinfer's FP64 `ref`; numpy's own FP64 forward agrees with it to "
             "%.1e nats (max)." % (cpu, n, ref.mean(), rows["numpy fp64 vs pcinfer ref (check)"]),
             "", "| path | mean abs delta (nats) | max abs delta (nats) | mean signed delta |",
             "|---|---|---|---|"]
    for r in table:
        lines.append("| %s | %.2e | %.2e | %+.2e |" % (r["path"], r["mean_abs_delta_nats"],
                                                      r["max_abs_delta_nats"],
                                                      r["mean_delta_nats"]))
    with open(base + ".md.tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(base + ".md.tmp", base + ".md")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
