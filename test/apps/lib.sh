# SPDX-License-Identifier: BSD-3-Clause
# Helpers shared by the application tests (sourced by blacs.sh, hpcc.sh, lammps.sh).
# The caller sets: flavour (openmpi|mpich), run_mpi (test/run_mpi.sh of the build),
# veneer (path of libveneer.so). POSIX sh.

# Applications are built with OpenMP/OpenBLAS threads: one thread per rank on 2 cores.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
# Never a profile calibrated on this machine by hand (run_mpi.sh does the same).
export VENEER_PROFILE=${VENEER_PROFILE:-off}

# Absolute paths: every run starts in its own folder.
abspath() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
run_mpi=$(abspath "$run_mpi"); veneer=$(abspath "$veneer")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/veneer-apps.XXXXXX")
if [ -n "${VENEER_APPS_KEEP:-}" ]; then
  echo "keeping the runs in $tmp"
else
  trap 'rm -rf "$tmp"' EXIT
fi

fail() { echo "FAIL: $*"; exit 1; }

# need PACKAGE FILE...: skip (ctest SKIP_RETURN_CODE 77) when a packaged file is missing.
need() {
  l_pkg=$1; shift
  for l_f in "$@"; do
    [ -e "$l_f" ] || { echo "SKIP: $l_f not found (apt-get install $l_pkg)"; exit 77; }
  done
}

# launch DIR MODE NP PROGRAM [ARGS...]: runs PROGRAM on NP ranks inside DIR (which
# must hold the inputs) with stdout in DIR/out, stderr in DIR/err and the exit
# status in DIR/rc. MODE plain: no Veneer. MODE veneer: libveneer preloaded with
# its end-of-run report in DIR/report (and "loaded" lines on stderr). VENEER_*
# settings in the caller's environment reach the ranks.
launch() {
  l_dir=$1; l_mode=$2; l_np=$3; shift 3
  if [ -n "${cluster_script:-}" ]; then
    # Pretend hosts (test/cluster/netns_cluster.sh, 2 ranks each): it hands
    # LD_PRELOAD and the VENEER_* variables to the ranks only.
    l_hosts=$(( l_np / 2 )); l_spec=2; while [ "$l_hosts" -gt 1 ]; do l_spec="$l_spec,2"; l_hosts=$((l_hosts - 1)); done
    if [ "$l_mode" = veneer ]; then
      (cd "$l_dir" && VENEER_REPORT=1 VENEER_REPORT_FILE="$l_dir/report" VENEER_LOG=${VENEER_LOG:-info} \
        LD_PRELOAD="$veneer" "$cluster_script" --hosts "$l_spec" --mpi "$flavour" --launcher "$cluster_launcher" \
        --timeout "${VENEER_TEST_TIMEOUT:-280}" -- "$@" >"$l_dir/out" 2>"$l_dir/err")
    else
      (cd "$l_dir" && env -u LD_PRELOAD "$cluster_script" --hosts "$l_spec" --mpi "$flavour" \
        --launcher "$cluster_launcher" --timeout "${VENEER_TEST_TIMEOUT:-280}" -- "$@" >"$l_dir/out" 2>"$l_dir/err")
    fi
  elif [ "$l_mode" = veneer ]; then
    if [ "$flavour" = openmpi ]; then
      (cd "$l_dir" && VENEER_REPORT=1 VENEER_REPORT_FILE="$l_dir/report" VENEER_LOG=${VENEER_LOG:-info} \
        VENEER_TEST_LAUNCH_FLAGS="${VENEER_TEST_LAUNCH_FLAGS:-} -x LD_PRELOAD=$veneer" \
        "$run_mpi" "$l_np" "$@" >"$l_dir/out" 2>"$l_dir/err")
    else
      (cd "$l_dir" && VENEER_REPORT=1 VENEER_REPORT_FILE="$l_dir/report" VENEER_LOG=${VENEER_LOG:-info} \
        LD_PRELOAD="$veneer" "$run_mpi" "$l_np" "$@" >"$l_dir/out" 2>"$l_dir/err")
    fi
  else
    (cd "$l_dir" && env -u LD_PRELOAD "$run_mpi" "$l_np" "$@" >"$l_dir/out" 2>"$l_dir/err")
  fi
  l_rc=$?
  echo "$l_rc" >"$l_dir/rc"
  if [ -n "${cluster_script:-}" ] && [ "$l_rc" -eq 77 ]; then
    cat "$l_dir/err"; echo "SKIP: no cluster of pretend hosts here"; exit 77
  fi
  if [ "$l_rc" -eq 124 ] || [ "$l_rc" -eq 137 ]; then
    show "$l_dir"
    fail "$l_mode run in $l_dir timed out (a hang) after ${VENEER_TEST_TIMEOUT:-280} s"
  fi
}

