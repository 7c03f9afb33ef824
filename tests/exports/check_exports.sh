#!/bin/sh
# check_exports.sh NM LIBRARY HEADER
# Checks that the shared library LIBRARY exports exactly the functions that
# HEADER marks with TC_API: none missing, none extra. Names starting with an
# underscore (_init, __bss_start, sanitizer hooks) belong to the toolchain and
# are ignored. Exit 0 when the sets match, 1 otherwise, 2 on a usage error.
set -eu

nm_tool=${1:-nm}
lib=${2:?usage: check_exports.sh NM LIBRARY HEADER}
header=${3:?usage: check_exports.sh NM LIBRARY HEADER}
[ -n "$nm_tool" ] || nm_tool="nm"
[ -f "$lib" ] || { echo "check_exports: no library at $lib" >&2; exit 2; }
[ -f "$header" ] || { echo "check_exports: no header at $header" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# declared: every line that starts with TC_API (after blanks), joined with the
# lines that follow until the first '(' ; the name is the identifier before it
awk '
    /^[ \t]*TC_API[ \t]/ { buf = ""; collecting = 1 }
    collecting {
        buf = buf " " $0
        p = index(buf, "(")
        if (p > 0) {
            decl = substr(buf, 1, p - 1)
            sub(/[ \t]+$/, "", decl)
            n = split(decl, words, /[^A-Za-z0-9_]+/)
            while (n > 0 && words[n] == "") n--
            if (n > 0) print words[n]
            collecting = 0
        } else if (buf ~ /;/) {
            collecting = 0 # TC_API on something that is not a function
        }
    }
' "$header" | sort -u > "$tmp/declared"

# exported: defined dynamic symbols, version suffixes (@...) dropped
"$nm_tool" -D --defined-only "$lib" | awk 'NF >= 2 { print $NF }' | sed 's/@.*//' \
    | sort -u > "$tmp/all"
grep -v '^_' "$tmp/all" > "$tmp/exported" || true

n_declared=$(wc -l < "$tmp/declared")
n_exported=$(wc -l < "$tmp/exported")
if [ "$n_declared" -eq 0 ]; then
    echo "check_exports: found no TC_API function in $header" >&2
    exit 1
fi

comm -23 "$tmp/declared" "$tmp/exported" > "$tmp/missing"
comm -13 "$tmp/declared" "$tmp/exported" > "$tmp/extra"

status=0
if [ -s "$tmp/missing" ]; then
    echo "check_exports: declared TC_API in $(basename "$header") but not exported by $(basename "$lib"):"
    sed 's/^/  /' "$tmp/missing"
    status=1
fi
if [ -s "$tmp/extra" ]; then
    echo "check_exports: exported by $(basename "$lib") but not TC_API in $(basename "$header")" \
         "(give them hidden visibility or declare them):"
    sed 's/^/  /' "$tmp/extra"
    status=1
fi
if [ "$status" -eq 0 ]; then
    echo "check_exports: $(basename "$lib") exports exactly the $n_declared TC_API functions"
else
    echo "check_exports: $n_declared declared, $n_exported exported (ignoring _-prefixed names)"
fi
exit "$status"
