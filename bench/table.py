#!/usr/bin/env python3
"""table.py - bench/run.sh's table: reads the result files run.sh wrote in
DIR and prints one Markdown table of ratios (to stdout, and to OUT if given).

    table.py DIR THREADS [OUT]

ratio = our speed / the peer's speed, whatever the unit: above 1 we are
faster (GFLOPS and GB/s: ours/peer; ms: peer/ours). Targets are issue #7's,
the matmul rows' issue #14's (0.9x of OpenBLAS).
The check column is the difference between our result and the peer's on the
same inputs (a fast wrong kernel must not look good); a failed one marks the
row WRONG and makes the exit status 1.
"""
import os
import platform
import re
import sys

DIR, THREADS = sys.argv[1], int(sys.argv[2])
OUT = sys.argv[3] if len(sys.argv) > 3 else ""


def lines(name):
    path = os.path.join(DIR, name)
    return open(path).read().splitlines() if os.path.exists(path) else []


def tagged(*names):
    """{(tag, case): [fields]} and the info lines of bench_ops/peers.py files"""
    out, info = {}, []
    for name in names:
        for line in lines(name):
            f = line.split()
            if len(f) >= 3 and f[0] in ("ours", "peer"):
                out[(f[0], f[1])] = f[2:]
            elif f and f[0] == "info":
                info.append(line[5:])
    return out, info


def columns(name):
    """rows of a bench_train_step-style file (header lines start with
    "model"), keyed by the first field"""
    rows = [l.split() for l in lines(name) if l.strip() and not l.startswith("model")]
    return {r[0]: r for r in rows}


ops, info = tagged("ops.txt", "peers.txt")
rows = []  # (benchmark, ours, peer, unit, ratio, target, met, check, peer_name)


def fmt(v):
    if v is None:
        return "-"
    return "%.3g" % v if abs(v) < 100 else "%.0f" % v


def add(name, ours, peer, unit, higher_better, target, check, peer_name):
    ratio = None
    if ours is not None and peer is not None and ours > 0 and peer > 0:
        ratio = ours / peer if higher_better else peer / ours
    met = "-"
    if target is not None:
        met = "n/a" if ratio is None else ("yes" if ratio >= target else "no")
    if "FAIL" in check:
        met = "WRONG"
    tgt = "-" if target is None else (">= %.1fx" % target if target != 1.0 else "> 1x")
    rows.append((name, fmt(ours), fmt(peer), unit, "-" if ratio is None else "%.2fx" % ratio,
                 tgt, met, check, peer_name))


def val(tag, case):
    f = ops.get((tag, case))
    return float(f[0]) if f else None


def chk(case):
    f = ops.get(("peer", case))
    return f[1] if f and len(f) > 1 else "-"


for n in (256, 512, 1024, 2048, 4096):  # issue #14: within 0.9x of OpenBLAS at every size
    c = "matmul%d" % n
    add("matmul %dx%d f32" % (n, n), val("ours", c), val("peer", c), "GFLOPS", True, 0.9, chk(c),
        "numpy (OpenBLAS)")
add("skinny, (64,768) @ (768,50304) f32", val("ours", "skinny_n"), val("peer", "skinny_n"),
    "GFLOPS", True, 0.9, chk("skinny_n"), "numpy (OpenBLAS)")
add("skinny, (128,50304) @ (50304,768) f32", val("ours", "skinny_k"), val("peer", "skinny_k"),
    "GFLOPS", True, 0.9, chk("skinny_k"), "numpy (OpenBLAS)")
add("x @ W.T, (256,256) @ (50304,256).T f32", val("ours", "matmul_wt"), val("peer", "matmul_wt"),
    "GFLOPS", True, 0.9, chk("matmul_wt"), "numpy (OpenBLAS)")
add("a.T @ b, (1024,1024) each, a stored (k,m) f32", val("ours", "matmul_tn"), val("peer", "matmul_tn"),
    "GFLOPS", True, 0.9, chk("matmul_tn"), "numpy (OpenBLAS)")
add("a.T @ b.T, (1024,1024) each f32", val("ours", "matmul_tt"), val("peer", "matmul_tt"),
    "GFLOPS", True, 0.9, chk("matmul_tt"), "numpy (OpenBLAS)")
