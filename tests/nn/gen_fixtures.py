#!/usr/bin/env python3
"""gen_fixtures.py - PyTorch reference values for the optimizer tests
(tests/nn/test_optim.c) and examples/adam_onestep.c.

Run with Debian's python3-torch (CPU, float32):
    /usr/bin/python3 tests/nn/gen_fixtures.py [OUTDIR]   (default: tests/nn/fixtures)

Every file is raw little-endian data with no header; the C side knows the
shapes. Values come from splitmix64 streams (seeded 1, 2, ...); the MLP's
inputs are stored, TinyBobNet's are not (examples/adam_onestep.c has the
same generator), so only PyTorch's results for it are.

1. A 2-layer MLP, 12 -> 10 -> relu -> 4, batch 6, torch's nn.Linear layout
   (w1 (10,12), b1 (10), w2 (4,10), b2 (4)), loss cross_entropy (mean):
   mlp_init.f32      w1 b1 w2 b2 before training (streams 1, 11, 12, 13)
   mlp_x.f32         x (6,12) (stream 2),   mlp_y.i32  labels (6) (stream 3)
   mlp_<opt>.f32     w1 b1 w2 b2 after step 1, then after step 3 (same batch),
   for opt in: adam (lr 0.01), sgd_momentum (lr 0.1, momentum 0.9), adamw
   (lr 0.01, weight_decay 0.1), sgd_nesterov_wd (lr 0.1, momentum 0.9,
   weight_decay 0.01, nesterov), sgd_dampening (lr 0.1, momentum 0.9,
   dampening 0.5, weight_decay 0.01), sgd_plain (lr 0.1).
2. tinygrad's TestMNIST.test_adam_onestep: TinyBobNet x.dot(l1).relu().dot(l2),
   l1 (784,128), l2 (128,10) from Tensor.scaled_uniform (U(-1,1)/sqrt(numel),
   stream 4 then stream 5), batch 69 of pixels 0..255 as float (stream 6),
   labels (stream 7), sparse categorical cross-entropy, Adam lr 0.001:
   bobnet.bin   loss before the step (f64), l2 after (1280 f32), l1 after:
                row sums (784 f64), column sums (128 f64), and every 25th
                element in row-major order (4014 f32).
"""
import os
import struct
import sys

import numpy as np
import torch

MASK = (1 << 64) - 1


def splitmix64(seed, n):
    """n uniform floats in [0,1) (24 bits each) from splitmix64 seeded with seed"""
    out = np.empty(n, dtype=np.float64)
    x = seed & MASK
    for i in range(n):
        x = (x + 0x9E3779B97F4A7C15) & MASK
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z = z ^ (z >> 31)
        out[i] = (z >> 40) * 2.0 ** -24
    return out


def uniform(seed, shape, bound):
    """U(-bound, bound) float32, as the C side computes it: (float)((u*2-1)*bound)"""
    u = splitmix64(seed, int(np.prod(shape)))
    return ((u * 2 - 1) * bound).astype(np.float32).reshape(shape)


MLP_OPTS = {
    "adam": lambda p: torch.optim.Adam(p, lr=0.01),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
    "sgd_nesterov_wd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01,
                                                 nesterov=True),
    "sgd_dampening": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.5,
                                               weight_decay=0.01),
    "sgd_plain": lambda p: torch.optim.SGD(p, lr=0.1),
}


def mlp_init():
    w1 = uniform(1, (10, 12), 1 / np.sqrt(12))
    b1 = uniform(11, (10,), 1 / np.sqrt(12))
    w2 = uniform(12, (4, 10), 1 / np.sqrt(10))
    b2 = uniform(13, (4,), 1 / np.sqrt(10))
    x = uniform(2, (6, 12), 2.0)
    y = (splitmix64(3, 6) * 4).astype(np.int32)
    return [w1, b1, w2, b2], x, y


def mlp(outdir):
    params, x, y = mlp_init()
    np.concatenate([p.ravel() for p in params]).astype("<f4").tofile(
        os.path.join(outdir, "mlp_init.f32"))
    x.astype("<f4").tofile(os.path.join(outdir, "mlp_x.f32"))
    y.astype("<i4").tofile(os.path.join(outdir, "mlp_y.i32"))
    for name, make in MLP_OPTS.items():
        ps = [torch.tensor(p, requires_grad=True) for p in params]
        opt = make(ps)
        xt, yt = torch.tensor(x), torch.tensor(y, dtype=torch.long)
        out = []
        for step in range(3):
            opt.zero_grad()
            h = torch.relu(xt @ ps[0].T + ps[1])
            loss = torch.nn.functional.cross_entropy(h @ ps[2].T + ps[3], yt)
            loss.backward()
            opt.step()
            if step in (0, 2):
                out += [p.detach().numpy().ravel().copy() for p in ps]
        np.concatenate(out).astype("<f4").tofile(os.path.join(outdir, "mlp_%s.f32" % name))


def bobnet(outdir):
    l1 = uniform(4, (784, 128), 1 / np.sqrt(784 * 128))
    l2 = uniform(5, (128, 10), 1 / np.sqrt(128 * 10))
    x = np.floor(splitmix64(6, 69 * 784) * 256).astype(np.float32).reshape(69, 784)
    y = (splitmix64(7, 69) * 10).astype(np.int64)
    t1, t2 = torch.tensor(l1, requires_grad=True), torch.tensor(l2, requires_grad=True)
    opt = torch.optim.Adam([t1, t2], lr=0.001, eps=1e-8)
    out = torch.relu(torch.tensor(x) @ t1) @ t2
    loss = torch.nn.functional.cross_entropy(out, torch.tensor(y))
    opt.zero_grad()
    loss.backward()
    opt.step()
    a1 = t1.detach().numpy().astype(np.float64)
    with open(os.path.join(outdir, "bobnet.bin"), "wb") as f:
        f.write(struct.pack("<d", loss.item()))
        f.write(t2.detach().numpy().astype("<f4").tobytes())
        f.write(a1.sum(axis=1).astype("<f8").tobytes())
        f.write(a1.sum(axis=0).astype("<f8").tobytes())
        f.write(t1.detach().numpy().ravel()[::25].astype("<f4").tobytes())


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "fixtures")
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)
    mlp(outdir)
    bobnet(outdir)
    print("fixtures written to", outdir)


if __name__ == "__main__":
    main()
