"""pcinfer.logsumexp and token_logprob on NumPy arrays: the CPU kernels against their FP64
reference, hard rows (-inf, NaN, +inf, huge ranges, empty rows), any dim, strided views read
in place."""

import numpy as np
import pytest

import pcinfer

# Per-kernel error bounds against FP64, relative to max(1, |LSE|) (docs/kernels.md measures
# fuse at ~1e-7 and IntLSE at ~1e-5 on these ranges).
TOL = {"fuse": 2e-6, "int": 1e-4}


def ref64(x, axis=-1):
    return np.logaddexp.reduce(x.astype(np.float64), axis=axis)


def assert_close(got, ref, tol=TOL["fuse"]):
    """|got - ref| <= tol * max(1, |ref|) everywhere (the kernels' error measure)."""
    err = np.abs(np.asarray(got, np.float64) - ref) / np.maximum(1, np.abs(ref))
    assert err.max(initial=0) <= tol, err.max()


def hard_rows(rng, cols):
    rows = [
        rng.normal(0, 4, cols),
        rng.uniform(-100, 0, cols),
        rng.uniform(-3e38, 3e38, cols),
        np.full(cols, -np.inf),
        np.where(rng.random(cols) < 0.5, -np.inf, rng.normal(0, 1, cols)),
    ]
    return np.array(rows, np.float32)


@pytest.mark.parametrize("kernel", ["fuse", "int"])
@pytest.mark.parametrize("cols", [1, 7, 64, 1000, 4099])
def test_rows_match_fp64(rng, kernel, cols):
    x = np.concatenate([rng.normal(0, 3, (9, cols)).astype(np.float32), hard_rows(rng, cols)])
    got = pcinfer.logsumexp(x, kernel=kernel)
    assert got.dtype == np.float32 and got.shape == (x.shape[0],)
    ref = pcinfer.logsumexp(x, kernel="ref")
    assert ref.dtype == np.float64
    np.testing.assert_allclose(ref[:9], ref64(x[:9]), rtol=1e-12)
    finite = np.isfinite(ref)
    err = np.abs(got[finite] - ref[finite]) / np.maximum(1, np.abs(ref[finite]))
    assert err.max() <= TOL[kernel], err.max()
    np.testing.assert_array_equal(got[~finite], ref[~finite])


def test_edge_cases():
    x = np.array(
        [[np.nan, 0, 1], [np.inf, 0, 1], [np.inf, np.nan, 0], [-np.inf] * 3, [3.0e38, 3.0e38, 0]],
        np.float32,
    )
    for kernel in ("fuse", "int", "ref"):
        got = pcinfer.logsumexp(x, kernel=kernel)
        assert np.isnan(got[0]) and got[1] == np.inf and np.isnan(got[2]), kernel
        assert got[3] == -np.inf and np.isfinite(got[4]), kernel
    assert (pcinfer.logsumexp(np.zeros((3, 0), np.float32)) == -np.inf).all()
    assert pcinfer.logsumexp(np.zeros((0, 5), np.float32)).shape == (0,)


def test_any_dim_and_views_read_in_place(rng):
    x = rng.normal(0, 2, (3, 4, 50)).astype(np.float32)
    for dim in (0, 1, 2, -1, (0, 2), (1, 2)):
        assert_close(pcinfer.logsumexp(x, dim), ref64(x, dim))
    assert pcinfer.logsumexp(x, (0, 2), keepdim=True).shape == (1, 4, 1)
    wide = rng.normal(0, 2, (20, 300)).astype(np.float32)
    view = wide[::3, 10:200]  # rows 900 floats apart, 190 of them each: read in place
    np.testing.assert_array_equal(pcinfer.logsumexp(view), pcinfer.logsumexp(view.copy()))
    step = wide[:, ::2]  # elements 2 apart: copied first
    np.testing.assert_array_equal(pcinfer.logsumexp(step), pcinfer.logsumexp(step.copy()))
    assert pcinfer.logsumexp(x[0, 0]).shape == ()


@pytest.mark.parametrize("kernel", ["fuse", "int", "ref"])
def test_out_is_written_and_returned(rng, kernel):
    """out= gets the bits of the call without it (poisoned first, so an unwritten element
    fails), for the 2-D fast path and the general one; a wrong out raises, naming what it
    must be."""
    x = np.concatenate([rng.normal(0, 3, (9, 300)).astype(np.float32), hard_rows(rng, 300)])
    want = np.float64 if kernel == "ref" else np.float32
    for dim, keepdim in ((-1, False), (0, False), (1, True)):
        ref = pcinfer.logsumexp(x, dim, keepdim, kernel=kernel)
        out = np.full(ref.shape, np.nan, want)
        assert pcinfer.logsumexp(x, dim, keepdim, kernel=kernel, out=out) is out
        np.testing.assert_array_equal(out, ref)
    bad = [np.empty(14, np.float16), np.empty(13, want), np.empty((14, 2), want)[:, 0],
           np.empty((14, 1), want), [0.0] * 14]
    ro = np.empty(14, want)
    ro.flags.writeable = False
    for out in bad + [ro]:
        with pytest.raises(pcinfer.Error, match="out must be a writeable C-contiguous"):
            pcinfer.logsumexp(x, kernel=kernel, out=out)


def test_float16_and_threads(rng):
    x = rng.normal(0, 3, (64, 333)).astype(np.float16)
    got = pcinfer.logsumexp(x, threads=2)
    assert_close(got, ref64(x))
    np.testing.assert_array_equal(got, pcinfer.logsumexp(x, threads=1))


def test_isa_paths_agree(rng):
    x = rng.normal(0, 3, (16, 777)).astype(np.float32)
    best = pcinfer.logsumexp(x)
    scalar = pcinfer.logsumexp(x, isa="scalar")
    assert_close(scalar, best.astype(np.float64))


def test_token_logprob_matches_fp64(rng):
    logits = rng.normal(0, 5, (2, 6, 1000)).astype(np.float32)
    targets = rng.integers(0, 1000, (2, 6))
    got = pcinfer.token_logprob(logits, targets)
    assert got.shape == (2, 6) and got.dtype == np.float32
    expect = np.take_along_axis(logits.astype(np.float64), targets[..., None], -1)[..., 0]
    expect -= ref64(logits)
    np.testing.assert_allclose(got, expect, rtol=0, atol=3e-5)
    ref = pcinfer.token_logprob(logits, targets, kernel="ref")
    np.testing.assert_allclose(ref, expect, rtol=1e-12)
