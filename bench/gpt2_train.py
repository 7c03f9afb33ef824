#!/usr/bin/env python3
"""gpt2_train.py - issue 15's training table: ms per GPT-2 training step of
libtinyc (examples/gpt2.py's model, one TinyJit step), PyTorch CPU
(bench/gpt2_torch.py) and, where a binary is given, llm.c's train_gpt2.c,
on the same initial weights and the same batches, with the same thread
count on every side, measured in this run.

    python3 bench/gpt2_train.py [--configs small,124M] [--threads 1,2]
                                [--steps 6] [--llmc PATH] [--out FILE] [--generate 1]

After the table, --generate ROUNDS (default 1; 0: none) runs
bench/gpt2_generate.py at 124M on the first thread count: generation
tokens/s (batch 1, KV cache) of libtinyc next to PyTorch's KV-cache loop.

Configs (T 64, B 4, vocab 50304 as llm.c pads GPT-2's, AdamW lr 1e-4,
betas 0.9/0.999, eps 1e-8, no weight decay, no clipping: llm.c's
optimizer): small is 4 layers, 4 heads, C 256; 124M is GPT-2 small (12
layers, 12 heads, C 768). The weights are examples/gpt2.py's init for seed
1337; the batches are llm.c's: one stream of random token ids (numpy seed
0), batch s is tokens[s*B*T : s*B*T + B*T + 1], inputs and targets shifted
by one. A side's figure is the median of its steps after the second (the
first two build and capture). The losses of the first step are printed
side by side: they must agree (llm.c and PyTorch to about 1e-5).

llm.c is a peer, never built here: --llmc (or TC_LLMC) names a train_gpt2
binary that takes `CHECKPOINT TOKENS STEPS` on its command line, trains
without shuffling, validation or sampling, and prints llm.c's usual
"step N: train loss X (took Y ms)" (shared/reference/peers.md says how to
make one from karpathy/llm.c). This script writes its checkpoint (llm.c's
header and parameter order, weights (out, in)) and token file.
Threads: TC_THREADS, torch.set_num_threads with OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS, and OMP_NUM_THREADS for llm.c. Each side runs in a
process of its own (`gpt2_train.py --side NAME ...`).
"""
import argparse
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
CONFIGS = {"small": dict(n_layer=4, n_head=4, n_embd=256),
           "124M": dict(n_layer=12, n_head=12, n_embd=768)}
T, B, V, CTX, SEED, LR = 64, 4, 50304, 1024, 1337, 1e-4
REAL_V = 50257  # token ids drawn below GPT-2's own vocabulary


def token_stream(steps):
    """the tokens every side trains on: steps * B * T + 1 random ids"""
    return np.random.default_rng(0).integers(0, REAL_V, steps * B * T + 1)


def batches(steps):
    """llm.c's batches: (x, y) int32 (B, T) for each step"""
    toks = token_stream(steps).astype(np.int32)
    return [(toks[s * B * T:(s + 1) * B * T].reshape(B, T),
             toks[s * B * T + 1:(s + 1) * B * T + 1].reshape(B, T)) for s in range(steps)]


def read_safetensors(path):
    """{name: float32 array} of a safetensors file (numpy only)"""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=np.float32).reshape(v["shape"])
    return out


# ---- the sides (each in a process of its own) -----------------------------------

def side_tinyc(cfg, steps, init_path):
    sys.path.insert(0, os.path.join(REPO, "examples"))
    sys.path.insert(0, os.path.join(REPO, "python"))
    import gpt2
    from tinyc import GlobalCounters, Tensor, TinyJit, nn
    m = gpt2.GPT2(**cfg, n_ctx=CTX, vocab=V, seed=SEED)
    m.save(init_path)
    opt = nn.optim.AdamW(m.parameters(), lr=LR, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0)

    def step(x, y):
        opt.zero_grad()
        loss = m.loss(x, y)
        loss.backward()
        Tensor.realize(loss, *opt.schedule_step())
        return loss

    jstep = TinyJit(step)
    ms, losses, kernels = [], [], 0
    for x, y in batches(steps):
        xt, yt = Tensor(x).realize(), Tensor(y).realize()
        k0, t0 = GlobalCounters.kernel_count, time.perf_counter()
        losses.append(jstep(xt, yt).item())
        ms.append((time.perf_counter() - t0) * 1e3)
        kernels = GlobalCounters.kernel_count - k0
    return {"ms": ms, "losses": losses, "kernels": kernels}


