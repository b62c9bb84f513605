"""Models: loading, the schema's arrays, saving, building from arrays, scoring small models
exactly."""

import itertools
import os

import numpy as np
import pytest

import pcinfer


def test_load_reports_the_shape(mnist_model):
    m = mnist_model
    assert (m.num_vars, m.num_cats, m.num_latents) == (784, 256, 16)
    assert m.parent.shape == (784,) and m.parent.dtype == np.int32
    assert (m.parent == -1).sum() == 1
    assert m.input_logp.shape == (784, 16, 256)
    assert m.trans_logw.shape == (m.num_trans, 16, 16)
    np.testing.assert_allclose(np.logaddexp.reduce(m.input_logp, axis=2), 0, atol=1e-3)


def test_tiny_model_matches_the_schema_example(tiny_model, source_dir):
    """Every x of the worked example, against the table of docs/format.md (FP64)."""
    table = np.loadtxt(os.path.join(source_dir, "tests", "data", "tiny_expected.txt"))
    x = table[:, :3].astype(np.uint8)
    for kernel in ("ref", "cpu", "cpu-fuse"):
        got = tiny_model.log_likelihood(x, kernel=kernel)
        tol = 1e-12 if kernel == "ref" else 2e-3
        np.testing.assert_allclose(got, table[:, 3], rtol=0, atol=tol, err_msg=kernel)
    assert abs(np.logaddexp.reduce(tiny_model.log_likelihood(x, kernel="ref"))) < 1e-12


def random_hclt(rng, V, K, C):
    """A random valid HCLT: a random tree, about a third of its non-root variables sharing
    their parent's latent, normalised random parameters."""
    parent = np.array([-1] + [int(rng.integers(0, v)) for v in range(1, V)], np.int32)
    shares = rng.random(V) < 0.33
    shares[0] = True
    trans_index = np.full(V, -1, np.int32)
    rows = [v for v in range(V) if not shares[v]]
    trans_index[rows] = np.arange(len(rows))

    def logp(*shape):
        w = rng.random(shape) + 0.01
        return np.log(w / w.sum(axis=-1, keepdims=True))

    return parent, trans_index, logp(K), logp(len(rows), K, K), logp(V, K, C)


def test_from_arrays_sums_to_one(rng):
    """All C^V values of a random model have probabilities summing to 1 (FP64)."""
    arrays = random_hclt(rng, V=5, K=3, C=3)
    m = pcinfer.Model.from_arrays(*arrays)
    assert (m.num_vars, m.num_cats, m.num_latents) == (5, 3, 3)
    x = np.array(list(itertools.product(range(3), repeat=5)), np.uint8)
    lp = m.log_likelihood(x, kernel="ref")
    assert abs(np.logaddexp.reduce(lp)) < 1e-12
    for name, a in zip(("parent", "trans_index", "root_logw", "trans_logw", "input_logp"), arrays):
        np.testing.assert_array_equal(getattr(m, name), a)


def test_from_arrays_rejects_invalid_models(rng):
    parent, trans_index, root_logw, trans_logw, input_logp = random_hclt(rng, 4, 2, 2)
    bad = input_logp.copy()
    bad[2, 1, 0] = 0.5
    with pytest.raises(pcinfer.Error, match=r"mine: /params/input_logp\[2, 1") as e:
        pcinfer.Model.from_arrays(parent, trans_index, root_logw, trans_logw, bad, name="mine")
    assert e.value.status == pcinfer.Status.ERR_MODEL
    cyclic = parent.copy()
    cyclic[0] = 1
    with pytest.raises(pcinfer.Error):
        pcinfer.Model.from_arrays(cyclic, trans_index, root_logw, trans_logw, input_logp)
    with pytest.raises(pcinfer.Error, match="do not make an HCLT"):
        pcinfer.Model.from_arrays(parent, trans_index, root_logw, trans_logw, input_logp[:3])
    with pytest.raises(pcinfer.Error, match="input_logp must be"):
        pcinfer.Model.from_arrays(parent, trans_index, root_logw, trans_logw, input_logp[0])


def test_save_and_load_round_trip(tmp_path, rng):
    m = pcinfer.Model.from_arrays(*random_hclt(rng, 6, 3, 4))
    m.save(tmp_path / "m64.h5", float64=True)
    m.save(str(tmp_path / "m32.h5"))
    back = pcinfer.load(tmp_path / "m64.h5")
    np.testing.assert_array_equal(back.input_logp, m.input_logp)
    np.testing.assert_array_equal(back.trans_logw, m.trans_logw)
    f32 = pcinfer.load(tmp_path / "m32.h5")
    np.testing.assert_array_equal(f32.input_logp, m.input_logp.astype(np.float32))
    assert sorted(os.listdir(tmp_path)) == ["m32.h5", "m64.h5"]  # no temporary file left


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(pcinfer.Error, match="nope.h5") as e:
        pcinfer.load(tmp_path / "nope.h5")
    assert e.value.status < 0 and e.value.status_name
    (tmp_path / "junk.h5").write_bytes(b"not hdf5 at all")
    with pytest.raises(pcinfer.Error, match="junk.h5"):
        pcinfer.load(tmp_path / "junk.h5")


def test_missing_entries_are_marginalised(tiny_model):
    """p(x0) = sum over x1, x2 of p(x0, x1, x2): the mask marginalises exactly (ref)."""
    x = np.array(list(itertools.product(range(2), repeat=3)), np.uint8)
    joint = tiny_model.log_likelihood(x, kernel="ref")
    missing = np.zeros_like(x, dtype=bool)
    missing[:, 1:] = True
    # Values under the mask are not read: 255 is out of range for C = 2 but hidden.
    hidden = x.copy()
    hidden[:, 1:] = 255
    marg = tiny_model.log_likelihood(hidden, missing, kernel="ref")
    for x0 in (0, 1):
        expect = np.logaddexp.reduce(joint[x[:, 0] == x0])
        np.testing.assert_allclose(marg[x[:, 0] == x0], expect, rtol=0, atol=1e-12)
