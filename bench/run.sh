#!/usr/bin/env bash
# run.sh - issue #7's table of ratios: libtinyc next to numpy (OpenBLAS), a
# plain C STREAM loop and PyTorch CPU, each pair measured in this run with the
# same thread count on both sides, every result checked against its peer.
#
# usage: bash bench/run.sh [--threads N | --one-thread] [--quick] [--out FILE]
#                          [--no-install] [--keep-coretype] [--as-avx2] [build-dir]
#   --threads N   threads on both sides (TC_THREADS, OPENBLAS_NUM_THREADS,
#                 torch.set_num_threads); default: all cores
#   --one-thread  the same as --threads 1
#   --quick       fewer runs per figure (a smoke test, noisier)
#   --out FILE    also write the table to FILE (Markdown)
#   --no-install  do not apt-get missing peers (their columns stay empty)
#   --keep-coretype  obey an OPENBLAS_CORETYPE that forces AVX2 kernels on an
#                 AVX-512 CPU (by default it is dropped: peers at their best)
#   --as-avx2     both sides as on a CPU without AVX-512 (a Zen 3, a Xeon
#                 before Skylake-SP): libtinyc plans for AVX2 (TC_CPU_ISA=avx2),
#                 OpenBLAS runs its Haswell kernels, PyTorch its AVX2 ones
#                 (ATEN_CPU_CAPABILITY=avx2) and oneDNN's convs too
#                 (ONEDNN_MAX_CPU_ISA=AVX2); caches stay this machine's
#   build-dir     default: build (configured as Release if it does not exist)
# What it runs (all in bench/): bench_ops + peers.py (matmul 256 to 4096, two
# skinny ones, x @ W.T, a.T @ b and a.T @ b.T,
# merged attention heads @ W.T, a*b+c, sum, softmax, layernorm, transpose,
# std; first the machine the CPU device read, TC_DEBUG=1's line),
# bench_train_step + train_step_torch.py (MNIST convnet and MLP steps, same
# initial weights and batch on both sides), resnet_train.py (a CIFAR
# ResNet-18 step and its peak memory next to PyTorch's), vocab_rows.py
# (cross-entropy, log_softmax and softmax over 256 x 50,257 logits),
# conv_rows.py (the convs of ResNet-18 and beautiful_mnist: forward, dx, dw),
# bench_train_step --compile 1 with a fresh and then a warm TC_CACHEDIR
# (compile, scheduling and lowering time of a convnet step, from
# tc_counters), bench_jit (replay overhead); table.py prints the table.
# Exit status 1 if a benchmark failed or a result differs from its peer.
set -euo pipefail
cd "$(dirname "$0")/.."

threads=$(nproc)
quick=()
out=""
install=1
keep_coretype=0
as_avx2=0
build=build
while [ $# -gt 0 ]; do
    case "$1" in
    --threads) threads=$2; shift 2 ;;
    --one-thread) threads=1; shift ;;
    --quick) quick=(--quick); shift ;;
    --out) out=$2; shift 2 ;;
    --no-install) install=0; shift ;;
    --keep-coretype) keep_coretype=1; shift ;;
    --as-avx2) as_avx2=1; shift ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) build=$1; shift ;;
    esac
done
case "$threads" in '' | *[!0-9]* | 0) echo "run.sh: --threads needs a positive number" >&2; exit 2 ;; esac
export TC_THREADS=$threads OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads

# ---- peers: numpy with OpenBLAS (not the reference BLAS), PyTorch ----
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
missing=()
"$PY" -c "import numpy" 2>/dev/null || missing+=(python3-numpy)
"$PY" -c "import torch" 2>/dev/null || missing+=(python3-torch)
dpkg -s libopenblas0-pthread >/dev/null 2>&1 || missing+=(libopenblas0-pthread)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$install" = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "run.sh: installing ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
            { apt-get update >&2 && apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
    else
        echo "run.sh: missing ${missing[*]} (apt-get install them as root); their columns stay empty" >&2
    fi
fi

# OpenBLAS's kernel set: the peers run at their best, so an AVX2 set forced
# by the environment (OPENBLAS_CORETYPE=Haswell/Zen/Sandybridge) on a CPU with
# AVX-512, where OpenBLAS reaches about half its speed, is dropped and
# OpenBLAS picks its own (--keep-coretype obeys the environment and warns)
coretype="OpenBLAS's own choice"
if [ "$as_avx2" = 1 ]; then
    # every side on AVX2: the scripts that start a peer keep these (TC_BENCH_AS_AVX2)
    export TC_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 TC_BENCH_AS_AVX2=1
    coretype="Haswell (--as-avx2: every side on AVX2 kernels, libtinyc included)"
elif [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    coretype="$OPENBLAS_CORETYPE, from the environment"
    avx512=1
    for f in avx512f avx512cd avx512bw avx512dq avx512vl; do grep -qw "$f" /proc/cpuinfo || avx512=0; done
    case "$avx512:$OPENBLAS_CORETYPE" in
    1:Haswell | 1:Zen | 1:Sandybridge)
        if [ "$keep_coretype" = 1 ]; then
            coretype="$coretype: WARNING, AVX2 kernels on an AVX-512 CPU (peers at about half speed)"
        else
            coretype="OpenBLAS's own choice (the environment's $OPENBLAS_CORETYPE, AVX2 kernels on an AVX-512 CPU, dropped)"
            unset OPENBLAS_CORETYPE
        fi ;;
    esac
fi

# ---- build ----
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >&2
fi
if ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$build/CMakeCache.txt"; then
    echo "run.sh: warning: $build is not a Release build; figures will be low" >&2
fi
cmake --build "$build" -j "$(nproc)" --target bench_ops bench_train_step bench_jit >&2
bin=$build/bench

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tc_bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0
{
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src include 2>/dev/null || echo ' (+ local changes)')"
    echo "load-before $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "openblas-coretype $coretype"
    # what the CPU device read of this machine (src/runtime/cpu_info.c), which its plans follow
    echo "machine $(TC_DEBUG=1 "$bin/bench_ops" --only machine 2>&1 >/dev/null | sed -n 's/^device CPU: //p' | head -n 1)"
} > "$tmp/meta.txt"
have() { "$PY" -c "import $1" 2>/dev/null; }
step() { echo "run.sh: $*" >&2; }

