#!/usr/bin/env python3
"""scale.py - issue 13's scaling table: what the compiler itself costs as
models grow, next to tinygrad v0.9.2 (CLANG) on the same MLP where it is
present. One command; prints Markdown and writes it to --out.

    python3 bench/scale.py [--build DIR] [--layers 8,32,128,512] [--max-layers N]
                           [--row-timeout S] [--out FILE] [--skip null,cold,steps,peer]
                           [--tinygrad PATH | --no-tinygrad] [--quick] [--instructions]

Tables (the models are bench/scale_models.py's, one training step each:
forward, loss, backward, Adam, realized together):
 1. NULL device (TC_DEVICE=NULL: scheduled, lowered and rendered as for the
    CPU, never compiled or run), the first step in a fresh process, for the
    MLP at each L, ResNet-18 (CIFAR, batch 16) and GPT-2 124M (T 64, B 4;
    the embedding a gather): graph nodes the schedule walked,
    kernels, schedule ms, lower ms (codegen: AST -> UOps, render: UOps ->
    C), the rest of the step's wall time (front end: building the graph,
    the optimizer's update), and schedule microseconds per node. tinygrad:
    the time of `loss.schedule(*opt.schedule_step())` for the same MLP step
    (scheduling only, nothing compiled), its kernel count, and our speed
    relative to it (tinygrad ms / ours).
 1b. With --instructions (valgrind present): the instructions
    tc_schedule_create runs per graph node for each MLP, counted by
    callgrind: deterministic, apart from caches and load, so it shows
    whether the scheduler's work is linear in the graph where the
    microseconds per node also carry the memory hierarchy (a 512-layer
    step's graph outgrows the last-level cache).
 2. CPU, cold: the first step from an empty TC_CACHEDIR (model creation and
    its initialisation kernels not counted) for the 4-layer MLP, the
    beautiful_mnist convnet (bench_train_step --compile 1, batch 512) and
    GPT-2: its wall time, the kernels built, the compile time, and the
    slowest compiler run, as timed in the step by bench/cc_timed.sh (the
    compilers run in parallel there) and again alone afterwards at the
    runtime's flags (read from src/runtime/cpu_cc.c), with its source's lines
    of C, and the most lines of C any compiled source had: a run compiles a
    batch of kernels in one source, so these are batches, not kernels
    (bench/kernel_survey.py times each kernel alone) (bench_train_step
    is one process, so its log also holds the small initialisation
    kernels). tinygrad: the MLP's first step with CACHELEVEL=0.
 3. CPU, warm cache: eager steps (no JIT; the median of steps 3..5, or the
    third step for GPT-2) with the scheduling and lowering ms of one, next
    to TinyJit replays (median of replays 1..4; GPT-2: replay 1), for the MLP at L=4
    and L=32, beautiful_mnist (bench_train_step --jit 0 / 1) and GPT-2.
    tinygrad: the MLP's eager steps the same way.
Every row runs in a subprocess of its own, killed after --row-timeout
seconds (default 600; the row then says so). The MLP rows stop at the
first L that times out (larger ones would too) and --max-layers bounds L. A row that fails says why. --quick
leaves out the ResNet-18 and GPT-2 rows; --skip leaves out tables (null,
cold, steps) or the tinygrad runs (peer).
--tinygrad PATH (default: $TINYGRAD_PATH, else /work/peers/tinygrad-0.9.2
if it exists) is put on PYTHONPATH for the peer rows, run with CLANG=1 and
CACHELEVEL=0 (no kernel cache on disk); without one the peer columns say
"absent". tinygrad is never imported by libtinyc's own rows.
The figures depend on the machine's load: the header prints the load
average before and after.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
DEFAULT_TG = "/work/peers/tinygrad-0.9.2"


# ---- rows (run in a subprocess: `scale.py --row KIND [ARG]`) ---------------

def _ours():
    sys.path.insert(0, HERE)
    import scale_models
    from tinyc import GlobalCounters, Tensor, TinyJit, nn
    return scale_models, GlobalCounters, Tensor, TinyJit, nn


def _build(sm, T, nn, model):
    if model.startswith("mlp"):
        return sm.mlp(T, nn, int(model[3:]))
    if model == "resnet18":
        return sm.resnet18(T, nn)
    if model == "gpt2":
        return sm.gpt2(T, nn)
    raise ValueError("unknown model %r" % model)


def _counters(GC):
    return {f: getattr(GC, f) for f in ("kernel_count", "graph_nodes", "schedule_s", "lower_s",
                                        "codegen_s", "render_s", "compile_s", "launch_s",
                                        "compile_count")}


def _delta(a, b):
    return {k: b[k] - a[k] for k in a}


def _timed_step(m, ins, GC):
    """(wall seconds, counter deltas) of one step, the loss read back"""
    c0, t0 = _counters(GC), time.perf_counter()
    m.step(*ins).numpy()
    return time.perf_counter() - t0, _delta(c0, _counters(GC))


def row_null(model):
    """table 1, ours: the first step on the NULL device"""
    sm, GC, T, _, nn = _ours()
    m = _build(sm, T, nn, model)
    m.realize_state()
    ins = [t.realize() for t in m.inputs()]
    wall, d = _timed_step(m, ins, GC)
    return {"nodes": d["graph_nodes"], "kernels": d["kernel_count"],
            "schedule_ms": d["schedule_s"] * 1e3, "lower_ms": d["lower_s"] * 1e3,
            "codegen_ms": d["codegen_s"] * 1e3, "render_ms": d["render_s"] * 1e3,
            "other_ms": (wall - d["schedule_s"] - d["lower_s"] - d["compile_s"]
                         - d["launch_s"]) * 1e3, "wall_ms": wall * 1e3,
            "built": d["compile_count"]}


def row_cold(model):
    """table 2, ours: the first step from the empty TC_CACHEDIR the driver made"""
    sm, GC, T, _, nn = _ours()
    m = _build(sm, T, nn, model)
    m.realize_state()
    ins = [t.realize() for t in m.inputs()]
    keep = os.environ.get("TC_CC_KEEP")
    if keep and os.path.exists(os.path.join(keep, "times.txt")):
        os.remove(os.path.join(keep, "times.txt"))  # the initialisation kernels' compiles
    wall, d = _timed_step(m, ins, GC)
    return {"kernels": d["kernel_count"], "built": d["compile_count"], "first_s": wall,
            "compile_s": d["compile_s"], "schedule_s": d["schedule_s"], "lower_s": d["lower_s"]}


def row_steps(model, eager_steps, jit_calls):
    """table 3, ours: eager steps, then TinyJit replays (warm kernel cache)"""
    sm, GC, T, TinyJit, nn = _ours()
    m = _build(sm, T, nn, model)
    m.realize_state()
    ins = [t.realize() for t in m.inputs()]
    eager = [_timed_step(m, ins, GC) for _ in range(eager_steps)]
    jit = TinyJit(m.step)
    replays = []
    for i in range(jit_calls):
        t0 = time.perf_counter()
        jit(*ins).numpy()
        if i >= 2:  # call 1 runs the step, call 2 captures it
            replays.append(time.perf_counter() - t0)
    late = eager[2:] if len(eager) > 2 else eager[-1:]
    return {"kernels": eager[-1][1]["kernel_count"],
            "eager_ms": statistics.median(w for w, _ in late) * 1e3,
            "eager_schedule_ms": statistics.median(d["schedule_s"] for _, d in late) * 1e3,
            "eager_lower_ms": statistics.median(d["lower_s"] for _, d in late) * 1e3,
            "jit_ms": statistics.median(replays) * 1e3 if replays else None}


def _tinygrad():
    sys.path.insert(0, HERE)
    import scale_models
    from tinygrad import Tensor, nn
    return scale_models, Tensor, nn


def row_tg_schedule(model):
    """table 1, tinygrad: scheduling the MLP step (nothing compiled or run)"""
    sm, T, nn = _tinygrad()
    m = _build(sm, T, nn, model)
    m.realize_state()
    ins = [t.realize() for t in m.inputs()]
    out = m.lazy_step(*ins)  # building the graph is not scheduling: not timed
    t0 = time.perf_counter()
    sched = out[0].schedule(*out[1:])
    dt = time.perf_counter() - t0
    kernels = sum(1 for si in sched if si.ast.op.name == "KERNEL")  # copies excluded
    return {"schedule_ms": dt * 1e3, "kernels": kernels, "items": len(sched)}


def row_tg_cold(model):
    sm, T, nn = _tinygrad()
    m = _build(sm, T, nn, model)
    m.realize_state()
    ins = [t.realize() for t in m.inputs()]
    t0 = time.perf_counter()
    m.step(*ins).numpy()
    return {"first_s": time.perf_counter() - t0}


def row_tg_steps(model, eager_steps):
    sm, T, nn = _tinygrad()
    m = _build(sm, T, nn, model)
    m.realize_state()
    ins = [t.realize() for t in m.inputs()]
    walls = []
    for _ in range(eager_steps):
        t0 = time.perf_counter()
        m.step(*ins).numpy()
        walls.append(time.perf_counter() - t0)
    late = walls[2:] if len(walls) > 2 else walls[-1:]
    return {"eager_ms": statistics.median(late) * 1e3}


ROWS = {"null": row_null, "cold": row_cold, "steps": row_steps, "tg-schedule": row_tg_schedule,
        "tg-cold": row_tg_cold, "tg-steps": row_tg_steps}


def run_row(argv):
    """`--row KIND ARGS...`: one row, printed as a line "ROW <json>". The work
    runs in a thread with a large stack (tinygrad recurses on deep graphs)."""
    import threading
    sys.setrecursionlimit(1 << 20)
    threading.stack_size(1 << 29)
    kind, args = argv[0], [int(a) if a.isdigit() else a for a in argv[1:]]
    out = {}

    def work():
        try:
            out["row"] = ROWS[kind](*args)
        except Exception as e:  # reported by the driver
            out["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")

    t = threading.Thread(target=work)
    t.start()
    t.join()
    print("ROW " + json.dumps(out), flush=True)
    return 0 if "row" in out else 1


# ---- the driver ----------------------------------------------------------------

class Runner:
    def __init__(self, args):
        self.args = args
        self.lib = os.path.join(args.build, "libtinyc.so")
        self.tg = None if args.no_tinygrad else (args.tinygrad or os.environ.get("TINYGRAD_PATH")
                                                 or (DEFAULT_TG if os.path.isdir(DEFAULT_TG)
                                                     else None))
        if self.tg and not os.path.isdir(os.path.join(self.tg, "tinygrad")):
            print("scale.py: no tinygrad package under %s: peer columns skipped" % self.tg,
                  file=sys.stderr)
            self.tg = None
        self.warm_cache = os.path.join(args.build, "kcache-scale")

    def env(self, peer=False, **extra):
        e = dict(os.environ)
        for k in ("TC_DEVICE", "TC_DEBUG", "TC_BEAM", "TC_NOOPT", "TC_NOFUSE", "TC_SAVE_SCHEDULE"):
            e.pop(k, None)
        if peer:
            e.update(PYTHONPATH=os.pathsep.join([self.tg, HERE]), CLANG="1", CACHELEVEL="0")
        else:
            e.update(PYTHONPATH=os.pathsep.join([os.path.join(REPO, "python"), HERE]),
                     TINYC_LIB=self.lib, TC_CACHEDIR=self.warm_cache)
        e.update(extra)
        return e

    def run(self, cmd, env, what):
        """(stdout, error): runs cmd in a process group killed after the row limit"""
        limit = self.args.row_timeout
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            print("  %-34s timeout (> %d s)" % (what, limit), file=sys.stderr, flush=True)
            return None, "timeout (> %d s)" % limit
        dt = time.perf_counter() - t0
        if p.returncode != 0 and "ROW " not in out:
            last = (err.strip().splitlines() or ["exit status %d" % p.returncode])[-1]
            print("  %-34s failed: %s" % (what, last), file=sys.stderr, flush=True)
            return None, "failed: " + last[:120]
        print("  %-34s %.1f s" % (what, dt), file=sys.stderr, flush=True)
        return out, None

    def row(self, kind, *args, peer=False, wrap=(), **env):
        """one row in a subprocess (under the command wrap, e.g. valgrind, when given)"""
        out, err = self.run(list(wrap) + [PY, os.path.abspath(__file__), "--row", kind] +
                            [str(a) for a in args], self.env(peer, **env),
                            "%s%s %s" % ("tinygrad " if peer else "", kind,
                                         " ".join(map(str, args))))
        if err:
            return {"error": err}
        line = [l for l in out.splitlines() if l.startswith("ROW ")][-1]
        res = json.loads(line[4:])
        return res["row"] if "row" in res else {"error": "failed: " + res["error"][:120]}


def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, int):
        return "{:,}".format(v)
    if abs(v) >= 1000:
        return "{:,.0f}".format(v)
    return ("%." + str(digits) + "f") % v


def ratio(peer, ours):
    """peer time / our time: above 1 we are faster (3 significant digits)"""
    return "%.3gx" % (peer / ours) if peer and ours else "-"


def table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def peer_schedule(r, args, model):
    """tinygrad's cells for an MLP row: schedule ms, kernels (and the raw dict)"""
    if not r.tg:
        return ["absent", ""], {}
    if "peer" in args.skip:
        return ["-", ""], {}
    tg = r.row("tg-schedule", model, peer=True)
    if "error" in tg:
        return [tg["error"], ""], {}
    return [fmt(tg["schedule_ms"]), fmt(tg["kernels"])], tg