add("heads merged, (4,12,64,64) -> (256,768) @ (768,768).T f32", val("ours", "matmul_heads"),
    val("peer", "matmul_heads"), "GFLOPS", True, 0.9, chk("matmul_heads"), "numpy (OpenBLAS)")
add("a*b+c, 16M f32", val("ours", "triad"), val("peer", "triad"), "GB/s", True, 0.9,
    chk("triad"), "C STREAM loop")
add("sum, 16M f32", val("ours", "sum"), val("peer", "sum"), "GB/s", True, 0.9, chk("sum"),
    "C STREAM loop")
for case, label in (("softmax", "softmax 4096x1024"), ("softmax64", "softmax 64x1024"),
                    ("layernorm", "layernorm 4096x1024"), ("std", "std 4096x1024"),
                    ("transpose", "transpose (512,4608) -> (4608,512)")):
    add(label, val("ours", case), val("peer", case), "ms", False, 1.0, chk(case), "PyTorch CPU")

ours_t, torch_t = columns("train_ours.txt"), columns("train_torch.txt")
for model, label in (("conv", "MNIST convnet step"), ("mlp", "MLP 784-128-10 Adam step")):
    o, t = ours_t.get(model), torch_t.get(model)
    check = "-"
    if t and len(t) > 4:  # step 1: forward only; steps 2-5: a loose bound (see train_step_torch.py)
        d1, d2 = float(t[3]), float(t[4])
        check = "loss relerr step 1 %.2g, 2-5 %.2g(%s)" % (
            d1, d2, "ok" if d1 <= 1e-4 and d2 <= 5e-2 else "FAIL")
    batch = o[1] if o else (t[1] if t else "?")
    kernels = ", %s kernels" % o[3] if o else ""
    add("%s (batch %s%s)" % (label, batch, kernels), float(o[2]) if o else None,
        float(t[2]) if t else None, "ms", False, 1.0, check, "PyTorch CPU")

for line in lines("resnet.txt"):  # resnet_train.py --lines: "resnet THREADS key=value ..."
    f = dict(t.split("=", 1) for t in line.split()[2:] if "=" in t)
    check = "loss relerr step 1 %s, 2-5 %s(%s)" % (f["d1"], f["d2"], f["check"])
    label = "ResNet-18 CIFAR step (batch %s, %s kernels, JIT)" % (f["batch"], f["kernels"])
    add(label, float(f["jit_ms"]), float(f["torch_ms"]), "ms", False, 1.0, check, "PyTorch CPU")
    add("ResNet-18 step, eager (no JIT)", float(f["eager_ms"]), float(f["torch_ms"]), "ms", False,
        1.0, check, "PyTorch CPU")
    add("ResNet-18 step peak memory, eager (JIT: %.0f MB)" % float(f["jit_peak_mb"]),
        float(f["peak_mb"]), float(f["torch_peak_mb"]), "MB", False, 1.0, "-", "PyTorch CPU")


for line in lines("vocab.txt"):  # vocab_rows.py --lines: "vocab THREADS op=... ours_ms=..."
    f = dict(t.split("=", 1) for t in line.split()[2:] if "=" in t)
    add("%s (256, %s), eager" % (f["op"], f["classes"]), float(f["ours_ms"]), float(f["torch_ms"]),
        "ms", False, 1.0, "maxabs=%s(%s)" % (f["diff"], f["check"]), "PyTorch CPU")

for line in lines("conv.txt"):  # conv_rows.py --lines: "conv THREADS name=... ours_ms=... torch_ms=... gflop=..."
    f = dict(t.split("=", 1) for t in line.split()[2:] if "=" in t)
    g = float(f["gflop"]) * 1e3
    add("conv %s" % f["name"].replace("_", " "), g / float(f["ours_ms"]), g / float(f["torch_ms"]), "GFLOPS",
        True, 0.9, "reldiff=%s(%s)" % (f["diff"], f["check"]), "PyTorch CPU")


