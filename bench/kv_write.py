#!/usr/bin/env python3
"""kv_write.py - the cost of writing one token's K and V rows into a KV
cache, per token, at GPT-2 124M's shapes (12 layers, 12 heads, head size
64) for caches of S positions: libtinyc's indexed store (index_copy_, what
examples/gpt2.py does: one kernel a layer writes both rows) next to the
scheme it replaced (cache.assign(where(row == p, new, cache)): the whole
cache rewritten every token) and to PyTorch's index_copy_ on preallocated
caches and torch.cat of a growing cache (bench/gpt2_torch.py's loop), in the
same run, one thread each.

    python3 bench/kv_write.py [--sizes 64,256,1024] [--steps 200] [--threads 1]

Each libtinyc step is a TinyJit replay (the rows come out of a (1, 1, 3C)
qkv input as in the model, the position is a (1,) int32 input); times are
the median of the steps after warm-up, in microseconds per token for all
12 layers. Each scheme's caches are checked against torch's after the run.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="64,256,1024")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args()


ARGS = parse()
os.environ["TC_THREADS"] = str(ARGS.threads)
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
sys.path.insert(0, os.path.join(REPO, "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tinyc import Tensor, TinyJit, dtypes  # noqa: E402

L, H, HD = 12, 12, 64
C = H * HD


def heads(qkv, part):
    """part 1 (k) or 2 (v) of qkv (1, 1, 3C) as (1, H, 1, hd)"""
    return qkv[:, :, part * C:(part + 1) * C].reshape(1, 1, H, HD).permute(0, 2, 1, 3)


def tinyc_scheme(S, scheme):
    """a TinyJit step (qkvs, pos) writing each layer's rows, and its caches"""
    caches = [Tensor.zeros(1, H, S, HD).contiguous().realize() for _ in range(2 * L)]
    rows = Tensor.arange(S, dtype=dtypes.int32).reshape(1, 1, S, 1)

    def step(qkv, pos):
        is_row = rows == pos.reshape(1, 1, 1, 1)
        for layer in range(L):
            x = qkv[layer:layer + 1]  # each layer its own qkv row
            for part in (1, 2):
                cache, new = caches[2 * layer + part - 1], heads(x, part)
                if scheme == "index_copy_":
                    cache.index_copy_(2, pos, new)
                else:
                    cache.assign(is_row.where(new, cache))
        Tensor.realize(*caches)

    return TinyJit(step), caches


def time_tinyc(S, scheme, qkvs):
    jit, caches = tinyc_scheme(S, scheme)
    times = []
    for i, q in enumerate(qkvs):
        qt, pt = Tensor(q), Tensor(np.array([i % S], np.int32))
        t0 = time.perf_counter()
        jit(qt, pt)
        times.append(time.perf_counter() - t0)
    return float(np.median(times[3:])) * 1e6, [c.numpy() for c in caches]


def time_torch(S, scheme, qkvs):
    kv = [torch.zeros(1, H, S, HD) for _ in range(2 * L)] if scheme == "index_copy_" else None
    cat = [None] * (2 * L)
    times = []
    for i, q in enumerate(qkvs):
        qt = torch.tensor(q)
        t0 = time.perf_counter()
        for layer in range(L):
            x = qt[layer:layer + 1]
            for part in (1, 2):
                new, k = heads(x, part), 2 * layer + part - 1
                if kv is not None:
                    kv[k].index_copy_(2, torch.tensor([i % S]), new)
                else:  # grown by one row a token, restarted when full
                    cat[k] = new if cat[k] is None or cat[k].shape[2] == S else \
                        torch.cat([cat[k], new], 2)
        times.append(time.perf_counter() - t0)
    return float(np.median(times[3:])) * 1e6, [c.numpy() for c in (kv or cat)]


def main():
    torch.set_num_threads(ARGS.threads)
    rng = np.random.default_rng(0)
    print("K and V rows of one token into 12 layers' caches (1, 12, S, 64) float32, "
          "%d thread(s); microseconds a token (median of %d steps); load average %s"
          % (ARGS.threads, ARGS.steps, open("/proc/loadavg").read().split()[0]))
    print("%6s %22s %22s %18s %18s" % ("S", "tinyc index_copy_", "tinyc where+assign",
                                       "torch index_copy_", "torch cat"))
    ok = True
    for S in (int(s) for s in ARGS.sizes.split(",")):
        qkvs = [rng.standard_normal((L, 1, 3 * C)).astype(np.float32) for _ in range(ARGS.steps)]
        ic, c_ic = time_tinyc(S, "index_copy_", qkvs)
        wh, c_wh = time_tinyc(S, "where", qkvs)
        tic, c_tic = time_torch(S, "index_copy_", qkvs)
        tcat, _ = time_torch(S, "cat", qkvs)
        ok = ok and all(np.array_equal(a, b) for a, b in zip(c_ic, c_tic)) and \
            all(np.array_equal(a, b) for a, b in zip(c_wh, c_tic))
        print("%6d %22.1f %22.1f %18.1f %18.1f" % (S, ic, wh, tic, tcat))
    print("caches: %s" % ("the same as torch's" if ok else "DIFFER from torch's"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
