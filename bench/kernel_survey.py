#!/usr/bin/env python3
"""kernel_survey.py - issue 13's bound on kernels: every CPU kernel source the
test corpus, the beautiful_mnist step and the GPT-2 124M step compile, with
the largest (lines of C) and the slowest to compile.

    python3 bench/kernel_survey.py [--build DIR] [--skip tests,mnist,gpt2] [--top N] [--keep DIR]

Each workload runs from an empty kernel cache with TC_CC set to
bench/cc_timed.sh, which keeps a copy of every source compiled. The runtime
builds a schedule's new kernels in batches, one compiler run per batch (the
slowest run is printed with its kernel count); the survey cuts each batch
into its kernels (a kernel alone: the batch's prelude items before it and
its own text), compiles every distinct kernel once alone, two at a time,
at the runtime's flags (src/runtime/cpu_cc.c's cc_flags), then compiles
the N slowest of those and the N largest (lines of the kernel's function)
again, one at a time, and prints their CPU time (user + system of the
compiler and its children; the least of three compiles): that is the
figure least disturbed by other load.
The test corpus is `ctest -LE "slow|gpu"` in the build dir, its kernel
caches (build/kcache) emptied first. Cost: the workloads' own time, one
compile of every kernel, and 6N compiles (2N kernels, three each).
"""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

from scale import parse_flags  # the runtime's compiler flags, read from cpu_cc.c

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = sys.executable


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def compile_cmd(src, out):
    return [os.environ.get("TC_CC", "cc")] + parse_flags() + ["-x", "c", src, "-o", out, "-lm"]


def compile_alone(src, out, repeats=3):
    """CPU seconds of a compile of src at the runtime's flags: the least of
    `repeats` runs (a busy machine inflates CPU time too: the survey's own
    ctest -j2 has just ended, load 5-7; one 360-line source took 381 ms
    then and 230 ms on a quiet machine)"""
    best = None
    for _ in range(repeats):
        t0 = child_cpu()
        if subprocess.run(compile_cmd(src, out), capture_output=True).returncode != 0:
            return None
        t = child_cpu() - t0
        best = t if best is None else min(best, t)
    return best


