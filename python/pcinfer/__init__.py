"""pcinfer: probabilistic circuits (Hidden Chow-Liu Trees) and log-sum-exp kernels from
Python, over the pcinfer C library (docs/python.md).

    model = pcinfer.load("models/mnist.h5")
    logp = model.log_likelihood(images)          # uint8 [n, 784] -> float64 [n], nats
    pcinfer.logsumexp(tensor, dim=-1)            # NumPy or torch (CPU / CUDA, autograd)
"""

import enum

from ._errors import Error
from . import _core
from ._data import load_idx
from ._learn import learn
from ._lse import logsumexp, token_logprob
from ._model import Model, gpu_available, load
from ._pyjuice import from_pyjuice

__version__ = _core.library_version

# The library's status codes (pc_status), as Error.status holds them.
Status = enum.IntEnum(
    "Status", {name: getattr(_core, name) for name in dir(_core) if name.startswith("ERR_")}
)

__all__ = [
    "Error",
    "Model",
    "Status",
    "from_pyjuice",
    "gpu_available",
    "learn",
    "load",
    "load_idx",
    "logsumexp",
    "token_logprob",
]
