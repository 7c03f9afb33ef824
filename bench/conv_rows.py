#!/usr/bin/env python3
"""conv_rows.py - issue 14's convolutions one by one: the conv shapes of the
CIFAR ResNet-18 step (batch 16; bench/scale_models.py) and of beautiful_mnist
(batch 512; examples/mnist.py), each as its forward (y = conv(x, w)), its
input gradient (dx from dy and w) and its weight gradient (dw from x and dy),
libtinyc next to PyTorch CPU with the same thread count, each side in a
process of its own, on the same seeded inputs.

libtinyc: each op is a TinyJit of what a training step builds for it
(`x.conv2d(w, ...)`; `backward(dy)` of the same with only x, or only w,
requiring a gradient), timed as replays: the conv's kernels with the copies
the step makes for them (the padded input, the weight laid out channels-last
or flipped), no scheduling. PyTorch: `F.conv2d` and the
`aten.convolution_backward` its autograd calls, for one gradient at a time.
Printed per row: ms (median of the calls after warm-up), GFLOP/s (2 x the
conv's multiply-adds / time, the same count on both sides), the ratio, and
the largest difference relative to the result's largest magnitude.

    python3 bench/conv_rows.py [--threads 1,2] [--calls 9] [--only SUBSTR] [--lines FILE]

--lines writes bench/run.sh's lines for table.py ("conv THREADS name=... ours_ms=... torch_ms=...
gflop=... diff=... check=ok|FAIL").
"""
import argparse
import json
import os
import sys

from sides import finish, median_ms, run_side

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TOL = 1e-4  # largest difference / largest magnitude of the result (float32 sums of up to 4,608 products)

# (name, batch, c_in, c_out, size, kernel, stride, padding)
SHAPES = (
    ("resnet 3x3 64>64 32x32", 16, 64, 64, 32, 3, 1, 1),
    ("resnet 3x3 128>128 16x16", 16, 128, 128, 16, 3, 1, 1),
    ("resnet 3x3 256>256 8x8", 16, 256, 256, 8, 3, 1, 1),
    ("resnet 3x3 512>512 4x4", 16, 512, 512, 4, 3, 1, 1),
    ("resnet 3x3 s2 128>256 16x16", 16, 128, 256, 16, 3, 2, 1),
    ("resnet 1x1 s2 128>256 16x16", 16, 128, 256, 16, 1, 2, 0),
    ("mnist 5x5 32>32 24x24", 512, 32, 32, 24, 5, 1, 0),
    ("mnist 3x3 32>64 10x10", 512, 32, 64, 10, 3, 1, 0),
)
OPS = ("fwd", "dx", "dw")


def out_size(size, k, stride, pad):
    return (size + 2 * pad - k) // stride + 1


def gflop(shape):
    _, n, ci, co, s, k, st, p = shape
    o = out_size(s, k, st, p)
    return 2.0 * n * co * o * o * ci * k * k / 1e9


def inputs(shape):
    import numpy as np
    _, n, ci, co, s, k, st, p = shape
    o = out_size(s, k, st, p)
    rng = np.random.default_rng(14)
    x = rng.standard_normal((n, ci, s, s), dtype=np.float32)
    w = rng.standard_normal((co, ci, k, k), dtype=np.float32) * (2.0 / (ci * k * k)) ** 0.5
    dy = rng.standard_normal((n, co, o, o), dtype=np.float32)
    return x, w, dy


def torch_fns(shape, x, w, dy):
    import torch
    _, n, ci, co, s, k, st, p = shape
    tx, tw, tdy = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(dy)
    back = torch.ops.aten.convolution_backward

    def grad(which):
        mask = [which == 0, which == 1, False]
        return lambda: back(tdy, tx, tw, None, [st, st], [p, p], [1, 1], False, [0, 0], 1, mask)[which]
    return {"fwd": lambda: torch.nn.functional.conv2d(tx, tw, None, st, p), "dx": grad(0), "dw": grad(1)}


def ours_fns(shape, x, w, dy):
    sys.path.insert(0, os.path.join(REPO, "python"))
    from tinyc import Tensor, TinyJit
    _, n, ci, co, s, k, st, p = shape
    tx, tw, tdy = Tensor(x).realize(), Tensor(w).realize(), Tensor(dy).realize()

    def grad_of(which):
        def f(a, b, g):
            leaf = (a, b)[which]
            leaf.requires_grad = True
            leaf.grad = None  # no sum with the last call's gradient
            a.conv2d(b, stride=st, padding=p).backward(g)
            out = leaf.grad
            leaf.requires_grad = False
            return out
        return f
    fns = {"fwd": TinyJit(lambda a, b: a.conv2d(b, stride=st, padding=p)),
           "dx": TinyJit(grad_of(0)), "dw": TinyJit(grad_of(1))}
    return {"fwd": lambda: fns["fwd"](tx, tw), "dx": lambda: fns["dx"](tx, tw, tdy),
            "dw": lambda: fns["dw"](tx, tw, tdy)}


def side(who, only, calls):
    """times every row on one side; prints a JSON line: {name op: [ms, sample of the result, its max abs]}"""
    import numpy as np
    out = {}
    for shape in SHAPES:
        rows = [op for op in OPS if only in "%s %s" % (shape[0], op)]
        if not rows:
            continue
        x, w, dy = inputs(shape)
        fns = (torch_fns if who == "torch" else ours_fns)(shape, x, w, dy)
        for op in rows:
            ms, r = median_ms(fns[op], calls)
            v = np.asarray(r.numpy(), dtype=np.float64).ravel()
            out["%s %s" % (shape[0], op)] = [ms, v[::max(1, v.size // 4096)].tolist(), float(np.abs(v).max())]
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--calls", type=int, default=9)
    ap.add_argument("--only", default="", help="rows whose 'name op' contains this")
    ap.add_argument("--lines", default="", help="also write run.sh's lines to this file")
    a = ap.parse_args()
    lines, bad = [], False
    print("| threads | conv | op | libtinyc ms | PyTorch ms | libtinyc GFLOP/s | PyTorch GFLOP/s | ratio | rel diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t in [int(s) for s in a.threads.split(",")]:
        ours, peer = (run_side("conv_rows", who, t, a.only, a.calls) for who in ("ours", "torch"))
        for shape in SHAPES:
            g = gflop(shape)
            for op in OPS:
                key = "%s %s" % (shape[0], op)
                if key not in ours:
                    continue
                (mo, vo, big), (mp, vp, _) = ours[key], peer[key]
                diff = max(abs(p - q) for p, q in zip(vo, vp)) / max(big, 1e-30)
                ok = diff <= TOL
                bad |= not ok
                print("| %d | %s | %s | %.3f | %.3f | %.1f | %.1f | %.2fx | %.1e%s |" % (
                    t, shape[0], op, mo, mp, g / mo * 1e3, g / mp * 1e3, mp / mo, diff, "" if ok else " WRONG"))
                lines.append("conv %d name=%s_%s ours_ms=%.4f torch_ms=%.4f gflop=%.4f diff=%.2g check=%s" % (
                    t, shape[0].replace(" ", "_"), op, mo, mp, g, diff, "ok" if ok else "FAIL"))
    finish(lines, a.lines, bad)


if __name__ == "__main__":
    main()
