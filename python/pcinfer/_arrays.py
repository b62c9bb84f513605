"""Argument checks and conversions shared by the package: evidence arrays for the evaluator,
dtypes of the LSE kernels, the parsed names of kernels."""

import numpy as np

from . import _core
from ._errors import Error

# Names as the tools spell them, parsed once by the library's parsers.
_parsed = {}


def parse(kind, name):
    """The library's enum value for a kernel or isa name (kind: backend, lse_kernel, isa)."""
    key = (kind, name)
    value = _parsed.get(key)
    if value is None:
        if not isinstance(name, str):
            raise Error("%s must be a name, not %r" % (kind.replace("_", " "), name), _core.ERR_ARG)
        value = getattr(_core, kind + "_parse")(name)
        _parsed[key] = value
    return value


def evidence(x, name="x"):
    """x as C-contiguous uint8 [n, V]: without a copy when it is one already; other integer
    (and bool) arrays are converted after checking that every value fits in 0..255 (the
    library then checks values against C)."""
    if type(x) is np.ndarray and x.dtype == np.uint8 and x.flags.c_contiguous and x.ndim == 2:
        return x
    a = np.asarray(x)
    if a.ndim != 2:
        raise Error(
            "%s must be [n, V] (2 dimensions), not of shape %s; one sample is x[None]"
            % (name, a.shape),
            _core.ERR_ARG,
        )
    if a.dtype == np.bool_:
        return np.ascontiguousarray(a).view(np.uint8)
    if a.dtype.kind not in "iu":
        raise Error("%s must hold integers, not %s" % (name, a.dtype), _core.ERR_ARG)
    if a.dtype != np.uint8 and a.size:
        bad = np.flatnonzero((a < 0) | (a > 255))
        if bad.size:
            i, v = divmod(int(bad[0]), a.shape[1])
            raise Error(
                "%s[%d, %d] = %d is not a category (0..255)" % (name, i, v, a[i, v]),
                _core.ERR_DATA,
            )
    return np.ascontiguousarray(a, dtype=np.uint8)


def mask(missing, name="missing"):
    """A missing mask as C-contiguous uint8 (nonzero = unobserved); None stays None."""
    if missing is None:
        return None
    if (
        type(missing) is np.ndarray
        and missing.dtype in (np.uint8, np.bool_)
        and missing.flags.c_contiguous
    ):
        return missing.view(np.uint8)
    m = np.asarray(missing)
    if m.dtype != np.bool_ and m.dtype.kind not in "iu":
        raise Error("%s must hold bools or integers, not %s" % (name, m.dtype), _core.ERR_ARG)
    return np.ascontiguousarray(m != 0).view(np.uint8)