def null_table(r, args):
    """table 1: the NULL device rows, tinygrad's schedule beside the MLP's"""
    models = ["mlp%d" % L for L in args.layers if L <= args.max_layers]
    models += [] if args.quick else ["resnet18", "gpt2"]
    rows, stopped = [], None
    for model in models:
        is_mlp = model.startswith("mlp")
        name = "MLP L=%s" % model[3:] if is_mlp else {"resnet18": "ResNet-18 (CIFAR, B 16)",
                                                      "gpt2": "GPT-2 124M (T 64, B 4)"}[model]
        if stopped and is_mlp:  # a smaller L timed out: this one would too
            o = {"error": "skipped (%s timed out)" % stopped}
        elif "null" in args.skip:
            o = {"error": "-"}
        else:
            o = r.row("null", model, TC_DEVICE="NULL")
        peer, tg = peer_schedule(r, args, model) if is_mlp else (["", ""], {})
        if is_mlp and o.get("error", "").startswith("timeout"):
            stopped = name
        if "error" in o:
            rows.append([name, o["error"]] + [""] * 8 + peer + [""])
            continue
        per_node = o["schedule_ms"] * 1e3 / o["nodes"] if o["nodes"] else None
        rows.append([name, fmt(o["nodes"]), fmt(o["kernels"]), fmt(o["schedule_ms"]),
                     fmt(o["lower_ms"]), fmt(o["codegen_ms"]), fmt(o["render_ms"]),
                     fmt(o["other_ms"]), fmt(per_node, 2), fmt(o["built"])] + peer +
                    [ratio(tg.get("schedule_ms"), o["schedule_ms"]) if tg else ""])
    head = ["model", "graph nodes", "kernels", "schedule ms", "lower ms", "codegen ms",
            "render ms", "other ms", "sched us/node", "built", "tinygrad schedule ms",
            "tinygrad kernels", "tinygrad/ours"]
    return ["### NULL device: the first training step (TC_DEVICE=NULL)", ""] + table(head, rows)


