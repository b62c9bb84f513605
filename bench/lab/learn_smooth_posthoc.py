#!/usr/bin/env python3
"""Which parameters of a learned HCLT overfit: bits/dim after smoothing them afterwards.

A question for the learner, asked of its finished models: at K = 256 train and test bits/dim
are 0.14 apart, and the pseudocount (a uniform prior of total mass `pc` per distribution, at
most 0.1) gives a category unseen by a state in training about pc / C / N_k of probability.
If bits/dim on held-out images fall when the finished parameters are mixed with a smoothed
copy of themselves, that smoothing is worth having in the learner.

Variants, each on the model's FP64 parameters, scored in FP64 on the GPU (torch), each
distribution renormalised:
  input uniform l      p <- (1 - l) p + l / C                     (input rows [V, K, C])
  input gauss s l      p <- (1 - l) p + l G_s p                   (G_s: a Gaussian of width s
                                                                  categories along c, each
                                                                  source's mass kept in range;
                                                                  s = inf: spread evenly)
  input inner s l      the same on the categories 1..C-2 only, the spikes at 0 and C-1 kept
  sum uniform l        w <- (1 - l) w + l / K                     (trans rows and the root)

--grid first: every family, a few points each; --grid inner: the inner smoothing over widths
2..32 and inf and weights 0.03..0.3. With --valid (images the model did not learn from) it
names the variant best there, so that the test images do not pick it.

    python3 bench/lab/learn_smooth_posthoc.py MODEL.h5 --test T10K.gz [--train TRAIN.gz]
                                  [--valid VALID.idx] [--grid first|inner] [--json OUT.json]
"""
import argparse
import gzip
import json
import time

import h5py
import numpy as np
import torch

LN2 = float(np.log(2.0))
DEV = "cuda" if torch.cuda.is_available() else "cpu"


def read_idx_images(path, limit=None):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    n, rows, cols = (int.from_bytes(data[i : i + 4], "big") for i in (4, 8, 12))
    x = np.frombuffer(data, dtype=np.uint8, count=n * rows * cols, offset=16)
    return x.reshape(n, rows * cols)[:limit]


class Hclt:
    """The tree as layers of latent groups (children before parents), parameters FP64 on the
    GPU; score() gives log p(x) per image."""

    def __init__(self, path):
        with h5py.File(path, "r") as f:
            self.parent = f["structure/parent"][...].astype(np.int64)
            self.trans = f["structure/trans_index"][...].astype(np.int64)
            self.root_logw = torch.tensor(f["params/root_logw"][...], dtype=torch.float64)
            self.trans_logw = torch.tensor(f["params/trans_logw"][...], dtype=torch.float64)
            self.input_logp = torch.tensor(f["params/input_logp"][...], dtype=torch.float64)
        V, K, C = self.input_logp.shape
        parent, trans = self.parent, self.trans
        root = int(np.flatnonzero(parent < 0)[0])
        owner = [v for v in range(V) if v == root or trans[v] >= 0]
        gid = {v: g for g, v in enumerate(owner)}

        def group(v):
            while v not in gid:
                v = parent[v]
            return gid[v]

        self.var_group = torch.tensor([group(v) for v in range(V)])
        G = len(owner)
        gparent = np.array([-1 if v == root else group(parent[v]) for v in owner])
        height = np.zeros(G, dtype=np.int64)
        for _ in range(G):
            h2 = height.copy()
            for g in range(G):
                if gparent[g] >= 0:
                    h2[gparent[g]] = max(h2[gparent[g]], height[g] + 1)
            if (h2 == height).all():
                break
            height = h2
        self.V, self.K, self.C, self.G = V, K, C, G
        self.layers = []  # (groups, their trans rows, parents' groups)
        for h in range(int(height.max())):
            gs = np.flatnonzero(height == h)
            self.layers.append((torch.tensor(gs).to(DEV),
                                torch.tensor([trans[owner[g]] for g in gs]).to(DEV),
                                torch.tensor(gparent[gs]).to(DEV)))
        self.root_group = int(np.flatnonzero(height == height.max())[0])
        self.var_offset = (torch.arange(V) * C).to(DEV)
        self.var_group = self.var_group.to(DEV)

    @torch.inference_mode()
    def score(self, x, input_logp, trans_logw, root_logw, batch=2000):
        table = input_logp.permute(0, 2, 1).reshape(self.V * self.C, self.K).to(DEV)
        w_t = torch.exp(trans_logw).transpose(1, 2).contiguous().to(DEV)  # [T, k, j]
        root_w = torch.exp(root_logw).to(DEV)
        out = []
        for i in range(0, len(x), batch):
            xb = torch.from_numpy(x[i : i + batch]).to(DEV).long()
            B = xb.shape[0]
            inp = table[(xb + self.var_offset).reshape(-1)].reshape(B, self.V, self.K)
            prod = torch.zeros(self.G, B, self.K, dtype=torch.float64, device=DEV)
            prod.index_add_(0, self.var_group, inp.transpose(0, 1))
            for gs, rows, ps in self.layers:
                p = prod[gs]
                m = p.amax(dim=2, keepdim=True)
                msg = torch.log(torch.bmm(torch.exp(p - m), w_t[rows])) + m
                prod.index_add_(0, ps, msg)
            p = prod[self.root_group]
            m = p.amax(dim=1, keepdim=True)
            out.append((m.squeeze(1) + torch.log(torch.exp(p - m) @ root_w)).cpu())
        return torch.cat(out).numpy()


