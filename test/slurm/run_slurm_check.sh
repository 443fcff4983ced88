#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# run_slurm_check.sh BUILD_DIR [--two-nodes]: brings up a private Slurm on
# this machine (munged, slurmctld, slurmd on loopback, as root), submits
# Veneer's benchmark suite and the calibration run with sbatch, checks the
# results (JSON lines present, halo3d verified with and without Veneer, the
# profile written) and draws the charts; then stops every daemon it started.
#
#   --two-nodes  pretend to be a 2-node cluster (two slurmd on this host) and
#                also run the multi-node scaling sweep across them
#
# Idempotent: daemons left by an earlier run (found through their pid files
# in the state folder) are stopped first and the state folder is recreated.
# Installs slurmctld, slurmd, slurm-client, munge, hwloc and
# python3-matplotlib with apt-get if they are missing. Needs root.
# Environment: VENEER_SLURM_STATE (state folder, default BUILD_DIR/slurm-check),
# VENEER_SLURM_PORT (first of the three TCP ports used, default 16817),
# VENEER_SLURM_TIMEOUT (seconds to wait for each job, default 300).
set -euo pipefail

usage() { echo "usage: $0 BUILD_DIR [--two-nodes]" >&2; exit 2; }
[ $# -ge 1 ] || usage
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$1"
build=$(cd "$1" && pwd)
shift
nodes=1
while [ $# -gt 0 ]; do
  case $1 in
    --two-nodes) nodes=2; shift ;;
    *) usage ;;
  esac
done
state=${VENEER_SLURM_STATE:-$build/slurm-check}
port=${VENEER_SLURM_PORT:-16817}
job_limit=${VENEER_SLURM_TIMEOUT:-300}
python=/usr/bin/python3  # Debian's, with Debian's matplotlib
started=$(date +%s)

