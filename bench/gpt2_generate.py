#!/usr/bin/env python3
"""gpt2_generate.py - GPT-2 generation speed, batch 1, greedy, KV cache:
libtinyc from Python (examples/gpt2.py's generate: a TinyJit replays one
position a step against fixed-shape caches) and from C (build/examples/gpt2,
gpt2_generate), next to a PyTorch CPU KV-cache loop (bench/gpt2_torch.py:
torch.cat'ed caches) on the same weights, one thread each by default.

    TC_THREADS is set from --threads; torch.set_num_threads(--threads)
    python3 bench/gpt2_generate.py [--config 124M|small] [--tokens 32] [--prompt 8]
                                   [--threads 1] [--seed 0] [--c build/examples/gpt2]
                                   [--rounds 3] [--no-cache]

--config 124M (the default) is GPT-2 small with GPT-2's vocabulary: 12
layers, 12 heads, width 768, context 1024, vocab 50257 (124.4M parameters,
random init: speed does not depend on the values); small is 4 layers, width
256, vocab 50257 (a quick check). The prompt is --prompt token ids, then
--tokens new ones; a warm-up generation first (kernels compiled, the kernel
cache filled), then --rounds timed ones of libtinyc (Python) and PyTorch in
turn, and the C example's (a process of its own each round). tok/s is over
the new tokens' steps (each a jit replay: the prompt takes the first
positions), the median of the rounds, with the median step in ms beside it;
"vs torch" is the median of the per-round ratios (shared machine: the pairs
run back to back). Prints the machine's load average and whether the three
produced the same greedy tokens. --no-cache adds one timed generation of
libtinyc without the cache (the whole sequence, padded to prompt + tokens
positions, through the model each step: the reference the cache replaces;
its first step, which compiles, is left out).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

CONFIGS = {"124M": (12, 12, 768, 1024, 50257), "small": (4, 4, 256, 1024, 50257)}


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="124M")
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--prompt", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=3,
                   help="timed generations of each, taken in turn (tinyc, torch, tinyc, ...)")
    p.add_argument("--c", default=os.path.join(REPO, "build", "examples", "gpt2"),
                   help="the C example ('' to skip it)")
    p.add_argument("--no-cache", action="store_true",
                   help="also time libtinyc without the KV cache (one generation)")
    return p.parse_args()


ARGS = parse()
os.environ["TC_THREADS"] = str(ARGS.threads)  # read once, when libtinyc loads
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "examples"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import gpt2  # noqa: E402
from gpt2_torch import TorchGPT2  # noqa: E402
from tinyc.nn.state import get_state_dict  # noqa: E402


def rate(times):
    return len(times) / sum(times), 1e3 * float(np.median(times))


C_WARM = []  # not empty once the C example ran


def run_c(m, prompt, layers, heads, width, ctx, vocab):
    """(tokens, tok/s) of the C example on m's weights, or None"""
    if not ARGS.c or not os.access(ARGS.c, os.X_OK):
        return None
    with tempfile.TemporaryDirectory() as d:
        w = os.path.join(d, "w.safetensors")
        m.save(w)
        cmd = [ARGS.c, "--layers", str(layers), "--heads", str(heads), "--width", str(width),
               "--context", str(ctx), "--vocab", str(vocab), "--steps", "0", "--load", w,
               "--temperature", "0", "--ids", "1", "--prompt", bytes(prompt).decode("latin-1")]
        if not C_WARM:  # the first run compiles (the kernel cache keeps them)
            subprocess.run(cmd + ["--sample", "3"], capture_output=True, check=True)
            C_WARM.append(True)
        r = subprocess.run(cmd + ["--sample", str(ARGS.tokens)], capture_output=True, text=True,
                           check=True)
    lines = r.stdout.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("---- %d tokens" % ARGS.tokens))
    toks = [int(t) for t in lines[head + 1].split()]
    tps = float(re.search(r"steps alone: ([\d.]+) tok/s", r.stdout).group(1))
    return toks, tps


def main():
    layers, heads, width, ctx, vocab = CONFIGS[ARGS.config]
    torch.set_num_threads(ARGS.threads)
    t0 = time.perf_counter()
    m = gpt2.GPT2(layers, heads, width, ctx, vocab, seed=ARGS.seed)
    n = sum(p.numel() for p in m.parameters())
    print("GPT-2 %s: %d layers, %d heads, width %d, vocab %d: %.1fM parameters (init %.1f s)"
          % (ARGS.config, layers, heads, width, vocab, n / 1e6, time.perf_counter() - t0))
    print("batch 1, greedy, %d prompt + %d new tokens, %d thread(s); load average %s"
          % (ARGS.prompt, ARGS.tokens, ARGS.threads, open("/proc/loadavg").read().split()[0]))
    prompt = [int(t) for t in np.random.default_rng(ARGS.seed).integers(32, 127, ARGS.prompt)]
    tm = TorchGPT2({k: v.numpy() for k, v in get_state_dict(m).items()}, heads)

    t0 = time.perf_counter()
    m.generate(prompt, 3)  # compiles, captures
    warm = time.perf_counter() - t0
    tm.generate(prompt, 3)
    py, th, cc = [], [], []  # per round: (tok/s, median ms), ...
    for _ in range(ARGS.rounds):
        times, ttimes = [], []
        ours = m.generate(prompt, ARGS.tokens, times_out=times)
        py.append(rate(times))
        ref = tm.generate(prompt, ARGS.tokens, times=ttimes)
        th.append(rate(ttimes))
        c = run_c(m, prompt, layers, heads, width, ctx, vocab)
        if c:
            cc.append(c[1])
    med = lambda xs: float(np.median(xs))  # noqa: E731
    py_tps, py_ms = med([r[0] for r in py]), med([r[1] for r in py])
    th_tps, th_ms = med([r[0] for r in th]), med([r[1] for r in th])
    py_x = med([a[0] / b[0] for a, b in zip(py, th)])
    c_x = med([a / b[0] for a, b in zip(cc, th)]) if cc else None
    print("%-34s %9s %9s %9s" % ("", "tok/s", "ms/token", "vs torch"))
    print("%-34s %9.2f %9.1f %8.2fx" % ("libtinyc, Python (TinyJit)", py_tps, py_ms, py_x))
    if c:
        print("%-34s %9.2f %9s %8.2fx" % ("libtinyc, C (examples/gpt2)", med(cc), "", c_x))
    print("%-34s %9.2f %9.1f %8s" % ("PyTorch %s CPU (KV cache)" % torch.__version__, th_tps,
                                     th_ms, "1.00x"))
    same_nc = True
    if ARGS.no_cache:
        times = []
        nc = m.generate(prompt, ARGS.tokens, use_cache=False, times_out=times)
        nc_tps, nc_ms = rate(times[1:] or times)  # the first step compiles
        print("%-34s %9.2f %9.1f %8.2fx" % ("libtinyc, Python, no cache", nc_tps, nc_ms,
                                           nc_tps / th_tps))
        same_nc = nc == ref
    print("first generation (compile + capture): %.1f s; load average now %s"
          % (warm, open("/proc/loadavg").read().split()[0]))
    same = ours == ref and (c is None or c[0] == ref) and same_nc
    print("greedy tokens: %s" % ("the same in all" if same else "DIFFER: %s / %s / %s"
                                 % (ours, c[0] if c else None, ref)))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
