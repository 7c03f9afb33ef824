#!/usr/bin/env python3
"""gpt2.py - GPT-2 trained on Debian's fortunes and sampled through a KV
cache, with tinyc from Python: the model, data and recipe of examples/gpt2.c.

    python3 examples/gpt2.py [--layers 4] [--heads 4] [--width 128] [--context 128]
                             [--vocab 256] [--config 124M] [--steps 200] [--batch 8]
                             [--seq 64] [--lr 1e-3] [--seed 1337] [--val-every 50]
                             [--val-batches 8] [--sample 300] [--prompt '%\\n']
                             [--temperature 0.8] [--top-k 40] [--ids] [--load FILE]
                             [--save FILE] [--data /usr/share/games/fortunes] [--jit 1]

The model (GPT2 below) names its tensors as Hugging Face's GPT-2 does
(wte.weight, h.0.attn.c_attn.weight, ..., ln_f.bias; the projections are
Conv1D weights stored (in, out)), so get_state_dict(model) is a GPT-2 state
dict and safetensors files move between this script, examples/gpt2.c and
transformers. GPT2(..., seed) draws the same initial weights as the C
example's gpt2_init for the same seed (the same tc_normal stream, drawn in
the same order).

generate(tokens, max_new_tokens, temperature, top_k, seed, use_cache) runs
one position a step against per-layer K/V caches of a fixed shape, each
step writing its K and V rows in place with index_copy_ at the position
given as a tensor (a TinyJit replays the step from its third call on, each
replay writing the new row), or, with use_cache=False,
the whole sequence again each step (the reference). The sampler is the C
example's (same splitmix64 stream, same top-k rule).

Data and training as in the C example: the fortune files cut into fortunes,
every tenth one held out for validation, byte tokens, AdamW (weight decay 0.1
on the matrices only), gradients clipped to norm 1, one TinyJit step.
Run from a checkout (python/ is added to sys.path) or with tinyc installed;
TINYC_LIB may point at libtinyc.so.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

from tinyc import Tensor, TinyJit, dtypes, nn, no_grad  # noqa: E402
from tinyc.nn.state import get_state_dict, load_state_dict, safe_load, safe_save  # noqa: E402

MASK64 = (1 << 64) - 1


# ---- the model -------------------------------------------------------------------

def _normal(shape, std):
    return Tensor.normal(*shape, mean=0.0, std=std).contiguous().realize()


class Embedding:
    """a table of rows, weight (n, C) ~ N(0, 0.02); (idx) -> weight[idx]"""

    def __init__(self, n, C):
        self.weight = _normal((n, C), 0.02)


class Conv1D:
    """Hugging Face's Conv1D: y = x @ weight + bias, weight (in, out) ~ N(0, std)"""

    def __init__(self, n_in, n_out, std=0.02):
        self.weight = _normal((n_in, n_out), std)
        self.bias = Tensor(np.zeros(n_out, np.float32))

    def __call__(self, x):
        return x @ self.weight + self.bias