say() { echo "slurm-check: $*"; }
fail() {
  say "FAILED: $*"
  exit 1
}
[ "$(id -u)" -eq 0 ] || fail "needs root (the daemons run as root on loopback)"
# munged's socket lives in the state folder; a unix socket path has at most 107 bytes.
[ ${#state} -le 90 ] || fail "state folder path too long for munged's socket: set VENEER_SLURM_STATE"

# --- packages -------------------------------------------------------------
packages=(slurmctld slurmd slurm-client munge hwloc python3 python3-matplotlib)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- the programs under test ----------------------------------------------
needed=(veneer veneer-halo3d veneer-bench-pingpong veneer-bench-pack)
if [ -f "$build/build.ninja" ] || [ -f "$build/Makefile" ]; then
  # Build what is missing or stale; the collectives benchmark only if this tree has it.
  targets=("${needed[@]}")
  [[ $(cmake --build "$build" --target help 2>/dev/null) == *veneer-bench-coll* ]] && targets+=(veneer-bench-coll)
  say "building ${targets[*]} in $build"
  cmake --build "$build" -j"${VENEER_JOBS:-2}" --target "${targets[@]}" >"$build/slurm-check-build.log" 2>&1 ||
    { tail -30 "$build/slurm-check-build.log"; fail "build failed"; }
fi
[ -f "$build/interposer/libveneer.so" ] || fail "no $build/interposer/libveneer.so (configure and build Veneer first)"
for p in veneer-halo3d veneer-bench-pingpong veneer-bench-pack; do
  [ -x "$build/bench/$p" ] || fail "no $build/bench/$p"
done

# --- daemons ----------------------------------------------------------------
# Stops the daemons whose pid files lie in the state folder, if those pids
# still belong to a munged/slurmctld/slurmd (never anything else).
stop_daemons() {
  local f pid comm
  # Jobs first (the cluster is private, every job on it is ours), so that no
  # slurmstepd outlives its slurmd.
  if [ -f "$state/slurm.conf" ] && [ -f "$state/slurmctld.pid" ] &&
     [ "$(cat "/proc/$(cat "$state/slurmctld.pid")/comm" 2>/dev/null)" = slurmctld ]; then
    local ids
    ids=$(SLURM_CONF=$state/slurm.conf timeout 10 squeue -h -o %i 2>/dev/null || true)
    if [ -n "$ids" ]; then
      # shellcheck disable=SC2086  # one job id per word
      SLURM_CONF=$state/slurm.conf timeout 10 scancel $ids 2>/dev/null || true
      for _ in $(seq 30); do
        [ -z "$(SLURM_CONF=$state/slurm.conf timeout 10 squeue -h -o %i 2>/dev/null)" ] && break
        sleep 0.5
      done
    fi
  fi
  for f in "$state"/slurmd-*.pid "$state"/slurmctld.pid "$state"/munged.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || continue
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    case $comm in
      munged|slurmctld|slurmd)
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true ;;
    esac
    rm -f "$f"
  done
}

cleanup() {
  local rc=$?
  set +e
  stop_daemons
  rm -f "$state/munge.socket" "$state/munge.socket.lock"
  say "daemons stopped; $(( $(date +%s) - started )) s in all; state and logs in $state"
  exit $rc
}

stop_daemons
rm -rf "$state"
mkdir -p "$state"
chmod 755 "$state"  # munged needs its socket's folder searchable by all
mkdir -p "$state/ctld" "$state/results"
trap cleanup EXIT

# A private munged: own key and socket, so a system munge (if any) is untouched.
# munged wants its socket's folder searchable by all and its key private.
mkdir -m 700 "$state/key"
dd if=/dev/urandom of="$state/key/munge.key" bs=1024 count=1 status=none
chmod 400 "$state/key/munge.key"
munged --socket="$state/munge.socket" --key-file="$state/key/munge.key" --log-file="$state/munged.log" \
  --pid-file="$state/munged.pid" --seed-file="$state/munged.seed" ||
  { cat "$state/munged.log"; fail "munged did not start"; }

host=$(hostname -s)
# This machine's real CPUs, sockets, cores and memory, as slurmd sees them.
hardware=$(slurmd -C | head -1 | sed 's/^NodeName=[^ ]* //')
[ -n "$hardware" ] || fail "slurmd -C printed nothing"
{
  cat <<EOF
# Generated by test/slurm/run_slurm_check.sh: a private one-host Slurm for CI.
ClusterName=veneerci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge.socket
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool-%n
TmpFS=$state/tmp-%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd-%n.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
InactiveLimit=0
KillWait=5
EOF
  if [ $nodes = 1 ]; then
    echo "SlurmdPort=$((port + 1))"
    echo "NodeName=$host NodeAddr=127.0.0.1 $hardware State=UNKNOWN"
  else
    # Several slurmd on one host: same NodeHostname, one port each.
    for n in 1 2; do
      echo "NodeName=n$n NodeHostname=$host NodeAddr=127.0.0.1 Port=$((port + n)) $hardware State=UNKNOWN"
    done
  fi
  echo "PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} >"$state/slurm.conf"
export SLURM_CONF=$state/slurm.conf
mkdir -p "$state"/tmp-{"$host",n1,n2}

slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start (see $state/slurmctld.log)"
if [ $nodes = 1 ]; then
  slurmd -f "$SLURM_CONF" || fail "slurmd did not start (see $state/slurmd-$host.log)"
else
  for n in n1 n2; do slurmd -f "$SLURM_CONF" -N $n || fail "slurmd -N $n did not start"; done
fi
for _ in $(seq 60); do
  idle=$(sinfo -h -t idle -o '%D' 2>/dev/null | head -1)
  [ "${idle:-0}" = "$nodes" ] && break
  sleep 0.5
done
[ "${idle:-0}" = "$nodes" ] || { sinfo; tail -20 "$state/slurmctld.log"; fail "nodes not idle after 30 s"; }
say "Slurm up: $nodes node(s), $hardware"

# --- jobs ---------------------------------------------------------------------
# submit NAME SCRIPT [sbatch options...]: submits and waits; the job's output
# is $state/NAME.out.
submit() {
  local name=$1 script=$2; shift 2
  local id
  id=$(sbatch --parsable --output="$state/$name.out" --time=10 "$@" "$root/bench/slurm/$script") ||
    fail "sbatch $script"
  id=${id%%;*}
  local t0=$SECONDS job_state="" exit_code=""
  while [ $((SECONDS - t0)) -lt "$job_limit" ]; do
    local line
    line=$(scontrol -o show job "$id" 2>/dev/null || true)
    job_state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$line")
    exit_code=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$line")
    case $job_state in
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) break ;;
    esac
    sleep 1
  done
  say "job $id ($name): ${job_state:-unknown}, exit ${exit_code:-?}, $((SECONDS - t0)) s"
  if [ "$job_state" != COMPLETED ] || [ "$exit_code" != 0:0 ]; then
    [ -f "$state/$name.out" ] && tail -40 "$state/$name.out"
    [ -n "$job_state" ] || scancel "$id" 2>/dev/null || true
    fail "job $name did not complete (state ${job_state:-still running after $job_limit s})"
  fi
}

# check_results PREFIX OUTFILE BENCH...: the results file has the machine line
# and records of every BENCH, halo3d ran verified both ways, and the job's
# last line is the suite's halo3d verdict.
check_results() {
  local prefix=$1 out=$2; shift 2
  "$python" - "$prefix.jsonl" "$@" <<'EOF' || fail "results in $prefix.jsonl"
import json, sys
path, wanted = sys.argv[1], sys.argv[2:]
records = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
assert records and records[0]["bench"] == "machine", "first line is not the machine description"
machine = records[0]
for key in ("hwloc_tree", "mpi_library", "veneer_version"):
    assert machine.get(key), f"machine description lacks {key}"
for bench in wanted:
    mine = [r for r in records if r.get("bench") == bench]
    assert mine, f"no {bench} records"
    if bench in ("pingpong", "halo3d"):
        for variant in ("library", "veneer"):
            assert any(r["variant"] == variant for r in mine), f"no {bench} run {variant}"
    for r in mine:
        if "veneer" in r and r["variant"] in ("library", "veneer"):
            # The program's own look at its process: was libveneer really there?
            assert r["veneer"] == (r["variant"] == "veneer"), f"{r['suite_run']}: Veneer preloaded = {r['veneer']}"
    if bench == "halo3d":
        for r in mine:
            assert r["verified"] > 0, f"halo3d {r['variant']} on {r['ranks']} ranks verified nothing"
print(f"slurm-check: {path}: {len(records) - 1} records of {', '.join(wanted)}")
EOF
  local last
  last=$(grep -v '^$' "$out" | tail -1)
  [[ $last =~ ^halo3d:\ verified\ [0-9]+\ exchanges,\ Veneer/library\ time\ ratio\ [0-9.]+$ ]] ||
    fail "last line of $out is not the halo3d verdict: '$last'"
  say "$last"
}

# sbatch hands the submitting environment to the job (and its srun steps).
export VENEER_ROOT=$root VENEER_BUILD=$build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
unset LD_PRELOAD

VENEER_RESULTS=$state/results/single VENEER_SUITE_ARGS=--quick submit single suite_single_node.sbatch --nodes=1
benches=(pack pingpong halo3d)
charts=(pingpong_speedup.png pack_speedup.png halo_time.png)
if [ -x "$build/bench/veneer-bench-coll" ]; then benches+=(coll); charts+=(coll_busbw.png); fi
check_results "$state/results/single" "$state/single.out" "${benches[@]}"

"$python" "$root/bench/plot/plot_results.py" "$state/results/single.jsonl" --out "$state/results/plots" |
  sed 's/^/slurm-check: /'
for png in "${charts[@]}"; do
  [ -s "$state/results/plots/$png" ] || fail "no chart $png"
  [[ $(head -c 4 "$state/results/plots/$png" | tail -c 3) == PNG ]] || fail "$png is not a PNG"
done

VENEER_PROFILE=$state/results/profile.json VENEER_CALIBRATE_ARGS=--quick submit calibrate calibrate.sbatch
"$python" - "$state/results/profile.json" <<'EOF' || fail "calibration profile"
import json, sys
profile = json.load(open(sys.argv[1], encoding="utf-8"))
assert profile["format"] == "veneer-profile" and profile["version"] == 1, "not a Veneer machine profile"
assert profile["fingerprint"]["mpi"] and profile["levels"]["intra"]["alpha"] > 0, "no fingerprint or level fit"
points = profile["collectives"]
assert points and all(p["times"]["library"]["median"] > 0 for p in points), "no collective timings"
print(f"slurm-check: profile {sys.argv[1]}: {len(points)} collective points, {profile['calibration']['seconds']:.1f} s")
EOF

if [ $nodes = 2 ]; then
  # Two slurmd on one host: Open MPI's shared-memory transport cannot span
  # the pretend nodes, TCP over loopback can.
  OMPI_MCA_btl=self,tcp VENEER_RESULTS=$state/results/scaling VENEER_SUITE_ARGS=--quick \
    submit scaling suite_scaling.sbatch --nodes=2
  check_results "$state/results/scaling" "$state/scaling.out" pingpong halo3d
  "$python" "$root/bench/plot/plot_results.py" "$state/results/scaling.jsonl" --out "$state/results/scaling-plots" |
    sed 's/^/slurm-check: /'
fi

say "PASSED in $(( $(date +%s) - started )) s"
