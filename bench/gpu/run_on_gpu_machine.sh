#!/usr/bin/env bash
# Builds and runs, on a machine with a GPU, CMake and CUDA but no MPI and no
# network: the CUDA kernels, their tests and the GPU pack benchmark (the
# standalone build in bench/gpu/standalone). Prints everything; exits non-zero
# if a build step, a test or the benchmark's own check fails.
#
#   bash bench/gpu/run_on_gpu_machine.sh --prepare
#       run where GoogleTest's sources are (Debian: /usr/src/googletest), before:
#       copies them into build-gpu-carry/ (git-ignored), for machines that lack
#       GoogleTest; carry that folder along.
#   bash bench/gpu/run_on_gpu_machine.sh [--quick]
#       on the GPU machine: configure, build, test, benchmark.
#
# Environment: VENEER_GPU_BUILD (build folder, default build-gpu),
# VENEER_CUDA_ARCHITECTURES (default: the GPU's own, from nvidia-smi),
# VENEER_GPU_SANITIZE=1 (also run the device tests under compute-sanitizer),
# OUT (if set, a folder for the benchmark's CSVs and the tests' XML).
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
carry=$root/build-gpu-carry

if [[ ${1:-} == --prepare ]]; then
  src=${GTEST_SOURCE:-/usr/src/googletest}
  [[ -f $src/CMakeLists.txt ]] || { echo "no GoogleTest sources at $src (set GTEST_SOURCE)"; exit 1; }
  mkdir -p "$carry"
  rm -rf "$carry/googletest"
  cp -r "$src" "$carry/googletest"
  echo "copied $src to $carry/googletest; carry build-gpu-carry to the GPU machine"
  exit 0
fi

bench_args=()
[[ ${1:-} == --quick ]] && bench_args=(--quick)
build=${VENEER_GPU_BUILD:-$root/build-gpu}
results=${OUT:-$build/results}
mkdir -p "$results"

echo "== GPU"
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv 2>/dev/null || echo "nvidia-smi failed"
nvcc --version | tail -2

arch=${VENEER_CUDA_ARCHITECTURES:-}
if [[ -z $arch ]]; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  arch=${cc:-90}
fi
configure=(-DCMAKE_BUILD_TYPE=Release "-DVENEER_CUDA_ARCHITECTURES=$arch")
[[ -d $carry/googletest ]] && configure+=("-DVENEER_GTEST_SOURCE=$carry/googletest")
command -v ninja >/dev/null && configure+=(-G Ninja)

echo "== configure and build (CUDA architectures: $arch)"
cmake -S "$root/bench/gpu/standalone" -B "$build" "${configure[@]}" || exit 1
cmake --build "$build" -j "$(nproc)" || exit 1

status=0
tests=$build/test-kernels
if [[ -x $tests/kernels_device_test ]]; then
  # Each binary in a process of its own: the memory-kind test checks that
  # nothing loaded the CUDA driver before it.
  for t in kernels_memory_kind_test kernels_emulated_test kernels_device_test kernels_device_runtime_test; do
    [[ -x $tests/$t ]] || { echo "== $t was not built"; status=1; continue; }
    echo "== $t"
    "$tests/$t" "--gtest_output=xml:$results/$t.xml" || status=1
  done
  if [[ ${VENEER_GPU_SANITIZE:-0} == 1 ]] && command -v compute-sanitizer >/dev/null; then
    echo "== kernels_device_test under compute-sanitizer (memcheck)"
    compute-sanitizer --tool memcheck --error-exitcode 3 "$tests/kernels_device_test" \
      --gtest_filter='DevicePack.Ddtbench*:DevicePack.Benchmark*' || status=1
    echo "== kernels_device_runtime_test under compute-sanitizer (memcheck)"
    compute-sanitizer --tool memcheck --error-exitcode 3 "$tests/kernels_device_runtime_test" \
      --gtest_filter='DeviceTransfer.Ddtbench*:CudaRuntime.*' || status=1
  fi
else
  echo "== no tests built (no GoogleTest: run with --prepare where its sources are, and carry build-gpu-carry)"
  status=1
fi

echo "== GPU pack benchmark"
"$build/bench-gpu/veneer-bench-gpu-pack" "${bench_args[@]}" --csv "$results/gpu_pack.csv" \
  --d2h-csv "$results/gpu_pack_d2h.csv" || status=1
echo "== results in $results; exit status $status"
exit $status
