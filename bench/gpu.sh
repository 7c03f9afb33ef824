#!/usr/bin/env bash
# gpu.sh - libtinyc on a GPU device next to PyTorch on the same GPU, in ms:
# softmax and layernorm over (4096,1024), softmax over (64,1024), matmul
# 1024 and 2048, and the MNIST convnet (batch 512) and MLP (batch 128)
# training steps, every result checked against the peer's on the same inputs.
#
# usage: bash bench/gpu.sh [DEVICE] [build-dir]
#   DEVICE     libtinyc's device (default CUDA; OPENCL also works). PyTorch
#              runs on cuda for a CUDA device; other devices get no peer
#              column (PyTorch has no OpenCL), so OPENCL here is a smoke
#              test of the script and our side only
#   build-dir  default build (configured as Release if it does not exist)
# Environment: TRAIN_ARGS (default empty) goes to both training benches,
# e.g. "--batch 64 --steps 2" for a slow device; QUICK=1 fewer runs.
# Our op figures are tc_jit replays ending with tc_synchronize (the kernels'
# time, no scheduling), PyTorch's end with torch.cuda.synchronize(); a
# training step ends when its loss reaches the host on both sides.
# Exit status 1 if a benchmark failed or a result differs from its peer.
set -euo pipefail
cd "$(dirname "$0")/.."
dev=${1:-CUDA}
build=${2:-build}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
quick=()
[ "${QUICK:-0}" = 1 ] && quick=(--quick)

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$build" -j "$(nproc)" --target bench_ops bench_train_step >&2

torch_dev=""
case "$(echo "$dev" | tr '[:lower:]' '[:upper:]')" in
CUDA) torch_dev=cuda ;;
CUDA:*) torch_dev=cuda:${dev#*:} ;;
esac
has_torch=0
if [ -n "$torch_dev" ] && "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    has_torch=1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tc_gpu_bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0
echo "gpu.sh: our side on $dev" >&2
for c in softmax softmax64 layernorm matmul1024 matmul2048; do
    "$build/bench/bench_ops" --device "$dev" --only "$c" --dump "$tmp" "${quick[@]}" >> "$tmp/ours.txt" || status=1
done
# shellcheck disable=SC2086  # TRAIN_ARGS is a list of arguments
"$build/bench/bench_train_step" --device "$dev" --model both --dump "$tmp" ${TRAIN_ARGS:-} > "$tmp/train.txt" || status=1
: > "$tmp/peers.txt"
: > "$tmp/train_torch.txt"
if [ "$has_torch" = 1 ]; then
    echo "gpu.sh: PyTorch on $torch_dev" >&2
    "$PY" bench/peers.py "$tmp" 1 --torch-device "$torch_dev" "${quick[@]}" > "$tmp/peers.txt" || status=1
    # shellcheck disable=SC2086
    "$PY" bench/train_step_torch.py bench --model both --load "$tmp" --device "$torch_dev" ${TRAIN_ARGS:-} \
        > "$tmp/train_torch.txt" || status=1
else
    echo "gpu.sh: no PyTorch with a GPU for $dev: no peer column" >&2
fi

"$PY" - "$dev" "$torch_dev" "$has_torch" "$tmp" <<'PY' || status=1
import os, sys
dev, torch_dev, has_torch, tmp = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
def lines(name):
    path = os.path.join(tmp, name)
    return [l.split() for l in open(path).read().splitlines()] if os.path.exists(path) else []
ours = {w[1]: float(w[2]) for w in lines("ours.txt") if w[:1] == ["ours"]}
peer = {w[1]: (float(w[2]), w[3] if len(w) > 3 else "") for w in lines("peers.txt") if w[:1] == ["peer"]}
info = [" ".join(w[1:]) for w in lines("peers.txt") if w[:1] == ["info"]]
def ms(case, v):  # bench_ops and peers.py give matmul in GFLOPS
    if case.startswith("matmul"):
        n = int(case[6:])
        return 2.0 * n ** 3 / (v * 1e9) * 1e3
    return v
names = {"softmax": "softmax 4096x1024", "softmax64": "softmax 64x1024",
         "layernorm": "layernorm 4096x1024", "matmul1024": "matmul 1024x1024",
         "matmul2048": "matmul 2048x2048"}
print("libtinyc on %s vs PyTorch on %s" % (dev, torch_dev if has_torch else "(none)"))
for i in info:
    print("- " + i)
print()
print("| benchmark | libtinyc ms | PyTorch ms | ratio | check |")
print("|---|---|---|---|---|")
bad = False
for case, label in names.items():
    o = ms(case, ours[case]) if case in ours else None
    p, chk = peer.get(case, (None, ""))
    p = ms(case, p) if p is not None else None
    bad |= o is None or "FAIL" in chk or (has_torch and p is None)
    print("| %s | %s | %s | %s | %s |" % (label, "%.4g" % o if o else "failed", "%.4g" % p if p else "-",
                                       "%.2fx" % (p / o) if o and p else "-", chk or "-"))
train = {w[0]: w for w in lines("train.txt")[1:] if w}
torch_train = {w[0]: w for w in lines("train_torch.txt")[1:] if w}
for kind, label in (("conv", "MNIST convnet step"), ("mlp", "MLP 784-128-10 Adam step")):
    w, t = train.get(kind), torch_train.get(kind)
    if not w:
        bad = True
        print("| %s | failed | - | - | - |" % label)
        continue
    o = float(w[2])
    p = float(t[2]) if t else None
    chk = "loss relerr step 1 %s, 2-5 %s" % (t[3], t[4]) if t and len(t) > 4 else "-"
    if t and len(t) > 4 and not float(t[3]) <= 1e-3:  # the forward pass must agree
        chk += " (FAIL)"
        bad = True
    print("| %s (batch %s, %s kernels) | %.4g | %s | %s | %s |" % (
        label, w[1], w[3], o, "%.4g" % p if p else "-", "%.2fx" % (p / o) if p else "-", chk))
print("\nratio = PyTorch ms / libtinyc ms (>1: libtinyc faster)")
sys.exit(1 if bad else 0)
PY
exit "$status"
