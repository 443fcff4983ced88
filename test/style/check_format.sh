#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Checks the tracked C/C++/CUDA sources against the repository's .clang-format
# (clang-format 14), or applies it; --tidy runs test/style/check_tidy.sh (the
# checks in .clang-tidy over the library sources of a build that exported
# compile_commands.json). See test/style/README.md.
#
#   test/style/check_format.sh                  # check: exit 1 if any file would change
#   test/style/check_format.sh --fix            # reformat the files in place
#   test/style/check_format.sh --tidy BUILD_DIR # runs test/style/check_tidy.sh BUILD_DIR
#   test/style/check_format.sh [...] -- FILE... # only these files
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2

usage() { sed -n '3,11s/^# \{0,1\}//p' "$0"; }

mode=check build=""
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --fix) mode=fix ;;
    --tidy) [ $# -ge 2 ] || { usage >&2; exit 2; }; mode=tidy; build=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; files=("$@"); break ;;
    *) echo "check_format.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

# A tool of the version the configuration was written for: other versions
# format some constructs differently, and would report differences that are not.
pick() {  # pick VAR NAME: $VAR if set, else NAME-14, else NAME
  local override=${!1:-}
  if [ -n "$override" ]; then echo "$override"; return; fi
  if command -v "$2-14" >/dev/null 2>&1; then echo "$2-14"; else echo "$2"; fi
}

tracked_sources() {  # the C/C++/CUDA files under version control (or, outside git, on disk)
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -- '*.c' '*.h' '*.cpp' '*.hpp' '*.cu' '*.cuh'
  else
    find . -path ./build -prune -o -path ./.git -prune -o -type f \
      \( -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) -print |
      sed 's|^\./||' | sort
  fi
}

# The lint check has its own script; --tidy is kept as a way to call it.
if [ "$mode" = tidy ]; then
  if [ ${#files[@]} -gt 0 ]; then exec test/style/check_tidy.sh "$build" -- "${files[@]}"; fi
  exec test/style/check_tidy.sh "$build"
fi

format=$(pick CLANG_FORMAT clang-format)
command -v "$format" >/dev/null 2>&1 || { echo "check_format.sh: $format not found (apt-get install clang-format)" >&2; exit 2; }
version=$("$format" --version | grep -oE 'version [0-9]+' | grep -oE '[0-9]+')
[ "$version" = 14 ] || echo "check_format.sh: warning: $format is version $version; .clang-format is tuned for 14" >&2
[ ${#files[@]} -gt 0 ] || mapfile -t files < <(tracked_sources)

if [ "$mode" = fix ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 20 "$format" -i --style=file
  echo "== clang-format: applied to ${#files[@]} files"
  exit 0
fi

bad=0
for f in "${files[@]}"; do
  if ! "$format" --dry-run --Werror --style=file "$f" >/dev/null 2>&1; then
    changed=$("$format" --style=file "$f" | diff -U0 "$f" - | grep -c '^-[^-]')
    echo "$f: $changed lines would change"
    bad=$((bad + 1))
  fi
done
if [ "$bad" -gt 0 ]; then
  echo "== clang-format: $bad of ${#files[@]} files differ from .clang-format (see them: clang-format --dry-run FILE;" \
       "apply: test/style/check_format.sh --fix)"
  exit 1
fi
echo "== clang-format: ${#files[@]} files clean"
