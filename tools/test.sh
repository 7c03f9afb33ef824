#!/usr/bin/env bash
# tools/test.sh - THE test command (CI runs it through .ci/run).
#
# On a fresh Debian 12 machine as root: installs missing packages
# (tools/deps.sh), then
#   1. Release build in build/:              cmake, build, ctest, examples,
#                                            the Python tests (pytest, torch)
#   2. ASan+UBSan build in build-asan/ (TC_SANITIZE=ON, leak checking on):
#                                            cmake, build, ctest (without the
#                                            gpu label), examples
# and exits nonzero if any step failed. A failed configure or build skips
# the rest of that build, but the other build still runs, so one run shows
# every failure.
# Works from any directory. Environment: JOBS (default: nproc).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/deps.sh

JOBS=${JOBS:-$(nproc)}
EXAMPLES=(hello adam_onestep) # examples/<name>.c run by this script, each must exit 0
failed=()  # names of the steps that failed
results=() # "ok      NAME" / "FAILED  NAME", in the order the steps ran

# step NAME COMMAND...: runs COMMAND, records whether it passed
step() {
    local name=$1
    shift
    echo
    echo "==== test.sh: $name"
    if "$@"; then
        results+=("ok      $name")
        return 0
    fi
    echo "==== test.sh: FAILED: $name"
    results+=("FAILED  $name")
    failed+=("$name")
    return 1
}

run_examples() { # run_examples BUILD_DIR
    local dir=$1 name rc=0
    for name in "${EXAMPLES[@]}"; do
        echo "---- $dir/examples/$name"
        if ! TC_CACHEDIR="$PWD/$dir/kcache/examples" "$dir/examples/$name"; then
            echo "---- $dir/examples/$name FAILED"
            rc=1
        fi
    done
    return "$rc"
}

# py_tests LIB: the Python tests against LIB in two pytest processes at once
# (one runs on one core), each every other test (TC_PY_SHARD, conftest.py);
# the first's output follows the second's
py_tests() {
    local out rb=0 ra=0
    out=$(mktemp)
    TC_PY_SHARD=0/2 TINYC_LIB="$1" /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests >"$out" 2>&1 &
    local pid=$!
    TC_PY_SHARD=1/2 TINYC_LIB="$1" /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests || rb=$?
    wait "$pid" || ra=$?
    cat "$out"
    rm -f "$out"
    return $((ra || rb))
}

# one_build LABEL DIR CMAKE_ARGS...: configure and build; if that worked, ctest
# and the examples (each runs even when the other failed)
one_build() {
    local label=$1 dir=$2
    shift 2
    step "$label: configure ($dir)" cmake -S . -B "$dir" "$@" &&
        step "$label: build" cmake --build "$dir" -j"$JOBS" || return 0
    step "$label: ctest" ctest --test-dir "$dir" --output-on-failure --no-tests=error -j"$JOBS" \
        ${CTEST_EXTRA:-} || true
    step "$label: examples" run_examples "$dir" || true
}

step "install packages" tc_install_deps || true
if ((${#failed[@]} == 0)); then
    one_build release build -DCMAKE_BUILD_TYPE=Release
    if [ -f build/libtinyc.so ]; then
        # the Python binding against the Release library, PyTorch as the reference
        step "release: python tests" py_tests "$PWD/build/libtinyc.so" || true
    fi
    # intercept_tls_get_addr=0: gcc 12's sanitizer runtime (up to gcc 13 and
    # LLVM 16) takes a dynamic TLS block that happens to start 16 bytes into
    # a page for a pre-2.25 glibc header and reads a bogus range from before
    # it, so LeakSanitizer's tracer dies at exit ("Tracer caught signal 11")
    # after a passing test, more often the more dlopen'd TLS (pocl, LLVM)
    export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1
    export LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp" # pocl's process-lifetime state
    # most GPU-target suites (OpenCL on pocl, NVRTC compile checks) and the
    # extra differential runs (TC_NOFUSE, TC_NOOPT, TC_BEAM: label slow) run in the
    # Release build only: under the sanitizers they take half an hour cold;
    # the on-device suites labelled gpu-asan run under them too
    CTEST_EXTRA="-LE gpu|slow" one_build asan build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTC_SANITIZE=ON
    if [ -f build-asan/libtinyc.so ]; then
        step "asan: ctest, OpenCL suites (label gpu-asan)" ctest --test-dir build-asan \
            --output-on-failure --no-tests=error -j"$JOBS" -L gpu-asan || true
    fi
fi

echo
echo "==== test.sh summary"
for r in "${results[@]}"; do echo "  $r"; done
if ((${#failed[@]} > 0)); then
    echo "test.sh: FAILED (${#failed[@]} step(s))"
    exit 1
fi
echo "test.sh: OK"