def instructions_table(r, args):
    """table 1b (--instructions): the instructions tc_schedule_create runs per
    graph node on the MLPs, counted by callgrind (deterministic, whatever the
    caches and the load): the test of linear work apart from memory effects"""
    head = ["model", "graph nodes", "schedule instructions", "instructions/node"]
    rows = []
    for L in [L for L in args.layers if L <= args.max_layers]:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "callgrind.out")
            o = r.row("null", "mlp%d" % L, TC_DEVICE="NULL",
                      wrap=("valgrind", "--tool=callgrind", "--toggle-collect=tc_schedule_create",
                            "--callgrind-out-file=" + out))
            ir = None
            if "error" not in o and os.path.exists(out):
                ir = next((int(l.split()[1]) for l in open(out) if l.startswith("summary:")), None)
        if ir is None:
            rows.append(["MLP L=%d" % L, o.get("error", "no callgrind summary"), "", ""])
            continue
        rows.append(["MLP L=%d" % L, fmt(o["nodes"]), fmt(ir), fmt(ir / o["nodes"], 0)])
    return ["### Scheduler instructions per node (callgrind, NULL device)", ""] + table(head, rows)


def parse_flags():
    src = open(os.path.join(REPO, "src", "runtime", "cpu_cc.c")).read()
    decl = re.search(r"cc_flags\[\]\s*=\s*{([^}]*)}", src)
    return re.findall(r'"(-[^"]*)"', decl.group(1)) if decl else ["-O2", "-march=native"]


