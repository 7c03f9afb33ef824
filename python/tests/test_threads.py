"""test_threads.py - tensors built and realized from several Python threads at
once (ctypes drops the GIL; libtinyc takes its lock at every call)."""
import threading

import numpy as np

from helpers import assert_close
from tinyc import Tensor


def test_threads_build_and_realize():
    errors, results = [], {}

    def work(k):
        try:
            rng = np.random.default_rng(k)
            a = rng.standard_normal((16, 8)).astype(np.float32)
            b = rng.standard_normal((8,)).astype(np.float32)
            for i in range(40):
                out = ((Tensor(a) * Tensor(b) + i).relu().sum(axis=1)).numpy()
                want = np.maximum(a * b + i, 0).sum(axis=1)
                np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
            results[k] = True
        except Exception as e:  # reported by the main thread
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert len(results) == 4


def test_tensor_shared_across_threads():
    base = Tensor(np.arange(64, dtype=np.float32))
    outs = [None] * 4

    def work(k):
        outs[k] = (base * (k + 1)).sum().item()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert_close(np.array(outs), np.arange(64).sum() * np.arange(1, 5))
