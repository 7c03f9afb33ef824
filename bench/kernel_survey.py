#!/usr/bin/env python3
"""kernel_survey.py - issue 13's bound on kernels: every CPU kernel source the
test corpus, the beautiful_mnist step and the GPT-2 124M step compile, with
the largest (lines of C) and the slowest to compile.

    python3 bench/kernel_survey.py [--build DIR] [--skip tests,mnist,gpt2] [--top N]

Each workload runs from an empty kernel cache with TC_CC set to
bench/cc_timed.sh, which keeps a copy of every source compiled. Then the N
largest and the N slowest (as timed in the workload, where compilers run
in parallel and the machine may be busy) are compiled again alone, one at a
time, at the runtime's flags (src/runtime/cpu_cc.c's cc_flags), and their CPU
time (user + system of the compiler and its children; the least of three
compiles) is printed: that is the figure least disturbed by other load. The runtime builds a schedule's
new kernels in batches, one compiler run per batch; the survey sets
TC_CC_JOBS=64, so each batch is one kernel until a schedule has more than
64 new ones (then a source may hold two or more).
The test corpus is `ctest -LE "slow|gpu"` in the build dir, its kernel
caches (build/kcache) emptied first. Cost: the workloads' own time plus 6N
compiles each (2N sources, the least of three compiles each).
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


def compile_alone(src, out, repeats=3):
    """CPU seconds of a compile of src at the runtime's flags: the least of
    `repeats` runs (a busy machine inflates CPU time too: the survey's own
    ctest -j2 has just ended, load 5-7; one 360-line source took 381 ms
    then and 230 ms on a quiet machine)"""
    cmd = [os.environ.get("TC_CC", "cc")] + parse_flags() + ["-x", "c", src, "-o", out, "-lm"]
    best = None
    for _ in range(repeats):
        t0 = child_cpu()
        if subprocess.run(cmd, capture_output=True).returncode != 0:
            return None
        t = child_cpu() - t0
        best = t if best is None else min(best, t)
    return best


def run_workload(name, build, keep):
    env = dict(os.environ, TC_CC=os.path.join(HERE, "cc_timed.sh"),
               TC_CC_REAL=os.environ.get("TC_CC", "cc"), TC_CC_KEEP=keep, TC_CC_JOBS="64",
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


def survey(name, build, top):
    keep = tempfile.mkdtemp(prefix="tc_survey_keep_")
    try:
        err = run_workload(name, build, keep)
        path = os.path.join(keep, "times.txt")
        logged = [(int(l.split()[0]), l.split()[1]) for l in open(path)] if os.path.exists(path) \
            else []
        if err or not logged:
            return [name, err or "no compiles logged"] + [""] * 5
        sized = sorted(((open(s).read().count("\n"), us, s) for us, s in logged), reverse=True)
        by_time = sorted(logged, reverse=True)
        picks = {s for _, _, s in sized[:top]} | {s for _, s in by_time[:top]}
        out = os.path.join(keep, "alone.so")
        alone = {s: compile_alone(s, out) for s in picks}
        slow = max(picks, key=lambda s: alone[s] or 0)
        name_of = lambda s: (re.findall(r"void (\w+)\(", open(s).read()) or ["?"])[-1]
        lines = dict((s, n) for n, _, s in sized)
        return [name, "%d" % len(logged), "%d (%s)" % (sized[0][0], name_of(sized[0][2])),
                "%.0f (%s)" % (by_time[0][0] / 1e3, name_of(by_time[0][1])),
                "%.0f (%s, %d lines)" % ((alone[slow] or 0) * 1e3, name_of(slow), lines[slow]),
                "%.0f" % ((alone[sized[0][2]] or 0) * 1e3)]
    finally:
        shutil.rmtree(keep, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--skip", default="", help="comma list of: tests, mnist, gpt2")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    rows = [survey(n, build, args.top) for n in ("tests", "mnist", "gpt2")
            if n not in args.skip.split(",")]
    cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"],
                         capture_output=True, text=True).stdout.strip()
    print("kernel survey, %s, %s, load %s" % (subprocess.run(
        ["date", "+%F %H:%M"], capture_output=True, text=True).stdout.strip(), cpu,
        " ".join("%.2f" % x for x in os.getloadavg())))
    head = ["workload", "sources compiled", "largest: lines", "slowest in the run ms",
            "slowest alone, CPU ms", "largest alone, CPU ms"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