# show DIR: prints a run's output for a failure message.
show() {
  echo "--- $1/out (tail)"; tail -40 "$1/out"
  echo "--- $1/err (tail)"; tail -20 "$1/err"
  [ -f "$1/report" ] && { echo "--- $1/report"; cat "$1/report"; }
  return 0
}

# expect_loaded DIR NP: every rank logged that Veneer was loaded (works for
# runs that end in MPI_Abort, which never print the report).
expect_loaded() {
  # Ranks' stderr lines may interleave: count distinct ranks, wherever the line starts.
  l_n=$(grep -o 'veneer\[[0-9]*\]: Veneer [^ ]* loaded' "$1/err" | sort -u | wc -l)
  [ "$l_n" -eq "$2" ] || { show "$1"; fail "Veneer loaded on $l_n of $2 ranks in $1"; }
}

# expect_report DIR NP: the end-of-run report exists (Veneer was loaded and reached MPI_Finalize).
expect_report() {
  grep -Eq "^veneer report \(summed over ranks, $2 ranks?," "$1/report" 2>/dev/null ||
    { show "$1"; fail "no Veneer report in $1: was it preloaded?"; }
}

# calls DIR COLLECTIVE ALGORITHM: rank 0's calls of COLLECTIVE served by ALGORITHM
# ("library" for the library's own), from the report's per-algorithm table.
calls() {
  awk -v c="  $2:" -v a="$3" '
    index($0, c) == 1 {
      line = substr($0, length(c) + 1); n = split(line, parts, ",")
      for (i = 1; i <= n; i++) { split(parts[i], f, " "); if (f[1] == a) print f[2] }
    }' "$1/report" | head -1
}

# expect_forced DIR COLLECTIVE ALGORITHM: ALGORITHM served at least one call of COLLECTIVE.
expect_forced() {
  l_k=$(calls "$1" "$2" "$3")
  [ -n "$l_k" ] && [ "$l_k" -gt 0 ] ||
    { show "$1"; fail "$2 forced to $3 in $1, but the report shows no call served by it"; }
  echo "  $2: $3 served $l_k calls (rank 0)"
}

# numbers_close FILE_A FILE_B RTOL: the files have the same words; numeric words
# agree within RTOL relative to the larger magnitude (absolute RTOL below magnitude 1).
numbers_close() {
  awk -v rtol="$3" '
    function isnum(s) { return s ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ }
    function abs(x) { return x < 0 ? -x : x }
    NR == FNR { a[FNR] = $0; na = FNR; next }
    {
      nb = FNR
      if (!(FNR in a)) { print "extra line " FNR ": " $0; bad = 1; next }
      n = split(a[FNR], x, " "); m = split($0, y, " ")
      if (n != m) { print "line " FNR " differs: " a[FNR] " | " $0; bad = 1; next }
      for (i = 1; i <= n; i++) {
        if (x[i] == y[i]) continue
        if (isnum(x[i]) && isnum(y[i])) {
          d = abs(x[i] - y[i]); s = abs(x[i]) > abs(y[i]) ? abs(x[i]) : abs(y[i])
          if (d > rtol * (s > 1 ? s : 1)) { print "line " FNR " word " i ": " x[i] " vs " y[i]; bad = 1 }
          if (d / (s > 1 ? s : 1) > worst) worst = d / (s > 1 ? s : 1)
        } else { print "line " FNR " word " i ": " x[i] " vs " y[i]; bad = 1 }
      }
    }
    END {
      if (na != nb) { print "line counts differ: " na " vs " nb; bad = 1 }
      printf "  largest relative difference %.3g (tolerance %g)\n", worst, rtol
      exit bad
    }' "$1" "$2"
}
