"""The package against the command-line tools on the same model and data: pcinfer --output
and pclearn --f64 give bit-identical numbers through the CPU kernels, and pclearn --device
cuda (--em-f32) through the GPU's EM where a GPU is present."""

import numpy as np
import pytest

import pcinfer
from conftest import MNIST_MODEL, mnist_path, write_idx


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """Random 28 x 28 images (seeded, printed) and their IDX file; values skewed to 0 like
    MNIST so that scores are in MNIST's range."""
    seed = 20261201
    print("images seed", seed)
    rng = np.random.default_rng(seed)
    n = 1500  # more than the CPU batch of 1024: two library calls
    img = np.where(rng.random((n, 28, 28)) < 0.8, 0, rng.integers(0, 256, (n, 28, 28)))
    path = tmp_path_factory.mktemp("idx") / "images.idx.gz"
    write_idx(path, img)
    return path, img.reshape(n, 784).astype(np.uint8)


@pytest.mark.parametrize("kernel", ["ref", "cpu", "cpu-fuse"])
def test_log_likelihood_equals_pcinfer_output(tool, mnist_model, images, tmp_path, kernel):
    path, x = images
    out = tmp_path / "logp.txt"
    tool("pcinfer", "--kernel", kernel, "--data", path, "--output", out, "--threads", 2,
         MNIST_MODEL)
    expect = np.loadtxt(out)
    got = mnist_model.log_likelihood(x, kernel=kernel, threads=2)
    assert got.dtype == np.float64 and got.shape == (x.shape[0],)
    np.testing.assert_array_equal(got, expect)
    # The IDX file through the library's reader gives the same array.
    np.testing.assert_array_equal(pcinfer.load_idx(path), x)


def test_mnist_test_set_equals_pcinfer_output(tool, mnist_model, mnist_test, tmp_path):
    out = tmp_path / "logp.txt"
    tool("pcinfer", "--kernel", "cpu", "--limit", 2000, "--output", out,
         "--data", mnist_path("t10k-images-idx3-ubyte.gz"), MNIST_MODEL)
    np.testing.assert_array_equal(mnist_model.log_likelihood(mnist_test[:2000], kernel="cpu"),
                                  np.loadtxt(out))


@pytest.mark.parametrize("smooth", [(), (0.0, 8.0), (0.3, 2.5)], ids=["default", "off", "0.3"])
def test_learn_equals_pclearn(tool, tmp_path, smooth):
    """The same data, options and seed: pcinfer.learn and pclearn --f64 make the same model,
    with the inputs smoothed by default, not at all, or otherwise."""
    seed = 7
    rng = np.random.default_rng(seed)
    n = 300
    base = rng.integers(0, 256, (n, 1, 1))
    img = np.clip(base + rng.integers(-40, 40, (n, 4, 5)), 0, 255).astype(np.uint8)
    data = tmp_path / "train.idx.gz"
    write_idx(data, img)
    out = tmp_path / "learned.h5"
    opts = dict(latents=3, epochs=2, batch=64, full_epochs=1, bins=8, mi_rows=100, seed=seed)
    flags = ("--smooth", smooth[0], "--smooth-width", smooth[1]) if smooth else ()
    if smooth:
        opts.update(smooth=smooth[0], smooth_width=smooth[1])
    tool("pclearn", "--latents", 3, "--epochs", 2, "--batch", 64, "--full-epochs", 1,
         "--bins", 8, "--mi-rows", 100, "--seed", seed, "--f64", *flags, "--data", data,
         "-o", out)
    expect = pcinfer.load(out)
    epochs = []
    got = pcinfer.learn(img.reshape(n, 20), progress=lambda e, ll: epochs.append((e, ll)),
                        **opts)
    assert [e for e, _ in epochs] == [1, 2, 3]
    for name in ("parent", "trans_index", "root_logw", "trans_logw", "input_logp"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expect, name), err_msg=name)
    if smooth == (0.0, 8.0):  # smoothing moves the inputs, and only them
        smoothed = pcinfer.learn(img.reshape(n, 20), **dict(opts, smooth=0.1))
        assert not np.array_equal(smoothed.input_logp, got.input_logp)
        np.testing.assert_array_equal(smoothed.trans_logw, got.trans_logw)
    # Training improves the fit: the last epoch's log-likelihood is the best.
    assert epochs[-1][1] >= max(ll for _, ll in epochs[:-1])


@pytest.mark.skipif(not pcinfer.gpu_available(), reason="no GPU")
@pytest.mark.parametrize("f32", [False, True], ids=["fp64", "fp32"])
def test_learn_on_the_gpu_equals_pclearn(tool, mnist_test, tmp_path, f32):
    """2000 MNIST images, EM on the GPU in FP64 or FP32: pcinfer.learn(device="cuda") and
    pclearn --device cuda make the same model; 2000 rows = 7 full batches, a short one and a
    full-batch step ending in a part of a chunk of 32."""
    x = mnist_test[:2000]
    data = tmp_path / "train.idx.gz"
    write_idx(data, x.reshape(-1, 28, 28))
    out = tmp_path / "learned.h5"
    tool("pclearn", "--latents", 8, "--epochs", 2, "--batch", 256, "--full-epochs", 1,
         "--mi-rows", 1000, "--seed", 3, "--f64", "--device", "cuda",
         *(["--em-f32"] if f32 else []), "--data", data, "-o", out)
    expect = pcinfer.load(out)
    got = pcinfer.learn(x, 8, epochs=2, batch=256, full_epochs=1, mi_rows=1000, seed=3,
                        device="cuda", f32=f32)
    for name in ("parent", "trans_index", "root_logw", "trans_logw", "input_logp"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expect, name), err_msg=name)
