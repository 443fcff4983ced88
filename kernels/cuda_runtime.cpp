// The DeviceRuntime of real runs: CUDA's static runtime (kernels/device_runtime.h).
//
// Nothing here runs before the first call of cuda_runtime(): libveneer must
// load, and run, on hosts with no GPU and no driver. Every CUDA failure comes
// back as false or null, and the error is taken off the runtime's per-thread
// "last error" so that it does not surface in a later, unrelated check.
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

// True on success; on failure also clears the error, which the launch or
// call left as the thread's last error.
bool succeeded(cudaError_t e) {
  if (e == cudaSuccess) return true;
  cudaGetLastError();
  return false;
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
    if (!succeeded(cudaGetDevice(&device))) return -1;
    return device;
  }

  bool set_device(int device) override { return device >= 0 && succeeded(cudaSetDevice(device)); }

  std::unique_ptr<DevicePacker> make_packer(const datatypes::Layout& layout) override {
    const int device = current_device();
    if (device < 0) return nullptr;
    try {
      auto packer = std::make_unique<CudaPacker>(layout, device);
      if (!succeeded(packer->layout().status())) return nullptr;
      return packer;
    } catch (const std::bad_alloc&) {
      return nullptr;  // host memory for the plan: pass through
    }
  }

  // Zero bytes still get an allocation: null means failure to the caller.
  void* alloc_host(size_t bytes) override {
    void* p = nullptr;
    if (!succeeded(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocMapped | cudaHostAllocPortable)))
      return nullptr;
    return p;
  }
  void free_host(void* p) override {
    if (p) succeeded(cudaFreeHost(p));
  }
  void* alloc_device(size_t bytes) override {
    void* p = nullptr;
    if (!succeeded(cudaMalloc(&p, std::max<size_t>(bytes, 1)))) return nullptr;
    return p;
  }
  void free_device(void* p) override {
    if (p) succeeded(cudaFree(p));
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
    if (!s && !succeeded(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) s = nullptr;
    return s;
  }

  DeviceEvent create_event() override {
    cudaEvent_t e = nullptr;
    if (!succeeded(cudaEventCreateWithFlags(&e, cudaEventDisableTiming))) return nullptr;
    return e;
  }
  void destroy_event(DeviceEvent event) override {
    if (event) succeeded(cudaEventDestroy(static_cast<cudaEvent_t>(event)));
  }
  bool record(DeviceEvent event, DeviceStream stream) override {
    return event && stream && succeeded(cudaEventRecord(static_cast<cudaEvent_t>(event), as_stream(stream)));
  }
  bool wait(DeviceStream stream, DeviceEvent event) override {
    return event && stream && succeeded(cudaStreamWaitEvent(as_stream(stream), static_cast<cudaEvent_t>(event), 0));
  }
  bool synchronize(DeviceStream stream) override {
    return stream && succeeded(cudaStreamSynchronize(as_stream(stream)));
  }

  bool pack(const DevicePacker& packer, int64_t count, const void* buf, int64_t skip, int64_t max_bytes, void* out,
            DeviceStream stream) override {
    const DeviceLayout* layout = usable_here(packer);
    return layout && stream && succeeded(device_pack(*layout, count, buf, skip, max_bytes, out, as_stream(stream)));
  }
  bool unpack(const DevicePacker& packer, int64_t count, void* buf, int64_t skip, int64_t max_bytes, const void* in,
              DeviceStream stream) override {
    const DeviceLayout* layout = usable_here(packer);
    return layout && stream && succeeded(device_unpack(*layout, count, buf, skip, max_bytes, in, as_stream(stream)));
  }
  bool copy(void* dst, const void* src, size_t bytes, DeviceStream stream) override {
    if (!stream) return false;
    if (bytes == 0) return true;
    return succeeded(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)));
  }
  bool copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t height,
               DeviceStream stream) override {
    if (!stream) return false;
    if (width == 0 || height == 0) return true;
    return succeeded(
        cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, cudaMemcpyDefault, as_stream(stream)));
  }

  bool reduce(ReduceOp op, ReduceType type, void* inout, const void* in, int64_t count, DeviceStream stream) override {
    return stream && succeeded(device_reduce(op, type, inout, in, count, as_stream(stream)));
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
