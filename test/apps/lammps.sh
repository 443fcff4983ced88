#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# lammps.sh FLAVOUR RUN_MPI LIBVENEER MODE [CLUSTER_SCRIPT LAUNCHER]
# LAMMPS (Debian's lmp, built against Open MPI) on 4 ranks with in.lammps, with
# and without Veneer preloaded; compares the thermo output and the RDF file.
#   MODE library: Veneer preloaded with VENEER_COLLECTIVES=0 must give output
#                 identical to the run without it; with default settings
#                 (built-in model, which may pick Veneer's algorithms) equal
#                 within floating-point tolerance.
#   MODE forced1..forced5: every collective forced to one of Veneer's
#                 algorithms on 2 pretend nodes (VENEER_RANKS_PER_NODE=2); the
#                 five sets together force every algorithm of every collective.
#                 Output within tolerance, and the report must show each
#                 forced algorithm serving calls.
#   MODE cluster SCRIPT LAUNCHER: every run on 2 pretend hosts of 2 ranks
#                 (SCRIPT: test/cluster/netns_cluster.sh): default settings,
#                 then the sets forced3-forced5 (the hierarchical algorithms).
set -u
flavour=$1; run_mpi=$2; veneer=$3; mode=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
lmp=/usr/bin/lmp
need lammps "$lmp"
np=${VENEER_APPS_NP:-4}
# Sums reordered by another algorithm move the last bits. Before load
# balancing only the printed sums differ (1e-15); once balancing has cut the
# box by reduced histograms, atoms sit on other ranks, forces are summed in
# another order and the melt's chaotic dynamics amplify it: 6.4e-12 relative
# at step 500 (forced3), growing step by step. Keep the run short.
rtol=1e-9

run_lammps() {  # run_lammps NAME MODE: one run into $tmp/NAME
  mkdir -p "$tmp/$1"
  cp "$here/in.lammps" "$tmp/$1/"
  launch "$tmp/$1" "$2" $np "$lmp" -in in.lammps -log none -echo none
  rc=$(cat "$tmp/$1/rc")
  [ "$rc" -eq 0 ] || { show "$tmp/$1"; fail "$1: lmp exited $rc"; }
  # Thermo rows: every line between a "Step" header and "Loop time".
  awk '/^ *Step /{on=1; next} /^Loop time/{on=0} on' "$tmp/$1/out" >"$tmp/$1/thermo"
  [ "$(wc -l <"$tmp/$1/thermo")" -eq 29 ] || { show "$tmp/$1"; fail "$1: expected 29 thermo rows"; }
  [ -s "$tmp/$1/rdf.out" ] || { show "$tmp/$1"; fail "$1: no rdf.out"; }
}

compare() {  # compare NAME exact|close
  if [ "$2" = exact ]; then
    cmp -s "$tmp/plain/thermo" "$tmp/$1/thermo" ||
      { diff "$tmp/plain/thermo" "$tmp/$1/thermo"; fail "$1: thermo output differs from the run without Veneer"; }
    cmp -s "$tmp/plain/rdf.out" "$tmp/$1/rdf.out" ||
      { diff "$tmp/plain/rdf.out" "$tmp/$1/rdf.out" | head; fail "$1: rdf.out differs from the run without Veneer"; }
    echo "  $1: thermo ($(wc -l <"$tmp/plain/thermo") rows) and rdf.out identical to the run without Veneer"
  else
    numbers_close "$tmp/plain/thermo" "$tmp/$1/thermo" $rtol || fail "$1: thermo output beyond tolerance"
    numbers_close "$tmp/plain/rdf.out" "$tmp/$1/rdf.out" $rtol || fail "$1: rdf.out beyond tolerance"
    echo "  $1: thermo and rdf.out within $rtol of the run without Veneer"
  fi
}

# forced_run SET: one forced set (allreduce bcast reduce allgather reduce_scatter
# alltoall; reduce_scatter_block is forced too, but no application here calls it).
forced_run() {
  case "$1" in
    forced1) set -- "$1" recursive_doubling binomial binomial recursive_doubling recursive_halving bruck ;;
    forced2) set -- "$1" rabenseifner scatter_allgather reduce_scatter_gather bruck pairwise pairwise ;;
    forced3) set -- "$1" ring two_level two_level ring recursive_halving node_aware ;;
    forced4) set -- "$1" two_level binomial reduce_scatter_gather two_level pairwise bruck ;;
    forced5) set -- "$1" lanes scatter_allgather two_level ring recursive_halving pairwise ;;
    *) fail "unknown set $1" ;;
  esac
  rsb=recursive_halving; [ "$6" = pairwise ] && rsb=pairwise
  echo "$1: allreduce=$2 bcast=$3 reduce=$4 allgather=$5 reduce_scatter=$6 alltoall=$7, $where"
  VENEER_ALLREDUCE=$2 VENEER_BCAST=$3 VENEER_REDUCE=$4 VENEER_ALLGATHER=$5 \
    VENEER_REDUCE_SCATTER=$6 VENEER_REDUCE_SCATTER_BLOCK=$rsb VENEER_ALLTOALL=$7 run_lammps "$1" veneer
  expect_report "$tmp/$1" $np
  compare "$1" close
  expect_forced "$tmp/$1" allreduce "$2"
  expect_forced "$tmp/$1" bcast "$3"
  expect_forced "$tmp/$1" reduce "$4"
  expect_forced "$tmp/$1" allgather "$5"
  expect_forced "$tmp/$1" reduce_scatter "$6"
  expect_forced "$tmp/$1" alltoall "$7"
}

case "$mode" in
  cluster)
    # 2 pretend hosts of 2 ranks (network namespaces, test/cluster/): the
    # hierarchy detects real nodes. Args: netns_cluster.sh and the launcher.
    cluster_script=$5; cluster_launcher=$6; where="2 hosts of test/cluster/netns_cluster.sh" ;;
  forced*) where="2 pretend nodes (VENEER_RANKS_PER_NODE=2)"; export VENEER_RANKS_PER_NODE=2 ;;
esac
run_lammps plain plain
case "$mode" in
  library)
    VENEER_COLLECTIVES=0 run_lammps coll0 veneer
    expect_report "$tmp/coll0" $np
    compare coll0 exact
    run_lammps default veneer
    expect_report "$tmp/default" $np
    compare default close
    grep -A8 "^collectives (calls" "$tmp/default/report"
    ;;
  forced[1-5]) forced_run "$mode" ;;
  cluster)
    run_lammps default veneer
    expect_report "$tmp/default" $np
    compare default close
    grep -A8 "^collectives (calls" "$tmp/default/report"
    # The sets with the hierarchical algorithms (two_level, node_aware, lanes).
    for set in forced3 forced4 forced5; do forced_run $set; done
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "lammps $mode: passed"
