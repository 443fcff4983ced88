#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Veneer in one command, on a fresh Debian 12 machine:
#
#   bench/demo.sh
#
# installs the Debian packages it needs (apt-get; root or sudo), configures
# and builds Veneer against Open MPI (Release, in build/demo), runs the
# halo3d mini-app with Veneer preloaded and --paired (every iteration one
# exchange through Veneer's MPI_ entry points and one through the library's
# PMPI_ ones, in the same run, so that the ratio is not two launches' noise),
# the packing benchmark (MPI_Pack through Veneer vs the library's), then
# calibrates Veneer's model for allreduce (a short veneer-calibrate run into
# the build folder, not the user's cache) and times MPI_Allreduce through
# Veneer's real entry points with veneer-model-check: the algorithm Veneer
# picks by itself against the library and every algorithm forced. It prints
# the speedups as a short table. A few minutes on two cores.
#
# Environment: VENEER_DEMO_BUILD (build folder, default build/demo),
# VENEER_DEMO_CMAKE_ARGS (extra cmake options), VENEER_DEMO_RANKS (halo3d
# rank counts, default "2 4"; allreduce runs on the largest), VENEER_JOBS
# (parallel compile jobs, default: all cores), VENEER_* (Veneer's own settings).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${VENEER_DEMO_BUILD:-$root/build/demo}
jobs=${VENEER_JOBS:-$(nproc)}
started=$(date +%s)
step() { echo; echo "== $* ($(( $(date +%s) - started )) s)"; }

step "Debian packages"
packages=(build-essential cmake ninja-build pkg-config openmpi-bin libopenmpi-dev libhwloc-dev hwloc python3)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null
else
  echo "all present"
fi

step "configure and build Veneer (Open MPI, Release) in $build"
mkdir -p "$build"
# Open MPI by name: on a machine with both MPIs, plain mpicc may be MPICH's.
# The demo measures host paths only, so CUDA and the tests stay out of the build.
# shellcheck disable=SC2086  # VENEER_DEMO_CMAKE_ARGS is a list of options
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVENEER_TESTS=OFF -DVENEER_BENCH=ON \
  -DVENEER_CUDA=OFF -DMPI_C_COMPILER=mpicc.openmpi -DMPI_CXX_COMPILER=mpicxx.openmpi \
  ${VENEER_DEMO_CMAKE_ARGS:-} >"$build/demo-configure.log" 2>&1 ||
  { tail -30 "$build/demo-configure.log"; echo "demo: configure failed (log: $build/demo-configure.log)"; exit 1; }
targets=(veneer veneer-halo3d veneer-bench-pack veneer-calibrate veneer-model-check)
cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$build/demo-build.log" 2>&1 ||
  { tail -30 "$build/demo-build.log"; echo "demo: build failed (log: $build/demo-build.log)"; exit 1; }
echo "built ${targets[*]}"

step "packing benchmark, library alone and with Veneer"
ranks=${VENEER_DEMO_RANKS:-"2 4"}
results=$build/results/demo
suite_rc=0
"$root/bench/suite/run_suite.sh" --build "$build" --quick --only pack --repeat 2 --out "$results" || suite_rc=$?

# The launcher for halo3d and allreduce (Open MPI's, as the build).
read -r -a launcher <<<"${MPIEXEC:-$(command -v mpiexec.openmpi || echo mpirun)}"
mpiexec=("${launcher[@]}" --oversubscribe --bind-to none)
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}

# halo3d with Veneer preloaded, both ways in one run; every halo cell of
# every exchange is verified. Rows: "what|library us|Veneer us|speedup".
step "halo3d, Veneer and the library in the same run (--paired)"
halo_rows=$results-halo3d.rows
mkdir -p "$(dirname "$halo_rows")"
: >"$halo_rows"
for n in $ranks; do
  log=$results-halo3d-np$n.log
  if timeout -k 10 300 "${mpiexec[@]}" -n "$n" -x LD_PRELOAD="$build/interposer/libveneer.so" \
    "$build/bench/veneer-halo3d" --paired --n 24 --r 2 --q 3 --iterations 60 --warmup 5 --method all >"$log" 2>&1; then
    awk -v n="$n" '/^(isend|neighbor|alltoallv) / { printf "halo3d %s, %s ranks|%s|%s|%s\n", $1, n, $3, $2, $4 }' \
      "$log" >>"$halo_rows"
    tail -1 "$log"
  else
    tail -20 "$log"
    echo "demo: halo3d failed on $n ranks (log: $log)"
    suite_rc=3
  fi
