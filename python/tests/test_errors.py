"""Wrong dtypes, shapes, strides and values raise pcinfer.Error with a message naming what is
wrong; outputs are never filled with wrong numbers."""

import numpy as np
import pytest

import pcinfer
from pcinfer import _core


def raises(status, match=None):
    return pytest.raises(pcinfer.Error, match=match), status


def check(ctx, fn):
    cm, status = ctx
    with cm as e:
        fn()
    assert e.value.status == status, (e.value.status, str(e.value))
    return str(e.value)


def test_values_out_of_range_get_the_library_message(tiny_model, mnist_model):
    x = np.zeros((4, 3), np.uint8)
    x[2, 1] = 2  # C = 2
    msg = check(raises(pcinfer.Status.ERR_DATA, "sample 2, variable 1: value 2"),
                lambda: tiny_model.log_likelihood(x, kernel="ref"))
    assert "0..1" in msg
    wide = np.zeros((2, 784), np.int64)
    wide[1, 5] = 256
    check(raises(pcinfer.Status.ERR_DATA, r"x\[1, 5\] = 256"),
          lambda: mnist_model.log_likelihood(wide))
    check(raises(pcinfer.Status.ERR_DATA, r"x\[0, 0\] = -1"),
          lambda: mnist_model.log_likelihood(np.full((1, 784), -1)))


def test_value_errors_in_later_batches_name_the_batch(tiny_model):
    x = np.zeros((10, 3), np.uint8)
    x[7, 0] = 9
    check(raises(pcinfer.Status.ERR_DATA, r"rows 6\.\. of x: .*sample 1, variable 0"),
          lambda: tiny_model.log_likelihood(x, kernel="ref", batch=3))


def test_wrong_width_and_shape(mnist_model):
    check(raises(pcinfer.Status.ERR_DATA, "rows of 783 values, but the model has 784 variables"),
          lambda: mnist_model.log_likelihood(np.zeros((2, 783), np.uint8)))
    check(raises(pcinfer.Status.ERR_ARG, "2 dimensions"),
          lambda: mnist_model.log_likelihood(np.zeros(784, np.uint8)))
    x = np.zeros((2, 784), np.uint8)
    check(raises(pcinfer.Status.ERR_DATA, r"missing is \[3, 784\] but x is \[2, 784\]"),
          lambda: mnist_model.log_likelihood(x, np.zeros((3, 784), bool)))


def test_wrong_dtypes(mnist_model):
    check(raises(pcinfer.Status.ERR_ARG, "integers, not float64"),
          lambda: mnist_model.log_likelihood(np.zeros((1, 784))))
    check(raises(pcinfer.Status.ERR_ARG, "bools or integers, not float32"),
          lambda: mnist_model.log_likelihood(np.zeros((1, 784), np.uint8),
                                             np.zeros((1, 784), np.float32)))
    check(raises(pcinfer.Status.ERR_ARG, "not an input type"),
          lambda: pcinfer.logsumexp(np.zeros((2, 3))))
    check(raises(pcinfer.Status.ERR_ARG, "not an input type"),
          lambda: pcinfer.logsumexp(np.zeros((2, 3), np.int32)))


def test_unknown_names(tiny_model):
    x = np.zeros((1, 3), np.uint8)
    check(raises(pcinfer.Status.ERR_ARG, "unknown kernel 'fast'"),
          lambda: tiny_model.log_likelihood(x, kernel="fast"))
    check(raises(pcinfer.Status.ERR_ARG), lambda: pcinfer.logsumexp(np.zeros(3, np.float32),
                                                                    kernel="cpu"))
    check(raises(pcinfer.Status.ERR_ARG), lambda: pcinfer.logsumexp(np.zeros(3, np.float32),
                                                                    isa="sse9"))


