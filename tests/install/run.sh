#!/bin/sh
# run.sh BUILD_DIR CONSUMER_DIR CC [EXTRA_CFLAGS] [CONFIG]
# The install test: `cmake --install` the build in BUILD_DIR into a fresh
# temporary prefix, then build the outside project in CONSUMER_DIR against
# that prefix three ways and run each program:
#   1. CMake, find_package(tinyc) -> tinyc::tinyc         (shared library)
#   2. CMake, find_package(tinyc) -> tinyc::tinyc_static  (static + its deps)
#   3. a plain `CC main.c $(pkg-config --cflags --libs tinyc)` (shared library)
# EXTRA_CFLAGS go to every compile and link (the sanitizer flags of an
# instrumented build). The prefix is deleted afterwards unless KEEP_INSTALL=1.
set -eu

build=${1:?usage: run.sh BUILD_DIR CONSUMER_DIR CC [EXTRA_CFLAGS] [CONFIG]}
consumer=${2:?usage: run.sh BUILD_DIR CONSUMER_DIR CC [EXTRA_CFLAGS] [CONFIG]}
cc=${3:?usage: run.sh BUILD_DIR CONSUMER_DIR CC [EXTRA_CFLAGS] [CONFIG]}
extra=${4:-}
config=${5:-}

work=$(mktemp -d "$build/install-test.XXXXXX")
if [ "${KEEP_INSTALL:-0}" != 1 ]; then
    trap 'rm -rf "$work"' EXIT
fi
prefix=$work/prefix
log=$work/log
: "${TC_CACHEDIR:=$work/kcache}"
export TC_CACHEDIR

step() { # step WHAT COMMAND...: runs COMMAND quietly, shows its log if it fails
    what=$1
    shift
    if "$@" > "$log" 2>&1; then
        echo "install test: ok: $what"
    else
        echo "install test: FAILED: $what"
        echo "  command: $*"
        sed 's/^/  | /' "$log"
        exit 1
    fi
}

# 1. install -------------------------------------------------------------------
if [ -n "$config" ]; then
    step "cmake --install into $prefix" cmake --install "$build" --prefix "$prefix" --config "$config"
else
    step "cmake --install into $prefix" cmake --install "$build" --prefix "$prefix"
fi
[ -f "$prefix/include/tinyc.h" ] || { echo "install test: FAILED: include/tinyc.h not installed"; exit 1; }
pc=$(find "$prefix" -name tinyc.pc | head -n 1)
cfg=$(find "$prefix" -name tinycConfig.cmake | head -n 1)
so=$(find "$prefix" -name 'libtinyc.so' | head -n 1)
ar=$(find "$prefix" -name 'libtinyc.a' | head -n 1)
for v in "tinyc.pc:$pc" "tinycConfig.cmake:$cfg" "libtinyc.so:$so" "libtinyc.a:$ar"; do
    [ -n "${v#*:}" ] || { echo "install test: FAILED: ${v%%:*} not installed"; exit 1; }
done
libdir=$(dirname "$so")
echo "install test: installed $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"

# 2. find_package(tinyc), shared and static ------------------------------------
step "configure consumer with find_package(tinyc)" \
    cmake -S "$consumer" -B "$work/cmake-build" -DCMAKE_BUILD_TYPE=Release \
          -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$extra" -DCMAKE_PREFIX_PATH="$prefix"
found=$(sed -n 's/^tinyc_DIR:[A-Z]*=//p' "$work/cmake-build/CMakeCache.txt")
case "$found" in
"$prefix"/*) echo "install test: ok: find_package(tinyc) found $found" ;;
*) echo "install test: FAILED: find_package(tinyc) found '$found', not the one under $prefix"
   exit 1 ;;
esac
step "build consumer (tinyc::tinyc, tinyc::tinyc_static)" cmake --build "$work/cmake-build"

# the shared consumer must load the installed libtinyc.so, not the build's
needed=$(LD_LIBRARY_PATH="$libdir" ldd "$work/cmake-build/consumer_shared" | grep libtinyc || true)
case "$needed" in
*"$libdir"/*) echo "install test: ok: consumer_shared loads ${needed#*=> }" ;;
*) echo "install test: FAILED: consumer_shared does not load libtinyc from $libdir: $needed"
   exit 1 ;;
esac
if ldd "$work/cmake-build/consumer_static" | grep -q libtinyc; then
    echo "install test: FAILED: consumer_static depends on libtinyc.so"
    exit 1
fi
step "run consumer_shared" env LD_LIBRARY_PATH="$libdir" "$work/cmake-build/consumer_shared"
step "run consumer_static" "$work/cmake-build/consumer_static"

# 3. pkg-config ------------------------------------------------------------------
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs tinyc)
echo "install test: pkg-config --cflags --libs tinyc: $flags"
# shellcheck disable=SC2086 # flags are words on purpose
step "build consumer with pkg-config" \
    "$cc" $extra -o "$work/consumer_pc" "$consumer/main.c" $flags
step "run consumer_pc" env LD_LIBRARY_PATH="$libdir" "$work/consumer_pc"
# static through pkg-config: libtinyc.a plus Libs.private/Requires.private
cflags=$(pkg-config --cflags tinyc)
static_libs=$(pkg-config --static --libs tinyc | sed 's/-ltinyc\b//')
# shellcheck disable=SC2086
step "build consumer with pkg-config --static" \
    "$cc" $extra -o "$work/consumer_pc_static" "$consumer/main.c" $cflags "$ar" $static_libs
step "run consumer_pc_static" "$work/consumer_pc_static"

echo "install test: all consumers built against $prefix and ran"
