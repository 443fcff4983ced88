// SPDX-License-Identifier: BSD-3-Clause
#include "kernels/device_runtime.h"

#include <atomic>

#include "kernels/device_transfer.h"

namespace veneer::kernels {
namespace detail {
std::atomic<DeviceRuntime*> g_installed{nullptr};
}  // namespace detail

#if !VENEER_HAVE_CUDA
// Built without CUDA: no runtime of our own. Device buffers (seen through the
// driver by memory_kind()) are passed through to the library.
DeviceRuntime* cuda_runtime() { return nullptr; }
#endif

DeviceRuntime* device_runtime() {
  if (DeviceRuntime* rt = detail::g_installed.load(std::memory_order_acquire)) return rt;
  // The CUDA runtime is only worth asking once the application has loaded
  // the driver: before that no pointer can be device memory, and asking
  // would initialise CUDA in a process that never used it.
  if (!cuda_driver_loaded()) return nullptr;
  return cuda_runtime();
}

void install_device_runtime(DeviceRuntime* runtime) {
  // Pooled buffers belong to the runtime that made them, which may be about
  // to go away: give them back first.
  detail::g_runtime_installed.store(runtime != nullptr, std::memory_order_release);
  if (runtime) detail::set_quiet(0);
  if (detail::g_installed.exchange(runtime, std::memory_order_acq_rel) != runtime) release_pools();
}

MemoryKind buffer_kind(const void* p, int* device) {
  if (DeviceRuntime* rt = device_runtime()) return rt->kind(p, device);
  if (device) *device = -1;
  return memory_kind(p, device);
}

}  // namespace veneer::kernels
