"""Data files read by the library's own readers."""

import numpy as np

from . import _core


def load_idx(path):
    """The images of an IDX file (MNIST layout, plain or .gz) as uint8 [count, width], read by
    the library's reader (every header field and the payload length are checked)."""
    values, count, width = _core.load_idx(path)
    return np.frombuffer(values, dtype=np.uint8).reshape(count, width)