def slowest_compiles(keep, n=3):
    """(in-step us, alone us, lines, name) of the slowest compile logged in keep:
    the n slowest in the step are compiled again alone, one at a time"""
    path = os.path.join(keep, "times.txt")
    if not os.path.exists(path):
        return None
    logged = sorted((int(l.split()[0]), l.split()[1]) for l in open(path) if l.strip())[::-1]
    if not logged:
        return None
    flags, best = parse_flags(), None
    for us, src in logged[:n]:
        out = os.path.join(keep, "alone.so")
        t0 = time.perf_counter()
        rc = subprocess.run(["cc"] + flags + ["-x", "c", src, "-o", out, "-lm"],
                            capture_output=True).returncode
        alone = (time.perf_counter() - t0) * 1e6 if rc == 0 else None
        text = open(src).read()
        names = re.findall(r"^void (\w+)\(", text, re.M)  # a batch: several kernels
        name = names[0] if len(names) == 1 else "%d kernels" % len(names) if names else "?"
        cand = (us, alone, text.count("\n"), name)
        if best is None or (alone or 0) > (best[1] or 0):
            best = cand
    biggest = max((open(src).read().count("\n"), src) for _, src in logged)
    return max(logged)[0], best, biggest[0]


def cold_env(keep, cache):
    return dict(TC_CACHEDIR=cache, TC_CC=os.path.join(HERE, "cc_timed.sh"),
                TC_CC_REAL=os.environ.get("TC_CC", "cc"), TC_CC_KEEP=keep)


