#!/usr/bin/env bash
# export.sh - the MNIST convnet's Adam training step (batch 512) and its
# inference at batch 1, exported as standalone C (tc_export_c) and built with
# the CPU runtime's own compiler flags, next to the library running the same
# graphs through tc_jit replay, and PyTorch CPU (the same model and batch
# size; bench/train_step_torch.py, and a batch-1 forward in eval mode), all
# with the same number of threads (TC_BENCH_THREADS, default: the cores; sets
# TC_THREADS too). Prints ms per step / per inference and the ratios.
# usage: bash bench/export.sh [build-dir] [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-10}
threads=${TC_BENCH_THREADS:-$(nproc)}
export TC_THREADS=$threads
out=$(mktemp -d /tmp/tc_bench_export.XXXXXX)
trap 'rm -rf "$out"' EXIT
"$build/bench/bench_export" --out "$out" --batch 512 --steps "$steps" > "$out/lib.txt"
# the kernels' flags, as the CPU runtime compiles them (cc_flags in src/runtime/cpu_cc.c)
flags=$(sed -n '/cc_flags\[\] *=/,/};/p' src/runtime/cpu_cc.c | grep -o '"-[^"]*"' | tr -d '"' |
        grep -v -e '^-shared$' -e '^-fPIC$' | tr '\n' ' ')
cc $flags -pthread -I"$out" -o "$out/export_time" bench/export_time.c "$out/bench_step.c" \
   "$out/bench_infer.c" -lm
"$out/export_time" "$out" "$threads" "$steps" > "$out/export.txt"
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
torch_step=nan; torch_infer=nan
if "$PY" -c "import torch" 2>/dev/null; then
    torch_step=$("$PY" bench/train_step_torch.py bench --model conv --batch 512 --steps "$steps" \
                 --threads "$threads" | awk '$1 == "conv" {print $3}')
    torch_infer=$("$PY" - "$threads" "$steps" <<'PY'
import sys, time, torch
sys.path.insert(0, "bench")
from train_step_torch import make_model
torch.set_num_threads(int(sys.argv[1]))
m = make_model("conv").eval()
x = torch.rand(1, 1, 28, 28) * 255
with torch.no_grad():
    for _ in range(10): m(x)
    n = 20 * int(sys.argv[2]); t0 = time.perf_counter()
    for _ in range(n): m(x)
print("%.3f" % (1e3 * (time.perf_counter() - t0) / n))
PY
)
fi
"$PY" - "$out" "$threads" "$torch_step" "$torch_infer" <<'PY'
import sys
out, threads, torch_step, torch_infer = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
rows = {l.split()[0]: l.split() for l in open(out + "/lib.txt").read().splitlines() +
        open(out + "/export.txt").read().splitlines() if l.strip()}
es, ls = float(rows["export_step"][2]), float(rows["library_jit_step"][2])
ei, li = float(rows["export_infer"][2]), float(rows["library_jit_infer"][2])
print(f"{'what':<34}{'export_ms':>10}{'jit_ms':>10}{'torch_ms':>10}{'export/jit':>12}{'export/torch':>14}")
print(f"{'conv Adam step, batch ' + rows['export_step'][1]:<34}{es:>10.2f}{ls:>10.2f}{torch_step:>10.2f}"
      f"{es / ls:>11.2f}x{es / torch_step:>13.2f}x")
print(f"{'conv inference, batch 1':<34}{ei:>10.3f}{li:>10.3f}{torch_infer:>10.3f}"
      f"{ei / li:>11.2f}x{ei / torch_infer:>13.2f}x")
print(f"(threads: {threads} for all three)")
PY