def side_torch(cfg, steps, init_path):
    import torch
    sys.path.insert(0, HERE)
    from gpt2_torch import TorchGPT2
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    tm = TorchGPT2(read_safetensors(init_path), cfg["n_head"], requires_grad=True)
    opt = torch.optim.AdamW(tm.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    ms, losses = [], []
    for x, y in batches(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(tm.forward(x).reshape(-1, V),
                                                 torch.tensor(y.reshape(-1), dtype=torch.long))
        loss.backward()
        opt.step()
        losses.append(loss.item())
        ms.append((time.perf_counter() - t0) * 1e3)
    return {"ms": ms, "losses": losses}


def write_llmc_files(cfg, steps, init_path, ckpt, tokens):
    """llm.c's checkpoint (version 3) and token file (version 1) of the init"""
    sd, L, C = read_safetensors(init_path), cfg["n_layer"], cfg["n_embd"]
    head = np.zeros(256, np.int32)
    head[:8] = [20240326, 3, CTX, V, L, cfg["n_head"], C, V]

    def stack(name, transpose):  # Hugging Face's Conv1D weights are (in, out)
        return np.stack([sd["h.%d.%s" % (l, name)].T if transpose else sd["h.%d.%s" % (l, name)]
                         for l in range(L)])
    parts = [sd["wte.weight"], sd["wpe.weight"], stack("ln_1.weight", 0), stack("ln_1.bias", 0),
             stack("attn.c_attn.weight", 1), stack("attn.c_attn.bias", 0),
             stack("attn.c_proj.weight", 1), stack("attn.c_proj.bias", 0),
             stack("ln_2.weight", 0), stack("ln_2.bias", 0), stack("mlp.c_fc.weight", 1),
             stack("mlp.c_fc.bias", 0), stack("mlp.c_proj.weight", 1), stack("mlp.c_proj.bias", 0),
             sd["ln_f.weight"], sd["ln_f.bias"]]
    with open(ckpt, "wb") as f:
        f.write(head.tobytes())
        for p in parts:
            f.write(np.ascontiguousarray(p, dtype=np.float32).tobytes())
    stream = token_stream(steps).astype(np.uint16)
    th = np.zeros(256, np.int32)
    th[:3] = [20240520, 1, len(stream)]
    with open(tokens, "wb") as f:
        f.write(th.tobytes())
        f.write(stream.tobytes())


def side_llmc(cfg, steps, init_path, binary):
    d = tempfile.mkdtemp(prefix="tc_llmc_")
    ckpt, tokens = os.path.join(d, "model.bin"), os.path.join(d, "tokens.bin")
    write_llmc_files(cfg, steps, init_path, ckpt, tokens)
    p = subprocess.run([binary, ckpt, tokens, str(steps)], capture_output=True, text=True)
    for f in (ckpt, tokens):
        os.remove(f)
    os.rmdir(d)
    if p.returncode != 0:
        raise RuntimeError("llm.c failed (%d): %s" % (p.returncode, (p.stdout + p.stderr)[-400:]))
    rows = re.findall(r"step (\d+): train loss ([\d.]+) \(took ([\d.]+) ms\)", p.stdout)
    return {"ms": [float(r[2]) for r in rows], "losses": [float(r[1]) for r in rows]}


# ---- the driver --------------------------------------------------------------------

def run_side(name, config, threads, steps, init_path, llmc):
    env = dict(os.environ, TC_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads))
    if name != "tinyc" and not os.environ.get("TC_BENCH_AS_AVX2"):  # peers at their best (peers.md)
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    cmd = [PY, os.path.abspath(__file__), "--side", name, "--configs", config, "--steps",
           str(steps), "--init", init_path] + (["--llmc", llmc] if llmc else [])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stdout + p.stderr).strip()[-300:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def fmt(x, spec="%.0f"):
    return spec % x if x is not None else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default="small,124M")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--llmc", default=os.environ.get("TC_LLMC"))
    ap.add_argument("--out")
    ap.add_argument("--generate", type=int, default=1, metavar="ROUNDS",
                    help="rounds of bench/gpt2_generate.py (124M) after the table; 0: none")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--init", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.steps < 3:
        ap.error("--steps must be at least 3 (two to build and capture, one to time)")
    if a.side:
        cfg = CONFIGS[a.configs]
        fn = {"tinyc": lambda: side_tinyc(cfg, a.steps, a.init),
              "torch": lambda: side_torch(cfg, a.steps, a.init),
              "llmc": lambda: side_llmc(cfg, a.steps, a.init, a.llmc)}[a.side]
        print(json.dumps(fn()))
        return 0
    cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"],
                         capture_output=True, text=True).stdout.strip()
    lines = ["## GPT-2 training steps (issue 15), %s" % time.strftime("%Y-%m-%d %H:%M"), "",
             "%s, %d cores, load average %s; T %d, B %d, vocab %d, AdamW lr %g; median ms "
             "per step of steps 3..%d" % (cpu, os.cpu_count(), " ".join(
                 "%.2f" % x for x in os.getloadavg()), T, B, V, LR, a.steps),
             "command: python3 bench/gpt2_train.py --configs %s --threads %s --steps %d%s" % (
                 a.configs, a.threads, a.steps, " --llmc PATH" if a.llmc else ""), "",
             "| config | threads | libtinyc ms | kernels/step | PyTorch ms | llm.c ms | "
             "PyTorch/ours | llm.c/ours | step-1 loss ours / PyTorch / llm.c |",
             "|---|---|---|---|---|---|---|---|---|"]
    failed = False
    for config in a.configs.split(","):
        init = tempfile.mktemp(prefix="tc_gpt2_init_", suffix=".safetensors")
        for th in (int(t) for t in a.threads.split(",")):
            res = {"tinyc": run_side("tinyc", config, th, a.steps, init, None)}
            res["torch"] = run_side("torch", config, th, a.steps, init, None)
            if a.llmc:
                res["llmc"] = run_side("llmc", config, th, a.steps, init, a.llmc)
            med, loss1 = {}, {}
            for k, r in res.items():
                if "error" in r:
                    print("%s %s threads %d: %s" % (k, config, th, r["error"]), file=sys.stderr)
                    failed = True
                    continue
                med[k] = statistics.median(r["ms"][2:]) if len(r["ms"]) > 2 else None
                loss1[k] = r["losses"][0] if r["losses"] else None
            ours = med.get("tinyc")
            ratio = lambda k: fmt(med[k] / ours, "%.2fx") if ours and med.get(k) else "-"
            lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                config, th, fmt(ours), res["tinyc"].get("kernels", "-"), fmt(med.get("torch")),
                fmt(med.get("llmc")), ratio("torch"), ratio("llmc"),
                " / ".join(fmt(loss1.get(k), "%.5f") for k in ("tinyc", "torch", "llmc"))))
            for k in ("tinyc", "llmc"):
                if loss1.get(k) and loss1.get("torch") and \
                        abs(loss1[k] - loss1["torch"]) > 1e-4 * abs(loss1["torch"]):
                    print("step-1 losses differ: %r" % loss1, file=sys.stderr)
                    failed = True
        if os.path.exists(init):
            os.remove(init)
    if not a.llmc:
        lines.append("")
        lines.append("llm.c: no binary (--llmc or TC_LLMC), no column")
    if a.generate:  # generation tokens/s in the same run: bench/gpt2_generate.py
        th = int(a.threads.split(",")[0])
        cmd = [sys.executable, os.path.join(HERE, "gpt2_generate.py"), "--config", "124M",
               "--threads", str(th), "--rounds", str(a.generate)]
        g = subprocess.run(cmd, capture_output=True, text=True)
        lines += ["", "### Generation, 124M, batch 1, %d thread(s): "
                  "python3 bench/gpt2_generate.py --threads %d --rounds %d" % (th, th, a.generate),
                  "", "```"] + g.stdout.strip().splitlines() + ["```"]
        if g.returncode:
            print("gpt2_generate.py failed:\n%s" % g.stderr[-2000:], file=sys.stderr)
            failed = True
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
