"""bench/bench_eager.py - eager vs TinyJit training step of issue #13's MLP:
L x (nn.Linear(64, 64) + gelu), batch 32, loss h.square().mean(), Adam,
through the tinygrad-shaped Python API. An eager step builds its graph,
runs backward and the optimizer and realizes, every step; from the second
step on the engine runs the plan it cached for the first (no scheduling,
lowering or compiling). The JIT replays the captured kernels.

    TINYC_LIB=build/libtinyc.so /usr/bin/python3 bench/bench_eager.py [--layers 32] [--steps 8]

Prints one line per mode, "mode layers batch step3_ms best_ms kernels", the
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


def run(layers, steps, jit):
    """per-step (wall ms, counters) of `steps` steps, and the losses"""
    Tensor.manual_seed(0)
    model = MLP(layers)
    opt = nn.optim.Adam(get_parameters(model), lr=1e-3)

    parts = []  # per eager step: seconds in zero_grad, forward, backward, opt.step

    def step(x):
        t0 = time.perf_counter()
        with Tensor.train():
            opt.zero_grad()
            t1 = time.perf_counter()
            loss = model(x).square().mean()
            t2 = time.perf_counter()
            loss.backward()
            t3 = time.perf_counter()
            opt.step()
        parts.append((t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t3))
        return loss

    f = TinyJit(step) if jit else step
    rng = np.random.default_rng(0)
    out, losses = [], []
    for _ in range(steps):
        x = Tensor(rng.standard_normal((BATCH, WIDTH)).astype(np.float32))
        x.realize()
        GlobalCounters.reset()
        t = time.perf_counter()
        losses.append(f(x).item())
        wall = (time.perf_counter() - t) * 1e3
        c = GlobalCounters
        out.append((wall, {k: getattr(c, k) * 1e3 for k in ("schedule_s", "lower_s", "compile_s", "launch_s")},
                    c.kernel_count))
    return out, losses, parts[2:]


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
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    steps = max(a.steps, 4)
    eager, le, parts = run(a.layers, steps, False)
    jit, lj, _ = run(a.layers, steps, True)
    np.testing.assert_allclose(le, lj, rtol=1e-5, atol=1e-7, err_msg="eager and JIT losses differ")
    print("mode  layers batch  step3_ms   best_ms kernels")
    best = {}
    for name, rows in (("eager", eager), ("jit", jit)):
        best[name] = min(w for w, _, _ in rows[2:])
        print(f"{name:<5} {a.layers:>6} {BATCH:>5} {rows[2][0]:>9.2f} {best[name]:>9.2f} {rows[2][2]:>7}")
    print(f"eager/jit (best steps): {best['eager'] / best['jit']:.2f}x")
    w, c, _ = eager[2]
    other = w - sum(c.values())
    print("eager step 3: " + " ".join(f"{k[:-2]}={v:.2f}" for k, v in c.items()) + f" other={other:.2f} ms")
    mean = [sum(p[i] for p in parts) / len(parts) * 1e3 for i in range(4)]
    sched = sum(c["schedule_s"] for _, c, _ in eager[2:]) / len(parts)
    launch = sum(c["launch_s"] for _, c, _ in eager[2:]) / len(parts)
    print(f"eager steps 3-{steps} (mean ms): zero_grad={mean[0]:.2f} forward={mean[1]:.2f} "
          f"backward={mean[2]:.2f} opt.step={mean[3]:.2f} (its realize: schedule={sched:.2f} "
          f"launch={launch:.2f})")
    print("eager step 1 (first): %.1f ms, step 2: %.1f ms" % (eager[0][0], eager[1][0]))
    try:
        import torch
        torch.set_num_threads(int(os.environ.get("TC_THREADS", os.cpu_count() or 1)))
        print(f"peer torch eager step (best of {steps}): {torch_step_ms(a.layers, steps):.2f} ms")
    except ImportError:
        print("PyTorch not installed: no peer")


if __name__ == "__main__":
    main()
