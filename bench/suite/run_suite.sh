#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# run_suite.sh: runs Veneer's benchmarks with and without Veneer in one job and
# writes one results file pair (JSON lines + CSV) with the machine description.
#
# The plain MPI programs (halo3d, ping-pong) run twice: once as they are and
# once with libveneer.so preloaded into the ranks only (never into the
# launcher). The pack benchmark (linked with Veneer: MPI_Pack vs PMPI_Pack) and
# the collectives benchmark (linked with Veneer's algorithms: each algorithm
# and the one Veneer's selector picks vs the library's own) compare in one run.
#
# Launchers: Open MPI's mpirun/mpiexec, MPICH's mpiexec.mpich, or srun when run
# inside a Slurm allocation (SLURM_JOB_ID set). Aggregation uses Debian's
# python3 (/usr/bin/python3), not whatever python3 comes first on PATH.
#
# The last line printed, when halo3d ran, is
#   halo3d: verified N exchanges, Veneer/library time ratio R
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${VENEER_PYTHON:-/usr/bin/python3}

usage() {
  cat <<EOF
usage: bench/suite/run_suite.sh [options]
  --build DIR        Veneer build folder (default: \$VENEER_BUILD or <repo>/build)
  --out PREFIX       write PREFIX.jsonl, PREFIX.csv and PREFIX.raw/ (logs, raw records)
                     (default: results/veneer-suite-<date>[-<slurm job>] under the current folder)
  --quick            short runs (CI, calibration, demos)
  --only LIST        comma-separated subset of: pack,pingpong,coll,halo3d (default: all)
  --ranks "LIST"     rank counts for halo3d (default: "1 2 4"; under Slurm 1, 2, 4, ...
                     doubling up to the allocation's tasks or CPUs)
  --coll-ranks N     ranks for the collectives benchmark (default: largest of --ranks, at least 2)
  --coll-args "ARGS" veneer-bench-coll's arguments (default: none; with --quick "--quick",
                     which measures allreduce and alltoall from 8 B to 256 KiB)
  --halo-args "ARGS" veneer-halo3d's arguments, replacing the defaults
                     ("--n 32 --r 2 --q 3 --iterations 100 --warmup 5 --method all";
                     with --quick "--n 16 ... --iterations 20 --warmup 2")
  --launcher NAME    auto (default) | mpirun | mpiexec.mpich | srun
  --srun-mpi NAME    srun's --mpi plugin (default: \$VENEER_SRUN_MPI, else pmix for Open MPI,
                     pmi2 for MPICH)
  --repeat K         run every measurement K times, library and Veneer alternating;
                     each side's best time counts (default 1; helps on a noisy machine)
  --timeout S        limit for every launched program in seconds (default 300)
  --exit-zero        exit 0 even when a benchmark failed (failures are still reported)
Environment: every VENEER_* variable set here reaches the Veneer runs and is
recorded in the results. MPIEXEC overrides the mpirun/mpiexec command.
EOF
}

build=${VENEER_BUILD:-$root/build}
out=""
quick=0
only="pack,pingpong,coll,halo3d"
ranks=""
coll_ranks=""
coll_args=""
coll_args_given=0
halo_args=""
launcher=auto
srun_mpi=${VENEER_SRUN_MPI:-}
limit=300
repeat=1
strict=1
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --only) only=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --coll-ranks) coll_ranks=$2; shift 2 ;;
    --coll-args) coll_args=$2; coll_args_given=1; shift 2 ;;
    --halo-args) halo_args=$2; shift 2 ;;
    --launcher) launcher=$2; shift 2 ;;
    --srun-mpi) srun_mpi=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --exit-zero) strict=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_suite: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done

die() { echo "run_suite: $*" >&2; exit 2; }
wants() { [[ ",$only," == *",$1,"* ]]; }
for b in ${only//,/ }; do
  case $b in pack|pingpong|coll|halo3d) ;; *) die "unknown benchmark '$b' in --only" ;; esac
done