def compile_all(srcs, out_dir, jobs=2):
    """{src: CPU seconds of one compile}, `jobs` compilers at a time (each
    writing the library of its slot), each timed by its own rusage
    (os.wait4)"""
    times, running, todo = {}, {}, list(srcs)
    while todo or running:
        while todo and len(running) < jobs:
            src = todo.pop()
            slot = min(set(range(jobs)) - {s for _, _, s in running.values()})
            p = subprocess.Popen(compile_cmd(src, os.path.join(out_dir, "once%d.so" % slot)),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            running[p.pid] = (p, src, slot)
        pid, status, ru = os.wait4(-1, 0)
        if pid in running:
            p, src, _ = running.pop(pid)
            p.returncode = status  # reaped here: Popen must not wait for it again
            times[src] = ru.ru_utime + ru.ru_stime if status == 0 else None
    return times


KERNEL = re.compile(r"^#define (\w+) \1__\w+\n", re.M)


def split_kernels(path):
    """the kernels of one compiled source: [(name, kernel lines, standalone
    source)]. A batch (src/runtime/cpu_batch.c) holds prelude items and
    each kernel between "#define f f__key" and "#undef f"; a kernel's
    standalone source is the items before it and its own text; a source of
    one kernel is itself"""
    text = open(path).read()
    marks = list(KERNEL.finditer(text))
    if not marks:
        names = re.findall(r"void (\w+)\(", text)
        return [(names[-1] if names else "?", text.count("\n"), text)]
    out, prelude, pos = [], [], 0
    for m in marks:
        prelude.append(text[pos:m.start()])
        undef = text.index("#undef %s\n" % m.group(1), m.end())
        body = text[m.end():undef]
        out.append((m.group(1), body.count("\n"), "".join(prelude) + body))
        pos = undef + len("#undef %s\n" % m.group(1))
    return out


def run_workload(name, build, keep):
    env = dict(os.environ, TC_CC=os.path.join(HERE, "cc_timed.sh"),
               TC_CC_REAL=os.environ.get("TC_CC", "cc"), TC_CC_KEEP=keep,
               TINYC_LIB=os.path.join(build, "libtinyc.so"),
               PYTHONPATH=os.path.join(REPO, "python"))
    cache = tempfile.mkdtemp(prefix="tc_survey_cache_")
    try:
        if name == "tests":
            shutil.rmtree(os.path.join(build, "kcache"), ignore_errors=True)
            cmd = ["ctest", "--test-dir", build, "-j2", "-LE", "slow|gpu", "-Q"]
        elif name == "mnist":
            env["TC_CACHEDIR"] = cache
            cmd = [os.path.join(build, "bench", "bench_train_step"), "--model", "conv",
                   "--compile", "1"]
        else:
            env["TC_CACHEDIR"] = cache
            cmd = [PY, os.path.join(HERE, "scale.py"), "--row", "cold", "gpt2"]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            return "failed (%d): %s" % (p.returncode, (p.stdout + p.stderr)[-300:])
        return None
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def survey(name, build, top, keep_dir=None):
    keep = tempfile.mkdtemp(prefix="tc_survey_keep_%s_" % name, dir=keep_dir)
    try:
        err = run_workload(name, build, keep)
        path = os.path.join(keep, "times.txt")
        logged = [(int(l.split()[0]), l.split()[1]) for l in open(path)] if os.path.exists(path) \
            else []
        if err or not logged:
            return [name, err or "no compiles logged"] + [""] * 5
        kernels, seen = [], set()  # (lines, name, standalone source path), each text once
        alone_dir = os.path.join(keep, "alone")
        os.mkdir(alone_dir)
        for _, src in logged:
            for kname, lines, text in split_kernels(src):
                if text in seen:
                    continue
                seen.add(text)
                kpath = os.path.join(alone_dir, "k%d.c" % len(kernels))
                open(kpath, "w").write(text)
                kernels.append((lines, kname, kpath))
        once = compile_all([k for _, _, k in kernels], keep)
        by_once = sorted(kernels, key=lambda k: once.get(k[2]) or 0, reverse=True)
        by_lines = sorted(kernels, reverse=True)
        picks = {k for k in by_once[:top]} | {k for k in by_lines[:top]}
        out = os.path.join(keep, "alone.so")
        alone = {k: compile_alone(k[2], out) for k in picks}
        slow = max(picks, key=lambda k: alone[k] or 0)
        if keep_dir:  # the slowest kernels alone, by the file that holds each
            for k in sorted(picks, key=lambda k: alone[k] or 0, reverse=True)[:top]:
                print("%s: %.0f ms %s, %d lines: %s" % (name, (alone[k] or 0) * 1e3, k[1], k[0], k[2]),
                      file=sys.stderr)
        run = max(logged)
        return [name, "%d runs, %d kernels" % (len(logged), len(kernels)),
                "%d (%s)" % (by_lines[0][0], by_lines[0][1]),
                "%.0f (%d kernels)" % (run[0] / 1e3, len(split_kernels(run[1]))),
                "%.0f (%s, %d lines)" % ((alone[slow] or 0) * 1e3, slow[1], slow[0]),
                "%.0f" % ((alone[by_lines[0]] or 0) * 1e3)]
    finally:
        if not keep_dir:
            shutil.rmtree(keep, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--skip", default="", help="comma list of: tests, mnist, gpt2")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--keep", default=None, help="keep the sources in this directory and "
                    "print the slowest kernels' files on stderr")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    rows = [survey(n, build, args.top, args.keep) for n in ("tests", "mnist", "gpt2")
            if n not in args.skip.split(",")]
    cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"],
                         capture_output=True, text=True).stdout.strip()
    print("kernel survey, %s, %s, load %s" % (subprocess.run(
        ["date", "+%F %H:%M"], capture_output=True, text=True).stdout.strip(), cpu,
        " ".join("%.2f" % x for x in os.getloadavg())))
    head = ["workload", "compiler runs, distinct kernels", "largest: lines", "slowest run ms",
            "slowest alone, CPU ms", "largest alone, CPU ms"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
