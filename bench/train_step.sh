#!/usr/bin/env bash
# train_step.sh - ms per training step of examples/mnist.c's models (conv:
# beautiful_mnist's convnet at batch 512, mlp: 784-128-10 at batch 128) and
# the kernels per step, next to PyTorch CPU with the same number of threads
# (TC_BENCH_THREADS, default: the cores; sets TC_THREADS too).
# usage: bash bench/train_step.sh [build-dir] [extra bench_train_step args]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
threads=${TC_BENCH_THREADS:-$(nproc)}
export TC_THREADS=$threads  # the same thread count on both sides
"$build/bench/bench_train_step" "$@" | tee /tmp/tc_bench_train_step.txt
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "PyTorch not installed: no peer column"
    exit 0
fi
"$PY" bench/train_step_torch.py bench --threads "$threads" "$@" > /tmp/tc_bench_train_step_torch.txt
"$PY" - "$threads" <<'PY'
import sys
def table(path):
    rows = [l.split() for l in open(path).read().splitlines()[1:] if l.strip()]
    return {r[0]: r for r in rows}
ours, torch = table("/tmp/tc_bench_train_step.txt"), table("/tmp/tc_bench_train_step_torch.txt")
print(f"\n{'model':<6}{'batch':>6}{'tinyc_ms':>10}{'torch_ms':>10}{'tinyc/torch':>12}{'kernels':>9}"
      f"   (torch threads: {sys.argv[1]})")
for k, r in ours.items():
    t = float(torch[k][2]) if k in torch else float('nan')
    print(f"{k:<6}{r[1]:>6}{float(r[2]):>10.2f}{t:>10.2f}{float(r[2]) / t:>11.2f}x{r[3]:>9}")
PY
