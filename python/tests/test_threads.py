"""Threads: a model serves concurrent calls (one evaluator per call), and long calls release
the GIL."""

import threading
import time

import numpy as np

import pcinfer


def test_concurrent_calls_give_the_numbers_of_one(mnist_model, rng):
    x = rng.integers(0, 256, (400, 784)).astype(np.uint8)
    expect = mnist_model.log_likelihood(x, kernel="cpu", threads=1)
    results, errors = {}, []

    def work(i):
        try:
            results[i] = mnist_model.log_likelihood(x, kernel="cpu", threads=1)
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(4):
        np.testing.assert_array_equal(results[i], expect)


def test_one_evaluator_refuses_a_second_thread(tiny_model):
    from pcinfer import _core

    ev = _core.Evaluator(tiny_model._core, 0, 1 << 16, 1)
    x = np.zeros((1 << 16, 3), np.uint8)
    out = np.empty(1 << 16)
    started = threading.Event()
    errors = []

    def long_call():
        started.set()
        for _ in range(20):
            ev.evaluate(x, None, out)

    t = threading.Thread(target=long_call)
    t.start()
    started.wait()
    deadline = time.monotonic() + 30
    while t.is_alive() and not errors and time.monotonic() < deadline:
        try:
            ev.evaluate(x[:1], None, out[:1])
        except pcinfer.Error as e:
            errors.append(e)
    t.join()
    assert errors and "in use by another thread" in str(errors[0])


def test_long_calls_release_the_gil(mnist_model, rng):
    """While a thread scores with the FP64 backend, this thread keeps running Python."""
    x = rng.integers(0, 256, (3000, 784)).astype(np.uint8)
    mnist_model.log_likelihood(x[:1], kernel="ref", threads=1)  # evaluator made beforehand
    done = threading.Event()

    def score():
        mnist_model.log_likelihood(x, kernel="ref", threads=1)
        done.set()

    t = threading.Thread(target=score)
    t.start()
    ticks = 0
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    assert ticks >= 20, ticks
