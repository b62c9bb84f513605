"""Fixtures of the Python tests: the source and build folders (from ctest's environment, else
found from this file), the shipped models, MNIST where present, seeded random generators."""

import gzip
import os
import struct
import subprocess
import time

import numpy as np
import pytest

import pcinfer

SOURCE = os.environ.get(
    "PC_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
BINARY = os.environ.get("PC_BINARY_DIR")
MNIST_MODEL = os.path.join(SOURCE, "models", "mnist.h5")


@pytest.fixture(scope="session")
def source_dir():
    return SOURCE


@pytest.fixture(scope="session")
def tool():
    """tool(name, *args) runs a command-line tool of this build and returns its stdout."""
    if not BINARY or not os.path.isfile(os.path.join(BINARY, "pcinfer")):
        pytest.skip("the tools of the build are not known (PC_BINARY_DIR)")

    def run(name, *args):
        done = subprocess.run(
            [os.path.join(BINARY, name), *map(str, args)], capture_output=True, text=True
        )
        assert done.returncode == 0, "%s failed: %s" % (name, done.stderr)
        return done.stdout

    return run


@pytest.fixture(scope="session")
def mnist_model():
    return pcinfer.load(MNIST_MODEL)


@pytest.fixture(scope="session")
def tiny_model():
    """V = 3, K = 2, C = 2: the worked example of docs/format.md (tests/data/tiny_f64.h5)."""
    return pcinfer.load(os.path.join(SOURCE, "tests", "data", "tiny_f64.h5"))


def mnist_path(name):
    for folder in (
        os.path.join(SOURCE, "datasets", "mnist"),
        os.path.join(SOURCE, "..", "shared", "datasets", "mnist"),
    ):
        if os.path.isfile(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return None


@pytest.fixture(scope="session")
def mnist_test():
    """The MNIST test images (uint8 [10000, 784]), where present."""
    path = mnist_path("t10k-images-idx3-ubyte.gz")
    if not path:
        pytest.skip("MNIST not found (datasets/find_mnist.sh)")
    return pcinfer.load_idx(path)


@pytest.fixture
def rng():
    """A generator seeded from the clock; the seed is printed (pytest shows it on failure)."""
    seed = time.time_ns() % (1 << 32)
    print("seed", seed)
    return np.random.default_rng(seed)


def write_idx(path, images):
    """Writes uint8 images [n, h, w] as a gzip IDX file (magic 0x00000803)."""
    n, h, w = images.shape
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, h, w))
        f.write(np.ascontiguousarray(images, dtype=np.uint8).tobytes())