def normalise_log(p):
    p = torch.clamp(p, min=0)
    return torch.log(p / p.sum(dim=-1, keepdim=True))


def gauss_smooth(p, sigma, lo=0, hi=None):
    """G_s p along the last axis over categories lo..hi-1 (the others untouched): each
    source category's mass spread by a Gaussian of width sigma, cut to the range and
    renormalised so that the mass stays in it; sigma = inf spreads it evenly."""
    hi = p.shape[-1] if hi is None else hi
    if sigma == float("inf"):
        out = p.clone()
        out[..., lo:hi] = p[..., lo:hi].mean(dim=-1, keepdim=True)
        return out
    r = int(np.ceil(4 * sigma))
    g = torch.exp(-0.5 * (torch.arange(-r, r + 1, dtype=torch.float64) / sigma) ** 2).to(DEV)
    n = hi - lo
    ones = torch.ones(1, 1, n, dtype=torch.float64, device=DEV)
    z = torch.nn.functional.conv1d(ones, g.view(1, 1, -1), padding=r).view(n)
    seg = p[..., lo:hi].reshape(-1, 1, n) / z
    sm = torch.nn.functional.conv1d(seg, g.view(1, 1, -1), padding=r).view(p[..., lo:hi].shape)
    out = p.clone()
    out[..., lo:hi] = sm
    return out


def variants(grid):
    """The variants of a round: "first" (every family, a few points each), "inner" (the inner
    smoothing over widths up to the uniform spread, inf, and weights)."""
    yield "base", None
    if grid == "first":
        for l in (1e-6, 1e-5, 1e-4, 1e-3):
            yield "input uniform %g" % l, ("iu", l)
        for s in (1, 3):
            for l in (0.003, 0.01, 0.03):
                yield "input gauss %g %g" % (s, l), ("ig", s, l)
        for s in (1, 2, 4, 8):
            for l in (0.1, 0.3, 0.6, 1.0):
                yield "input inner %g %g" % (s, l), ("ii", s, l)
        for l in (1e-4, 1e-3, 1e-2, 0.05):
            yield "sum uniform %g" % l, ("su", l)
    else:
        for s in (2, 4, 8, 16, 32, float("inf")):
            for l in (0.03, 0.05, 0.1, 0.15, 0.2, 0.3):
                yield "input inner %g %g" % (s, l), ("ii", s, l)


def apply(model, v):
    ip, tw, rw = model.input_logp, model.trans_logw, model.root_logw
    if v is None:
        return ip, tw, rw
    if v[0] in ("iu", "ig", "ii"):
        p = torch.exp(ip.to(DEV))
        if v[0] == "iu":
            p = (1 - v[1]) * p + v[1] / model.C
        elif v[0] == "ig":
            p = (1 - v[2]) * p + v[2] * gauss_smooth(p, v[1])
        else:
            p = (1 - v[2]) * p + v[2] * gauss_smooth(p, v[1], 1, model.C - 1)
        return normalise_log(p), tw, rw
    l = v[1]
    tw2 = normalise_log((1 - l) * torch.exp(tw) + l / model.K)
    rw2 = normalise_log((1 - l) * torch.exp(rw) + l / model.K)
    return ip, tw2, rw2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--test", required=True)
    ap.add_argument("--train", help="IDX images: its first 10,000 scored too (training fit)")
    ap.add_argument("--valid", help="IDX images scored too (held-out rows that pick a variant)")
    ap.add_argument("--grid", choices=("first", "inner"), default="first")
    ap.add_argument("--json")
    a = ap.parse_args()
    t0 = time.time()
    model = Hclt(a.model)
    test = read_idx_images(a.test)
    sets = {"test": test}
    if a.train:
        sets["train10k"] = read_idx_images(a.train, 10000)
    if a.valid:
        sets["valid"] = read_idx_images(a.valid)
    rows = []
    for name, v in variants(a.grid):
        params = apply(model, v)
        row = {"variant": name}
        for key, x in sets.items():
            row[key + "_bpd"] = -float(model.score(x, *params).mean()) / (model.V * LN2)
        rows.append(row)
        print("%-24s %s" % (name, "  ".join("%s %.4f" % (k, row[k + "_bpd"]) for k in sets)),
              flush=True)
    if a.valid:
        best = min(rows, key=lambda r: r["valid_bpd"])
        print("best on valid: %s (valid %.4f, test %.4f)"
              % (best["variant"], best["valid_bpd"], best["test_bpd"]))
    print("K=%d, %.1f s" % (model.K, time.time() - t0))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "K": model.K, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
