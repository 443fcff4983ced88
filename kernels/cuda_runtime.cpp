// SPDX-License-Identifier: BSD-3-Clause
// The DeviceRuntime of real runs: CUDA's static runtime (kernels/device_runtime.h).
//
// Nothing here runs before the first call of cuda_runtime(): libveneer must
// load, and run, on hosts with no GPU and no driver. Every CUDA failure comes
// back as a failed DeviceStatus (or null), logged with CUDA's name and text
// for the error, and is taken off the runtime's per-thread "last error" so
// that it does not surface in a later, unrelated check.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <memory>
#include <new>
#include <vector>

#include "kernels/device_pack.h"
#include "kernels/device_reduce_launch.h"
#include "kernels/device_runtime.h"

namespace veneer::kernels {
namespace {

// The status of CUDA call `step`; a failure is logged with its cause and
// cleared, as the launch or call left it as the thread's last error.
DeviceStatus status(cudaError_t e, const char* step, LogLevel level = LogLevel::warn) {
  if (e == cudaSuccess) return {};
  cudaGetLastError();
  return DeviceStatus::failure(step, static_cast<int>(e), cudaGetErrorName(e), cudaGetErrorString(e), level);
}

// A step refused before CUDA was asked (no stream, a packer from elsewhere).
DeviceStatus refused(const char* step, const char* why) {
  return DeviceStatus::failure(step, static_cast<int>(cudaErrorInvalidValue), "refused", why);
}

class CudaPacker final : public DevicePacker {
 public:
  CudaPacker(const datatypes::Layout& layout, int device) : layout_(layout), device_(device) {}
  int device() const override { return device_; }
  const DeviceLayout& layout() const { return layout_; }

 private:
  DeviceLayout layout_;
  int device_;
};

// Veneer's two streams per device of one thread. The streams are never
// destroyed: at thread or process exit the CUDA runtime may already be gone,
// and a context torn down takes its streams with it.
struct ThreadStreams {
  std::vector<std::array<cudaStream_t, 2>> by_device;
};

class CudaRuntime final : public DeviceRuntime {
 public:
  const char* name() const override { return "cuda"; }

  MemoryKind kind(const void* p, int* device) override { return memory_kind(p, device); }

  int current_device() override {
    int device = -1;
    if (!status(cudaGetDevice(&device), "cudaGetDevice")) return -1;
    return device;
  }

  DeviceStatus set_device(int device) override {
    if (device < 0) return refused("cudaSetDevice", "no such device");
    return status(cudaSetDevice(device), "cudaSetDevice");
  }

  std::unique_ptr<DevicePacker> make_packer(const datatypes::Layout& layout) override {
    const int device = current_device();
    if (device < 0) return nullptr;
    try {
      auto packer = std::make_unique<CudaPacker>(layout, device);
      // Too irregular (cudaErrorNotSupported) is a pass-through, not a fault.
      const cudaError_t e = packer->layout().status();
      if (!status(e, "device layout", e == cudaErrorNotSupported ? LogLevel::info : LogLevel::warn)) return nullptr;
      return packer;
    } catch (const std::bad_alloc&) {
      return nullptr;  // host memory for the plan: pass through
    }
  }

  // Zero bytes still get an allocation: null means failure to the caller.
  void* alloc_host(size_t bytes) override {
    void* p = nullptr;
    if (!status(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocMapped | cudaHostAllocPortable),
                "cudaHostAlloc"))
      return nullptr;
    return p;
  }
  void free_host(void* p) override {
    if (p) (void)status(cudaFreeHost(p), "cudaFreeHost");
  }
  void* alloc_device(size_t bytes) override {
    void* p = nullptr;
    if (!status(cudaMalloc(&p, std::max<size_t>(bytes, 1)), "cudaMalloc")) return nullptr;
    return p;
  }
  void free_device(void* p) override {
    if (p) (void)status(cudaFree(p), "cudaFree");
  }

