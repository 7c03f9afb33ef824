"""bench/bench_eager.py - eager vs TinyJit training step of issue #13's MLP:
L x (nn.Linear(64, 64) + gelu), batch 32, loss h.square().mean(), Adam,
through the tinygrad-shaped Python API. An eager step builds its graph,
runs backward and the optimizer and realizes, every step; from the second
step on the engine runs the plan it cached for the first (no scheduling,
lowering or compiling). The JIT replays the captured kernels.

    TINYC_LIB=build/libtinyc.so /usr/bin/python3 bench/bench_eager.py [--layers 32] [--steps 8]
    ... bench/bench_eager.py --model gpt2 [--small] [--layers 12] [--steps 4]

--model gpt2 runs a GPT-2 shaped step instead (124M parameters at the
defaults; minutes per run on a small CPU; --small for a quick one).

Prints one line per mode, "mode model layers step3_ms best_ms kernels", the
eager/JIT ratio of the best steps, the third eager step's breakdown from
GlobalCounters (schedule = keying + planning on a cached step, lower,
compile, launch, other = wall minus those: Python, graph building, autograd),
where the eager steps from the third on spend their time (zero_grad, the
forward graph, backward, opt.step: the optimizer's graph and the realize)
and PyTorch's eager step on the same model (CPU, same thread count) as a
peer when torch is importable (no tinygrad peer yet). Set TC_CACHEDIR to a scratch folder for a cold
first step; steps 3 and later do not depend on it.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import numpy as np  # noqa: E402

from tinyc import GlobalCounters, Tensor, TinyJit, nn  # noqa: E402
from tinyc.nn.state import get_parameters  # noqa: E402

WIDTH, BATCH = 64, 32


class MLP:
    def __init__(self, layers):
        self.layers = [nn.Linear(WIDTH, WIDTH) for _ in range(layers)]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x).gelu()
        return x

    def loss(self, x):
        return self(x).square().mean()

    def batch(self, rng):
        return [Tensor(rng.standard_normal((BATCH, WIDTH)).astype(np.float32))]


class GPT:
    """GPT-2 shaped (--model gpt2: 124M, n_layer 12, n_embd 768, vocab 50257,
    T 64, B 4; --small: n_embd 128, vocab 512, T 32): token embedding as
    one_hot @ wte, learned positions, pre-norm blocks with causal attention
    (an additive mask input) and a gelu MLP, untied head, cross-entropy"""

    def __init__(self, layers, small):
        self.V, self.C, self.T, self.B = (512, 128, 32, 4) if small else (50257, 768, 64, 4)
        self.H = 4 if small else 12
        self.wte = Tensor.randn(self.V, self.C) * 0.02
        self.wpe = Tensor.randn(self.T, self.C) * 0.01
        Tensor.realize(self.wte, self.wpe)
        self.wte.requires_grad = self.wpe.requires_grad = True
        C = self.C
        self.blocks = [dict(ln1=nn.LayerNorm(C), ln2=nn.LayerNorm(C), qkv=nn.Linear(C, 3 * C),
                            proj=nn.Linear(C, C), fc=nn.Linear(C, 4 * C), out=nn.Linear(4 * C, C))
                       for _ in range(layers)]
        self.lnf, self.head = nn.LayerNorm(C), nn.Linear(C, self.V, bias=False)

    def block(self, b, x, mask):
        B, T, C, H = self.B, self.T, self.C, self.H
        q, k, v = [t.reshape(B, T, H, C // H).transpose(1, 2) for t in b["qkv"](b["ln1"](x)).chunk(3, dim=-1)]
        att = (q @ k.transpose(-2, -1)) * (1.0 / (C // H) ** 0.5) + mask
        x = x + b["proj"]((att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))
        return x + b["out"](b["fc"](b["ln2"](x)).gelu())

    def loss(self, idx, y, mask):
        x = idx.one_hot(self.V).float() @ self.wte + self.wpe
        for b in self.blocks:
            x = self.block(b, x, mask)
        logits = self.head(self.lnf(x)).reshape(self.B * self.T, self.V)
        return logits.sparse_categorical_crossentropy(y.reshape(self.B * self.T))

    def batch(self, rng):
        mask = np.triu(np.full((self.T, self.T), -1e9, np.float32), 1)
        ids = [rng.integers(0, self.V, (self.B, self.T)).astype(np.int32) for _ in range(2)]
        return [Tensor(ids[0]), Tensor(ids[1]), Tensor(mask)]


def run(args, jit):
    """per-step (wall ms, counters, kernels) of args.steps steps, the losses,
    and per eager step from the third on the seconds in zero_grad, forward,
    backward and opt.step"""
    Tensor.manual_seed(0)
    model = MLP(args.layers) if args.model == "mlp" else GPT(args.layers, args.small)
    opt = nn.optim.Adam(get_parameters(model), lr=1e-3)

    parts = []

    def step(*inputs):
        t0 = time.perf_counter()
        with Tensor.train():
            opt.zero_grad()
            t1 = time.perf_counter()
            loss = model.loss(*inputs)
            t2 = time.perf_counter()
            loss.backward()
            t3 = time.perf_counter()
            opt.step()
        parts.append((t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t3))
        return loss

    f = TinyJit(step) if jit else step
    rng = np.random.default_rng(0)
    out, losses = [], []  # parts fills as the steps run
    for _ in range(args.steps):
        inputs = model.batch(rng)
        Tensor.realize(*inputs)
        GlobalCounters.reset()
        t = time.perf_counter()
        losses.append(f(*inputs).item())
        wall = (time.perf_counter() - t) * 1e3
        c = GlobalCounters
        out.append((wall, {k: getattr(c, k) * 1e3 for k in ("schedule_s", "lower_s", "compile_s", "launch_s")},
                    c.kernel_count))
    return out, losses, parts


def torch_step_ms(layers, steps):
    import torch
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(approximate="tanh")]
    model = torch.nn.Sequential(*mods)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    best = 1e30
    for _ in range(steps):
        x = torch.tensor(rng.standard_normal((BATCH, WIDTH)).astype(np.float32))
        t = time.perf_counter()
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        loss.item()
        best = min(best, (time.perf_counter() - t) * 1e3)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "gpt2"], default="mlp")
    ap.add_argument("--layers", type=int, default=None, help="MLP layers (32) or GPT n_layer (12)")
    ap.add_argument("--small", action="store_true", help="gpt2: a small width and vocabulary")
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    a.layers = a.layers or (32 if a.model == "mlp" else 12)
    a.steps = max(a.steps, 4)
    eager, le, parts = run(a, False)
    jit, lj, _ = run(a, True)
    np.testing.assert_allclose(le, lj, rtol=1e-5, atol=1e-7, err_msg="eager and JIT losses differ")
    parts = parts[2:]
    print("mode  model layers  step3_ms   best_ms kernels")
    best = {}
    for name, rows in (("eager", eager), ("jit", jit)):
        best[name] = min(w for w, _, _ in rows[2:])
        print(f"{name:<5} {a.model:>5} {a.layers:>6} {rows[2][0]:>9.2f} {best[name]:>9.2f} {rows[2][2]:>7}")
    print(f"eager/jit (best steps): {best['eager'] / best['jit']:.2f}x")
    w, c, _ = eager[2]
    other = w - sum(c.values())
    print("eager step 3: " + " ".join(f"{k[:-2]}={v:.2f}" for k, v in c.items()) + f" other={other:.2f} ms")
    mean = [sum(p[i] for p in parts) / len(parts) * 1e3 for i in range(4)]
    sched = sum(c["schedule_s"] for _, c, _ in eager[2:]) / len(parts)
    launch = sum(c["launch_s"] for _, c, _ in eager[2:]) / len(parts)
    print(f"eager steps 3-{a.steps} (mean ms): zero_grad={mean[0]:.2f} forward={mean[1]:.2f} "
          f"backward={mean[2]:.2f} opt.step={mean[3]:.2f} (its realize: schedule={sched:.2f} "
          f"launch={launch:.2f})")
    print("eager step 1 (first): %.1f ms, step 2: %.1f ms" % (eager[0][0], eager[1][0]))
    if a.model != "mlp":
        return
    try:
        import torch
        torch.set_num_threads(int(os.environ.get("TC_THREADS", os.cpu_count() or 1)))
        print(f"peer torch eager step (best of {a.steps}): {torch_step_ms(a.layers, a.steps):.2f} ms")
    except ImportError:
        print("PyTorch not installed: no peer")


if __name__ == "__main__":
    main()
