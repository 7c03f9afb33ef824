"""bench/probe_kernels.py - single-kernel timings quoted in the closing
notes of issue #7, through the Python binding (no peer: compare builds or
TC_NOOPT=1 / TC_BEAM=n runs of this script against each other).

    TINYC_LIB=build/libtinyc.so /usr/bin/python3 bench/probe_kernels.py

Prints best-of-N wall ms (realize included) of:
  conv fwd     x (64,32,24,24) conv w (32,32,5,5)            (beautiful_mnist's conv2)
  conv fwd+bwd the same, (y*y).sum().backward(), grads realized
  x @ w.T      (128,784) @ (128,784).T                        (the MLP's first layer)
  matmul N     (N,N) @ (N,N) for N = 512, 1024, 2048
and checks each result against numpy.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import numpy as np  # noqa: E402

from tinyc import Tensor  # noqa: E402


def best_ms(f, n):
    best = 1e9
    out = None
    for _ in range(n):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best * 1e3, out


def main():
    rng = np.random.default_rng(0)
    x = rng.random((64, 32, 24, 24), dtype=np.float32)
    w = rng.random((32, 32, 5, 5), dtype=np.float32)
    tx, tw = Tensor(x), Tensor(w)
    Tensor.realize(tx, tw)
    ms, y = best_ms(lambda: tx.conv2d(tw).realize(), 4)
    print("conv fwd      %8.2f ms  %6.1f GFLOPS" % (ms, 2 * 64 * 32 * 20 * 20 * 32 * 25 / ms / 1e6))

    gx, gw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
    Tensor.realize(gx, gw)

    def fwd_bwd():
        gx.grad = gw.grad = None
        y2 = gx.conv2d(gw)
        (y2 * y2).sum().backward()
        Tensor.realize(gx.grad, gw.grad)
        return gx.grad

    ms, _ = best_ms(fwd_bwd, 3)
    print("conv fwd+bwd  %8.2f ms" % ms)

    a = rng.random((128, 784), dtype=np.float32)
    b = rng.random((128, 784), dtype=np.float32)
    ta, tb = Tensor(a), Tensor(b)
    Tensor.realize(ta, tb)
    ms, y = best_ms(lambda: (ta @ tb.T).realize(), 20)
    err = abs(y.numpy() - a @ b.T).max()
    print("x @ w.T       %8.3f ms  %6.1f GFLOPS  maxerr %.1e" % (ms, 2 * 128 * 128 * 784 / ms / 1e6, err))

    for n in (512, 1024, 2048):
        m1 = rng.random((n, n), dtype=np.float32)
        m2 = rng.random((n, n), dtype=np.float32)
        t1, t2 = Tensor(m1), Tensor(m2)
        Tensor.realize(t1, t2)
        ms, y = best_ms(lambda: (t1 @ t2).realize(), 6 if n < 2048 else 3)
        rel = abs(y.numpy() - m1 @ m2).max() / n
        print("matmul %4d   %8.2f ms  %6.1f GFLOPS  relerr %.1e" % (n, ms, 2 * n ** 3 / ms / 1e6, rel))


if __name__ == "__main__":
    main()