  // Null when no stream can be had; every stream-ordered call below refuses a
  // null stream rather than fall back to the legacy default stream, which
  // would wait for (and hold up) the application's work.
  DeviceStream stream(int which) override {
    if (which < 0 || which > 1) return nullptr;
    const int device = current_device();
    if (device < 0) return nullptr;
    thread_local ThreadStreams mine;
    const auto slot = static_cast<size_t>(device);
    try {
      if (mine.by_device.size() <= slot) mine.by_device.resize(slot + 1, {nullptr, nullptr});
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
    cudaStream_t& s = mine.by_device[slot][static_cast<size_t>(which)];
    if (!s && !status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags")) s = nullptr;
    return s;
  }

  DeviceEvent create_event() override {
    cudaEvent_t e = nullptr;
    if (!status(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags")) return nullptr;
    return e;
  }
  void destroy_event(DeviceEvent event) override {
    if (event) (void)status(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cudaEventDestroy");
  }
  DeviceStatus record(DeviceEvent event, DeviceStream stream) override {
    if (!event || !stream) return refused("cudaEventRecord", "no event or stream");
    return status(cudaEventRecord(static_cast<cudaEvent_t>(event), as_stream(stream)), "cudaEventRecord");
  }
  DeviceStatus wait(DeviceStream stream, DeviceEvent event) override {
    if (!event || !stream) return refused("cudaStreamWaitEvent", "no event or stream");
    return status(cudaStreamWaitEvent(as_stream(stream), static_cast<cudaEvent_t>(event), 0), "cudaStreamWaitEvent");
  }
  DeviceStatus synchronize(DeviceStream stream) override {
    if (!stream) return refused("cudaStreamSynchronize", "no stream");
    return status(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
  }

  DeviceStatus pack(const DevicePacker& packer, int64_t count, const void* buf, int64_t skip, int64_t max_bytes,
                    void* out, DeviceStream stream) override {
    const DeviceLayout* layout = usable_here(packer);
    if (!layout || !stream) return refused("device_pack", "no stream, or a packer of another device");
    return status(device_pack(*layout, count, buf, skip, max_bytes, out, as_stream(stream)), "device_pack");
  }
  DeviceStatus unpack(const DevicePacker& packer, int64_t count, void* buf, int64_t skip, int64_t max_bytes,
                      const void* in, DeviceStream stream) override {
    const DeviceLayout* layout = usable_here(packer);
    if (!layout || !stream) return refused("device_unpack", "no stream, or a packer of another device");
    return status(device_unpack(*layout, count, buf, skip, max_bytes, in, as_stream(stream)), "device_unpack");
  }
  DeviceStatus copy(void* dst, const void* src, size_t bytes, DeviceStream stream) override {
    if (!stream) return refused("cudaMemcpyAsync", "no stream");
    if (bytes == 0) return {};
    return status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)), "cudaMemcpyAsync");
  }
  DeviceStatus copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t height,
                       DeviceStream stream) override {
    if (!stream) return refused("cudaMemcpy2DAsync", "no stream");
    if (width == 0 || height == 0) return {};
    return status(
        cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, cudaMemcpyDefault, as_stream(stream)),
        "cudaMemcpy2DAsync");
  }

  DeviceStatus reduce(ReduceOp op, ReduceType type, void* inout, const void* in, int64_t count,
                      DeviceStream stream) override {
    if (!stream) return refused("device_reduce", "no stream");
    return status(device_reduce(op, type, inout, in, count, as_stream(stream)), "device_reduce");
  }

 private:
  static cudaStream_t as_stream(DeviceStream s) { return static_cast<cudaStream_t>(s); }

  // The packer's layout, if it is one of ours and its device arrays (if any)
  // live on the current device: a kernel elsewhere could not read them.
  const DeviceLayout* usable_here(const DevicePacker& packer) {
    const auto* mine = dynamic_cast<const CudaPacker*>(&packer);
    if (!mine) return nullptr;
    const DeviceLayout& layout = mine->layout();
    if (layout.device() >= 0 && layout.device() != current_device()) return nullptr;
    return &layout;
  }
};

}  // namespace

DeviceRuntime* cuda_runtime() {
  // Never destroyed: threads may still send during static destruction, and
  // the runtime holds no resources of its own to give back.
  static auto* rt = new CudaRuntime;
  return rt;
}

}  // namespace veneer::kernels
