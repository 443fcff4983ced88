// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Moving the bytes of a datatype between device memory and host memory, over
// any DeviceRuntime (kernels/device_runtime.h): the three ways the interposer
// carries device buffers, and the pooled pinned and device buffers they use.
//
// - one-shot: the pack kernel writes straight into mapped pinned host memory
//   (and the unpack kernel reads from it): one launch, the GPU's writes cross
//   the bus as they happen. Best for small and medium messages.
// - staged: the message is cut into chunks; chunk k+1 is packed into device
//   scratch on one stream while the copy engine moves chunk k to host memory
//   on another (double-buffered), and the reverse for unpacking. Best for
//   large messages, and the only way into pageable host memory.
// - on device: packed into device memory, for an MPI library that is
//   CUDA-aware (it sends from device memory itself) and for MPI_Pack into a
//   device buffer.
// A contiguous layout needs no kernel: its bytes are copied.
//
// MPI semantics fix the unit of transfer: one send is one message, whose size
// a receiver may probe and whose matching order is the posting order, so the
// pipeline overlaps packing with the bus transfer, and the message is handed
// to the library once all of it is in host memory.
//
// Every function here returns when its work is done (it synchronises Veneer's
// streams), with the first failure the runtime reported (DeviceStatus,
// kernels/device_status.h: logged with its cause where it happened).
#include <cstddef>
#include <cstdint>
#include <utility>

#include "datatypes/layout.h"
#include "kernels/device_runtime.h"

namespace veneer::kernels {

enum class DeviceMethod { oneshot, staged, on_device };
const char* to_string(DeviceMethod method);

// A buffer from the pinned-host or device pool of a runtime; back to the pool
// on destruction. The pools keep at most `pool_limit` bytes each
// (set_pool_limit, VENEER_PINNED_POOL) and are emptied by release_pools().
class PooledBuffer {
 public:
  enum class Kind { none, pinned, device };
  PooledBuffer() = default;
  // At least `bytes` (1 for 0) of `kind` memory from `rt`'s pool, on the
  // current device for device memory; get() is null on failure.
  PooledBuffer(DeviceRuntime& rt, Kind kind, size_t bytes);
  ~PooledBuffer();
  PooledBuffer(PooledBuffer&& other) noexcept { *this = std::move(other); }
  PooledBuffer& operator=(PooledBuffer&& other) noexcept;
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;

  char* get() const { return data_; }
  size_t capacity() const { return capacity_; }
  Kind kind() const { return kind_; }
  // Gives up ownership without freeing (memory the MPI library may still use).
  void leak() { data_ = nullptr; }

 private:
  DeviceRuntime* rt_ = nullptr;
  Kind kind_ = Kind::none;
  int device_ = -1;
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

void set_pool_limit(int64_t bytes);
struct PoolStats {
  int64_t pinned_bytes = 0, device_bytes = 0, reused = 0, allocated = 0;
};
PoolStats pool_stats();
void release_pools();  // frees every pooled buffer (MPI_Finalize)

struct TransferOptions {
  int64_t chunk = int64_t{1} << 20;  // staged: bytes per chunk (VENEER_DEVICE_CHUNK)
};

// Packs stream bytes [skip, skip + bytes) of `count` instances of `layout` at
// device (or managed) buffer `buf` into `out`. `out` is host memory for
// oneshot (mapped pinned memory from alloc_host) and staged (any host
// memory), device memory for on_device. `packer` was made for `layout` on
// the buffer's device, which is current.
DeviceStatus pack_from_device(DeviceRuntime& rt, const DevicePacker& packer, const datatypes::Layout& layout,
                              int64_t count, const void* buf, int64_t skip, int64_t bytes, void* out,
                              DeviceMethod method, const TransferOptions& options = {});

// The inverse: scatters `in` (stream bytes [skip, skip + bytes)) into the
// instances at device buffer `buf`.
DeviceStatus unpack_to_device(DeviceRuntime& rt, const DevicePacker& packer, const datatypes::Layout& layout,
                              int64_t count, void* buf, int64_t skip, int64_t bytes, const void* in,
                              DeviceMethod method, const TransferOptions& options = {});

}  // namespace veneer::kernels
