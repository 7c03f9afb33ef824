#!/usr/bin/env bash
# cold_start.sh - the first training step from an empty kernel cache (issue
# 13's cold start): beautiful_mnist's convnet (batch 512) and the 784-128-10
# MLP (batch 128) of bench_train_step --compile 1, and issue 13's 4-layer
# gelu MLP (batch 32) through the Python binding (bench/cold_mlp.py), next
# to tinygrad v0.9.2 (CLANG=1, CACHELEVEL=0) on that MLP when its tree is
# found (TC_TINYGRAD, else peers/tinygrad-0.9.2 in a folder above the
# checkout).
# Each of ours runs in a fresh TC_CACHEDIR with TC_CC set to a wrapper that
# times every compiler run (a few ms of shell per run are in the figures).
# Columns: first step ms, of it compile ms (engine counters: compiler runs
# and loads), kernels built from source, compiler runs, the slowest run ms,
# a later step ms (warm, eager).
# usage: bash bench/cold_start.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/cc" <<'SH'
#!/bin/sh
# the compiler, its wall ms appended to $TC_BENCH_CC_LOG
t0=$(date +%s%N)
"${TC_BENCH_CC:-cc}" "$@"
rc=$?
echo $(( ($(date +%s%N) - t0) / 1000000 )) >> "$TC_BENCH_CC_LOG"
exit $rc
SH
chmod +x "$tmp/cc"
export TC_BENCH_CC=${TC_CC:-cc} TC_CC="$tmp/cc"
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
tinygrad=${TC_TINYGRAD:-}
for up in .. ../.. ../../..; do
    [ -z "$tinygrad" ] && [ -d "$up/peers/tinygrad-0.9.2/tinygrad" ] && tinygrad=$(cd "$up/peers/tinygrad-0.9.2" && pwd)
done

# runs "$@" in a fresh cache; prints "runs slowest_ms" of its compilers
fresh() {
    rm -rf "$tmp/cache" "$tmp/cc.log"
    : > "$tmp/cc.log"
    TC_CACHEDIR="$tmp/cache" TC_BENCH_CC_LOG="$tmp/cc.log" "$@" > "$tmp/out.txt"
    awk 'BEGIN {m = 0} {n++; if ($1 > m) m = $1} END {printf "%d %d\n", n, m}' "$tmp/cc.log"
}
field() { tr ' ' '\n' < "$tmp/out.txt" | sed -n "s/^$1=//p"; }

printf "%-6s %10s %10s %7s %6s %11s %10s %12s\n" model first_ms compile_ms built runs slowest_ms later_ms tinygrad_ms
for m in conv mlp; do
    read -r runs slowest < <(fresh "$build/bench/bench_train_step" --model "$m" --compile 1)
    printf "%-6s %10.1f %10.1f %7s %6s %11s %10.1f %12s\n" "$m" "$(field first_wall_ms)" \
        "$(field first_compile_ms)" "$(field first_built)" "$runs" "$slowest" "$(field later_wall_ms)" -
done
TINYC_LIB="$build/libtinyc.so" PYTHONPATH=python fresh "$PY" bench/cold_mlp.py tinyc > /dev/null
first=$(field first_ms) built=$(field built) later=$(field last_ms) runs=$(field runs)
slowest=$(field slowest_ms) # the first step's runs only (parameters are realized before it)
peer=-
if [ -d "$tinygrad/tinygrad" ] && command -v clang > /dev/null; then
    PYTHONPATH="$tinygrad" CLANG=1 CACHELEVEL=0 "$PY" bench/cold_mlp.py tinygrad > "$tmp/out.txt" &&
        peer=$(field first_ms)
fi
printf "%-6s %10.1f %10s %7s %6s %11s %10.1f %12s\n" gelu4 "$first" - "$built" "$runs" "$slowest" "$later" "$peer"
[ "$peer" = - ] && echo "(no tinygrad tree found (TC_TINYGRAD) or no clang: no peer figure)"
exit 0
