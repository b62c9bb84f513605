#!/usr/bin/env python3
"""Writes a random HCLT of MNIST's shape (V = 784, C = 256) for timing the evaluators.

The tree is random (each variable hangs below a random earlier one in a random order, which
gives trees about as deep as Chow-Liu trees of images: O(log V) on average); a fraction of the
variables share their parent's latent, as PyJuice's HCLT leaves do. Parameters are random
normalised distributions. Timing does not depend on the values, only on V, K, C and the tree.

usage: make_random_hclt.py --latents K [--vars V] [--cats C] [--share F] [--seed S] OUT.h5
"""
import argparse
import os

import h5py
import numpy as np


def log_dist(rng, shape):
    x = np.exp(rng.normal(0.0, 1.5, size=shape))
    return np.log(x / x.sum(axis=-1, keepdims=True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latents", type=int, required=True)
    ap.add_argument("--vars", type=int, default=784)
    ap.add_argument("--cats", type=int, default=256)
    ap.add_argument("--share", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("out")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    V, C, K = a.vars, a.cats, a.latents
    perm = rng.permutation(V)
    parent = np.full(V, -1, dtype=np.int32)
    trans = np.full(V, -1, dtype=np.int32)
    owners = []
    for i in range(1, V):
        v = perm[i]
        parent[v] = perm[rng.integers(0, i)]
        if rng.random() >= a.share:
            owners.append(v)
    rows = rng.permutation(len(owners))
    for v, t in zip(owners, rows):
        trans[v] = t
    tmp = a.out + ".tmp-%d" % os.getpid()
    with h5py.File(tmp, "w") as f:
        f.attrs["format"] = "pcinfer-hclt"
        f.attrs["version"] = np.int32(1)
        f.attrs["num_vars"] = np.int32(V)
        f.attrs["num_cats"] = np.int32(C)
        f.attrs["num_latents"] = np.int32(K)
        f["structure/parent"] = parent
        f["structure/trans_index"] = trans
        f["params/root_logw"] = log_dist(rng, (K,)).astype(np.float32)
        f["params/trans_logw"] = log_dist(rng, (len(owners), K, K)).astype(np.float32)
        f["params/input_logp"] = log_dist(rng, (V, K, C)).astype(np.float32)
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
