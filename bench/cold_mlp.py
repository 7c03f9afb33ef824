#!/usr/bin/env python3
"""cold_mlp.py - the first Adam steps of issue 13's MLP (L x (Linear(64, 64)
then gelu), batch 32, loss h.square().mean()), through libtinyc's Python
binding or, as the peer, tinygrad's (the same script: tinyc's API is shaped
like tinygrad's).

    cold_mlp.py tinyc|tinygrad [--layers L] [--steps N]

Parameters and the input are realized first; then each step (zero_grad,
forward, backward, Adam, the loss to the host) is timed. Prints one line:
"<impl> layers=L first_ms=.. second_ms=.. last_ms=.. [built=K]" (built:
kernels libtinyc compiled from source in the first step), and, when
TC_BENCH_CC_LOG names the log of bench/cold_start.sh's compiler wrapper
(one line of wall ms per run), "runs=R slowest_ms=S" of the first step's
compiler runs. Run it with an empty kernel cache (TC_CACHEDIR; tinygrad:
CACHELEVEL=0, CLANG=1) for cold-start figures: bench/cold_start.sh does.
"""
import os
import sys
import time


def cc_log():
    """the compiler runs logged so far (ms each), [] without a log"""
    path = os.environ.get("TC_BENCH_CC_LOG")
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(w) for w in f.read().split()]


impl = sys.argv[1]
args = sys.argv[2:]
layers = int(args[args.index("--layers") + 1]) if "--layers" in args else 4
steps = int(args[args.index("--steps") + 1]) if "--steps" in args else 3
if impl == "tinyc":
    from tinyc import GlobalCounters, Tensor, nn
    from tinyc.nn.optim import Adam
elif impl == "tinygrad":
    from tinygrad import GlobalCounters, Tensor, nn
    from tinygrad.nn.optim import Adam
else:
    sys.exit("usage: cold_mlp.py tinyc|tinygrad [--layers L] [--steps N]")

Tensor.manual_seed(0)
model = [nn.Linear(64, 64) for _ in range(layers)]
params = [p for lin in model for p in (lin.weight, lin.bias)]
opt = Adam(params, lr=1e-3)
x = Tensor.randn(32, 64)
Tensor.realize(x, *params)
times, built, runs = [], None, []
with Tensor.train():
    for step in range(steps):
        before = getattr(GlobalCounters, "compile_count", None) if impl == "tinyc" else None
        logged = len(cc_log())
        t0 = time.perf_counter()
        opt.zero_grad()
        h = x
        for lin in model:
            h = lin(h).gelu()
        loss = h.square().mean()
        loss.backward()
        opt.step()
        loss.numpy()
        times.append(1e3 * (time.perf_counter() - t0))
        if step == 0 and before is not None:
            built = GlobalCounters.compile_count - before
        if step == 0:
            runs = cc_log()[logged:]
line = "%s layers=%d first_ms=%.1f second_ms=%.1f last_ms=%.1f" % (
    impl, layers, times[0], times[min(1, steps - 1)], times[-1])
line += " built=%d" % built if built is not None else ""
line += " runs=%d slowest_ms=%d" % (len(runs), max(runs)) if runs else ""
print(line)