[[ $repeat =~ ^[1-9][0-9]*$ ]] || die "--repeat needs a positive count"
[ -x "$python" ] || die "Debian's python3 ($python) is missing: apt-get install python3"
build=$(cd "$build" 2>/dev/null && pwd) || die "no build folder $build (configure and build Veneer first)"
libveneer=$build/interposer/libveneer.so
bin=$build/bench
[ -f "$libveneer" ] || die "no $libveneer: build the 'veneer' target"

# A preload left in the caller's environment would put Veneer under the
# library-only runs too; keep every other preloaded library.
if [ -n "${LD_PRELOAD:-}" ]; then
  kept=()
  IFS=': ' read -r -a entries <<<"$LD_PRELOAD"
  for e in "${entries[@]}"; do [[ $e == *libveneer* ]] || kept+=("$e"); done
  LD_PRELOAD=$(IFS=:; echo "${kept[*]:-}")
  if [ -n "$LD_PRELOAD" ]; then export LD_PRELOAD; else unset LD_PRELOAD; fi
fi

# Which MPI the programs were built with decides the launcher's dialect.
probe=""
for p in veneer-halo3d veneer-bench-pingpong veneer-bench-pack veneer-bench-coll; do
  [ -x "$bin/$p" ] && { probe=$bin/$p; break; }
done
[ -n "$probe" ] || die "no benchmark programs in $bin (build veneer-halo3d, veneer-bench-pingpong, veneer-bench-pack)"
# (ldd's output is read whole: with pipefail, grep -q closing the pipe early
# would make ldd die of SIGPIPE and the test fail at random.)
if [[ $(ldd "$probe" 2>/dev/null) == *libmpich* ]]; then flavor=mpich; else flavor=openmpi; fi

if [ "$launcher" = auto ]; then
  if [ -n "${SLURM_JOB_ID:-}" ] && command -v srun >/dev/null; then
    launcher=srun
  elif [ $flavor = mpich ]; then
    launcher=mpiexec.mpich
  else
    launcher=mpirun
  fi
fi
# MPIEXEC may carry options of its own ("mpiexec.openmpi --mca btl self,tcp").
case $launcher in
  srun) mpiexec=(srun) ;;
  mpiexec.mpich) read -r -a mpiexec <<<"${MPIEXEC:-mpiexec.mpich}" ;;
  mpirun)
    if [ $flavor = mpich ]; then
      read -r -a mpiexec <<<"${MPIEXEC:-mpiexec.mpich}"; launcher=mpiexec.mpich
    elif command -v mpiexec.openmpi >/dev/null; then
      read -r -a mpiexec <<<"${MPIEXEC:-mpiexec.openmpi}"
    else
      read -r -a mpiexec <<<"${MPIEXEC:-mpirun}"
    fi ;;
  *) die "unknown launcher $launcher" ;;
esac
command -v "${mpiexec[0]}" >/dev/null || die "launcher ${mpiexec[0]} not found"
# Open MPI 4.1 starts under Slurm through PMIx; Debian's MPICH speaks PMI-1/2.
[ -z "$srun_mpi" ] && { [ $flavor = mpich ] && srun_mpi=pmi2 || srun_mpi=pmix; }

# Open MPI as root on a small box: allowed, and ranks that wait must yield.
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}

