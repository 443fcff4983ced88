// The quick "no device memory here" answer must turn false once the
// application loads the CUDA driver, however late: dlopen raises Veneer's flag
// (interposer/loader.cpp) and the next check asks the loader again.
#include <dlfcn.h>

#include <cstdio>

#include "kernels/device_runtime.h"
#include "kernels/memory_kind.h"

namespace k = veneer::kernels;

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
  void* driver = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);  // the fake libcuda.so.1, by path
  expect(driver != nullptr, "the fake driver loads");
  expect(!k::cuda_driver_surely_absent(), "a dlopen makes the quick answer unsure");
  expect(k::cuda_driver_loaded(), "and the full check finds the driver");
  expect(!k::device_memory_surely_absent(), "device memory is possible from now on");
  expect(k::memory_kind(&failures) == k::MemoryKind::host, "the driver says host for a stack address");
  if (failures == 0) std::printf("late_driver: ok\n");
  return failures == 0 ? 0 : 1;
}
