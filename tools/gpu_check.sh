#!/bin/sh
# gpu_check.sh [BUILD_DIR] - the CUDA checks, for a machine with an NVIDIA GPU
# (driver with libcuda.so.1, and NVRTC: libnvrtc.so from the CUDA toolkit or
# the nvidia-cuda-nvrtc wheel; set TC_NVRTC_LIB=/path/libnvrtc.so.N if it is
# not on the loader's path). CUDA needs nothing at build time (both libraries
# are dlopen'ed), so this is a plain build. Then it runs:
#   1. runtime_test_cuda: device open, copies at offsets, a launch, tensors,
#      NVRTC errors and warnings (here nothing may skip)
#   2. codegen_test_gpu: grouped reduces, barriers, gates (OpenCL parts skip
#      without OpenCL; the NVRTC part runs)
#   3. the differential suite and the kernel-count tests with TC_DEVICE=CUDA:
#      every kernel compiled by NVRTC for this GPU, launched, and compared
#      with the reference evaluator
#   4. the same suites with TC_CUDA_CHECK=1 (strict compile: NVRTC warnings
#      fail) while they run on the CPU
#   5. bench/gpu.sh CUDA in a Release build (BUILD_DIR-bench): softmax,
#      layernorm, matmul and the MNIST training steps in ms next to PyTorch
#      on the same GPU (where this Python's torch has CUDA), results checked
# Exit status 0 only if everything passed and nothing was skipped that a GPU
# machine must run. Environment: TC_SANITIZE=1 builds with ASan+UBSan (slow
# but thorough), JOBS=<n> for the build, BENCH=0 skips step 5.
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-gpu-check}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}

if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L
else
    echo "gpu_check: nvidia-smi not found; trying anyway"
fi

sanitize=OFF
[ "${TC_SANITIZE:-0}" = 1 ] && sanitize=ON
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTC_SANITIZE="$sanitize" \
      -DTC_BUILD_EXAMPLES=OFF -DTC_TEST_INSTALL=OFF
cmake --build "$build" -j "$jobs"

export TC_CACHEDIR="$build/kcache-gpu-check"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:intercept_tls_get_addr=0}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0

# check NAME MUST_NOT_SKIP ENV... -- runs one test binary with ENV
check() {
    name=$1
    strict=$2
    shift 2
    printf '== %s %s\n' "$name" "$*"
    if env "$@" "$build/$name" > "$log" 2>&1; then
        status=ok
    else
        status=FAILED
        failed=1
    fi
    if [ "$strict" = strict ] && grep -q -e '\[  SKIPPED \]' -e 'CUDA compile checks skipped' "$log"; then
        status="FAILED (skipped tests on a GPU machine)"
        failed=1
    fi
    grep -E '^\[  (PASSED|FAILED|SKIPPED) \]|^diff [a-z_]+:|CUDA compile' "$log" | sed 's/^/   /'
    [ "$status" = ok ] || tail -n 60 "$log" | sed 's/^/   | /'
    echo "   -> $status"
}

check runtime_test_cuda strict TC_DEVICE=
check codegen_test_gpu lax TC_DEVICE=
for t in diff_test_diff schedule_test_schedule schedule_test_fusion; do
    check "$t" strict TC_DEVICE=CUDA
done
for t in diff_test_diff schedule_test_schedule schedule_test_fusion; do
    check "$t" strict TC_DEVICE= TC_CUDA_CHECK=1
done

if [ "${BENCH:-1}" = 1 ]; then
    echo "== bench/gpu.sh CUDA"
    if ! bash "$src/bench/gpu.sh" CUDA "$build-bench"; then
        echo "   -> FAILED"
        failed=1
    fi
fi

if [ "$failed" = 0 ]; then
    echo "gpu_check: all CUDA checks passed"
else
    echo "gpu_check: FAILED"
fi
exit "$failed"