def keyed(name, model):
    """the key=value fields of model's line in a bench_train_step --compile file"""
    for line in lines(name):
        f = line.split()
        if f and f[0] == model:
            return {k: float(v) for k, v in (t.split("=", 1) for t in f[1:] if "=" in t)}
    return {}


def info_row(name, value, unit, target, note):
    rows.append((name, fmt(value), "-", unit, "-", target, "-", note, "-"))


cold, warm = keyed("compile_cold.txt", "conv"), keyed("compile_warm.txt", "conv")
if cold:
    info_row("conv step compile, fresh TC_CACHEDIR (%d kernels built)" % cold["first_built"],
             cold["first_compile_ms"] * 1e-3, "s", "-",
             "first eager step: schedule %.0f ms, lower+render %.0f ms"
             % (cold["first_schedule_ms"], cold["first_lower_ms"]))
if warm:
    info_row("conv step compile, warm TC_CACHEDIR (new process, %d built)" % warm["first_built"],
             warm["first_compile_ms"], "ms", "no compiler run",
             "cache lookups and loads of %d kernels" % warm["kernels"])
    info_row("conv step scheduling (eager, per step)", warm["later_schedule_ms"], "ms", "milliseconds",
             "tc_counters.schedule_s")
    info_row("conv step lowering+rendering (eager, per step)", warm["later_lower_ms"], "ms",
             "milliseconds", "tc_counters.lower_s")
    info_row("conv step graph building etc. (eager, per step)", warm["later_other_ms"], "ms", "-",
             "wall - schedule - lower - compile - launch")
for model, label in (("conv", "MNIST convnet"), ("mlp", "MLP")):
    o = ours_t.get(model)
    if o and len(o) > 4:
        info_row("%s step peak memory (jit)" % label, float(o[4]), "MB", "-", "tc_counters.mem_peak")

jit = " ".join(lines("jit.txt"))
m = re.search(r"step of (\d+) kernels: jit replay .*?\(([\d.]+) us/kernel\), eager .*?\(([\d.]+) us/kernel\)",
              jit)
if m:
    replay, eager = float(m.group(2)), float(m.group(3))
    c = re.search(r"check (\S+)", jit)
    add("JIT replay overhead per kernel (%s-kernel chain)" % m.group(1), replay, eager, "us", False,
        None, c.group(1) if c else "-", "eager realize")

head = ("benchmark", "libtinyc", "peer", "unit", "ratio", "target", "met", "check", "peer is")
out = ["libtinyc benchmarks: %d thread(s) on both sides, %s, %d cores (%s)"
       % (THREADS, platform.machine(), os.cpu_count(), platform.node()), ""]
meta = dict(l.split(" ", 1) for l in lines("meta.txt") if " " in l)
if meta:
    out.append("- libtinyc %s; load average (1, 5, 15 min) before %s, after %s (above 0 before"
               " the run: other processes share the cores, ratios are noisier)"
               % (meta.get("commit", "?"), meta.get("load-before", "?"), meta.get("load-after", "?")))
    out.append("- OpenBLAS kernel set for numpy and PyTorch (both call OpenBLAS): %s"
               % meta.get("openblas-coretype", "?"))
    out.append("- the machine as libtinyc's CPU device read it (its plans follow this): %s"
               % (meta.get("machine") or "?"))
    try:
        busy = float(meta.get("load-before", "0").split()[0]) >= 0.5 * (os.cpu_count() or 1)
    except ValueError:
        busy = False
    if busy:
        out.append("- WARNING: the machine was busy before the run; with more than one thread,"
                   " PyTorch's OpenMP barriers suffer most (its small ops can get 10-50x slower);"
                   " --one-thread gives steadier ratios")
out += ["- " + i for i in info]
out += ["", "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
out += ["| " + " | ".join(r) + " |" for r in rows]
out += ["", "ratio = our speed / peer speed (>1: libtinyc faster); medians after warm-up;"
        " libtinyc ops are one-op tc_jit replays (kernel time, no scheduling, outputs reused);"
        " numpy writes into out=, PyTorch allocates its outputs as a user's call does."]
text = "\n".join(out)
print(text)
if OUT:
    with open(OUT, "w") as f:
        f.write(text + "\n")
sys.exit(1 if any(r[6] == "WRONG" for r in rows) else 0)
