"""Queries (pc/query.h): conditionals, MPE and samples against brute force on small models,
and sampling's streams (the same rows for any split into calls)."""

import itertools

import numpy as np
import pytest

import pcinfer
from test_model import random_hclt


CPU_KERNELS = ["ref", "cpu", "cpu-fuse"]


@pytest.fixture
def small(rng):
    """A random model over V = 5 variables, K = 2, C = 3, and every x of it with log p(x)."""
    arrays = random_hclt(rng, V=5, K=2, C=3)
    m = pcinfer.Model.from_arrays(*arrays)
    xs = np.array(list(itertools.product(range(3), repeat=5)), np.uint8)
    return m, xs, m.log_likelihood(xs, kernel="ref")


def brute_conditionals(xs, logp, x, missing, C):
    """p(X_v = c | observed part of x) by summing p over every completion."""
    match = ((xs == x) | missing).all(axis=1)
    w = np.exp(logp[match] - logp[match].max())
    w /= w.sum()
    out = np.zeros((x.size, C))
    for v in range(x.size):
        for c in range(C):
            out[v, c] = w[xs[match][:, v] == c].sum()
    return out


def joint_with_latents(m, x, z):
    """log p(x, z): z holds a state for every variable owning a latent (root, trans rows)."""
    parent, ti = m.parent, m.trans_index

    def latent(v):
        return v if parent[v] == -1 or ti[v] >= 0 else latent(parent[v])

    lp = m.root_logw[z[int(np.flatnonzero(parent == -1)[0])]]
    for v in range(m.num_vars):
        lp += m.input_logp[v, z[latent(v)], x[v]]
        if parent[v] != -1 and ti[v] >= 0:
            lp += m.trans_logw[ti[v], z[latent(parent[v])], z[v]]
    return lp


@pytest.mark.parametrize("kernel", CPU_KERNELS)
def test_conditionals_equal_brute_force(small, rng, kernel):
    m, xs, logp = small
    x = xs[rng.integers(0, len(xs), 6)]
    missing = rng.random(x.shape) < 0.5
    probs, ll = m.conditional(x, missing, kernel=kernel, return_log_likelihood=True)
    assert probs.shape == (6, 5, 3) and probs.dtype == np.float64
    tol = 1e-12 if kernel == "ref" else 1e-5
    for i in range(6):
        np.testing.assert_allclose(probs[i], brute_conditionals(xs, logp, x[i], missing[i], 3),
                                   atol=tol)
    np.testing.assert_allclose(ll, m.log_likelihood(x, missing, kernel="ref"), atol=tol)
    f32 = m.conditional(x, missing, kernel=kernel, dtype=np.float32)
    assert f32.dtype == np.float32
    np.testing.assert_allclose(f32, probs, atol=1e-6)


@pytest.mark.parametrize("kernel", CPU_KERNELS)
def test_mpe_equals_brute_force(small, rng, kernel):
    m, xs, _ = small
    owners = [v for v in range(5) if m.parent[v] == -1 or m.trans_index[v] >= 0]
    x = xs[rng.integers(0, len(xs), 4)]
    missing = rng.random(x.shape) < 0.6
    got, lp = m.mpe(x, missing, kernel=kernel, return_log_prob=True)
    for i in range(4):
        best = -np.inf
        for cand in xs[((xs == x[i]) | missing[i]).all(axis=1)]:
            for states in itertools.product(range(2), repeat=len(owners)):
                z = dict(zip(owners, states))
                best = max(best, joint_with_latents(m, cand, z))
        np.testing.assert_allclose(lp[i], best, atol=1e-9)
        np.testing.assert_array_equal(got[i][~missing[i]], x[i][~missing[i]])
        z_best = max(
            (joint_with_latents(m, got[i], dict(zip(owners, s))) for s in
             itertools.product(range(2), repeat=len(owners)))
        )
        np.testing.assert_allclose(z_best, best, atol=1e-9)


def test_samples_follow_p_and_their_streams(tiny_model):
    n = 40000
    s = tiny_model.sample(n, seed=11)
    assert s.shape == (n, 3) and s.dtype == np.uint8 and s.max() <= 1
    split = np.concatenate([tiny_model.sample(15000, seed=11),
                            tiny_model.sample(25000, seed=11, first=15000)])
    np.testing.assert_array_equal(split, s)
    np.testing.assert_array_equal(tiny_model.sample(n, seed=11, batch=999, kernel="ref"), s)
    assert not np.array_equal(tiny_model.sample(1000, seed=12), s[:1000])
    xs = np.array(list(itertools.product(range(2), repeat=3)), np.uint8)
    p = np.exp(tiny_model.log_likelihood(xs, kernel="ref"))
    counts = np.array([(s == x).all(axis=1).sum() for x in xs])
    sd = np.sqrt(n * p * (1 - p))
    assert (np.abs(counts - n * p) <= 5 * sd).all(), (counts, n * p)


def test_conditional_samples_keep_the_evidence(small, rng):
    m, xs, logp = small
    x = np.repeat(xs[rng.integers(0, len(xs))][None], 20000, axis=0)
    missing = np.zeros_like(x, dtype=bool)
    missing[:, [1, 3]] = True
    s = m.sample(seed=3, evidence=x, missing=missing)
    np.testing.assert_array_equal(s[:, [0, 2, 4]], x[:, [0, 2, 4]])
    probs = brute_conditionals(xs, logp, x[0], missing[0], 3)
    for v in (1, 3):
        freq = np.bincount(s[:, v], minlength=3) / len(s)
        assert np.abs(freq - probs[v]).max() < 0.02, (freq, probs[v])


def test_query_errors(tiny_model):
    x = np.zeros((2, 3), np.uint8)
    m = np.zeros((2, 3), bool)
    if pcinfer.gpu_available():
        np.testing.assert_allclose(tiny_model.conditional(x, m, kernel="fuse"),
                                   tiny_model.conditional(x, m, kernel="ref"), atol=1e-5)
    else:
        with pytest.raises(pcinfer.Error) as e:
            tiny_model.conditional(x, m, kernel="fuse")
        assert e.value.status in (pcinfer.Status.ERR_UNSUPPORTED, pcinfer.Status.ERR_NO_DEVICE)
    with pytest.raises(pcinfer.Error, match="rows of 4 values, but the model has 3 variables"):
        tiny_model.mpe(np.zeros((2, 4), np.uint8), None)
    bad = x.copy()
    bad[1, 2] = 5
    with pytest.raises(pcinfer.Error, match="sample 1, variable 2"):
        tiny_model.mpe(bad, m)
    with pytest.raises(pcinfer.Error, match="count"):
        tiny_model.sample(3, evidence=x, missing=m)