# each case: libtinyc's side, then at once the peer's (a coprocess that keeps
# numpy and torch loaded), so both see the same load on a shared machine
step "ops: libtinyc, the STREAM loop, numpy and PyTorch ($threads threads)"
mkdir -p "$tmp/ops"
: > "$tmp/ops.txt"
: > "$tmp/peers.txt"
peers=0
if have numpy; then
    coproc PEERS { "$PY" bench/peers.py "$tmp/ops" "$threads" --serve "${quick[@]}"; }
    peers_pid=$PEERS_PID
    read -r line <&"${PEERS[0]}" && echo "$line" >> "$tmp/peers.txt" && peers=1
fi
for c in matmul256 matmul512 matmul1024 matmul2048 matmul4096 skinny_n skinny_k matmul_wt matmul_tn matmul_tt \
    matmul_heads stream softmax softmax64 layernorm std transpose; do
    "$bin/bench_ops" --only "$c" --dump "$tmp/ops" --threads "$threads" "${quick[@]}" \
        >> "$tmp/ops.txt" || status=1
    if [ "$peers" = 1 ] && ! kill -0 "$peers_pid" 2>/dev/null; then
        echo "run.sh: peers.py ended early" >&2
        peers=0 status=1
    fi
    if [ "$peers" = 1 ] && [ "$c" != stream ]; then
        echo "$c" >&"${PEERS[1]}"
        while read -r line <&"${PEERS[0]}" && [ "$line" != end ]; do
            echo "$line" >> "$tmp/peers.txt"
        done
    fi
done
if [ "$peers" = 1 ]; then
    eval "exec ${PEERS[1]}>&-"
    wait "$peers_pid" || status=1
fi

steps=()
[ ${#quick[@]} -gt 0 ] && steps=(--steps 2)
mkdir -p "$tmp/train"
: > "$tmp/train_ours.txt"
: > "$tmp/train_torch.txt"
for model in conv mlp; do
    step "training step ($model): libtinyc, then PyTorch from the same weights and batch"
    "$bin/bench_train_step" --model "$model" --dump "$tmp/train" "${steps[@]}" >> "$tmp/train_ours.txt" ||
        status=1
    if have torch; then
        "$PY" bench/train_step_torch.py bench --model "$model" --threads "$threads" --load "$tmp/train" \
            "${steps[@]}" >> "$tmp/train_torch.txt" || status=1
    fi
done

if have torch; then
    step "ResNet-18 (CIFAR, batch 16) step: libtinyc, then PyTorch from the same weights and batch"
    rsteps=6
    [ ${#quick[@]} -gt 0 ] && rsteps=4
    TINYC_LIB=${TINYC_LIB:-$build/libtinyc.so} "$PY" bench/resnet_train.py --threads "$threads" \
        --steps "$rsteps" --lines "$tmp/resnet.txt" >&2 || status=1
fi

if have torch; then
    step "rows over a 50,257-word vocabulary: cross-entropy, log_softmax, softmax; libtinyc, then PyTorch"
    TINYC_LIB=${TINYC_LIB:-$build/libtinyc.so} "$PY" bench/vocab_rows.py --threads "$threads" \
        --calls "$([ ${#quick[@]} -gt 0 ] && echo 5 || echo 15)" --lines "$tmp/vocab.txt" >&2 || status=1
fi

if have torch; then
    step "convolutions of ResNet-18 and beautiful_mnist, forward, dx and dw: libtinyc, then PyTorch"
    TINYC_LIB=${TINYC_LIB:-$build/libtinyc.so} "$PY" bench/conv_rows.py --threads "$threads" \
        --calls "$([ ${#quick[@]} -gt 0 ] && echo 3 || echo 9)" --lines "$tmp/conv.txt" >&2 || status=1
fi

step "compile: a convnet step with a fresh, then a warm TC_CACHEDIR"
TC_CACHEDIR=$tmp/cache "$bin/bench_train_step" --model conv --compile 1 > "$tmp/compile_cold.txt" || status=1
TC_CACHEDIR=$tmp/cache "$bin/bench_train_step" --model conv --compile 1 > "$tmp/compile_warm.txt" || status=1

step "JIT replay overhead"
"$bin/bench_jit" 200 > "$tmp/jit.txt" || status=1

echo "load-after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$tmp/meta.txt"
"$PY" bench/table.py "$tmp" "$threads" "$out" || status=1
if [ "$status" != 0 ] || grep -q 'FAIL' "$tmp"/*.txt; then
    echo "run.sh: a benchmark failed or a result differs from its peer (see above)" >&2
    exit 1
fi
