#!/usr/bin/env python3
"""vocab_rows.py - issue 14's row kernels over a language model's vocabulary:
cross-entropy forward (mean over 256 rows of 50,257 logits against int class
ids: max, sum of exps and the one-hot pick per row) and log_softmax and
softmax over the same (256, 50257) logits, libtinyc next to PyTorch CPU with
the same thread count, each side in a process of its own, on the same inputs
(seeded); ms per eager call (libtinyc: graph, schedule from its cache,
kernels, result realized; PyTorch: the call), the median of the calls after
warm-up, and the largest difference of the results.

50,257 (GPT-2's vocabulary, 29 x 1,733) is divided by no vector's lanes:
the reduce runs in vectors over its whole steps and a scalar tail loop over
the rest (src/codegen/lower.c).

    python3 bench/vocab_rows.py [--threads 1,2] [--calls 15] [--classes 50257] [--lines FILE]

--lines writes bench/run.sh's lines for table.py ("vocab THREADS op=... ours_ms=... torch_ms=...
diff=... check=ok|FAIL classes=...").
"""
import argparse
import json
import os
import sys

from sides import finish, median_ms, run_side

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ROWS = 256
OPS = ("cross_entropy", "log_softmax", "softmax")


def inputs(classes):
    import numpy as np
    rng = np.random.default_rng(14)
    x = rng.standard_normal((ROWS, classes), dtype=np.float32) * 3
    y = rng.integers(0, classes, ROWS).astype(np.int32)
    return x, y


def side(who, classes, calls):
    """times every op on one side; prints a JSON line: {op: [ms, result]}"""
    import numpy as np
    x, y = inputs(classes)
    if who == "torch":
        import torch
        tx, ty = torch.from_numpy(x), torch.from_numpy(y).long()
        fns = {"cross_entropy": lambda: torch.nn.functional.cross_entropy(tx, ty),
               "log_softmax": lambda: torch.log_softmax(tx, -1),
               "softmax": lambda: torch.softmax(tx, -1)}
        value = lambda r: r.numpy()
    else:
        sys.path.insert(0, os.path.join(REPO, "python"))
        from tinyc import Tensor
        tx, ty = Tensor(x).realize(), Tensor(y).realize()
        fns = {"cross_entropy": lambda: tx.cross_entropy(ty).realize(),
               "log_softmax": lambda: tx.log_softmax(-1).realize(),
               "softmax": lambda: tx.softmax(-1).realize()}
        value = lambda r: r.numpy()
    out = {}
    for op in OPS:
        ms, r = median_ms(fns[op], calls)
        v = np.asarray(value(r), dtype=np.float64)
        out[op] = [ms, v.ravel()[:4096].tolist() if v.size > 1 else float(v)]
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--classes", type=int, default=50257)
    ap.add_argument("--lines", default="", help="also write run.sh's lines to this file")
    a = ap.parse_args()
    lines = []
    print("| threads | op, (%d, %d) | libtinyc ms | PyTorch ms | ratio | max abs diff |" % (ROWS, a.classes))
    print("|---|---|---|---|---|---|")
    bad = False
    for t in [int(s) for s in a.threads.split(",")]:
        ours, peer = (run_side("vocab_rows", who, t, a.classes, a.calls) for who in ("ours", "torch"))
        for op in OPS:
            (mo, vo), (mp, vp) = ours[op], peer[op]
            vo, vp = (vo if isinstance(vo, list) else [vo]), (vp if isinstance(vp, list) else [vp])
            diff = max(abs(p - q) for p, q in zip(vo, vp))
            bad |= not diff <= 1e-4
            print("| %d | %s | %.2f | %.2f | %.2fx | %.1e%s |" % (t, op, mo, mp, mp / mo, diff,
                                                               "" if diff <= 1e-4 else " WRONG"))
            lines.append("vocab %d op=%s ours_ms=%.4f torch_ms=%.4f diff=%.2g check=%s classes=%d"
                         % (t, op, mo, mp, diff, "ok" if diff <= 1e-4 else "FAIL", a.classes))
    finish(lines, a.lines, bad)


if __name__ == "__main__":
    main()
