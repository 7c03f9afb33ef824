#!/usr/bin/env python3
"""peers.py - the numpy (OpenBLAS) and PyTorch CPU side of bench_ops' rows,
on the very inputs bench_ops used, checked against its outputs.

    peers.py DIR THREADS [--quick] [--serve] [--torch-device DEV]
    peers.py - THREADS --corename     (prints the kernel set OpenBLAS picks)

DIR holds bench_ops --dump's files (<case>.<part>.f32, raw float32). Prints
"peer <case> <value> <check>" lines (GFLOPS for matmul, ms for the row ops;
check = the max abs difference from libtinyc's result, relative to the
largest peer value for matmul, then "(ok)" or "(FAIL)") and "info" lines; exit status 1 when a check
fails. numpy gets THREADS through OPENBLAS_NUM_THREADS (set here, before
numpy loads), PyTorch through torch.set_num_threads. --serve: read case
names (matmul256, ..., matmul_wt, matmul_tn, matmul_tt, matmul_heads, softmax, softmax64, layernorm, std,
transpose) from stdin, one a
line, and answer each with its lines and a line "end". matmul_wt is x @ W.T
with W stored (out, in), as torch and GPT-2 keep it. --torch-device DEV
(cuda): every case, matmul included, runs in PyTorch on DEV, each timed run
ending with torch.cuda.synchronize() (bench/gpu.sh); no peer lines when
PyTorch cannot reach DEV.
"""
import os
import sys

DIR, THREADS = sys.argv[1], int(sys.argv[2])
QUICK = "--quick" in sys.argv[3:]
TORCH_DEV = sys.argv[sys.argv.index("--torch-device") + 1] if "--torch-device" in sys.argv[3:] else None
os.environ["OPENBLAS_NUM_THREADS"] = str(THREADS)
os.environ["OMP_NUM_THREADS"] = str(THREADS)

import ctypes  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

failures = 0


def load(case, part, shape):
    return np.fromfile(os.path.join(DIR, "%s.%s.f32" % (case, part)), np.float32).reshape(shape)


