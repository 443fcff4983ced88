#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# run_fortran_test.sh FLAVOUR RUN_MPI LIBVENEER NP APP [COUNTER...]
# Runs the Fortran program APP (which checks its own results and prints "ok")
# without Veneer, then with Veneer preloaded, taking over every typed send and
# receive and forcing Veneer's allreduce; the end-of-run report must show the
# program's sends, receives, packs, unpacks and allreduces taken over, proving
# the Fortran calls went through Veneer: the sends and receives taken over and
# each further report line COUNTER ("pack taken over", ...) must be nonzero.
set -eu
flavour=$1; run_mpi=$2; veneer=$3; np=$4; app=$5
shift 5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
preload=$veneer
if [ -n "${VENEER_TEST_PRELOAD_PREFIX:-}" ]; then preload="$VENEER_TEST_PRELOAD_PREFIX:$preload"; fi
if [ "$flavour" = openmpi ]; then flags="-x LD_PRELOAD=$preload"; else flags="-genv LD_PRELOAD $preload"; fi

"$run_mpi" "$np" "$app" >"$tmp/plain" 2>&1 || { cat "$tmp/plain"; exit 1; }
grep -q ": ok" "$tmp/plain" || { echo "the program failed without Veneer"; cat "$tmp/plain"; exit 1; }

VENEER_TEST_LAUNCH_FLAGS="$flags ${VENEER_TEST_LAUNCH_FLAGS:-}" VENEER_REPORT=1 VENEER_REPORT_FILE="$tmp/report" \
  VENEER_P2P_MAX_BLOCK=1M VENEER_P2P_MIN_BYTES=0 VENEER_ALLREDUCE=recursive_doubling \
  "$run_mpi" "$np" "$app" >"$tmp/veneer" 2>&1 || { cat "$tmp/veneer"; exit 1; }
grep -q ": ok" "$tmp/veneer" || { echo "the program failed with Veneer"; cat "$tmp/veneer"; exit 1; }
[ -s "$tmp/report" ] || { echo "no Veneer report: was it preloaded?"; cat "$tmp/veneer"; exit 1; }
for what in "sends taken over" "receives taken over" "$@"; do
  n=$(awk -v w="$what" 'index($0, w) == 3 { print $NF }' "$tmp/report")
  if [ -z "$n" ] || [ "$n" -eq 0 ]; then
    echo "Veneer's report shows no $what"; cat "$tmp/report"; exit 1
  fi
done
case " $* " in
  *"collectives taken over"*)
    grep -q "allreduce: recursive_doubling" "$tmp/report" || { echo "allreduce not run by Veneer"; cat "$tmp/report"; exit 1; } ;;
esac
cat "$tmp/veneer"
echo "run_fortran_test: $(basename "$app") verified with and without Veneer; report:"
cat "$tmp/report"
