#!/usr/bin/env bash
# tools/schedule_replay.sh BUILD_DIR OUT - the scheduler's process replay:
# runs the test suite of BUILD_DIR (ctest without the slow and gpu labels,
# one test at a time, then the Python tests) with TC_SCHEDULE_LOG=OUT, so OUT
# holds the dump of every schedule the tests made, in a fixed order. Run it
# on builds before and after a scheduler change and diff the two files:
# every changed kernel shows up, whether or not a test pins its count.
#   bash tools/schedule_replay.sh build /tmp/before.txt   # (old build)
#   bash tools/schedule_replay.sh build /tmp/after.txt    # (new build)
#   diff /tmp/before.txt /tmp/after.txt
set -uo pipefail
build=${1:?usage: schedule_replay.sh BUILD_DIR OUT}
out=${2:?usage: schedule_replay.sh BUILD_DIR OUT}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$build" && pwd)
out=$(realpath -m "$out")
rm -f "$out"
export TC_SCHEDULE_LOG=$out TC_CACHEDIR=$build/kcache/replay
ctest --test-dir "$build" -j1 -LE 'slow|gpu' --output-on-failure -Q
TINYC_LIB=$build/libtinyc.so /usr/bin/python3 -m pytest -q -p no:cacheprovider "$top/python/tests" >/dev/null
echo "schedule_replay: $(grep -c '^schedule:' "$out") schedules, $(grep -c '^item' "$out") items in $out"