# Ranks the Slurm allocation holds: the tasks asked for, else its CPUs
# (SLURM_JOB_CPUS_PER_NODE reads like "4(x2),2").
slots=0
if [ "$launcher" = srun ]; then
  if [ -n "${SLURM_NTASKS:-}" ]; then
    slots=$SLURM_NTASKS
  else
    IFS=, read -r -a per_node <<<"${SLURM_JOB_CPUS_PER_NODE:-}"
    for part in "${per_node[@]}"; do
      if [[ $part =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then
        slots=$((slots + BASH_REMATCH[1] * BASH_REMATCH[2]))
      elif [[ $part =~ ^[0-9]+$ ]]; then
        slots=$((slots + part))
      fi
    done
  fi
fi

if [ -z "$ranks" ]; then
  ranks="1 2 4"
  if [ "$slots" -gt 4 ]; then
    ranks="1 2"; n=4
    while [ $n -le "$slots" ]; do ranks+=" $n"; n=$((n * 2)); done
  fi
fi
if [ -z "$coll_ranks" ]; then
  coll_ranks=2
  for n in $ranks; do [ "$n" -gt "$coll_ranks" ] && coll_ranks=$n; done
fi
if [ -z "$halo_args" ]; then
  if [ $quick = 1 ]; then
    halo_args="--n 16 --r 2 --q 3 --iterations 20 --warmup 2 --method all"
  else
    halo_args="--n 32 --r 2 --q 3 --iterations 100 --warmup 5 --method all"
  fi
fi

if [ -z "$out" ]; then
  out=results/veneer-suite-$(date +%Y%m%d-%H%M%S)${SLURM_JOB_ID:+-$SLURM_JOB_ID}
fi
mkdir -p "$(dirname "$out")" || die "cannot create $(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
raw=$out.raw
rm -rf "$raw"
mkdir -p "$raw" || die "cannot create $raw"
manifest=$raw/runs.tsv
printf 'bench\tvariant\tranks\trepeat\trc\tseconds\trecords\tlog\n' >"$manifest"

echo "run_suite: $flavor via $launcher (${mpiexec[*]}); build $build; results $out.{jsonl,csv}"
# Veneer's own settings (not the suite's VENEER_BUILD and friends, listed in results.py).
veneer_vars=$(env | grep -o '^VENEER_[A-Za-z0-9_]*' | sort |
  grep -v -x -E 'VENEER_(ROOT|BUILD|RESULTS|SUITE_ARGS|RANKS|PYTHON|SRUN_MPI|JOBS|SLURM_STATE|TEST_.*)' | tr '\n' ' ')
[ -n "$veneer_vars" ] && echo "run_suite: Veneer settings: $(for v in $veneer_vars; do printf '%s=%s ' "$v" "${!v}"; done)"

# launch NP VARIANT SPREAD -- PROGRAM ARGS...: runs PROGRAM on NP ranks;
# VARIANT veneer preloads libveneer.so into the ranks; SPREAD 1 asks for one
# rank per node under Slurm when the job has several nodes.
launch() {
  local np=$1 variant=$2 spread=$3; shift 4
  local cmd=("${mpiexec[@]}")
  case $launcher in
    srun)
      cmd+=(--mpi="$srun_mpi" -n "$np" --kill-on-bad-exit=1)
      # More ranks than the allocation's tasks: allowed (the sweep may oversubscribe).
      [ "$slots" -gt 0 ] && [ "$np" -gt "$slots" ] && cmd+=(--overcommit)
      if [ "$spread" = 1 ] && [ "${SLURM_JOB_NUM_NODES:-1}" -ge "$np" ]; then
        cmd+=(-N "$np" --ntasks-per-node=1)
      elif [ "${SLURM_JOB_NUM_NODES:-1}" -gt "$np" ]; then
        cmd+=(-N "$np")
      fi
      if [ "$variant" = veneer ]; then cmd+=(--export="ALL,LD_PRELOAD=$libveneer"); else cmd+=(--export=ALL); fi
      ;;
    mpiexec.mpich)
      cmd+=(-n "$np")
      [ "$variant" = veneer ] && cmd+=(-genv LD_PRELOAD "$libveneer")
      ;;
    mpirun)
      cmd+=(-n "$np" --oversubscribe --bind-to none)
      # Local ranks inherit the environment; remote ones get only what -x names.
      for v in $veneer_vars; do cmd+=(-x "$v"); done
      [ "$variant" = veneer ] && cmd+=(-x "LD_PRELOAD=$libveneer")
      ;;
  esac
  timeout -k 10 "$limit" "${cmd[@]}" "$@"
}

[ $coll_args_given = 0 ] && [ $quick = 1 ] && coll_args="--quick"

