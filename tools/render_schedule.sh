#!/usr/bin/env bash
# render_schedule.sh - turns TC_SAVE_SCHEDULE Graphviz files into SVG (or PNG).
# usage: TC_SAVE_SCHEDULE=/tmp/sched%d.dot ./my_program
#        bash tools/render_schedule.sh [-png] /tmp/sched*.dot
set -euo pipefail
fmt=svg
if [ "${1:-}" = "-png" ]; then fmt=png; shift; fi
if [ $# -eq 0 ]; then echo "usage: $0 [-png] file.dot..." >&2; exit 2; fi
if ! command -v dot >/dev/null 2>&1; then
    echo "render_schedule.sh: Graphviz's dot is not installed (apt-get install graphviz)" >&2
    exit 1
fi
for f in "$@"; do
    dot -T"$fmt" "$f" -o "${f%.dot}.$fmt"
    echo "${f%.dot}.$fmt"
done