class Attention:
    def __init__(self, C, n_head, proj_std):
        self.c_attn, self.c_proj, self.n_head = Conv1D(C, 3 * C), Conv1D(C, C, proj_std), n_head

    def heads(self, x):
        """q, k, v (B, H, T, hd) of x (B, T, C)"""
        B, T, C = x.shape
        qkv = self.c_attn(x)  # (B, T, 3C)
        return [qkv[:, :, i * C:(i + 1) * C].reshape(B, T, self.n_head, C // self.n_head)
                .permute(0, 2, 1, 3) for i in range(3)]

    def out(self, y):
        """c_proj of the heads y (B, H, T, hd) merged back to (B, T, C)"""
        B, H, T, hd = y.shape
        return self.c_proj(y.permute(0, 2, 1, 3).contiguous().reshape(B, T, H * hd))

    def __call__(self, x):  # the whole sequence, causal
        q, k, v = self.heads(x)
        return self.out(q.scaled_dot_product_attention(k, v, is_causal=True))

    def decode(self, x, cache, pos, upto):
        """one position x (1, 1, C) against cache = [K, V] (1, H, S, hd): its k, v
        written at row pos (an int tensor (1,): one kernel writes both rows, in
        place), q against the rows upto (1, 1, 1, S) marks"""
        q, k, v = self.heads(x)
        cache[0].index_copy_(2, pos, k)
        cache[1].index_copy_(2, pos, v)
        return self.out(q.scaled_dot_product_attention(cache[0], cache[1], attn_mask=upto))


class MLP:
    def __init__(self, C, proj_std):
        self.c_fc, self.c_proj = Conv1D(C, 4 * C), Conv1D(4 * C, C, proj_std)

    def __call__(self, x):
        return self.c_proj(self.c_fc(x).gelu(approximate="tanh"))


class Block:
    def __init__(self, C, n_head, proj_std):
        # built in the order gpt2_init draws: c_attn, attn.c_proj, c_fc, mlp.c_proj
        self.ln_1 = nn.LayerNorm(C)
        self.attn = Attention(C, n_head, proj_std)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = MLP(C, proj_std)

    def __call__(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def decode(self, x, cache, pos, upto):
        x = x + self.attn.decode(self.ln_1(x), cache, pos, upto)
        return x + self.mlp(self.ln_2(x))


class GPT2:
    """GPT-2 with Hugging Face's tensor names; weights from tc_manual_seed(seed)"""

    def __init__(self, n_layer=4, n_head=4, n_embd=128, n_ctx=128, vocab=256, seed=1337):
        if n_embd % n_head:
            raise ValueError("gpt2: width %d is not a multiple of heads %d" % (n_embd, n_head))
        self.n_layer, self.n_head, self.n_embd, self.n_ctx, self.vocab = \
            n_layer, n_head, n_embd, n_ctx, vocab
        Tensor.manual_seed(seed)
        proj_std = 0.02 / math.sqrt(2 * n_layer)
        self.wte = Embedding(vocab, n_embd)
        self.wpe = Embedding(n_ctx, n_embd)
        self.h = [Block(n_embd, n_head, proj_std) for _ in range(n_layer)]
        self.ln_f = nn.LayerNorm(n_embd)

    def parameters(self):
        return list(get_state_dict(self).values())

    def head(self, x):
        return self.ln_f(x) @ self.wte.weight.transpose(0, 1)  # tied to wte: (B, T, V)

    def forward(self, idx):
        """logits (B, T, V) of token ids idx (B, T)"""
        T = idx.shape[1]
        if not 1 <= T <= self.n_ctx:
            raise ValueError("gpt2: %d tokens do not fit the context of %d" % (T, self.n_ctx))
        x = self.wte.weight[idx] + self.wpe.weight[:T]
        for b in self.h:
            x = b(x)
        return self.head(x)

    __call__ = forward

    def loss(self, idx, targets):
        logits = self.forward(idx)
        return logits.reshape(-1, self.vocab).sparse_categorical_crossentropy(
            targets.reshape(-1))

    def save(self, path):
        safe_save(get_state_dict(self), path)

    def load(self, path):
        """weights from a safetensors file with these names (also behind
        "transformer."); other entries of the file are ignored"""
        sd = {k[len("transformer."):] if k.startswith("transformer.") else k: v
              for k, v in safe_load(path).items()}
        load_state_dict(self, {k: v for k, v in sd.items() if k in get_state_dict(self)})

    # ---- generation ----

    def _decode_jit(self, S):
        """a TinyJit step (token (1, 1), position (1,)) -> logits (1, V) over new
        zeroed caches of S positions"""
        H, hd = self.n_head, self.n_embd // self.n_head
        caches = [[Tensor.zeros(1, H, S, hd).contiguous().realize() for _ in range(2)]
                  for _ in range(self.n_layer)]
        rows_r = Tensor.arange(S, dtype=dtypes.int32).reshape(1, 1, 1, S)

        def step(tok, pos):
            upto = rows_r <= pos.reshape(1, 1, 1, 1)
            x = self.wte.weight[tok] + self.wpe.weight[pos]  # (1, 1, C)
            for b, cache in zip(self.h, caches):
                x = b.decode(x, cache, pos, upto)
            logits = self.head(x).reshape(1, self.vocab)
            Tensor.realize(logits, *[t for c in caches for t in c])
            return logits

        return TinyJit(step)

    def generate(self, tokens, max_new_tokens, temperature=0.0, top_k=0, seed=0,
                 use_cache=True, logits_out=None, times_out=None):
        """tokens (a list of ids) followed by max_new_tokens new ones (the new
        ones returned as a list); logits_out / times_out (lists) receive each
        new token's logits and the seconds its step took"""
        n = len(tokens)
        if n < 1 or max_new_tokens < 0 or n + max_new_tokens > self.n_ctx:
            raise ValueError("gpt2: %d prompt tokens + %d new ones must be 1..context %d"
                             % (n, max_new_tokens, self.n_ctx))
        if any(not 0 <= t < self.vocab for t in tokens):
            raise ValueError("gpt2: the prompt has ids outside [0, %d)" % self.vocab)
        if max_new_tokens == 0:
            return []
        S, seq, rng, out = n + max_new_tokens, list(tokens), seed & MASK64, []
        jit = self._decode_jit(S) if use_cache else None
        with no_grad():  # no autograd history
            for p in range(0 if use_cache else n - 1, S - 1):
                t0 = time.perf_counter()
                if use_cache:
                    row = jit(Tensor([[seq[p]]], dtype=dtypes.int32),
                              Tensor([p], dtype=dtypes.int32)).numpy()[0]
                else:
                    idx = np.zeros((1, S), np.int32)
                    idx[0, :p + 1] = seq[:p + 1]
                    row = self.forward(Tensor(idx))[:, p].numpy()[0]
                if p < n - 1:
                    continue  # a prompt position: only its K and V matter
                rng, nxt = sample(row, temperature, top_k, rng)
                seq.append(nxt)
                out.append(nxt)
                if logits_out is not None:
                    logits_out.append(row)
                if times_out is not None:
                    times_out.append(time.perf_counter() - t0)
        return out


def splitmix64(state):
    """(new state, output) of splitmix64"""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def sample(logits, temperature, top_k, rng):
    """(new rng state, token) as gpt2_sample in C: greedy for temperature <= 0,
    else softmax(logits / temperature) over the top_k largest (ties kept)"""
    best = int(np.argmax(logits))
    if temperature <= 0:
        return rng, best
    cut = -np.inf
    if 0 < top_k < len(logits):
        cut = np.sort(logits)[::-1][top_k - 1]
    keep = np.nonzero(logits >= cut)[0]
    w = np.exp((logits[keep].astype(np.float64) - float(logits[best])) / temperature)
    rng, z = splitmix64(rng)
    u = (z >> 11) * 2.0 ** -53 * float(w.sum())
    i = int(np.searchsorted(np.cumsum(w), u, side="right"))
    return rng, int(keep[min(i, len(keep) - 1)])


# ---- data ------------------------------------------------------------------------

def load_corpus(data_dir):
    """(train bytes, val bytes, files): every fortune file of data_dir (no dot
    in the name, not a link) in name order, cut into fortunes (each up to and
    with its "%" line); every tenth fortune to val"""
    train, val, k, files = [], [], 0, 0
    for name in sorted(os.listdir(data_dir)):
        path = os.path.join(data_dir, name)
        if "." in name or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            text = f.read()
        files += 1
        start = 0
        for i in range(len(text)):
            at_end = i == len(text) - 1
            is_sep = text[i] == ord("%") and (i == 0 or text[i - 1] == ord("\n")) and \
                (at_end or text[i + 1] == ord("\n"))
            if not is_sep and not at_end:
                continue
            end = i + 2 if is_sep and not at_end else len(text)
            if end <= start:
                continue
            (val if k % 10 == 9 else train).append(text[start:end])
            k, start = k + 1, end
    if not files or not val:
        raise SystemExit("gpt2: no fortune files in %s (apt-get install fortunes)" % data_dir)
    return (np.frombuffer(b"".join(train), np.uint8), np.frombuffer(b"".join(val), np.uint8),
            files)


def windows(text, offs, T):
    """x, y (B, T) int32: the windows at offs and the bytes after each"""
    idx = np.asarray(offs)[:, None] + np.arange(T + 1)[None, :]
    w = text[idx].astype(np.int32)
    return Tensor(w[:, :-1].copy()), Tensor(w[:, 1:].copy())


# ---- training --------------------------------------------------------------------

def make_step(model, lr, use_jit):
    """the training step (x, y) -> (loss, gradient norm before clipping):
    AdamW with weight decay 0.1 on the matrices, none on the rest, gradients
    clipped to norm 1, everything realized in one tc_realize"""
    params = model.parameters()
    decay = nn.optim.AdamW([p for p in params if p.ndim == 2], lr=lr, weight_decay=0.1)
    nodecay = nn.optim.AdamW([p for p in params if p.ndim != 2], lr=lr, weight_decay=0.0)

    def step(x, y):
        decay.zero_grad()
        nodecay.zero_grad()
        loss = model.loss(x, y)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(params, 1.0)
        Tensor.realize(loss, norm, *decay.schedule_step(), *nodecay.schedule_step())
        return loss, norm

    return TinyJit(step) if use_jit else step


def validate(model, val, a):
    total = 0.0
    span = len(val) - a.seq - 1
    with no_grad():
        for k in range(a.val_batches):
            offs = [(k * a.batch + b) * span // (a.val_batches * a.batch) for b in range(a.batch)]
            total += model.loss(*windows(val, offs, a.seq)).item()
    return total / a.val_batches


def train(model, train_text, val, a):
    step_fn = make_step(model, a.lr, a.jit)
    rng, tokens, busy, t_all = a.seed, 0, 0.0, time.perf_counter()
    for step in range(1, a.steps + 1):
        offs = []
        for _ in range(a.batch):
            rng, z = splitmix64(rng)
            offs.append(z % (len(train_text) - a.seq - 1))
        x, y = windows(train_text, offs, a.seq)
        t0 = time.perf_counter()
        loss, norm = step_fn(x, y)
        lv, nv = loss.item(), norm.item()
        dt = time.perf_counter() - t0
        if step > 2:  # 1 and 2 compile and capture
            tokens, busy = tokens + a.batch * a.seq, busy + dt
        print("step %4d/%d  loss %.4f  norm %.3f  %7.1f ms  %7.0f tok/s"
              % (step, a.steps, lv, nv, 1e3 * dt, a.batch * a.seq / dt), flush=True)
        if step % a.val_every == 0 or step == a.steps:
            print("step %4d/%d  val loss %.4f" % (step, a.steps, validate(model, val, a)),
                  flush=True)
    if busy:
        print("trained %d steps in %.1f s; %.0f tok/s after the first two steps"
              % (a.steps, time.perf_counter() - t_all, tokens / busy))


# ---- main ------------------------------------------------------------------------

def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--config", choices=["124M"], help="GPT-2 small: 12 layers, 12 heads, "
                   "width 768, context 1024")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=None, help="tokens a window (min(64, context))")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--val-every", type=int, default=50)
    p.add_argument("--val-batches", type=int, default=8)
    p.add_argument("--sample", type=int, default=300)
    p.add_argument("--prompt", default="%\n")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=40)
    p.add_argument("--ids", action="store_true", help="print the sample as token ids")
    p.add_argument("--load")
    p.add_argument("--save")
    p.add_argument("--data", default="/usr/share/games/fortunes")
    p.add_argument("--jit", type=int, default=1)
    a = p.parse_args(argv)
    if a.config == "124M":
        a.layers, a.heads, a.width, a.context = 12, 12, 768, 1024
    a.seq = min(64, a.context) if a.seq is None else a.seq
    if a.steps < 0 or a.batch < 1 or not 1 <= a.seq <= a.context or a.val_every < 1 or \
            a.val_batches < 1 or a.sample < 0:
        p.error("steps >= 0, batch, val-every, val-batches >= 1, 1 <= seq <= context, "
                "sample >= 0")
    if a.vocab < 256 and (a.steps or a.sample):
        p.error("byte-level text needs --vocab >= 256")
    return a