@pytest.mark.skipif(pcinfer.gpu_available(), reason="a GPU is present")
def test_gpu_kernel_without_gpu(tiny_model):
    cm = pytest.raises(pcinfer.Error)
    with cm as e:
        tiny_model.log_likelihood(np.zeros((1, 3), np.uint8), kernel="fuse")
    assert e.value.status in (pcinfer.Status.ERR_NO_DEVICE, pcinfer.Status.ERR_UNSUPPORTED)


@pytest.mark.parametrize("device", ["gpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "cuda0", None, 0])
def test_learn_refuses_unknown_devices(device):
    check(raises(pcinfer.Status.ERR_ARG, "device = .*: need 'cpu', 'cuda' or 'cuda:N'"),
          lambda: pcinfer.learn(np.zeros((4, 3), np.uint8), 2, device=device))


def test_learn_f32_is_for_the_gpu():
    check(raises(pcinfer.Status.ERR_ARG, "f32=True is for device='cuda'"),
          lambda: pcinfer.learn(np.zeros((4, 3), np.uint8), 2, f32=True))


@pytest.mark.skipif(pcinfer.gpu_available(), reason="a GPU is present")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_learn_on_the_gpu_without_gpu(device):
    """The library's message: no GPU (PC_ERR_NO_DEVICE), or a build without CUDA."""
    with pytest.raises(pcinfer.Error, match="^EM on the GPU") as e:
        pcinfer.learn(np.zeros((4, 3), np.uint8), 2, epochs=1, num_cats=2, device=device)
    assert e.value.status in (pcinfer.Status.ERR_NO_DEVICE, pcinfer.Status.ERR_UNSUPPORTED)


@pytest.mark.skipif(not pcinfer.gpu_available(), reason="no GPU")
def test_gpu_em_steps_gather_the_attached_rows(tiny_model):
    """Steps on the array an Em was made with read the GPU's copy, whose values were checked
    once; other arrays come from the host and are checked in each step."""
    x = np.zeros((64, 3), np.uint8)
    em = _core.Em(tiny_model._core, x, True, False, -1)
    assert not em.streamed
    x[5, 1] = 7  # C = 2; breaks the contract (x unchanged) on purpose: only the copy is valid
    em.step(x, None, 1.0, 0.1)
    check(raises(pcinfer.Status.ERR_DATA, "row 5, variable 1"),
          lambda: em.step(x.copy(), None, 1.0, 0.1))


def test_strided_inputs_give_the_numbers_of_contiguous_ones(mnist_model, rng):
    """The package copies what the library cannot read in place; the module itself refuses
    it (never reading past or between rows)."""
    big = rng.integers(0, 256, (6, 2 * 784)).astype(np.uint8)
    view = big[:, ::2]
    assert not view.flags.c_contiguous
    np.testing.assert_array_equal(mnist_model.log_likelihood(view, kernel="ref"),
                                  mnist_model.log_likelihood(view.copy(), kernel="ref"))
    ev = _core.Evaluator(mnist_model._core, 0, 8, 1)
    out = np.full(6, np.nan)
    check(raises(pcinfer.Status.ERR_ARG, "not adjacent"), lambda: ev.evaluate(view, None, out))
    check(raises(pcinfer.Status.ERR_ARG, "not C-contiguous"),
          lambda: ev.evaluate(big[:, :784], None, out))
    assert np.isnan(out).all()


def test_module_checks_every_buffer(tiny_model):
    ev = _core.Evaluator(tiny_model._core, 0, 4, 1)
    x = np.zeros((2, 3), np.uint8)
    out = np.full(2, np.nan)
    check(raises(-1, "expected uint8"), lambda: ev.evaluate(x.astype(np.int16), None, out))
    check(raises(-1, "2 elements, expected 3"),
          lambda: ev.evaluate(np.zeros((3, 3), np.uint8), None, out))
    check(raises(-1, "expected float64"), lambda: ev.evaluate(x, None, out.astype(np.float32)))
    ro = out.copy()
    ro.flags.writeable = False
    check(raises(-1, "writable"), lambda: ev.evaluate(x, None, ro))
    check(raises(-1, "not a uint8 buffer"), lambda: ev.evaluate([[0, 0, 0]], None, out))
    # More rows than the evaluator's max_batch go in several calls, never past its buffers.
    x5 = np.zeros((5, 3), np.uint8)
    out5 = np.full(5, np.nan)
    ev.evaluate(x5, None, out5)
    np.testing.assert_array_equal(out5, tiny_model.log_likelihood(x5, kernel="ref"))


def test_lse_module_checks_strides_and_sizes():
    x = np.zeros((4, 6), np.float32)
    out = np.full(4, np.nan, np.float32)
    check(raises(-1, "not adjacent"), lambda: _core.lse_rows(1, 0, x[:, ::2], out, 1, 0))
    check(raises(-1, "expected float16"), lambda: _core.lse_rows(1, 1, x, out, 1, 0))
    check(raises(-1, "4 elements, expected 2"), lambda: _core.lse_rows(1, 0, x[:2], out, 1, 0))
    overlap = np.lib.stride_tricks.as_strided(x, shape=(4, 6), strides=(8, 4))
    check(raises(-1, "not a whole number >= cols"),
          lambda: _core.lse_rows(1, 0, overlap, out, 1, 0))
    assert np.isnan(out).all()
    check(raises(-1, "dtype 3"), lambda: _core.lse_rows(1, 3, x, out, 1, 0))


def test_token_logprob_refuses_bad_targets():
    logits = np.zeros((3, 5), np.float32)
    check(raises(pcinfer.Status.ERR_ARG, r"targets\[1\] = 5"),
          lambda: pcinfer.token_logprob(logits, np.array([0, 5, 1])))
    check(raises(pcinfer.Status.ERR_ARG, "targets must be integers of shape"),
          lambda: pcinfer.token_logprob(logits, np.array([0, 1])))
    check(raises(pcinfer.Status.ERR_ARG, "targets must be integers"),
          lambda: pcinfer.token_logprob(logits, np.array([0.0, 1.0, 2.0])))


def test_learn_rejects_bad_arguments():
    x = np.zeros((10, 4), np.uint8)
    check(raises(pcinfer.Status.ERR_ARG, "nothing to learn"),
          lambda: pcinfer.learn(x, latents=2, epochs=0, full_epochs=0))
    check(raises(pcinfer.Status.ERR_DATA, "no samples"),
          lambda: pcinfer.learn(x[:0], latents=2))
    bad = x.copy()
    bad[3, 2] = 4
    with pytest.raises(pcinfer.Error):
        pcinfer.learn(bad, latents=2, num_cats=4, epochs=1)
    for smooth, width, what in [(1.5, 8.0, "smooth = 1.5"), (float("nan"), 8.0, "smooth = nan"),
                                (0.1, 0.0, "smooth_width = 0.0"),
                                (0.1, float("inf"), "smooth_width = inf")]:
        check(raises(pcinfer.Status.ERR_ARG, what),
              lambda: pcinfer.learn(x, latents=2, smooth=smooth, smooth_width=width))


def test_hostile_model_files_raise(source_dir):
    """Files that crash or hang libhdf5 1.10 (tests/data/badinput) raise, in bounded time,
    instead of killing the interpreter: they are parsed by the reader program."""
    import os
    import time

    bad = os.path.join(source_dir, "tests", "data", "badinput")
    for name, what in [("hclt-crash-a2f0deb8047cabdf3782f67eea64970f1f9472d3", "crashed"),
                       ("hclt-timeout-91c0fc10c8dc8bb9af321288b847c702dae2904f", "took more"),
                       ("own-13KB-file-8GB-RSS.h5", "holds only 0 bytes")]:
        start = time.monotonic()
        msg = check(raises(pcinfer.Status.ERR_FORMAT, what),
                    lambda: pcinfer.load(os.path.join(bad, name)))
        assert name in msg
        assert time.monotonic() - start < 12
