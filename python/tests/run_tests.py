"""Runs the package's tests for ctest (label `python`): pytest on this folder with the build's
package first on sys.path (PYTHONPATH). Exits 77, which ctest reports as skipped, with the
reason when this interpreter lacks NumPy or pytest."""

import os
import sys

missing = []
for name in ("numpy", "pytest"):
    try:
        __import__(name)
    except ImportError:
        missing.append(name)
if missing:
    print(
        "python: skipped: %s has no %s (Debian: apt-get install python3-numpy python3-pytest)"
        % (sys.executable, " or ".join(missing))
    )
    sys.exit(77)

import pytest  # noqa: E402

sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", os.path.dirname(__file__)]))
