#!/usr/bin/env python3
"""PyJuice's queries on an MNIST HCLT, the peer of bench/harness/gpu_query_bench.c: sampling
from p(x), the MPE (max-product) forward pass and the conditionals p(x_v | e) with the left
half of each image missing, and conditional sampling, for one query per call (a failure in
PyJuice can leave the CUDA context unusable, so the device script runs each in a process of
its own). Times: CUDA events around one call after a warm-up call of the same shape, median
of --reps. PyJuice is not a dependency: its wheel is unpacked into the folder --pyjuice.

usage: query_pyjuice.py OUT.json --query sample|mpe|conditional|sample_conditional --k K
       [--n N] [--reps R] --pyjuice DIR --mnist-train TRAIN.gz --mnist-test TEST.gz
Adds the point to OUT.json (created if missing) as {"query", "K", "n", "ms" | "error"}.
"""

import argparse
import sys
import time

import numpy as np

from learn_pyjuice import load_idx, merge_results, timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--query", required=True,
                    choices=["sample", "mpe", "conditional", "sample_conditional"])
    ap.add_argument("--k", type=int, required=True)
    ap.add_argument("--n", type=int, default=512, help="samples drawn, or the batch")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pyjuice", required=True)
    ap.add_argument("--mnist-train", required=True)
    ap.add_argument("--mnist-test", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.pyjuice)
    import torch
    import pyjuice as juice

    dev = torch.device("cuda")
    train = torch.from_numpy(load_idx(a.mnist_train).astype(np.int64))
    t0 = time.time()
    pc = juice.compile(juice.structures.HCLT(train[:20000].float().to(dev), num_latents=a.k))
    pc.to(dev)
    compile_s = time.time() - t0
    x = torch.from_numpy(load_idx(a.mnist_test)[: a.n].astype(np.int64)).to(dev)
    missing = torch.zeros(x.shape, dtype=torch.bool, device=dev)
    missing.view(-1, 28, 28)[:, :, :14] = True  # the left half of every image

    def sample_conditional():
        juice.queries.marginal(pc, data=x, missing_mask=missing)
        return juice.queries.sample(pc, conditional=True)

    queries = {
        "sample": lambda: juice.queries.sample(pc, num_samples=a.n),
        "mpe": lambda: juice.queries.marginal(pc, data=x, missing_mask=missing,
                                              propagation_alg="MPE"),
        "conditional": lambda: juice.queries.conditional(pc, data=x, missing_mask=missing),
        "sample_conditional": sample_conditional,
    }
    point = {"query": a.query, "K": a.k, "n": a.n, "compile_s": round(compile_s, 2)}
    try:
        point["ms"] = timed(queries[a.query], a.reps, torch)
        print(f"pyjuice {a.query} K={a.k} n={a.n}: {point['ms']:.3f} ms", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - recorded: PyJuice's failure is a result
        point["error"] = f"{type(e).__name__}: {e}"[:300]
        print(f"pyjuice {a.query} K={a.k} n={a.n}: {point['error']}", file=sys.stderr)
    same = (a.query, a.k, a.n)
    merge_results(a.out, [point], lambda p: (p["query"], p["K"], p["n"]) == same, torch)


if __name__ == "__main__":
    main()
