#!/usr/bin/env python3
"""step_kernels.py - where a training step's time goes, kernel by kernel: a
model of bench/scale_models.py (ResNet-18 CIFAR batch 16, GPT-2 124M, the
64-wide MLP) runs eager steps, and the last one prints one line per kernel
(TC_DEBUG=2: name, ops, ms); each kernel's time is the least over --runs
processes, matched by its place in the step. Printed per kernel name (the
loop space: r_16_1_64_32_32_64_3_3 is a 64-channel 3x3 conv over 32 x 32):
count, total ms, GFLOP/s. With --against LIB, the same for that libtinyc
(TINYC_LIB) in processes alternated with ours, side by side: an A/B of two
builds in the same minutes (this guest's speed moves within the hour).

    python3 bench/step_kernels.py [--model resnet|gpt2|mlp] [--threads 1] [--runs 2]
                                  [--against /path/to/other/libtinyc.so] [--top 30]
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def side(model, steps):
    """runs `steps` eager steps; the last with TC_DEBUG=2 (its lines on stderr)"""
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(REPO, "python"))
    import scale_models
    import tinyc
    from tinyc import Tensor, nn
    m = {"resnet": lambda: scale_models.resnet18(Tensor, nn),
         "gpt2": lambda: scale_models.gpt2(Tensor, nn),
         "mlp": lambda: scale_models.mlp(Tensor, nn, 32)}[model]()
    m.realize_state()
    xs = m.inputs()
    for i in range(steps):
        if i == steps - 1:
            tinyc.set_flag("TC_DEBUG", 2)
        m.step(*xs)


def kernels(lib, model, threads, steps):
    """[(name, ops, ms)] of one process's last step"""
    env = dict(os.environ, TC_THREADS=str(threads))
    if lib:
        env["TINYC_LIB"] = lib
    code = "import sys; sys.path.insert(0, %r); import step_kernels; step_kernels.side(%r, %d)" % (
        HERE, model, steps)
    p = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("step_kernels.py: the step failed:\n%s" % p.stderr[-2000:])
    out = []
    for line in p.stderr.splitlines():
        f = line.split()
        if len(f) >= 7 and f[0] == "kernel" and f[4] == "ops" and "ms" in f:
            i = f.index("ms")
            out.append((f[2], float(f[3]), float(f[i - 1])))
    return out


def least(runs):
    """the least ms per kernel place over runs of the same step"""
    n = min(len(r) for r in runs)
    return [(runs[0][k][0], runs[0][k][1], min(r[k][2] for r in runs)) for k in range(n)]


def by_name(ks):
    t = {}
    for name, ops, ms in ks:
        c, o, m = t.get(name, (0, 0.0, 0.0))
        t[name] = (c + 1, o + ops, m + ms)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet", choices=("resnet", "gpt2", "mlp"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--against", default="", help="another libtinyc.so, measured alternately")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    ours, theirs = [], []
    for _ in range(a.runs):
        ours.append(kernels(os.environ.get("TINYC_LIB", ""), a.model, a.threads, a.steps))
        if a.against:
            theirs.append(kernels(a.against, a.model, a.threads, a.steps))
    mine = by_name(least(ours))
    other = by_name(least(theirs)) if a.against else {}
    rows = sorted(mine.items(), key=lambda kv: -kv[1][2])
    print("| kernel | count | ms | GFLOP/s |%s" % (" against: ms | GFLOP/s |" if a.against else ""))
    print("|---|---|---|---|%s" % ("---|---|" if a.against else ""))
    for name, (c, ops, ms) in rows[:a.top]:
        extra = ""
        if a.against and name in other:
            _, o2, m2 = other[name]
            extra = " %.2f | %.1f |" % (m2, o2 / m2 / 1e6 if m2 > 0 else 0)
        print("| %s | %d | %.2f | %.1f |%s" % (name, c, ms, ops / ms / 1e6 if ms > 0 else 0, extra))
    total = sum(v[2] for v in mine.values())
    print("all %d kernels: %.1f ms%s" % (sum(v[0] for v in mine.values()), total,
                                         "; against: %.1f ms" % sum(v[2] for v in other.values())
                                         if a.against else ""))


if __name__ == "__main__":
    main()
