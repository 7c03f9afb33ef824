#!/usr/bin/env bash
# tools/run.sh - the main job: on a fresh Debian 12 machine as root, installs
# missing packages (tools/deps.sh, including Debian's Fashion-MNIST), builds
# libtinyc and its examples (Release, build/), and trains the MNIST example:
# tinygrad's beautiful_mnist convnet, 70 steps of batch 512 with Adam on the
# default CPU device, ending with the test accuracy. Works from any directory.
# Environment: JOBS (default: nproc); MNIST_ARGS (default: the convnet recipe,
# e.g. MNIST_ARGS="--model mlp" for the small MLP).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/deps.sh

JOBS=${JOBS:-$(nproc)}
tc_install_deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$JOBS" --target tc_examples
export TC_CACHEDIR="$PWD/build/kcache/examples"
build/examples/hello
# shellcheck disable=SC2086 # MNIST_ARGS is a list of arguments
build/examples/mnist ${MNIST_ARGS:---model conv --steps 70 --batch 512}