def median_time(fn, budget):
    """median seconds of fn() over about `budget` seconds (3..50 runs) after
    one warm-up call"""
    if TORCH_DEV and TORCH_DEV.startswith("cuda"):  # the GPU's queue drained at the end of each timed run
        call = fn

        def fn():
            call()
            _torch.cuda.synchronize()
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
    """the BLAS shared libraries numpy has loaded (from this process's maps),
    and OpenBLAS's kernel set if it is one of them"""
    np.dot(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "blas" in os.path.basename(path).lower():
                libs.add(os.path.realpath(path))
    text = ", ".join(sorted(libs)) or "none found"
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return text + " (OpenBLAS kernels: %s)" % lib.openblas_get_corename().decode()
        except (OSError, AttributeError):
            pass
    return text


if sys.argv[3:4] == ["--corename"]:  # run.sh: which kernels OpenBLAS picks by itself
    print(blas_library().rsplit("kernels: ", 1)[-1].rstrip(")"))
    sys.exit(0)


# the matmul cases: (m, k, n, layout), as bench_ops has them; layout "nn": a
# stored (m, k), b (k, n); a "t" first: a stored (k, m) and used transposed;
# second: b stored (n, k) and used transposed
MATMULS = {"matmul256": (256, 256, 256, "nn"), "matmul512": (512, 512, 512, "nn"),
           "matmul1024": (1024, 1024, 1024, "nn"), "matmul2048": (2048, 2048, 2048, "nn"),
           "matmul4096": (4096, 4096, 4096, "nn"), "skinny_n": (64, 768, 50304, "nn"),
           "skinny_k": (128, 50304, 768, "nn"), "matmul_wt": (256, 256, 50304, "nt"),
           "matmul_tn": (1024, 1024, 1024, "tn"), "matmul_tt": (1024, 1024, 1024, "tt")}


def matmul(case):
    m, k, n, layout = MATMULS[case]
    if not os.path.exists(os.path.join(DIR, case + ".out.f32")):
        return
    at, bt = layout[0] == "t", layout[1] == "t"
    a, ours = load(case, "a", (k, m) if at else (m, k)), load(case, "out", (m, n))
    b = load(case, "b", (n, k) if bt else (k, n))
    c = np.empty((m, n), np.float32)
    if TORCH_DEV:
        torch = torch_module()
        if torch is None:
            return
        a, b = torch.from_numpy(a).to(TORCH_DEV), torch.from_numpy(b).to(TORCH_DEV)
        aa, bb = a.t() if at else a, b.t() if bt else b
        out = torch.empty((m, n), device=TORCH_DEV)
        t = median_time(lambda: torch.matmul(aa, bb, out=out), 1.0 if QUICK else 3.0)
        c = out.cpu().numpy()
    else:
        aa, bb = a.T if at else a, b.T if bt else b
        t = median_time(lambda: np.matmul(aa, bb, out=c), 1.0 if QUICK else 3.0)
    err = float(np.abs(ours - c).max() / np.abs(c).max())
    ok = check(case, err, 1e-4)
    print("peer %s %.3f relerr=%.2g(%s)" % (case, 2.0 * m * k * n / t * 1e-9, err, ok), flush=True)


HEADS = (4, 12, 64, 64)  # matmul_heads: (B, heads, T, d), as bench_ops has it


def matmul_heads(case):
    """y.transpose(1, 2).reshape(B, T, C) @ W.T as a user writes it: numpy
    gathers the heads into a contiguous copy, then OpenBLAS multiplies"""
    if not os.path.exists(os.path.join(DIR, case + ".out.f32")):
        return
    b, h, t, d = HEADS
    c = h * d
    y, w = load(case, "a", HEADS), load(case, "b", (c, c))
    ours = load(case, "out", (b, t, c))
    out = np.empty((b, t, c), np.float32)
    sec = median_time(lambda: np.matmul(y.transpose(0, 2, 1, 3).reshape(b, t, c), w.T, out=out),
                      1.0 if QUICK else 3.0)
    err = float(np.abs(ours - out).max() / np.abs(out).max())
    ok = check(case, err, 1e-4)
    print("peer %s %.3f relerr=%.2g(%s)" % (case, 2.0 * b * t * c * c / sec * 1e-9, err, ok),
          flush=True)


def rows(torch, case, fn, shape, out_shape):
    if not os.path.exists(os.path.join(DIR, case + ".out.f32")):
        return
    x = torch.from_numpy(load(case, "x", shape).copy()).to(TORCH_DEV or "cpu")
    ours = load(case, "out", out_shape)
    t = median_time(lambda: fn(x), 0.3 if QUICK else 1.5)
    y = fn(x).cpu().numpy()
    err = float(np.abs(ours - y).max())
    ok = check(case, err, 1e-4 * max(1.0, float(np.abs(y).max())))
    print("peer %s %.4f maxabs=%.2g(%s)" % (case, t * 1e3, err, ok), flush=True)


_torch = None


def torch_module():
    """PyTorch, imported (and its threads set) on first use; None if absent"""
    global _torch
    if _torch is None:
        try:
            import torch
        except ImportError:
            print("info PyTorch not installed: no peer for the row ops")
            _torch = False
            return None
        torch.set_num_threads(THREADS)
        print("info torch %s, %d thread(s)" % (torch.__version__, torch.get_num_threads()))
        _torch = torch
        if TORCH_DEV and TORCH_DEV.startswith("cuda") and not torch.cuda.is_available():
            print("info PyTorch has no CUDA device here: no peer")
            _torch = False
        elif TORCH_DEV:
            print("info torch device: %s" % TORCH_DEV)
    return _torch or None


def run_case(case):
    if case in MATMULS:
        return matmul(case)
    if case == "matmul_heads":
        return matmul_heads(case)
    torch = torch_module()
    if torch is None:
        return
    ln = torch.nn.functional.layer_norm
    cases = {
        "softmax": (lambda x: torch.softmax(x, -1), (4096, 1024), (4096, 1024)),
        "softmax64": (lambda x: torch.softmax(x, -1), (64, 1024), (64, 1024)),
        "layernorm": (lambda x: ln(x, (1024,), eps=1e-5), (4096, 1024), (4096, 1024)),
        "std": (lambda x: x.std(-1), (4096, 1024), (4096,)),
        "transpose": (lambda x: x.t().contiguous(), (512, 4608), (4608, 512)),
    }
    if case in cases:
        with torch.no_grad():
            rows(torch, case, *cases[case])


def main():
    blas = blas_library()
    print("info numpy %s, BLAS: %s, %d thread(s)" % (np.__version__, blas, THREADS), flush=True)
    if "openblas" not in blas.lower():
        print("info WARNING: numpy is not using OpenBLAS, so the matmul peer is slow (install"
              " libopenblas0-pthread, or select it with update-alternatives)", flush=True)
    if "--serve" in sys.argv[3:]:
        # one case name per input line, answered by its lines and "end", so
        # bench/run.sh can run each case right after libtinyc's side of it
        for line in sys.stdin:
            if line.strip():
                run_case(line.strip())
            print("end", flush=True)
        return
    for case in list(MATMULS) + ["matmul_heads", "softmax", "softmax64", "layernorm", "std", "transpose"]:
        run_case(case)


main()
sys.exit(1 if failures else 0)
