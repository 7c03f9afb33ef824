#!/usr/bin/env python3
"""resnet_train.py - issue 14's ResNet-18 rows: ms per CIFAR ResNet-18
training step (batch 16, 32x32, Adam lr 1e-3, cross-entropy; the model of
bench/scale_models.py) of libtinyc next to PyTorch CPU, from the same
initial weights and batch, with the same thread count on both sides,
measured in this run; and each side's peak memory over the steps.

    python3 bench/resnet_train.py [--threads 1,2] [--batch 16] [--steps 6]
                                  [--lines FILE]

Each side runs in a process of its own (`--side ours|torch`). libtinyc runs
its steps eagerly (no JIT; the first builds the kernels), then as TinyJit
replays; PyTorch runs them eagerly. A figure is the median of the steps
after the second (of the JIT calls, after the first replay, which touches
the captured plan's new buffers for the first time: about 2 s against 0.8
s at 1 thread). libtinyc's side writes its initial weights (an .npz) that
PyTorch's loads: the first step's losses (the forward on the same weights)
must agree to 1e-4, the later ones (Adam and BatchNorm's statistics from
there on) to 5e-2. Peak memory is the process's resident-set high-water
mark over the eager steps (getrusage) less its size after the imports,
before the model is made (/proc/self/statm): weights, gradients, Adam's
state, activations and what each library keeps, the same way on both
sides (libtinyc's JIT replays then add the captured step's own buffers,
shown apart). --lines writes bench/run.sh's lines for table.py. Threads:
TC_THREADS; torch.set_num_threads with OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MB = 1 << 20


def rss_now():
    """the resident set in bytes now"""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_peak():
    """the resident-set high-water mark in bytes (Linux: ru_maxrss in KiB)"""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def side_ours(args):
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(REPO, "python"))
    import scale_models
    from tinyc import GlobalCounters as GC
    from tinyc import Tensor, TinyJit, nn
    base = rss_now()
    m = scale_models.resnet18(Tensor, nn, batch=args.batch)
    m.realize_state()
    state = nn.state.get_state_dict(m.modules)
    np.savez(args.init, **{k: t.numpy() for k, t in state.items()})
    ins = [t.realize() for t in m.inputs()]
    losses, eager, replays = [], [], []
    k0 = GC.kernel_count
    for _ in range(args.steps):
        t0 = time.perf_counter()
        losses.append(float(m.step(*ins).numpy()))
        eager.append(time.perf_counter() - t0)
    kernels = GC.kernel_count - k0
    eager_peak = rss_peak()
    jit = TinyJit(m.step)
    for i in range(args.steps):
        t0 = time.perf_counter()
        losses.append(float(jit(*ins).numpy()))
        if i >= 3:  # call 1 runs the step, call 2 captures it, call 3 faults its buffers in
            replays.append(time.perf_counter() - t0)
    return {"losses": losses, "eager_ms": statistics.median(eager[2:] or eager) * 1e3,
            "jit_ms": statistics.median(replays) * 1e3 if replays else None,
            "kernels": kernels // args.steps, "peak_mb": (rss_peak() - base) / MB,
            "eager_peak_mb": (eager_peak - base) / MB}


def torch_model(nn):
    """scale_models.resnet18 in torch modules, with its state-dict names"""

    class Block(nn.Module):
        def __init__(self, c_in, c_out, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c_out)
            self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c_out)
            self.short = nn.ModuleList()
            if stride != 1 or c_in != c_out:
                self.short = nn.ModuleList([nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(c_out)])

        def forward(self, x):
            out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
            for f in self.short:
                x = f(x)
            return (out + x).relu()

    blocks, c_in = [], 64
    for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        blocks += [Block(c_in, c_out, stride), Block(c_out, c_out, 1)]
        c_in = c_out
    return nn.ModuleList([nn.ModuleList([nn.Conv2d(3, 64, 3, padding=1, bias=False),
                                         nn.BatchNorm2d(64)]),
                          nn.ModuleList(blocks), nn.Linear(512, 10)])


def side_torch(args):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    import scale_models
    torch.set_num_threads(int(args.threads))
    base = rss_now()
    model = torch_model(torch.nn)
    init = np.load(args.init)
    own = model.state_dict()
    for k, v in own.items():
        if k.endswith("num_batches_tracked"):
            continue
        if k not in init or init[k].shape != tuple(v.shape):
            raise SystemExit("resnet_train.py: torch weight %s not in libtinyc's state" % k)
        v.copy_(torch.from_numpy(init[k]))
    stem, blocks, fc = model
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = (torch.from_numpy(a) for a in scale_models.resnet18_batch(args.batch))
    y = y.long()

    def step():
        opt.zero_grad()
        h = stem[1](stem[0](x)).relu()
        for b in blocks:
            h = b(h)
        loss = F.cross_entropy(fc(F.avg_pool2d(h, 4).flatten(1)), y)
        loss.backward()
        opt.step()
        return loss.item()

    model.train()
    losses, times = [], []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - t0)
    return {"losses": losses, "ms": statistics.median(times[2:] or times) * 1e3,
            "peak_mb": (rss_peak() - base) / MB}


def run_side(name, threads, args, init):
    env = dict(os.environ, TC_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads))
    if name == "torch" and not os.environ.get("TC_BENCH_AS_AVX2"):  # the peer at its best (not run.sh --as-avx2)
        env.pop("OPENBLAS_CORETYPE", None), env.pop("OPENBLAS_L2_SIZE", None)
    cmd = [PY, os.path.abspath(__file__), "--side", name, "--threads", str(threads),
           "--batch", str(args.batch), "--steps", str(args.steps), "--init", init]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    rows = [l for l in p.stdout.splitlines() if l.startswith("SIDE ")]
    if p.returncode != 0 or not rows:
        print("resnet_train.py: %s side failed: %s" % (name, (p.stderr.strip().splitlines()
                                                              or ["?"])[-1]), file=sys.stderr)
        return None
    return json.loads(rows[-1][5:])


def loss_check(ours, peer):
    """(step-1 relative difference, worst of steps 2-5, ok)"""
    lo, lp = ours["losses"], peer["losses"]
    rel = [abs(a - b) / max(abs(b), 1e-6) for a, b in zip(lo, lp)]
    d1, d2 = rel[0], max(rel[1:5] or [0.0])
    return d1, d2, d1 <= 1e-4 and d2 <= 5e-2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2", help="comma list of thread counts")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--lines", default="", help="also write run.sh's lines to this file")
    ap.add_argument("--side", choices=("ours", "torch"), help=argparse.SUPPRESS)
    ap.add_argument("--init", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.steps < 4:
        ap.error("--steps must be >= 4 (the JIT figure is the calls after the third)")
    if args.side:
        out = side_ours(args) if args.side == "ours" else side_torch(args)
        print("SIDE " + json.dumps(out), flush=True)
        return 0
    status, lines = 0, []
    print("| threads | libtinyc JIT ms | eager ms | kernels | PyTorch ms | ratio JIT / eager "
          "| peak MB, eager: ours / PyTorch | ours after JIT | first losses | loss check |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init.npz")
        for threads in [int(t) for t in args.threads.split(",")]:
            ours = run_side("ours", threads, args, init)
            peer = run_side("torch", threads, args, init) if ours else None
            if not ours or not peer:
                status = 1
                continue
            d1, d2, ok = loss_check(ours, peer)
            status |= 0 if ok else 1
            check = "step 1 %.2g, 2-5 %.2g (%s)" % (d1, d2, "ok" if ok else "FAIL")
            print("| %d | %.0f | %.0f | %d | %.0f | %.2fx / %.2fx | %.0f / %.0f | %.0f | "
                  "%.4f / %.4f | %s |" % (
                      threads, ours["jit_ms"], ours["eager_ms"], ours["kernels"], peer["ms"],
                      peer["ms"] / ours["jit_ms"], peer["ms"] / ours["eager_ms"],
                      ours["eager_peak_mb"], peer["peak_mb"], ours["peak_mb"],
                      ours["losses"][0], peer["losses"][0], check), flush=True)
            lines.append("resnet %d batch=%d jit_ms=%.3f eager_ms=%.3f kernels=%d torch_ms=%.3f "
                         "peak_mb=%.1f jit_peak_mb=%.1f torch_peak_mb=%.1f d1=%.3g d2=%.3g "
                         "check=%s" % (threads, args.batch, ours["jit_ms"], ours["eager_ms"],
                                       ours["kernels"], peer["ms"], ours["eager_peak_mb"],
                                       ours["peak_mb"], peer["peak_mb"], d1, d2,
                                       "ok" if ok else "FAIL"))
    if args.lines:
        with open(args.lines, "w") as f:
            f.write("".join(l + "\n" for l in lines))
    return status


if __name__ == "__main__":
    sys.exit(main())
