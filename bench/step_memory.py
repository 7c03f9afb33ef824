#!/usr/bin/env python3
"""step_memory.py - what keeping the gradients costs: a training step of
bench/scale_models.py's models (ResNet-18 CIFAR batch 16, GPT-2 124M T 64
B 4, Adam) realized two ways, each in a process of its own:
  step      opt.step(): the update with every gradient stored (each by the
            kernel computing it), so .grad after the step holds the values
            the step used, as in PyTorch;
  schedule  Tensor.realize(loss, *opt.schedule_step()): tinygrad's way, the
            gradients stay lazy and no buffer holds them.
For each: kernels a step, ms a TinyJit step (median of steps 4..8) and the
device memory's peak over the steps (GlobalCounters, MB; under the JIT what
the captured step's memory plan holds).

    python3 bench/step_memory.py [--models resnet,gpt2] [--steps 8]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MB = 1e6


def side(model, via, steps):
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(REPO, "python"))
    import scale_models
    from tinyc import GlobalCounters as GC
    from tinyc import Tensor, TinyJit, nn
    m = scale_models.resnet18(Tensor, nn) if model == "resnet" else scale_models.gpt2(Tensor, nn)
    m.realize_state()
    ins = [t.realize() for t in m.inputs()]

    def step(*xs):
        if via == "step":
            return m.step(*xs)
        ts = m.lazy_step(*xs)  # [loss, *the update]
        Tensor.realize(*ts)
        return ts[0]

    jit, ms, kernels = TinyJit(step), [], 0
    for i in range(steps):
        k0, t0 = GC.kernel_count, time.perf_counter()
        jit(*ins).numpy()
        ms.append((time.perf_counter() - t0) * 1e3)
        kernels = GC.kernel_count - k0
    return {"kernels": kernels, "ms": statistics.median(ms[3:]), "peak": GC.mem_peak / MB}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet,gpt2")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--side", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        model, via = args.side.split(":")
        print(json.dumps(side(model, via, args.steps)))
        return
    print("| model | realized by | kernels | JIT step ms | peak MB |")
    print("|---|---|---|---|---|")
    for model in args.models.split(","):
        for via in ("step", "schedule"):
            p = subprocess.run([PY, os.path.abspath(__file__), "--side", "%s:%s" % (model, via),
                                "--steps", str(args.steps)], capture_output=True, text=True)
            if p.returncode != 0:
                print("| %s | %s | failed: %s |" % (model, via, (p.stdout + p.stderr).strip()[-200:]))
                continue
            r = json.loads(p.stdout.strip().splitlines()[-1])
            print("| %s | %s | %d | %.0f | %.0f |" % (model, via, r["kernels"], r["ms"], r["peak"]))


if __name__ == "__main__":
    main()
