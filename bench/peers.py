#!/usr/bin/env python3
"""peers.py - the numpy (OpenBLAS) and PyTorch CPU side of bench_ops' rows,
on the very inputs bench_ops used, checked against its outputs.

    peers.py DIR THREADS [--quick]

DIR holds bench_ops --dump's files (<case>.<part>.f32, raw float32). Prints
"peer <case> <value> <check>" lines (GFLOPS for matmul, ms for the row ops;
check = the max abs difference from libtinyc's result, relative to the
largest peer value for matmul, then "(ok)" or "(FAIL)") and "info" lines; exit status 1 when a check
fails. numpy gets THREADS through OPENBLAS_NUM_THREADS (set here, before
numpy loads), PyTorch through torch.set_num_threads.
"""
import os
import sys

DIR, THREADS = sys.argv[1], int(sys.argv[2])
QUICK = "--quick" in sys.argv[3:]
os.environ["OPENBLAS_NUM_THREADS"] = str(THREADS)
os.environ["OMP_NUM_THREADS"] = str(THREADS)

import time  # noqa: E402

import numpy as np  # noqa: E402

failures = 0


def load(case, part, shape):
    return np.fromfile(os.path.join(DIR, "%s.%s.f32" % (case, part)), np.float32).reshape(shape)


def median_time(fn, budget):
    """median seconds of fn() over about `budget` seconds (3..50 runs) after
    one warm-up call"""
    fn()
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    runs = max(3, min(5 if QUICK else 50, int(budget / max(once, 1e-9))))
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def check(case, err, tol):
    """"ok" or "FAIL" (also counted and explained on stderr)"""
    global failures
    if err <= tol:  # NaN fails
        return "ok"
    print("peers.py: %s differs from libtinyc by %g (tolerance %g)" % (case, err, tol),
          file=sys.stderr)
    failures += 1
    return "FAIL"


def blas_library():
    """the BLAS shared library numpy has loaded, from this process's maps"""
    np.dot(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "blas" in os.path.basename(path).lower():
                libs.add(os.path.realpath(path))
    return ", ".join(sorted(libs)) or "none found"


def matmul(n):
    case = "matmul%d" % n
    if not os.path.exists(os.path.join(DIR, case + ".out.f32")):
        return
    a, b, ours = load(case, "a", (n, n)), load(case, "b", (n, n)), load(case, "out", (n, n))
    c = np.empty((n, n), np.float32)
    t = median_time(lambda: np.matmul(a, b, out=c), 1.0 if QUICK else 3.0)
    err = float(np.abs(ours - c).max() / np.abs(c).max())
    ok = check(case, err, 1e-4)
    print("peer %s %.3f relerr=%.2g(%s)" % (case, 2.0 * n ** 3 / t * 1e-9, err, ok), flush=True)


def rows(torch, case, fn, shape, out_shape):
    if not os.path.exists(os.path.join(DIR, case + ".out.f32")):
        return
    x = torch.from_numpy(load(case, "x", shape).copy())
    ours = load(case, "out", out_shape)
    t = median_time(lambda: fn(x), 0.3 if QUICK else 1.5)
    y = fn(x).numpy()
    err = float(np.abs(ours - y).max())
    ok = check(case, err, 1e-4 * max(1.0, float(np.abs(y).max())))
    print("peer %s %.4f maxabs=%.2g(%s)" % (case, t * 1e3, err, ok), flush=True)


def main():
    print("info numpy %s, BLAS: %s, %d threads" % (np.__version__, blas_library(), THREADS))
    for n in (512, 1024, 2048):
        matmul(n)
    try:
        import torch
    except ImportError:
        print("info PyTorch not installed: no peer for the row ops")
        return
    torch.set_num_threads(THREADS)
    print("info torch %s, %d threads" % (torch.__version__, torch.get_num_threads()))
    ln = torch.nn.functional.layer_norm
    with torch.no_grad():
        rows(torch, "softmax", lambda x: torch.softmax(x, -1), (4096, 1024), (4096, 1024))
        rows(torch, "softmax64", lambda x: torch.softmax(x, -1), (64, 1024), (64, 1024))
        rows(torch, "layernorm", lambda x: ln(x, (1024,), eps=1e-5), (4096, 1024), (4096, 1024))
        rows(torch, "std", lambda x: x.std(-1), (4096, 1024), (4096,))


main()
sys.exit(1 if failures else 0)
