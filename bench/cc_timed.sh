#!/bin/sh
# cc_timed.sh - a TC_CC for bench/scale.py's cold-start rows: runs the real
# compiler (TC_CC_REAL, default cc) with the CPU runtime's arguments, and
# when TC_CC_KEEP names a directory, keeps a copy of the kernel source there
# and appends "<microseconds> <copy>" to TC_CC_KEEP/times.txt, so the bench
# can name the slowest compile and compile it again alone. Costs a few
# forks per compile (date, cp); the exit status is the compiler's.
src=
for a in "$@"; do
    case $a in *.c) src=$a ;; esac
done
t0=$(date +%s%N)
${TC_CC_REAL:-cc} "$@"
rc=$?
t1=$(date +%s%N)
if [ -n "$TC_CC_KEEP" ] && [ -n "$src" ] && [ -f "$src" ]; then
    copy="$TC_CC_KEEP/$(basename "$src")"
    cp "$src" "$copy" && echo "$(((t1 - t0) / 1000)) $copy" >>"$TC_CC_KEEP/times.txt"
fi
exit $rc
