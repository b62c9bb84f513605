"""pcinfer.learn: an HCLT from data through the library's learning calls (pc/learn.h), on the
schedule of the pclearn tool, so that the same data and seed give the same model."""

import re
import warnings

import numpy as np

from . import _arrays, _core
from ._errors import Error
from ._model import Model

_MASK64 = (1 << 64) - 1
_SHUFFLE_SALT = 0x5DEECE66D  # pclearn's shuffle stream: seed ^ salt
_CUDA = re.compile(r"cuda(?::([0-9]{1,9}))?")


def _device(device, f32):
    """(cuda, cuda_device) of pc_em_opts for device "cpu", "cuda" (-1: the current GPU) or
    "cuda:N"; f32 only on a GPU, where EM has the choice."""
    if device == "cpu":
        if f32:
            raise Error("f32=True is for device='cuda': EM on the CPU runs in FP64 only",
                        _core.ERR_ARG)
        return False, -1
    m = _CUDA.fullmatch(device) if isinstance(device, str) else None
    if not m:
        raise Error("device = %r: need 'cpu', 'cuda' or 'cuda:N' (N a GPU index)" % (device,),
                    _core.ERR_ARG)
    return True, int(m.group(1)) if m.group(1) else -1


def learn(x, latents, epochs=10, batch=512, full_epochs=1, pseudocount=0.1, step_start=0.9,
          step_end=0.1, bins=16, mi_rows=20000, seed=1, num_cats=256, smooth=0.1,
          smooth_width=8.0, device="cpu", f32=False, progress=None):
    """Learns an HCLT with `latents` states per latent from x, integers [n, V] < num_cats.

    Mutual information on `bins` value bins (over a sample of mi_rows rows; 0 = all) ->
    Chow-Liu tree rooted at a centre -> HCLT (tree leaves share their parent's latent) ->
    initial parameters from `seed` -> `epochs` epochs of mini-batch EM (rows shuffled from the
    seed, step size from step_start to step_end, linear over the batches) -> `full_epochs`
    epochs of full-batch EM -> the input rows smoothed along their values: a share `smooth`
    of each row's inner values 1..C-2 moved to their neighbours by a Gaussian of
    `smooth_width` values, the end values kept (0: off; the values must be ordered, as pixel
    intensities are). The defaults and the arithmetic are pclearn's: with the same data,
    options and seed the parameters equal those of ``pclearn --f64`` (with ``--device cuda``
    for device="cuda", on the same kind of GPU, and ``--em-f32`` for f32=True).
    device: where EM runs: "cpu", "cuda" (the current GPU, device 0 unless the caller chose
    another) or "cuda:N" (GPU N modulo the GPUs present, so a process's rank can pick one);
    on a GPU the training data is copied there once (or, when it does not fit, streamed from
    the host each step, with a RuntimeWarning). f32: on a GPU, FP32 values and messages
    (half the pass memory; parameters within about 2e-5 of FP64's after a step).
    progress: None, or a function called after each epoch with (epoch, mean log-likelihood
    of the training data in nats before that epoch's steps, averaged over the batches)."""
    x = _arrays.evidence(x)
    n, width = x.shape
    if n < 1:
        raise Error("x has no samples", _core.ERR_DATA)
    if epochs < 0 or full_epochs < 0 or epochs + full_epochs == 0:
        raise Error("epochs and full_epochs are >= 0 and not both 0: nothing to learn",
                    _core.ERR_ARG)
    if batch < 1:
        raise Error("batch = %d: need >= 1" % batch, _core.ERR_ARG)
    # checked before training, not after it (the library checks again when it smooths)
    if not 0 <= smooth <= 1:
        raise Error("smooth = %r: the share is in [0, 1]" % (smooth,), _core.ERR_ARG)
    if not 0 < smooth_width < float("inf"):
        raise Error("smooth_width = %r: need a finite width > 0" % (smooth_width,),
                    _core.ERR_ARG)
    cuda, cuda_device = _device(device, f32)
    mi = np.empty((width, width))
    _core.mutual_info(x, num_cats, bins, mi_rows, seed, mi)
    parent = np.empty(width, np.int32)
    _core.chow_liu(mi, parent)
    em = _core.Em(_core.hclt_init(parent, num_cats, latents, x, seed), x, cuda, f32, cuda_device)
    if em.streamed:
        warnings.warn("the training data does not fit the GPU: streamed from the host each step",
                      RuntimeWarning, stacklevel=2)
    rows = np.arange(n, dtype=np.int64)
    state = (seed ^ _SHUFFLE_SALT) & _MASK64
    per_epoch = (n + batch - 1) // batch
    updates = per_epoch * epochs
    u = 0
    for epoch in range(1, epochs + full_epochs + 1):
        if epoch > epochs:
            loglik = em.step(x, None, 1.0, pseudocount)
        else:
            state = _core.shuffle(rows, state)
            loglik = 0.0
            for b in range(per_epoch):
                frac = u / (updates - 1) if updates > 1 else 0.0
                step = step_start + (step_end - step_start) * frac
                u += 1
                loglik += em.step(x, rows[b * batch : (b + 1) * batch], step, pseudocount)
        if progress is not None:
            progress(epoch, loglik / n)
    return Model(em.export(smooth, smooth_width))
