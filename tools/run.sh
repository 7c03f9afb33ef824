#!/usr/bin/env bash
# tools/run.sh - the main job: on a fresh Debian 12 machine as root, installs
# missing packages (tools/deps.sh), builds libtinyc and its examples (Release,
# build/), and runs examples/hello. Works from any directory.
# Environment: JOBS (default: nproc).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/deps.sh

JOBS=${JOBS:-$(nproc)}
tc_install_deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$JOBS" --target tc_examples
TC_CACHEDIR="$PWD/build/kcache/examples" build/examples/hello
