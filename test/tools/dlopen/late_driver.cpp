// SPDX-License-Identifier: BSD-3-Clause
// The quick "no device memory here" answer must turn false once the
// application loads the CUDA driver, however late: dlopen raises Veneer's flag
// (interposer/loader.cpp) and the next check asks the loader again. The same
// dlopen moves the type cache's epoch on, so that the send rule each thread
// keeps per type (worked out with "no device memory") is worked out again,
// and the collectives' quick answers (marked with "no device memory") end.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>

#include "algorithms/decisions.h"
#include "datatypes/cache.h"
#include "interposer/switchboard.h"
#include "kernels/device_runtime.h"
#include "kernels/memory_kind.h"
#include "support/config.h"

namespace k = veneer::kernels;
namespace alg = veneer::algorithms;

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "late_driver: FAILED: %s\n", what);
      ++failures;
    }
  };
  expect(!k::cuda_driver_loaded(), "no driver at start");
  expect(k::cuda_driver_surely_absent(), "the quick answer knows it after one check");
  expect(k::device_memory_surely_absent(), "so no device memory");
  namespace dt = veneer::datatypes::detail;
  dt::Front rule;
  veneer::fill_pass_rule(nullptr, rule);  // a type Veneer does not describe
  expect(rule.pass_below[0] == dt::kAlwaysPasses && rule.pass_below[1] == dt::kAlwaysPasses,
         "without device memory, a send of a type Veneer does not describe always passes");
  // A broadcast the library serves, marked as the interposer marks it (interposer/collectives.cpp route).
  const alg::DecisionKey bcast{
      .comm = MPI_COMM_WORLD, .type = MPI_BYTE, .count = 8, .collective = alg::Collective::bcast};
  auto quick_path_open = [] { return !veneer::device_byte_down(veneer::config()); };
  alg::remember_decision(bcast, {});
  alg::answer_quickly(bcast, quick_path_open);
  expect(alg::library_answers(bcast), "without device memory, the collectives' quick path answers the broadcast");
  const uint64_t epoch = veneer::g_cache_epoch.load();
  void* driver = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);  // the fake libcuda.so.1, by path
  expect(driver != nullptr, "the fake driver loads");
  expect(veneer::g_cache_epoch.load() > epoch, "the dlopen moved the type cache's epoch on");
  expect(!alg::library_answers(bcast), "the dlopen ends the collectives' quick answers");
  alg::remember_decision(bcast, {});
  alg::answer_quickly(bcast, quick_path_open);
  expect(!alg::library_answers(bcast), "and they are not marked again while device memory is possible");
  veneer::fill_pass_rule(nullptr, rule);
  expect(rule.pass_below[0] == 0 && rule.pass_below[1] == 0,
         "with device memory possible, no send is passed without the full rules");
  expect(!k::cuda_driver_surely_absent(), "a dlopen makes the quick answer unsure");
  expect(k::cuda_driver_loaded(), "and the full check finds the driver");
  expect(!k::device_memory_surely_absent(), "device memory is possible from now on");
  expect(k::memory_kind(&failures) == k::MemoryKind::host, "the driver says host for a stack address");
  if (failures == 0) std::printf("late_driver: ok\n");
  return failures == 0 ? 0 : 1;
}
