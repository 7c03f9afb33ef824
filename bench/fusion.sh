#!/usr/bin/env bash
# fusion.sh - what fusion buys, next to PyTorch CPU measured in the same run:
# softmax, log_softmax, layernorm and std over the rows of (4096,1024) float32.
# usage: bash bench/fusion.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${TC_BENCH_THREADS:-$(nproc)}
export TC_THREADS=$threads  # the same thread count on both sides
"$build/bench/bench_fusion" 10 | tee /tmp/tc_bench_fusion.txt
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
"$PY" - "$threads" <<'PY'
import sys, time
try:
    import torch
except ImportError:
    print("PyTorch not installed: no peer column"); sys.exit(0)
torch.set_num_threads(int(sys.argv[1]))
x = (torch.sin(torch.arange(4096 * 1024, dtype=torch.float64) * 0.37) * 3).float().reshape(4096, 1024)
cases = {
    "softmax": lambda: torch.softmax(x, -1),
    "log_softmax": lambda: torch.log_softmax(x, -1),
    "layernorm": lambda: torch.nn.functional.layer_norm(x, (1024,), eps=1e-5),
    "std": lambda: x.std(-1),
}
ours = {}
for line in open("/tmp/tc_bench_fusion.txt").read().splitlines()[1:]:
    f = line.split()
    ours[f[0]] = float(f[3])
print(f"\n{'case':<12} {'torch_ms':>9} {'tinyc_ms':>9} {'torch/tinyc':>11}   (torch threads: {sys.argv[1]})")
for name, fn in cases.items():
    fn()
    best = 1e30
    for _ in range(10):
        t0 = time.perf_counter(); fn(); best = min(best, time.perf_counter() - t0)
    print(f"{name:<12} {best*1e3:9.3f} {ours[name]:9.3f} {best*1e3/ours[name]:11.2f}x")
PY