def cold_row(r, model):
    """ours, cold: a fresh cache dir and compile log; returns the table cells"""
    with tempfile.TemporaryDirectory(prefix="tc_scale_cold_") as tmp:
        keep, cache = os.path.join(tmp, "keep"), os.path.join(tmp, "cache")
        os.makedirs(keep)
        if model == "mnist":
            out, err = r.run([os.path.join(r.args.build, "bench", "bench_train_step"), "--model",
                              "conv", "--compile", "1"], r.env(**cold_env(keep, cache)),
                             "bench_train_step --compile 1")
            o = {"error": err} if err else {}
            if not err:
                kv = dict(w.split("=", 1) for w in out.split() if "=" in w)
                o = {"kernels": int(kv["kernels"]), "built": int(kv["first_built"]),
                     "first_s": float(kv["first_wall_ms"]) / 1e3,
                     "compile_s": float(kv["first_compile_ms"]) / 1e3}
        else:
            o = r.row("cold", model, **cold_env(keep, cache))
        slow = slowest_compiles(keep) if "error" not in o else None
    if "error" in o:
        return [o["error"]] + [""] * 6
    cells = [fmt(o["kernels"]), fmt(o["built"]), fmt(o["first_s"], 2), fmt(o["compile_s"], 2)]
    if slow:
        step_max, (us, alone, lines, name), most_lines = slow
        cells += ["%s (%s)" % (fmt(step_max / 1e3, 0), name) if step_max == us
                  else fmt(step_max / 1e3, 0),
                  "%s (%s, %s lines)" % (fmt(alone / 1e3 if alone else None, 0), name,
                                         fmt(lines)), fmt(most_lines)]
    else:
        cells += ["-", "-", "-"]
    return cells


def cold_table(r, args):
    rows = []
    for model, name in (("mlp4", "MLP L=4"), ("mnist", "beautiful_mnist (B 512)"),
                        ("gpt2", "GPT-2 124M (T 64, B 4)")):
        if args.quick and model == "gpt2":
            continue
        cells = cold_row(r, model)
        tg = "-"
        if model == "mlp4":
            if not r.tg:
                tg = "absent"
            elif "peer" not in args.skip:
                t = r.row("tg-cold", model, peer=True)
                tg = fmt(t["first_s"], 2) if "first_s" in t else t["error"]
        rows.append([name] + cells + [tg])
    head = ["model", "kernels", "built", "first step s", "compile s",
            "slowest compiler run in step ms", "slowest compiler run alone ms",
            "largest source lines", "tinygrad first step s"]
    return ["### CPU, cold: the first training step from an empty TC_CACHEDIR", "",
            "A compiler run builds a batch of kernels (one source, several kernels: "
            "`bench/kernel_survey.py` compiles each kernel alone).", ""] + table(head, rows)