done

# Allreduce as an application calls it: MPI_Allreduce through libveneer,
# after a short calibration (the profile stays in the build folder). Both
# runs pin their ranks: unpinned, oversubscribed ranks share the cores
# differently from launch to launch, and so do the library's own times.
coll_ranks=2
for n in $ranks; do [ "$n" -gt "$coll_ranks" ] && coll_ranks=$n; done
mpiexec=("${launcher[@]}" --oversubscribe --bind-to core:overload-allowed -n "$coll_ranks")
profile=$build/demo-profile.json
check=$results-model-check
mkdir -p "$(dirname "$check")"
step "calibrate allreduce ($coll_ranks ranks) and time what Veneer picks through MPI_Allreduce"
coll_rc=0
timeout -k 10 300 "${mpiexec[@]}" "$build/bench/veneer-calibrate" --collective allreduce --max 256k --step 8 \
  --repetitions 5 --seconds 0.002 --out "$profile" >"$check-calibrate.log" 2>&1 || coll_rc=$?
if [ $coll_rc = 0 ]; then
  tail -1 "$check-calibrate.log"
  VENEER_PROFILE=$profile timeout -k 10 300 "${mpiexec[@]}" "$build/bench/veneer-model-check" --collective allreduce \
    --max 256k --no-p2p --repetitions 7 --seconds 0.002 --json "$check.jsonl" >"$check.log" 2>&1 || coll_rc=$?
  tail -1 "$check.log"
fi
[ $coll_rc = 0 ] || { tail -20 "$check-calibrate.log" "$check.log" 2>/dev/null; echo "demo: allreduce check failed"; }

step "speedups"
if [ -s "$halo_rows" ]; then
  echo "halo3d (Veneer and the library in the same run; medians of the slowest rank's exchange time):"
  while IFS='|' read -r what library veneer speedup; do
    printf '%-28s %9s us %9s us  %sx\n' "$what" "$library" "$veneer" "$speedup"
  done <"$halo_rows"
fi
/usr/bin/python3 "$root/bench/suite/results.py" table --results "$results.jsonl" || true
if [ -s "$check.jsonl" ]; then
  # One line per size: the library (Veneer passing the call through) against
  # Veneer's automatic choice, both timed through MPI_Allreduce in one run.
  /usr/bin/python3 - "$check.jsonl" <<'PY' || true
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
def size(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"
lines = []
for r in rows:
    lib = r["forced_us"].get("library")
    if not lib:
        continue
    note = f"  [Veneer picks {r['auto']}"
    if r["best"] != r["auto"].split(" ")[0]:
        note += f"; fastest forced: {r['best']} {lib / r['best_us']:.2f}x"
    lines.append((f"{r['case']} {size(r['bytes'])}, {r['ranks']} ranks", f"{lib:.2f} us",
                  f"{r['auto_us']:.2f} us", f"{lib / r['auto_us']:.2f}x{note}]"))
width = max((len(w) for w, *_ in lines), default=0)
print("MPI_Allreduce through Veneer (library: Veneer passes the call through; Veneer: its automatic choice):")
for what, library, veneer, speedup in lines:
    print(f"{what:<{width}}  {library:>12}  {veneer:>12}  {speedup}")
PY
  tail -1 "$check.log"
fi
echo
echo "All numbers: $results.csv (one row per comparison), $results.jsonl (machine description and raw records);"
echo "allreduce: $check.log, $check.jsonl (veneer-model-check: the automatic choice and every forced one)."
echo "Charts: apt-get install python3-matplotlib; /usr/bin/python3 bench/plot/plot_results.py $results.jsonl"
echo "demo: done in $(( $(date +%s) - started )) s"
[ $suite_rc = 0 ] && suite_rc=$coll_rc
exit $suite_rc
