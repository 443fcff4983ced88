#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs clang-tidy (the checks in .clang-tidy, version 14) over Veneer's library
# sources (interposer/ datatypes/ topology/ algorithms/ support/ kernels/*.cpp)
# as a build compiles them, and fails on any finding. See test/style/README.md.
#
#   test/style/check_tidy.sh BUILD_DIR            # exit 1 on any finding
#   test/style/check_tidy.sh BUILD_DIR -- FILE... # only these files
#
# BUILD_DIR must hold compile_commands.json (configure with
# -DCMAKE_EXPORT_COMPILE_COMMANDS=ON). VENEER_JOBS files at a time (default 2).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2

usage() { sed -n '3,11s/^# \{0,1\}//p' "$0"; }

build="" files=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --) shift; files=("$@"); break ;;
    -*) echo "check_tidy.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    *) [ -z "$build" ] || { usage >&2; exit 2; }; build=$1 ;;
  esac
  shift
done
[ -n "$build" ] || { usage >&2; exit 2; }

tidy=${CLANG_TIDY:-}
if [ -z "$tidy" ]; then
  if command -v clang-tidy-14 >/dev/null 2>&1; then tidy=clang-tidy-14; else tidy=clang-tidy; fi
fi
command -v "$tidy" >/dev/null 2>&1 || { echo "check_tidy.sh: $tidy not found (apt-get install clang-tidy)" >&2; exit 2; }
db="$build/compile_commands.json"
[ -f "$db" ] || { echo "check_tidy.sh: no $db (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)" >&2; exit 2; }
db_dir=$(cd "$build" && pwd)

if [ ${#files[@]} -eq 0 ]; then
  # The library's own sources, as far as this build compiles them (the CUDA
  # kernels themselves, *.cu, are left to nvcc). Tests and benchmarks are not
  # the library: .clang-tidy's header filter also keeps their headers out.
  while IFS= read -r f; do
    grep -qF "\"$root/$f\"" "$db" && files+=("$f")
  done < <(git ls-files -- '*.cpp' | grep -E '^(interposer|datatypes|topology|algorithms|support|kernels)/[^/]*\.cpp$')
fi
[ ${#files[@]} -gt 0 ] || { echo "check_tidy.sh: no library sources in $db" >&2; exit 2; }

jobs=${VENEER_JOBS:-2}
echo "== clang-tidy ($("$tidy" --version | grep -o 'version [0-9.]*')) over ${#files[@]} files, $jobs at a time"
out=$(mktemp)
trap 'rm -f "$out" "$out.failing"' EXIT
start=$(date +%s)
# Largest files first, so the slowest do not start last. ($1..$3 expand in the inner shell.)
# shellcheck disable=SC2016
printf '%s\n' "${files[@]}" | xargs -d '\n' ls -S |
  xargs -d '\n' -P "$jobs" -I{} sh -c '"$1" -p "$2" --quiet "$3" 2>/dev/null' sh "$tidy" "$db_dir" {} >"$out"

# Each finding once (a header's is printed for every file that includes it),
# as "path:line:col: warning: text [check]" with the path relative to the root.
findings=$(grep -E '^/.*: (warning|error): ' "$out" | sed "s|^$root/||" | sort -u)
failing=""
[ -z "$findings" ] || failing="$findings"$'\n'
elapsed=$(($(date +%s) - start))
if [ -z "$failing" ]; then
  echo "== clang-tidy: clean ($elapsed s)"
  exit 0
fi
# The failing findings with the context clang-tidy printed under each.
printf '%s' "$failing" >"$out.failing"
awk -v root="$root/" '
  FNR == NR { want[$0] = 1; next }
  /^\/.*: (warning|error|note): / {
    line = $0
    if (index(line, root) == 1) line = substr(line, length(root) + 1)
    if (line ~ /: (warning|error): /) { show = (line in want) && !(line in seen); seen[line] = 1 }
    if (show) print line
    next
  }
  /^[0-9]+ warnings? (and [0-9]+ errors? )?generated/ { next }
  show { print }' "$out.failing" "$out"
echo "== clang-tidy: $(printf '%s' "$failing" | grep -c .) findings ($elapsed s), by check:"
printf '%s' "$failing" | grep -oE '\[[A-Za-z0-9.,-]+\]$' | sort | uniq -c | sort -rn
exit 1
