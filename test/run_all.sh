#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Sets up a fresh Debian 12 machine and runs every Veneer test:
#   Open MPI (default transport, then the UCX pml), MPICH, an
#   AddressSanitizer + UndefinedBehaviorSanitizer build on Open MPI, and the
#   thread tests under ThreadSanitizer on Open MPI.
# Usage: test/run_all.sh            (from anywhere; needs root or sudo for apt-get)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${VENEER_JOBS:-2}

packages=(build-essential gfortran cmake ninja-build pkg-config openmpi-bin libopenmpi-dev mpich libmpich-dev
          libhwloc-dev hwloc libucx-dev libgtest-dev libgmock-dev libbenchmark-dev python3-matplotlib
          nlohmann-json3-dev  # support/json.h: header-only
          libmetis-dev  # rank placement (topology/placement.cpp)
          slurm-wlm munge
          scalapack-mpi-test scalapack-test-common hpcc lammps  # test/apps: real applications
          clang-format clang-tidy)  # test/style: the layout and lint checks
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1

build() {  # build DIR [cmake args...]
  local dir=$1; shift
  echo "== configure $dir $*"
  cmake -S "$root" -B "$dir" -G Ninja "$@" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  echo "== build $dir"
  cmake --build "$dir" -j"$jobs" >"$dir.build.log" 2>&1 || { tail -50 "$dir.build.log"; exit 1; }
}

run_ctest() {  # run_ctest DIR TITLE [ctest args...]
  local dir=$1 title=$2; shift 2
  echo "== test: $title"
  (cd "$dir" && ctest --output-on-failure --timeout 600 "$@")
}

mkdir -p build
start=$(date +%s)

# Layout check (test/style/README.md), before anything is built: every tracked
# C/C++/CUDA file as .clang-format lays it out (VENEER_CHECK_FORMAT=0 skips it).
if [ "${VENEER_CHECK_FORMAT:-1}" = 1 ]; then
  echo "== clang-format check (.clang-format)"
  test/style/check_format.sh
fi

# VENEER_EMULATED_GPU_BENCH: halo3d --memory device, the device ping-pong and
# the GPU machine's script (gpu_script.emulated) run on the emulated GPU.
build build/ci-openmpi -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVENEER_EMULATED_GPU_BENCH=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
# Lint check (test/style/README.md): clang-tidy with .clang-tidy over the library's
# sources as this build compiles them; fails on any finding (VENEER_CHECK_TIDY=0 skips it).
if [ "${VENEER_CHECK_TIDY:-1}" = 1 ]; then
  test/style/check_tidy.sh build/ci-openmpi
fi
run_ctest build/ci-openmpi "Open MPI (default transport)"
VENEER_TEST_LAUNCH_FLAGS="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS=sm,self,tcp" \
  run_ctest build/ci-openmpi "Open MPI over UCX (MPI tests)" -L mpi

echo "== Slurm: a one-node cluster on loopback runs the benchmark suite with sbatch"
test/slurm/run_slurm_check.sh build/ci-openmpi

build build/ci-mpich -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMPI_C_COMPILER=mpicc.mpich -DMPI_CXX_COMPILER=mpicxx.mpich \
  -DVENEER_EMULATED_GPU_BENCH=ON
run_ctest build/ci-mpich "MPICH"

build build/ci-sanitize -DCMAKE_BUILD_TYPE=Debug -DVENEER_SANITIZE=ON -DVENEER_BENCH=OFF -DVENEER_CUDA=OFF
# The MPI libraries leak by design at exit; everything else must be clean.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  VENEER_TEST_PRELOAD_PREFIX="$(gcc -print-file-name=libasan.so)" \
  run_ctest build/ci-sanitize "AddressSanitizer + UndefinedBehaviorSanitizer (Open MPI)"

# ThreadSanitizer (Open MPI, default transport): the thread stress test and the
# other tests that run threads, built alone (test/threads/README.md). The MPI
# library is not instrumented: its own accesses are ignored
# (ignore_noninstrumented_modules, test/threads/tsan.supp), Veneer's are not;
# threads_tsan_canary checks that a race in a callback the library calls is still reported.
tsan=build/ci-tsan
echo "== configure $tsan (ThreadSanitizer)"
cmake -S "$root" -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVENEER_SANITIZE=thread -DVENEER_BENCH=OFF \
  -DVENEER_CUDA=OFF >"$tsan.configure.log" 2>&1 || { cat "$tsan.configure.log"; exit 1; }
echo "== build $tsan (thread tests only)"
cmake --build "$tsan" -j"$jobs" --target threads_test threads_late_start_test threads_tsan_canary p2p_test \
  collectives_selection_test device_mpi_test >"$tsan.build.log" 2>&1 || { tail -50 "$tsan.build.log"; exit 1; }
# Without address randomisation (setarch -R, inherited by mpirun's ranks): GCC 12's TSan
# stops on kernels that randomise mappings with more bits than it expects.
echo "== test: ThreadSanitizer (Open MPI)"
(cd "$tsan" &&
  TSAN_OPTIONS="ignore_noninstrumented_modules=1 suppressions=$root/test/threads/tsan.supp second_deadlock_stack=1" \
  VENEER_TEST_PRELOAD_PREFIX="$(gcc -print-file-name=libtsan.so)" \
  setarch "$(uname -m)" -R ctest --output-on-failure --timeout 600 \
    -R 'threads_|p2p_test|collectives_selection_test|device_mpi_test\.np2$')

echo "== all tests passed in $(( $(date +%s) - start )) s"
