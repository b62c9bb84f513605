#!/usr/bin/env python3
"""The torch peer of pcinfer's CPU backends: a plain PyTorch implementation of the HCLT forward
pass, as a user would write it (FP32, level by level, each sum layer a log-einsum-exp through
one batched matrix product), reading the same HDF5 model file (docs/format.md).

Per batch of B images, msg is [G, B, K] (one row of groups per node group, the layout torch.bmm
wants), and for each layer of groups (children before parents):
    P      = input terms of the layer's variables + its children's messages   [n, B, K]
    m      = max_k P                                                           [n, B, 1]
    S      = bmm(exp(P - m), W^T) with W = exp(trans_logw) of the layer's rows [n, B, K]
    msg    = m + log S
and log p(x) = m + log(exp(P_root - m) . exp(root_logw)).

As a module: TorchHclt(path, threads).score(x) scores a uint8 [N, V] array in batches.
As a script: prints images/s at each batch size and the error against --ref (a pcinfer
--output file of log p(x) per image).

usage: cpu_torch_hclt.py MODEL.h5 --data t10k-images-idx3-ubyte.gz [--threads T]
                         [--batches 64,256,1024,4096] [--ref LOGP.txt] [--limit N]
"""
import argparse
import gzip
import time

import h5py
import numpy as np
import torch


def read_idx_images(path, limit=None):
    """uint8 [N, rows * cols] from an IDX3 file, plain or .gz."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if int.from_bytes(data[0:4], "big") != 0x803:
        raise ValueError("%s: not an IDX3 image file" % path)
    n, rows, cols = (int.from_bytes(data[i : i + 4], "big") for i in (4, 8, 12))
    x = np.frombuffer(data, dtype=np.uint8, count=n * rows * cols, offset=16)
    x = x.reshape(n, rows * cols)
    return x[:limit] if limit else x


class TorchHclt:
    """The model's groups and layers as index tensors, and its parameters in FP32."""

    def __init__(self, path, threads):
        torch.set_num_threads(threads)
        with h5py.File(path, "r") as f:
            parent = f["structure/parent"][...].astype(np.int64)
            trans = f["structure/trans_index"][...].astype(np.int64)
            root_logw = f["params/root_logw"][...].astype(np.float64)
            trans_logw = f["params/trans_logw"][...].astype(np.float64)
            input_logp = f["params/input_logp"][...].astype(np.float32)
        V, K, C = input_logp.shape
        root = int(np.flatnonzero(parent < 0)[0])
        # A group per latent: the root's and one per variable with a trans row; a variable
        # without one shares its parent's latent (and so its parent's group).
        owner = [v for v in range(V) if v == root or trans[v] >= 0]
        group_of = np.full(V, -1, dtype=np.int64)
        for g, v in enumerate(owner):
            group_of[v] = g

        def group(v):
            while group_of[v] < 0:
                v = parent[v]
            return group_of[v]

        var_group = np.array([group(v) for v in range(V)], dtype=np.int64)
        G = len(owner)
        gparent = np.array([-1 if v == root else var_group[parent[v]] for v in owner])
        height = np.zeros(G, dtype=np.int64)
        changed = True
        while changed:  # height = 1 + the children's largest
            changed = False
            for g in range(G):
                p = gparent[g]
                if p >= 0 and height[p] < height[g] + 1:
                    height[p] = height[g] + 1
                    changed = True
        # Renumber groups by height so that each layer is a contiguous range of msg rows.
        order = np.argsort(height, kind="stable")
        new = np.empty(G, dtype=np.int64)
        new[order] = np.arange(G)
        var_group, gparent = new[var_group], np.where(gparent >= 0, new[gparent], -1)[order]
        height, owner = height[order], [owner[i] for i in order]
        self.V, self.K, self.C, self.G = V, K, C, G
        # Input table [V * C, K]: row v * C + c holds input_logp[v, :, c].
        self.inputs = torch.from_numpy(np.ascontiguousarray(input_logp.transpose(0, 2, 1)))
        self.inputs = self.inputs.reshape(V * C, K)
        self.var_offset = torch.arange(V, dtype=torch.int64) * C
        self.var_group = torch.from_numpy(var_group)
        self.layers = []
        for h in range(int(height.max()) + 1):
            lo, hi = np.searchsorted(height, [h, h + 1])
            kids = np.flatnonzero((gparent >= lo) & (gparent < hi))
            w = None
            if h < height.max():
                rows = np.array([trans[owner[g]] for g in range(lo, hi)])
                # [n, K (k), K (j)]: exp(trans_logw[t, j, k]) transposed for bmm(E, W^T).
                w = torch.from_numpy(np.exp(trans_logw[rows]).transpose(0, 2, 1).copy()).float()
            self.layers.append(
                (int(lo), int(hi), torch.from_numpy(kids), torch.from_numpy(gparent[kids] - lo), w)
            )
        self.root_w = torch.from_numpy(np.exp(root_logw)).float()

    @torch.inference_mode()
    def score_batch(self, x):
        """log p(x) (float64 [B]) for a uint8 [B, V] tensor, computed in FP32."""
        B = x.shape[0]
        rows = x.long() + self.var_offset  # [B, V]
        inp = self.inputs[rows.reshape(-1)].reshape(B, self.V, self.K)
        prod = torch.zeros(self.G, B, self.K)
        prod.index_add_(0, self.var_group, inp.transpose(0, 1))  # [G, B, K] input terms
        msg = torch.empty(self.G, B, self.K)
        for lo, hi, kids, kid_pos, w in self.layers:
            p = prod[lo:hi]
            if len(kids):
                p.index_add_(0, kid_pos, msg[kids])
            m = p.amax(dim=2, keepdim=True)
            e = torch.exp(p - m)
            if w is None:  # the root
                return (m.squeeze(2).squeeze(0) + torch.log(e[0] @ self.root_w)).double()
            msg[lo:hi] = torch.log(torch.bmm(e, w)) + m
        raise ValueError("model without a root layer")

    def score(self, x, batch):
        xt = torch.from_numpy(np.array(x))
        return torch.cat([self.score_batch(xt[i : i + batch]) for i in range(0, len(xt), batch)])


def images_per_second(model, x, batch, reps=1):
    """Best of reps timed passes over x (after one warm-up pass on its first batch)."""
    model.score(x[:batch], batch)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        model.score(x, batch)
        best = min(best, time.perf_counter() - t0)
    return len(x) / best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--data", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", default="64,256,1024,4096")
    ap.add_argument("--ref", default=None)
    ap.add_argument("--limit", type=int, default=None)
    a = ap.parse_args()
    x = read_idx_images(a.data, a.limit)
    model = TorchHclt(a.model, a.threads)
    print("torch %s, %d threads, V=%d K=%d C=%d G=%d, %d layers, %d images"
          % (torch.__version__, a.threads, model.V, model.K, model.C, model.G,
             len(model.layers), len(x)))
    for b in (int(s) for s in a.batches.split(",")):
        print("batch %5d: %9.1f images/s" % (b, images_per_second(model, x, b)))
    if a.ref:
        ref = np.loadtxt(a.ref)[: len(x)]
        got = model.score(x, 1024).numpy()
        d = np.abs(got - ref)
        print("mean LL %.6f nats; |delta| vs ref: mean %.3e, max %.3e nats"
              % (got.mean(), d.mean(), d.max()))


if __name__ == "__main__":
    main()