def main(argv=None):
    a = parse(argv)
    model = GPT2(a.layers, a.heads, a.width, a.context, a.vocab, seed=a.seed)
    if a.load:
        model.load(a.load)
    n = sum(p.numel() for p in model.parameters())
    print("GPT-2: %d layers, %d heads, width %d, context %d, vocab %d: %.2fM parameters"
          % (a.layers, a.heads, a.width, a.context, a.vocab, n / 1e6))
    if a.steps:
        train_text, val, files = load_corpus(a.data)
        print("data: %d files of %s, %d train / %d val bytes; %d steps of %d x %d tokens, "
              "AdamW lr %g, seed %d" % (files, a.data, len(train_text), len(val), a.steps,
                                         a.batch, a.seq, a.lr, a.seed), flush=True)
        train(model, train_text, val, a)
    if a.save:
        model.save(a.save)
    if a.sample:
        prompt = list(a.prompt.encode())
        times = []
        t0 = time.perf_counter()
        new = model.generate(prompt, a.sample, a.temperature, a.top_k, a.seed, times_out=times)
        dt = time.perf_counter() - t0
        print("---- %d tokens after %d of prompt (temperature %g, top-k %d) ----"
              % (a.sample, len(prompt), a.temperature, a.top_k))
        if a.ids or a.vocab > 256:
            print(" ".join(map(str, new)))
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(bytes(prompt + new) + b"\n")
            sys.stdout.buffer.flush()
        print("---- generated %d tokens in %.2f s: %.1f tok/s (KV cache, batch 1) ----"
              % (a.sample, dt, a.sample / dt))


if __name__ == "__main__":
    main()