def steps_table(r, args):
    rows = []
    for model, name in (("mlp4", "MLP L=4"), ("mlp32", "MLP L=32"),
                        ("mnist", "beautiful_mnist (B 512)"), ("gpt2", "GPT-2 124M (T 64, B 4)")):
        if args.quick and model == "gpt2":
            continue
        if model == "mnist":
            cells = []
            for jit in ("0", "1"):
                out, err = r.run([os.path.join(args.build, "bench", "bench_train_step"), "--model",
                                  "conv", "--jit", jit], r.env(), "bench_train_step --jit " + jit)
                line = [l.split() for l in (out or "").splitlines() if l.startswith("conv")]
                cells.append((float(line[0][2]), int(line[0][3])) if line else err or "failed")
            o = ({"kernels": cells[0][1], "eager_ms": cells[0][0], "jit_ms": cells[1][0],
                  "eager_schedule_ms": None, "eager_lower_ms": None}
                 if all(isinstance(c, tuple) for c in cells)
                 else {"error": next(c for c in cells if not isinstance(c, tuple))})
        else:
            o = r.row("steps", model, 3 if model == "gpt2" else 5, 3 if model == "gpt2" else 6)
        tg = "-"
        if model.startswith("mlp"):
            if not r.tg:
                tg = "absent"
            elif "peer" not in args.skip:
                t = r.row("tg-steps", model, 5, peer=True)
                tg = fmt(t["eager_ms"]) if "eager_ms" in t else t["error"]
        if "error" in o:
            rows.append([name, o["error"], "", "", "", "", "", tg])
            continue
        rows.append([name, fmt(o["kernels"]), fmt(o["eager_ms"]), fmt(o["eager_schedule_ms"]),
                     fmt(o["eager_lower_ms"]), fmt(o["jit_ms"]),
                     "%.2fx" % (o["eager_ms"] / o["jit_ms"]) if o["jit_ms"] else "-", tg])
    head = ["model", "kernels", "eager step ms", "its schedule ms", "its lower ms",
            "JIT replay ms", "eager/JIT", "tinygrad eager step ms"]
    return ["### CPU, warm cache: eager (no JIT) vs JIT steps", ""] + table(head, rows)


def header(r, args):
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO).stdout.strip()
        except OSError:
            return "?"
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    return ["## Scaling table (issue 13), %s" % time.strftime("%Y-%m-%d %H:%M"), "",
            "libtinyc %s (%s), %s, %d cores, load average %s" % (
                sh(["git", "describe", "--always", "--dirty"]), args.build, cpu, os.cpu_count(),
                " ".join(open("/proc/loadavg").read().split()[:3])),
            "tinygrad: %s" % (r.tg + " (CLANG=1, CACHELEVEL=0)" if r.tg else "absent"),
            "command: python3 bench/scale.py " + " ".join(sys.argv[1:]), ""]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--row":
        return run_row(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--layers", default="8,32,128,512")
    ap.add_argument("--max-layers", type=int, default=1 << 30)
    ap.add_argument("--row-timeout", type=int, default=600)
    ap.add_argument("--out", default=None, help="default: <build>/scale.md")
    ap.add_argument("--skip", default="", help="comma list of: null, cold, steps, peer")
    ap.add_argument("--tinygrad", default=None)
    ap.add_argument("--no-tinygrad", action="store_true")
    ap.add_argument("--quick", action="store_true", help="no ResNet-18 and GPT-2 rows")
    ap.add_argument("--instructions", action="store_true",
                    help="also count the scheduler's instructions per node under callgrind "
                         "(valgrind; about a minute)")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.layers = [int(x) for x in args.layers.split(",") if x]
    args.skip = set(s for s in args.skip.split(",") if s)
    if not os.path.exists(os.path.join(args.build, "libtinyc.so")):
        print("scale.py: no libtinyc.so in %s (build it first)" % args.build, file=sys.stderr)
        return 2
    r = Runner(args)
    os.makedirs(r.warm_cache, exist_ok=True)
    lines = header(r, args)
    tables = [("null", null_table), ("cold", cold_table), ("steps", steps_table)]
    if args.instructions and shutil.which("valgrind"):
        tables.insert(1, ("instructions", instructions_table))
    elif args.instructions:
        print("scale.py: valgrind not found: no instruction counts", file=sys.stderr)
    for name, fn in tables:
        if name in args.skip:
            continue
        print("%s:" % name, file=sys.stderr, flush=True)
        lines += fn(r, args) + [""]
    lines.append("load average after: " + " ".join(open("/proc/loadavg").read().split()[:3]))
    text = "\n".join(lines) + "\n"
    print(text)
    out = args.out or os.path.join(args.build, "scale.md")
    with open(out, "w") as f:
        f.write(text)
    print("written to %s" % out, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
