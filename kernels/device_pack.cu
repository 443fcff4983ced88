// SPDX-License-Identifier: BSD-3-Clause
// The pack and unpack kernels and their launcher. One kernel per form, word
// width (leaf) or group size (segments), direction and index width; every
// layout runs through these few instantiations with its shape as parameters.
#include <algorithm>

#include "kernels/device_pack.h"
#include "kernels/pack_items.h"

namespace veneer::kernels {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; past that the
// threads loop (grid-stride), which keeps launches of huge streams valid.
constexpr uint64_t kMaxBlocks = 8192;

template <int W, bool Pack, class Index>
__global__ void __launch_bounds__(kThreads) leaf_kernel(const __grid_constant__ LeafParams<Index> p) {
  const uint64_t step = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t t = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < p.threads; t += step)
    leaf_thread<W, Pack, Index>(p, static_cast<Index>(t));
}

template <int G, bool Pack, class Index>
__global__ void __launch_bounds__(kThreads) segment_kernel(const __grid_constant__ SegmentParams<Index> p) {
  const uint64_t step = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t t = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < p.threads; t += step)
    segment_thread<G, Pack, Index>(p, static_cast<Index>(t));
}

dim3 grid_for(uint64_t threads) {
  const uint64_t blocks = (threads + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(std::min(blocks, kMaxBlocks)));
}

// Launches with cudaLaunchKernel, whose return value is the launch's own
// error: cudaGetLastError() would also take (and clear) the application's.
struct Launcher {
  cudaStream_t stream;

  cudaError_t nothing() { return cudaSuccess; }

  template <bool Pack>
  cudaError_t copy(uintptr_t user, char* packed, int64_t bytes) {
    void* u = reinterpret_cast<void*>(user);
    const auto n = static_cast<size_t>(bytes);
    return Pack ? cudaMemcpyAsync(packed, u, n, cudaMemcpyDefault, stream)
                : cudaMemcpyAsync(u, packed, n, cudaMemcpyDefault, stream);
  }

  template <int W, bool Pack, class Index>
  cudaError_t leaf(const LeafParams<Index>& p) {
    void* args[] = {const_cast<LeafParams<Index>*>(&p)};
    return cudaLaunchKernel(reinterpret_cast<const void*>(&leaf_kernel<W, Pack, Index>), grid_for(p.threads),
                            dim3(kThreads), args, 0, stream);
  }

  template <int G, bool Pack, class Index>
  cudaError_t segments(const SegmentParams<Index>& p) {
    void* args[] = {const_cast<SegmentParams<Index>*>(&p)};
    return cudaLaunchKernel(reinterpret_cast<const void*>(&segment_kernel<G, Pack, Index>), grid_for(p.threads),
                            dim3(kThreads), args, 0, stream);
  }
};

template <bool Pack>
cudaError_t transfer(const DeviceLayout& layout, int64_t count, const void* buf, int64_t skip, int64_t max_bytes,
                     void* packed, cudaStream_t stream, int64_t* moved) {
  if (moved) *moved = 0;
  if (!layout.ok()) return layout.status();
  const Launch l = layout.launch(count, buf, packed, skip, max_bytes);
  Launcher launcher{stream};
  const cudaError_t e = dispatch<Pack>(l, launcher);
  if (e == cudaSuccess && moved) *moved = l.bytes;
  return e;
}

}  // namespace

DeviceLayout::DeviceLayout(const datatypes::Layout& layout, const PlanLimits& limits) {
  plan_status_ = make_plan(layout, limits, plan_);
  switch (plan_status_) {
    case PlanStatus::ok: break;
    case PlanStatus::too_many_segments: status_ = cudaErrorNotSupported; return;
    case PlanStatus::malformed: status_ = cudaErrorInvalidValue; return;
  }
  const bool needs_memory = !plan_.offsets.empty() || !plan_.segments.empty();
  if (needs_memory) {
    if (const cudaError_t e = cudaGetDevice(&device_); e != cudaSuccess) {
      status_ = e;
      return;
    }
    if (const cudaError_t e = offsets_.upload(plan_.offsets); e != cudaSuccess) {
      status_ = e;
      return;
    }
    if (const cudaError_t e = segments_.upload(plan_.segments); e != cudaSuccess) {
      status_ = e;
      return;
    }
  }
  status_ = cudaSuccess;
}

Launch DeviceLayout::launch(int64_t count, const void* buf, void* packed, int64_t skip, int64_t max_bytes) const {
  return plan_launch(plan_, offsets_.data(), segments_.data(), count, address::of(buf), static_cast<char*>(packed),
                     skip, max_bytes);
}

cudaError_t device_pack(const DeviceLayout& layout, int64_t count, const void* buf, int64_t skip, int64_t max_bytes,
                        void* out, cudaStream_t stream, int64_t* packed) {
  return transfer<true>(layout, count, buf, skip, max_bytes, out, stream, packed);
}

cudaError_t device_unpack(const DeviceLayout& layout, int64_t count, void* buf, int64_t skip, int64_t max_bytes,
                          const void* in, cudaStream_t stream, int64_t* unpacked) {
  return transfer<false>(layout, count, buf, skip, max_bytes, const_cast<void*>(in), stream, unpacked);
}

}  // namespace veneer::kernels
