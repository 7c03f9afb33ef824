"""sides.py - runs one side of a libtinyc-vs-PyTorch table (vocab_rows.py,
conv_rows.py) in a process of its own: `module.side(who, *args)` with the
thread count set on both sides (TC_THREADS, OMP_NUM_THREADS and, for
PyTorch, torch.set_num_threads), the peer at its best (an OPENBLAS_CORETYPE
or OPENBLAS_L2_SIZE in the environment dropped for PyTorch, unless run.sh
--as-avx2 set TC_BENCH_AS_AVX2), and returns the JSON the side printed last.
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def median_ms(fn, calls, warm=3):
    """fn's median time in ms over `calls` calls after `warm` (TinyJit: call 1
    runs, call 2 captures, call 3 replays), and its last result"""
    for _ in range(warm):
        r = fn()
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        r = fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e3, r


def run_side(module, who, threads, *args):
    env = dict(os.environ, TC_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    if who == "torch" and not os.environ.get("TC_BENCH_AS_AVX2"):  # not run.sh --as-avx2
        for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # the peer at its best
            env.pop(k, None)
    pre = "import torch; torch.set_num_threads(%d); " % threads if who == "torch" else ""
    code = "import sys; sys.path.insert(0, %r); %simport %s; %s.side(%s)" % (
        HERE, pre, module, module, ", ".join(repr(a) for a in (who,) + args))
    p = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("%s.py: the %s side failed:\n%s" % (module, who, p.stderr[-2000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def finish(lines, path, bad):
    """writes run.sh's lines to path (when given) and exits, 1 if a result was wrong"""
    if path:
        with open(path, "w") as f:
            f.write("".join(l + "\n" for l in lines))
    sys.exit(1 if bad else 0)
