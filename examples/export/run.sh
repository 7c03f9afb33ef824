#!/usr/bin/env bash
# run.sh - the export example end to end: train the MNIST convnet with the
# library and save it (examples/mnist --save), export its inference and its
# Adam training step (examples/export_mnist), build both with plain cc into
# programs that link nothing of ours (only libc, libm and pthread), and run
# them against what the library computed.
# usage: bash examples/export/run.sh [build-dir] [out-dir] [mnist training steps]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-/tmp/tc_export_mnist}
train_steps=${3:-70}
CC=${CC:-cc}
mkdir -p "$out"
if [ ! -f "$out/mnist.safetensors" ]; then
    "$build/examples/mnist" --steps "$train_steps" --save "$out/mnist.safetensors"
fi
"$build/examples/export_mnist" --weights "$out/mnist.safetensors" --out "$out"
# nothing of libtinyc on the command lines: no -I to its headers, no -L, no -ltinyc
flags="-std=c11 -O2 -march=native -Wall -Wextra"
$CC $flags -I"$out" -o "$out/infer" examples/export/infer.c "$out/mnist_infer.c" -lm
$CC $flags -pthread -I"$out" -o "$out/train" examples/export/train.c "$out/mnist_train.c" -lm
if ldd "$out/infer" "$out/train" | grep -e tinyc -e ffi; then
    echo "run.sh: the programs link libtinyc or libffi" >&2
    exit 1
fi
"$out/infer" "$out"
"$out/train" "$out" "$(nproc)"