failures=0
# run BENCH VARIANT NP SPREAD FORMAT PROGRAM ARGS...: one measured run, its log
# and its records (FORMAT json: JSON lines via --json; csv: a table via --csv)
# kept under $raw, one manifest line.
run() {
  local bench=$1 variant=$2 np=$3 spread=$4 format=$5 program=$6; shift 6
  local tag=$bench-$variant-np$np-r$rep
  local records_file=$raw/$tag.$format log=$raw/$tag.log
  [ "$format" = json ] && records_file=$raw/$tag.jsonl
  echo "== $bench, $variant, $np rank(s)${rep_note}"
  local start=$SECONDS rc
  launch "$np" "$variant" "$spread" -- "$program" "$@" "--$format" "$records_file" >"$log" 2>&1
  rc=$?
  local records=0
  [ -f "$records_file" ] && records=$(grep -c . "$records_file")
  [ "$format" = csv ] && [ "$records" -gt 0 ] && records=$((records - 1))  # the header
  if [ $rc -ne 0 ] || [ "$records" -eq 0 ]; then
    echo "   FAILED (exit $rc, $records records); last lines of $log:"
    tail -15 "$log" | sed 's/^/   | /'
    failures=$((failures + 1))
  else
    tail -1 "$log" | sed 's/^/   /'
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$bench" "$variant" "$np" "$rep" "$rc" $((SECONDS - start)) "$records" \
    "$(basename "$log")" >>"$manifest"
}

skip() { echo "== $1: skipped ($2)"; printf '%s\tskipped\t0\t0\t0\t0\t0\t%s\n' "$1" "$2" >>"$manifest"; }

quick_flag=(); [ $quick = 1 ] && quick_flag=(--quick)

for rep in $(seq "$repeat"); do
  rep_note=""; [ "$repeat" -gt 1 ] && rep_note=", repeat $rep of $repeat"
  if wants pack; then
    if [ -x "$bin/veneer-bench-pack" ]; then
      run pack both 1 0 json "$bin/veneer-bench-pack" "${quick_flag[@]}"
    else skip pack "no $bin/veneer-bench-pack"; fi
  fi

  if wants pingpong; then
    if [ -x "$bin/veneer-bench-pingpong" ]; then
      for variant in library veneer; do
        run pingpong $variant 2 1 json "$bin/veneer-bench-pingpong" "${quick_flag[@]}"
      done
    else skip pingpong "no $bin/veneer-bench-pingpong"; fi
  fi

  if wants coll; then
    coll=$bin/veneer-bench-coll
    if [ -x "$coll" ]; then
      # shellcheck disable=SC2086  # coll_args is a list of words
      run coll both "$coll_ranks" 0 csv "$coll" $coll_args
    else skip coll "no $coll"; fi
  fi

  if wants halo3d; then
    if [ -x "$bin/veneer-halo3d" ]; then
      # Library and Veneer side by side at every rank count, so that machine
      # noise drifting during the sweep hits both alike.
      for np in $ranks; do
        for variant in library veneer; do
          # shellcheck disable=SC2086  # halo_args is a list of words
          run halo3d $variant "$np" 0 json "$bin/veneer-halo3d" $halo_args
        done
      done
    else skip halo3d "no $bin/veneer-halo3d"; fi
  fi
  skip() { :; }  # a skipped benchmark is reported once
done

describe=(--launcher "$launcher" --mpiexec "${mpiexec[*]}" --flavor "$flavor" --build "$build"
          --libveneer "$libveneer" --root "$root" --args "quick=$quick only=$only ranks=$ranks repeat=$repeat halo=[$halo_args] coll=[$coll_ranks ranks: $coll_args]")
"$python" "$here/results.py" merge --raw "$raw" --out "$out" "${describe[@]}"
merge_rc=$?
if [ $merge_rc -eq 3 ]; then
  exit 1  # halo3d not verified; results.py said why, last
elif [ $merge_rc -ne 0 ]; then
  echo "run_suite: aggregation failed (exit $merge_rc)"
  exit 1
fi
if [ $failures -gt 0 ] && [ $strict = 1 ]; then
  echo "run_suite: $failures benchmark run(s) failed; see $raw/"
  exit 1
fi
exit 0
