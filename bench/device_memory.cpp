// SPDX-License-Identifier: BSD-3-Clause
#include "bench/device_memory.h"

#include <dlfcn.h>
#include <mpi.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#if VENEER_BENCH_EMULATED_GPU
#include "test/device/emulator.h"
#endif

namespace veneer::bench {
namespace {

#if VENEER_BENCH_EMULATED_GPU
test::EmulatedRuntime* g_emulator = nullptr;
#endif

// libveneer's kernels::install_device_runtime(), if it is preloaded.
using InstallFn = void (*)(kernels::DeviceRuntime*);
InstallFn veneer_install() {
  return reinterpret_cast<InstallFn>(
      dlsym(RTLD_DEFAULT, "_ZN6veneer7kernels22install_device_runtimeEPNS0_13DeviceRuntimeE"));
}

bool copy_now(kernels::DeviceRuntime& rt, void* dst, const void* src, size_t bytes) {
  kernels::DeviceStream s = rt.stream(1);
  if (!s) return false;
  const bool queued = rt.copy(dst, src, bytes, s);
  return rt.synchronize(s) && queued;
}

}  // namespace

DeviceChoice open_device([[maybe_unused]] bool library_reads_device) {
  DeviceChoice c;
#if VENEER_BENCH_EMULATED_GPU
  test::EmulatorOptions o;
  o.host_accessible = library_reads_device;
  // As in the device MPI tests: the emulated packer refuses every layout.
  const char* refuse = std::getenv("VENEER_TEST_EMULATOR_REFUSE");
  o.refuse_layouts = refuse && std::string_view(refuse) == "1";
  // Never destroyed: a preloaded Veneer keeps pooled buffers and packers of
  // it past MPI_Finalize, and static destructors run in no useful order.
  g_emulator = new test::EmulatedRuntime(o);
  c.rt = g_emulator;
  c.name = library_reads_device ? "emulator (the library may read device memory)" : "emulator";
  c.emulated = true;
  if (InstallFn install = veneer_install()) {
    install(g_emulator);
    c.installed_into_veneer = true;
  }
#elif VENEER_HAVE_CUDA
  c.rt = kernels::cuda_runtime();
  c.name = "cuda";
  // Built with CUDA, run where there is no GPU (or no driver): say so once.
  if (void* probe = c.rt ? c.rt->alloc_device(1) : nullptr) {
    c.rt->free_device(probe);
  } else {
    c.rt = nullptr;
    c.name = "none (CUDA found no usable GPU)";
  }
#else
  c.name = "none (built without CUDA and without VENEER_EMULATED_GPU_BENCH)";
#endif
  return c;
}

bool veneer_loaded() { return veneer_install() != nullptr; }

bool library_says_cuda_aware() {
  using OmpiQuery = int (*)();
  using MpichQuery = int (*)(int, int*);
  if (auto f = reinterpret_cast<OmpiQuery>(dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support"))) return f() != 0;
  if (auto f = reinterpret_cast<MpichQuery>(dlsym(RTLD_DEFAULT, "MPIX_GPU_query_support"))) {
    int supported = 0;
    constexpr int kGpuSupportCuda = 0;  // MPIX_GPU_SUPPORT_CUDA
    return f(kGpuSupportCuda, &supported) == MPI_SUCCESS && supported != 0;
  }
  return false;
}

int64_t device_failed_steps() {
#if VENEER_BENCH_EMULATED_GPU
  if (g_emulator) return g_emulator->counters().failed_steps;
#endif
  return 0;
}

std::string device_counters() {
#if VENEER_BENCH_EMULATED_GPU
  if (g_emulator) {
    const test::EmulatorCounters k = g_emulator->counters();
    char line[256];
    std::snprintf(line, sizeof line,
                  "pack kernels %" PRId64 ", unpack kernels %" PRId64 ", copies %" PRId64 " (2-D %" PRId64
                  "), failed steps %" PRId64,
                  k.packs, k.unpacks, k.copies, k.copies_2d, k.failed_steps);
    return line;
  }
#endif
  return "";
}

DeviceBuffer::DeviceBuffer(kernels::DeviceRuntime& rt, Kind kind, size_t bytes) : rt_(&rt), kind_(kind), bytes_(bytes) {
  const size_t n = bytes > 0 ? bytes : 1;
  data_ = static_cast<char*>(kind == Kind::device ? rt.alloc_device(n) : rt.alloc_host(n));
}

DeviceBuffer::~DeviceBuffer() {
  if (!data_) return;
  if (kind_ == Kind::device) rt_->free_device(data_);
  else rt_->free_host(data_);
}

bool upload(kernels::DeviceRuntime& rt, void* device, const void* host, size_t bytes) {
  return copy_now(rt, device, host, bytes);
}

bool download(kernels::DeviceRuntime& rt, void* host, const void* device, size_t bytes) {
  return copy_now(rt, host, device, bytes);
}

}  // namespace veneer::bench
