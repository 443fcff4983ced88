#!/bin/bash
# Veneer in one command, on a fresh Debian 12 machine:
#
#   bench/demo.sh
#
# installs the Debian packages it needs (apt-get; root or sudo), configures
# and builds Veneer against Open MPI (Release, in build/demo), runs the
# halo3d mini-app once with the library alone and once with Veneer preloaded,
# the packing benchmark (MPI_Pack through Veneer vs the library's) and the
# allreduce benchmark (the algorithm Veneer picks vs the library's), and
# prints the speedups as a short table. A few minutes on two cores.
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
targets=(veneer veneer-halo3d veneer-bench-pack)
[[ $(cmake --build "$build" --target help 2>/dev/null) == *veneer-bench-coll* ]] && targets+=(veneer-bench-coll)
cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$build/demo-build.log" 2>&1 ||
  { tail -30 "$build/demo-build.log"; echo "demo: build failed (log: $build/demo-build.log)"; exit 1; }
echo "built ${targets[*]}"

step "benchmarks, library alone and with Veneer"
# Two rank counts for halo3d; every measurement twice, alternating library and
# Veneer, best of each side, so a noisy moment does not decide a ratio.
ranks=${VENEER_DEMO_RANKS:-"2 4"}
results=$build/results/demo
suite_rc=0
"$root/bench/suite/run_suite.sh" --build "$build" --quick --only pack,coll,halo3d --ranks "$ranks" --repeat 2 \
  --halo-args "--n 24 --r 2 --q 3 --iterations 30 --warmup 3 --method all" \
  --coll-args "--quick --collective allreduce" --out "$results" || suite_rc=$?

step "speedups"
/usr/bin/python3 "$root/bench/suite/results.py" table --results "$results.jsonl" || true
echo
echo "All numbers: $results.csv (one row per comparison), $results.jsonl (machine description and raw records)."
echo "Charts: apt-get install python3-matplotlib; /usr/bin/python3 bench/plot/plot_results.py $results.jsonl"
echo "demo: done in $(( $(date +%s) - started )) s"
exit $suite_rc
