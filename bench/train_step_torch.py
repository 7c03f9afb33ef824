#!/usr/bin/env python3
"""train_step_torch.py - PyTorch CPU peer of bench_train_step and examples/mnist.c.

    train_step_torch.py bench [--model conv|mlp|both] [--batch B] [--steps N] [--threads T]
                              [--load DIR] [--device cpu|cuda]
        ms per training step (zero_grad, forward, cross-entropy, backward,
        Adam step) on a fixed random batch, after two warm-up steps; prints
        "model batch ms_per_step" lines like bench_train_step. With --load DIR
        (written by bench_train_step --dump DIR) it starts from libtinyc's
        initial parameters and batch instead, and adds two columns: the
        relative difference between its loss and libtinyc's at the first step
        (the forward pass) and the largest one over steps 2-5 (backward and
        Adam feed into those). --device cuda runs it on the GPU (each step
        ends with .item() of its loss, which waits for the GPU).
    train_step_torch.py train --model conv|mlp [--steps N] [--batch B] [--seed S]
                              [--lr X] [--data DIR] [--threads T]
        the same training run as examples/mnist.c (raw 0..255 pixels, batches
        drawn with replacement by splitmix64, Adam, BatchNorm on running
        statistics at test time); prints "test accuracy: NN.NN%".
The models: conv = tinygrad's beautiful_mnist convnet, mlp = 784-128-10.
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn


def make_model(kind):
    if kind == "conv":
        return nn.Sequential(
            nn.Conv2d(1, 32, 5), nn.ReLU(), nn.Conv2d(32, 32, 5), nn.ReLU(),
            nn.BatchNorm2d(32), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(),
            nn.BatchNorm2d(64), nn.MaxPool2d(2), nn.Flatten(1), nn.Linear(576, 10))
    return nn.Sequential(nn.Flatten(1), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def read_safetensors(path):
    """{name: float32 array} of a safetensors file (tc_nn_save writes F32 only)"""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    out = {}
    for name, e in json.loads(data[8:8 + n]).items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + end], "<f4").reshape(e["shape"])
    return out


def load_from(model, kind, d):
    """libtinyc's initial tensors ("<layer>.<name>", layers in the order of
    the modules that have parameters) and its batch"""
    tensors = read_safetensors(os.path.join(d, kind + ".init.safetensors"))
    layers = [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear, nn.BatchNorm2d))]
    state = {}
    for key, arr in tensors.items():
        i, name = key.split(".", 1)
        state[(int(i), name)] = torch.from_numpy(arr.copy())
    with torch.no_grad():
        for i, m in enumerate(layers):
            for name in ("weight", "bias", "running_mean", "running_var"):
                if (i, name) in state:
                    getattr(m, name).copy_(state.pop((i, name)))
    assert not state, "unused tensors: %s" % sorted(state)
    x = np.fromfile(os.path.join(d, kind + ".x.u8"), np.uint8)
    y = np.fromfile(os.path.join(d, kind + ".y.i32"), np.int32)
    losses = np.loadtxt(os.path.join(d, kind + ".loss.txt"), ndmin=1)
    return (torch.from_numpy(x.astype(np.float32)).reshape(len(y), 1, 28, 28),
            torch.from_numpy(y.astype(np.int64)), losses)


def bench(args):
    print("model batch ms_per_step" + (" loss1_relerr loss2to5_relerr" if args.load else ""))
    for kind in (["conv", "mlp"] if args.model == "both" else [args.model]):
        batch = args.batch or (512 if kind == "conv" else 128)
        steps = args.steps or (3 if kind == "conv" else 50)
        torch.manual_seed(1)
        model = make_model(kind)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x = torch.randint(0, 256, (batch, 1, 28, 28)).float()
        y = torch.randint(0, 10, (batch,))
        ref = None
        if args.load:
            x, y, ref = load_from(model, kind, args.load)
        model, x, y = model.to(args.device), x.to(args.device), y.to(args.device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # on the moved parameters
        losses = []
        for _ in range(2):
            losses.append(step(model, opt, x, y).item())
        t0 = time.perf_counter()
        for _ in range(steps):
            losses.append(step(model, opt, x, y).item())
        ms = 1e3 * (time.perf_counter() - t0) / steps
        if ref is None:
            print("%-4s %5d %10.2f" % (kind, batch, ms))
        else:
            # the first step's loss is the forward pass alone; the next ones
            # add backward and Adam, whose first updates (+-lr wherever a
            # gradient is not 0) turn rounding differences in tiny gradients
            # into real ones: torch's own float32 and float64 runs of the
            # convnet differ by 2e-3 at step 3 and 8e-3 at step 4
            rel = [abs(a - b) / max(abs(b), 1e-6) for a, b in zip(ref, losses)][:5]
            print("%-4s %5d %10.2f %10.3g %10.3g" % (kind, batch, ms, rel[0], max(rel[1:] or [0])))


def idx(path):
    with gzip.open(path) if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = np.frombuffer(data, ">u4", ndim, 4)
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(d, name):
    for cand in (name, name + ".gz"):
        if os.path.exists(os.path.join(d, cand)):
            return idx(os.path.join(d, cand))
    raise FileNotFoundError(os.path.join(d, name))


def splitmix64(state, n):
    out, mask = np.empty(n, np.uint64), (1 << 64) - 1
    for i in range(n):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out[i] = z ^ (z >> 31)
    return state, out


def train(args):
    xtr = torch.tensor(load(args.data, "train-images-idx3-ubyte")).float().unsqueeze(1)
    ytr = torch.tensor(load(args.data, "train-labels-idx1-ubyte")).long()
    xte = torch.tensor(load(args.data, "t10k-images-idx3-ubyte")).float().unsqueeze(1)
    yte = torch.tensor(load(args.data, "t10k-labels-idx1-ubyte")).long()
    steps = args.steps or (70 if args.model == "conv" else 200)
    batch = args.batch or (512 if args.model == "conv" else 128)
    torch.manual_seed(args.seed)
    model = make_model(args.model)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    state, t0 = args.seed, time.perf_counter()
    for i in range(steps):
        state, r = splitmix64(state, batch)
        rows = torch.tensor((r % np.uint64(len(ytr))).astype(np.int64))
        loss = step(model, opt, xtr[rows], ytr[rows])
        if (i + 1) % 10 == 0 or i + 1 == steps:
            print("step %d/%d loss %.4f  %.2f steps/s" % (i + 1, steps, loss.item(),
                                                          (i + 1) / (time.perf_counter() - t0)))
    model.eval()
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item()
    print("test accuracy: %.2f%%" % (100 * acc))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["bench", "train"])
    p.add_argument("--model", default="both")
    p.add_argument("--batch", type=int, default=0)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--load", default="", help="bench: start from bench_train_step --dump DIR")
    p.add_argument("--device", default="cpu", help="bench: the torch device (cpu, cuda)")
    args, _ = p.parse_known_args()  # bench_train_step options like --jit are ignored
    torch.set_num_threads(args.threads)
    bench(args) if args.mode == "bench" else train(args)


if __name__ == "__main__":
    main()
