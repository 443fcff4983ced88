// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Packing and unpacking datatypes in GPU memory, stream-ordered.
//
// A DeviceLayout is built once per (layout, device) from the canonical layout
// (datatypes/layout.h) and keeps what its kernels read on the device (irregular
// offsets, flattened segments). device_pack() then packs bytes [skip, skip +
// max_bytes) of the packed stream of `count` instances at `buf` into `out`,
// exactly as datatypes::pack() does on the host, but as work queued on
// `stream`: it returns once the work is queued, and the bytes are there when
// the stream reaches it. Both buffers must be addressable by the device
// (device, managed, or mapped pinned host memory). Nothing here throws; CUDA
// failures come back as cudaError_t.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "datatypes/layout.h"
#include "kernels/pack_plan.h"

namespace veneer::kernels {

// Device memory holding a copy of a host vector; freed on destruction.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(DeviceArray&& other) noexcept : data_(std::exchange(other.data_, nullptr)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(data_, other.data_);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    // At process exit the runtime may already be gone; nothing to do then.
    if (data_) cudaFree(data_);
  }

  cudaError_t upload(const std::vector<T>& host) {
    if (data_) cudaFree(std::exchange(data_, nullptr));
    if (host.empty()) return cudaSuccess;
    void* p = nullptr;
    const size_t bytes = host.size() * sizeof(T);
    if (const cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) return e;
    data_ = static_cast<T*>(p);
    return cudaMemcpy(data_, host.data(), bytes, cudaMemcpyHostToDevice);
  }
  const T* data() const { return data_; }

 private:
  T* data_ = nullptr;
};

class DeviceLayout {
 public:
  DeviceLayout() = default;  // status() is cudaErrorInvalidValue until built
  // Plans the layout and uploads what its kernels read to the current device.
  // Layouts that need no device memory (contiguous, plain strided) make no
  // CUDA call at all here.
  explicit DeviceLayout(const datatypes::Layout& layout, const PlanLimits& limits = {});

  // cudaSuccess, or why this layout cannot be packed on the device:
  // cudaErrorNotSupported (too many segments), cudaErrorInvalidValue
  // (malformed layout), or the CUDA error of the upload.
  cudaError_t status() const { return status_; }
  bool ok() const { return status_ == cudaSuccess; }
  PlanStatus plan_status() const { return plan_status_; }
  const PackPlan& plan() const { return plan_; }
  // The device holding this layout's arrays, or -1 when it has none (usable on any device).
  int device() const { return device_; }

  // Bytes a transfer with these arguments moves.
  int64_t packed_bytes(int64_t count, int64_t skip, int64_t max_bytes) const {
    return window_bytes(plan_, count, skip, max_bytes);
  }
  // The launch device_pack() would make (for tests and explanations).
  Launch launch(int64_t count, const void* buf, void* packed, int64_t skip, int64_t max_bytes) const;

 private:
  PackPlan plan_;
  PlanStatus plan_status_ = PlanStatus::ok;
  cudaError_t status_ = cudaErrorInvalidValue;
  int device_ = -1;
  DeviceArray<int64_t> offsets_;
  DeviceArray<Segment> segments_;
};

// Queues the packing of stream bytes [skip, skip + max_bytes) of `count`
// instances at `buf` into `out` on `stream`. *packed (if given) receives the
// bytes it will write: min(max_bytes, count * size - skip), or 0.
cudaError_t device_pack(const DeviceLayout& layout, int64_t count, const void* buf, int64_t skip, int64_t max_bytes,
                        void* out, cudaStream_t stream, int64_t* packed = nullptr);

// The inverse: queues the scattering of `in` (stream bytes [skip, skip +
// max_bytes)) into the instances at `buf`.
cudaError_t device_unpack(const DeviceLayout& layout, int64_t count, void* buf, int64_t skip, int64_t max_bytes,
                          const void* in, cudaStream_t stream, int64_t* unpacked = nullptr);

}  // namespace veneer::kernels
