// SPDX-License-Identifier: BSD-3-Clause
// memory_kind() in a process that never used CUDA: every pointer is host
// memory, and asking must not load (let alone initialise) the CUDA driver.
// This program links no CUDA library; it runs on every machine.
#include "kernels/memory_kind.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#if __has_include(<cuda.h>)
#include <cuda.h>
#endif

namespace vk = veneer::kernels;

namespace {

bool driver_in_process() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  if (driver) dlclose(driver);
  return driver != nullptr;
}

int in_static_storage = 0;

TEST(MemoryKind, HostMemoryWithoutLoadingTheDriver) {
  ASSERT_FALSE(driver_in_process()) << "something loaded the CUDA driver before the test";
  std::unique_ptr<char, decltype(&std::free)> heap(static_cast<char*>(std::malloc(1 << 20)), &std::free);
  ASSERT_NE(heap, nullptr);
  int on_stack = 0;
  std::vector<double> vector(1000);
  int device = -2;
  EXPECT_EQ(vk::memory_kind(heap.get(), &device), vk::MemoryKind::host);
  EXPECT_EQ(device, -1);
  EXPECT_EQ(vk::memory_kind(heap.get() + 12345), vk::MemoryKind::host);
  EXPECT_EQ(vk::memory_kind(&on_stack), vk::MemoryKind::host);
  EXPECT_EQ(vk::memory_kind(vector.data()), vk::MemoryKind::host);
  EXPECT_EQ(vk::memory_kind(&in_static_storage), vk::MemoryKind::host);
  EXPECT_EQ(vk::memory_kind(nullptr), vk::MemoryKind::host);  // MPI_BOTTOM
  EXPECT_FALSE(vk::cuda_driver_loaded());
  EXPECT_FALSE(driver_in_process()) << "memory_kind() loaded the CUDA driver";
}

TEST(MemoryKind, ManyThreadsAtOnce) {
  std::vector<std::thread> threads;
  std::vector<int> wrong(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &wrong] {
      std::vector<char> mine(64);
      for (int i = 0; i < 10000; ++i)
        if (vk::memory_kind(mine.data() + i % 64) != vk::MemoryKind::host) ++wrong[static_cast<size_t>(t)];
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w : wrong) EXPECT_EQ(w, 0);
  EXPECT_FALSE(driver_in_process());
}

// Where the driver is installed: loaded by the application but not yet
// initialised (no cuInit), every pointer still reads as host memory.
TEST(MemoryKind, DriverLoadedButNotInitialised) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) GTEST_SKIP() << "no CUDA driver installed here: " << dlerror();
  int x = 0;
  EXPECT_TRUE(vk::cuda_driver_loaded());
  EXPECT_EQ(vk::memory_kind(&x), vk::MemoryKind::host);
  dlclose(driver);
}

// The pass-through's device byte: every change, and only a change, bumps the
// registered epoch (libveneer's type cache folds the byte into each type's
// cached send rule, so entries worked out with the old value must go stale).
TEST(MemoryKind, QuietByteChangesBumpTheEpoch) {
  std::atomic<uint64_t> epoch{7};
  std::atomic<uint64_t>* before = vk::detail::g_quiet_epoch.exchange(&epoch);
  const unsigned char was = vk::detail::g_quiet.load();
  vk::detail::set_quiet(0);
  const uint64_t start = epoch.load();
  vk::detail::set_quiet(1);
  EXPECT_EQ(epoch.load(), start + 1);
  EXPECT_EQ(vk::detail::g_quiet.load(), 1);
  vk::detail::set_quiet(1);  // no change: no bump
  EXPECT_EQ(epoch.load(), start + 1);
  vk::detail::set_quiet(0);
  EXPECT_EQ(epoch.load(), start + 2);
  EXPECT_EQ(vk::detail::g_quiet.load(), 0);
  vk::detail::g_quiet_epoch.store(nullptr);
  vk::detail::set_quiet(1);  // nothing registered: the byte alone
  EXPECT_EQ(epoch.load(), start + 2);
  vk::detail::g_quiet_epoch.store(before);
  vk::detail::g_quiet.store(was);
}

TEST(MemoryKind, Names) {
  EXPECT_STREQ(vk::to_string(vk::MemoryKind::host), "host");
  EXPECT_STREQ(vk::to_string(vk::MemoryKind::device), "device");
  EXPECT_STREQ(vk::to_string(vk::MemoryKind::managed), "managed");
  EXPECT_STREQ(vk::to_string(vk::MemoryKind::unknown), "unknown");
}

#if __has_include(<cuda.h>)
// memory_kind.cpp spells out the driver's constants so that it builds without
// CUDA: they must be the driver's.
static_assert(CU_POINTER_ATTRIBUTE_MEMORY_TYPE == 2);
static_assert(CU_POINTER_ATTRIBUTE_IS_MANAGED == 8);
static_assert(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL == 9);
static_assert(CU_MEMORYTYPE_HOST == 1);
static_assert(CU_MEMORYTYPE_DEVICE == 2);
#endif

}  // namespace
