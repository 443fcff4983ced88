// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// What Veneer asks of a GPU, as a small interface: the CUDA runtime in real
// runs (kernels/cuda_runtime.cpp, built when CUDA is found), an emulator in
// the tests (test/device/emulator.h: host memory that the CPU cannot touch,
// worker threads as streams), so that the transfer pipelines of
// kernels/device_transfer.h run and are checked on machines without a GPU.
//
// Plain C++ with no CUDA headers. Streams and events are opaque handles. All
// calls are made by the thread that owns the operation; the runtime is shared
// by all threads (MPI_THREAD_MULTIPLE) and must be thread-safe. Nothing
// throws; a step that fails returns a failed DeviceStatus and an acquisition
// null, the cause logged (kernels/device_status.h), and the caller passes the
// MPI call through to the library or returns an MPI error.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "datatypes/layout.h"
#include "kernels/device_reduce.h"
#include "kernels/device_status.h"
#include "kernels/memory_kind.h"

namespace veneer::kernels {

using DeviceStream = void*;
using DeviceEvent = void*;

// One layout made ready for packing on one device (the plan and whatever the
// kernels read from device memory). Made once per (type, device) and cached.
class DevicePacker {
 public:
  virtual ~DevicePacker() = default;
  // The device it was made on.
  virtual int device() const = 0;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual const char* name() const = 0;

  // Where `p` lives; *device receives the ordinal for device and managed memory.
  virtual MemoryKind kind(const void* p, int* device) = 0;
  // The calling thread's current device.
  virtual int current_device() = 0;
  // Makes `device` current for the calling thread.
  virtual DeviceStatus set_device(int device) = 0;

  // A packer for `layout` on the current device, or null when the layout
  // cannot be packed there (too irregular, out of memory): pass through.
  virtual std::unique_ptr<DevicePacker> make_packer(const datatypes::Layout& layout) = 0;

  // Pinned host memory, mapped into the address space of every device (a
  // kernel may write it directly); null on failure.
  virtual void* alloc_host(size_t bytes) = 0;
  virtual void free_host(void* p) = 0;
  // Device memory on the current device; null on failure.
  virtual void* alloc_device(size_t bytes) = 0;
  virtual void free_device(void* p) = 0;

  // Veneer's own streams on the current device for the calling thread
  // (which = 0 or 1); they never wait for the application's streams.
  virtual DeviceStream stream(int which) = 0;
  virtual DeviceEvent create_event() = 0;
  virtual void destroy_event(DeviceEvent event) = 0;
  virtual DeviceStatus record(DeviceEvent event, DeviceStream stream) = 0;
  // Work queued on `stream` after this waits for `event`'s last record.
  virtual DeviceStatus wait(DeviceStream stream, DeviceEvent event) = 0;
  // Blocks until everything queued on `stream` has run; a failure if any of it failed.
  virtual DeviceStatus synchronize(DeviceStream stream) = 0;

  // Stream-ordered work. Pointers are device, managed or mapped pinned memory
  // (copy() also takes ordinary host memory). pack() moves stream bytes
  // [skip, skip + max_bytes) of `count` instances at `buf` to `out`, as
  // datatypes::pack() does on the host; unpack() is its inverse.
  virtual DeviceStatus pack(const DevicePacker& packer, int64_t count, const void* buf, int64_t skip, int64_t max_bytes,
                            void* out, DeviceStream stream) = 0;
  virtual DeviceStatus unpack(const DevicePacker& packer, int64_t count, void* buf, int64_t skip, int64_t max_bytes,
                              const void* in, DeviceStream stream) = 0;
  virtual DeviceStatus copy(void* dst, const void* src, size_t bytes, DeviceStream stream) = 0;
  // `height` rows of `width` bytes, rows `src_pitch` apart at `src` and
  // `dst_pitch` apart at `dst` (cudaMemcpy2DAsync). What an application that
  // packs a face by hand does; Veneer's own paths use pack(). The default is
  // one copy() per row; runtimes override it with one call.
  virtual DeviceStatus copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                               size_t height, DeviceStream stream) {
    for (size_t row = 0; row < height; ++row)
      if (DeviceStatus s = copy(static_cast<char*>(dst) + row * dst_pitch,
                                static_cast<const char*>(src) + row * src_pitch, width, stream);
          !s)
        return s;
    return {};
  }
  // inout[i] = in[i] op inout[i] for i < count elements of `type`
  // (kernels/device_reduce.h: MPI_Reduce_local's operand order), as a kernel
  // on `stream`. Both pointers are device, managed or mapped pinned memory,
  // aligned to the element. A failure (nothing queued) for an unsupported
  // pair, and by default: a runtime without a reduction kernel.
  virtual DeviceStatus reduce(ReduceOp op, ReduceType type, void* inout, const void* in, int64_t count,
                              DeviceStream stream) {
    (void)op, (void)type, (void)inout, (void)in, (void)count, (void)stream;
    return DeviceStatus::failure("reduce", 0, "unsupported", "this runtime has no reduction kernel", LogLevel::info);
  }
};

// The runtime for this process, or null when no buffer in it can be device
// memory: no runtime installed and either Veneer was built without CUDA or
// the application has not loaded the CUDA driver. Cheap; never initialises CUDA.
DeviceRuntime* device_runtime();
// Whether any buffer in this process may be device memory (a runtime is
// installed or the CUDA driver is loaded), even when Veneer has no runtime to
// move it with: such buffers are passed through. A few loads (asked on every call).
namespace detail {
extern std::atomic<DeviceRuntime*> g_installed;
}
[[gnu::always_inline]] inline bool device_memory_possible() {
  return detail::g_installed.load(std::memory_order_acquire) != nullptr || cuda_driver_loaded();
}
// The quickest form, for the pass-through path: true only when no buffer can
// be device memory and that is known without asking anyone; false means
// "maybe" (ask device_memory_possible() on the full path).
// One byte and this thread's countdown to the next check (memory_kind.h:
// detail::g_quiet says there is no runtime installed and no driver).
[[gnu::always_inline]] inline bool device_memory_surely_absent() {
  return detail::g_quiet.load(std::memory_order_acquire) != 0 && --detail::t_calls_until_recheck > 0;
}
// Installs a runtime in place of the built-in one (tests); null restores it.
// Not synchronised with calls in flight: install before MPI traffic starts.
// Pooled buffers (device_transfer.h) are released when the runtime changes.
void install_device_runtime(DeviceRuntime* runtime);
// The memory kind of `p` as the active runtime sees it (host when there is none).
MemoryKind buffer_kind(const void* p, int* device = nullptr);

// The CUDA runtime, or null in a build without CUDA (defined by
// cuda_runtime.cpp, or by a stub when CUDA is not built).
DeviceRuntime* cuda_runtime();

}  // namespace veneer::kernels
