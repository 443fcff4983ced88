// SPDX-License-Identifier: BSD-3-Clause
#include "kernels/memory_kind.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdint>

namespace veneer::kernels {
namespace {

// The few driver API values used here (cuda.h), so this file builds without
// CUDA; the tests check them against cuda.h where it is available.
constexpr int kAttributeMemoryType = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttributeIsManaged = 8;      // CU_POINTER_ATTRIBUTE_IS_MANAGED
constexpr int kAttributeDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr uint64_t kMemoryTypeHost = 1;     // CU_MEMORYTYPE_HOST
constexpr uint64_t kMemoryTypeDevice = 2;   // CU_MEMORYTYPE_DEVICE

// CUresult cuPointerGetAttributes(unsigned int, CUpointer_attribute*, void**, CUdeviceptr)
using GetAttributes = int (*)(unsigned, int*, void**, unsigned long long);

std::atomic<GetAttributes> get_attributes{nullptr};
// dlpi_adds when the driver was last found missing: while no object has been
// loaded since, it is still missing, and the (slow) dlopen need not be asked.
std::atomic<unsigned long long> missing_at_adds{~0ull};

unsigned long long objects_added() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;  // the counter is the same in every entry: stop at the first
      },
      &adds);
  return adds;
}

std::atomic<DlopenFn> g_unwatched_dlopen{nullptr};

// Calls left on this thread before the loader is asked again anyway (objects
// loaded without dlopen: dlmopen, a static dlopen inside another library).
constexpr int kRecheckEvery = 4096;

// Asks the loader: the driver's cuPointerGetAttributes if it is loaded, else null.
GetAttributes ask_loader() {
  const unsigned long long adds = objects_added();
  if (adds == missing_at_adds.load(std::memory_order_relaxed)) {
    detail::g_driver_missing.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  // RTLD_NOLOAD: a handle only if it is already there; never loads or initialises it.
  // Past Veneer's own dlopen, if it watches: asking must not look like a load.
  const DlopenFn open = g_unwatched_dlopen.load(std::memory_order_relaxed);
  void* lib = (open ? open : &dlopen)("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  if (!lib) {
    missing_at_adds.store(adds, std::memory_order_relaxed);
    detail::g_driver_missing.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  // The handle is kept (never closed): the driver stays mapped while we hold
  // a pointer into it.
  auto f = reinterpret_cast<GetAttributes>(dlsym(lib, "cuPointerGetAttributes"));
  if (!f) {
    dlclose(lib);
    missing_at_adds.store(adds, std::memory_order_relaxed);
    detail::g_driver_missing.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  get_attributes.store(f, std::memory_order_release);
  detail::g_driver_found.store(true, std::memory_order_release);
  detail::set_quiet(0);  // found behind dlopen's back (a dlopen lowered it already)
  return f;
}

// The driver's cuPointerGetAttributes if the driver is loaded, else null.
GetAttributes driver() {
  if (GetAttributes f = get_attributes.load(std::memory_order_acquire)) return f;
  std::atomic<unsigned char>* flag = detail::g_loaded_flag.load(std::memory_order_relaxed);
  if (flag) {
    // Lowered before asking. A dlopen still running while the loader is asked
    // loaded its object after the check: the periodic recheck finds it.
    flag->store(0, std::memory_order_relaxed);
    detail::t_calls_until_recheck = kRecheckEvery;
  }
  const GetAttributes f = ask_loader();
  if (!f && flag && !detail::g_runtime_installed.load(std::memory_order_acquire)) {
    // Missing, watched, no runtime: the pass-through's one byte says so until
    // the next dlopen lowers it. Raised, then the flag read: a dlopen since
    // the flag was lowered (it raises the flag, then lowers this byte) either
    // shows in the flag here or lowers the byte after this store.
    detail::set_quiet(1);
    if (flag->load(std::memory_order_seq_cst) != 0) detail::set_quiet(0);
  }
  return f;
}

}  // namespace

namespace detail {
std::atomic<bool> g_driver_found{false};
std::atomic<std::atomic<unsigned char>*> g_loaded_flag{nullptr};
std::atomic<bool> g_driver_missing{false};
std::atomic<unsigned char> g_quiet{0};
std::atomic<std::atomic<uint64_t>*> g_quiet_epoch{nullptr};
void set_quiet(unsigned char value) {
  if (g_quiet.exchange(value, std::memory_order_seq_cst) == value) return;
  if (std::atomic<uint64_t>* epoch = g_quiet_epoch.load(std::memory_order_acquire))
    epoch->fetch_add(1, std::memory_order_seq_cst);
}
std::atomic<bool> g_runtime_installed{false};
constinit thread_local int t_calls_until_recheck [[gnu::tls_model("initial-exec")]] = 0;
bool cuda_driver_loaded_slow() { return driver() != nullptr; }
}  // namespace detail

std::atomic<unsigned char>* watch_loads(std::atomic<unsigned char>* loaded_flag, DlopenFn next_dlopen) {
  g_unwatched_dlopen.store(next_dlopen, std::memory_order_relaxed);
  if (loaded_flag) loaded_flag->store(1, std::memory_order_relaxed);  // first call asks the loader
  detail::set_quiet(0);
  detail::g_loaded_flag.store(loaded_flag, std::memory_order_release);
  return &detail::g_quiet;
}

MemoryKind memory_kind(const void* p, int* device) {
  if (device) *device = -1;
  const GetAttributes f = driver();
  if (!f || !p) return MemoryKind::host;
  // Zeroed 8-byte slots: the driver writes an enum, a bool or an int into each.
  uint64_t type = 0, managed = 0, ordinal = 0;
  int attributes[] = {kAttributeMemoryType, kAttributeIsManaged, kAttributeDeviceOrdinal};
  void* data[] = {&type, &managed, &ordinal};
  if (f(3, attributes, data, reinterpret_cast<uintptr_t>(p)) != 0) return MemoryKind::host;
  const uint32_t type32 = static_cast<uint32_t>(type);
  const int ordinal32 = static_cast<int32_t>(static_cast<uint32_t>(ordinal));
  if (static_cast<uint32_t>(managed) != 0) {
    if (device) *device = ordinal32;
    return MemoryKind::managed;
  }
  // 0: memory the driver does not know, i.e. ordinary host memory.
  if (type32 == 0 || type32 == kMemoryTypeHost) return MemoryKind::host;
  if (type32 == kMemoryTypeDevice) {
    if (device) *device = ordinal32;
    return MemoryKind::device;
  }
  return MemoryKind::unknown;
}

const char* to_string(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::host: return "host";
    case MemoryKind::device: return "device";
    case MemoryKind::managed: return "managed";
    case MemoryKind::unknown: return "unknown";
  }
  return "unknown";
}

}  // namespace veneer::kernels
