#!/usr/bin/env bash
# tools/deps.sh - the Debian 12 packages libtinyc builds, tests and runs with,
# and tc_install_deps, which installs whichever of them are missing. Sourced by
# tools/test.sh and tools/run.sh; `bash tools/deps.sh` installs them alone.
# Add a package here when the project starts to need it.

TC_PACKAGES=(
    build-essential       # cc (also the CPU runtime's kernel compiler), make, nm
    cmake
    pkg-config
    libffi-dev            # CPU runtime: calling compiled kernels
    libcmocka-dev         # the C tests
    python3               # Python binding and its tests
    python3-numpy
    python3-pytest
    python3-torch         # the reference the Python tests compare with
    python3-setuptools    # python/ install test (pip install ./python)
    python3-pip
    python3-venv
    dataset-fashion-mnist # IDX files for the MNIST-format examples and tests
    fortunes              # /usr/share/games/fortunes: the GPT-2 example's text
    ocl-icd-opencl-dev    # the OpenCL device (ICD loader) ...
    opencl-headers
    pocl-opencl-icd       # ... and a real OpenCL CPU device for its tests
    clinfo
    graphviz              # tools/render_schedule.sh (TC_SAVE_SCHEDULE)
)

# prints the packages of TC_PACKAGES that dpkg does not have installed
tc_missing_packages() {
    local p
    for p in "${TC_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
            echo "$p"
        fi
    done
}

# installs the missing packages with apt-get (apt-get update only if needed)
tc_install_deps() {
    if ! command -v dpkg-query > /dev/null || ! command -v apt-get > /dev/null; then
        echo "deps: no dpkg/apt-get here; make sure these are installed: ${TC_PACKAGES[*]}" >&2
        return 0
    fi
    local missing
    mapfile -t missing < <(tc_missing_packages)
    if ((${#missing[@]} == 0)); then
        echo "deps: all ${#TC_PACKAGES[@]} packages are installed"
        return 0
    fi
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        if command -v sudo > /dev/null; then
            sudo=(sudo)
        else
            echo "deps: missing ${missing[*]}; run as root to install them" >&2
            return 1
        fi
    fi
    echo "deps: installing ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get -o DPkg::Lock::Timeout=300 update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
    tc_install_deps
fi
