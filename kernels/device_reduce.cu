// SPDX-License-Identifier: BSD-3-Clause
// The reduction kernel: one template on the element type, the op as a
// functor (device_reduce.h); one instantiation per supported (type, op).
#include <algorithm>

#include "kernels/device_reduce_launch.h"
#include "support/address.h"

namespace veneer::kernels {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kMaxBlocks = 8192;  // past that the threads loop (grid-stride)

template <class T, ReduceOp Op>
__global__ void __launch_bounds__(kThreads) reduce_kernel(T* inout, const T* in, uint64_t count) {
  const Combine<Op> combine;
  const uint64_t step = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step)
    inout[i] = combine(in[i], inout[i]);
}

}  // namespace

cudaError_t device_reduce(ReduceOp op, ReduceType type, void* inout, const void* in, int64_t count,
                          cudaStream_t stream) {
  if (count < 0) return cudaErrorInvalidValue;
  const size_t size = reduce_type_size(type);
  if (size == 0 || address::of(inout) % size != 0 || address::of(in) % size != 0) return cudaErrorInvalidValue;
  if (count == 0) return reduce_supported(op, type) ? cudaSuccess : cudaErrorInvalidValue;
  const auto n = static_cast<uint64_t>(count);
  const dim3 grid(static_cast<unsigned>(std::min<uint64_t>((n + kThreads - 1) / kThreads, kMaxBlocks)));
  cudaError_t result = cudaErrorInvalidValue;
  visit_reduction(op, type, [&]<class T, ReduceOp Op>() {
    T* io = static_cast<T*>(inout);
    const T* src = static_cast<const T*>(in);
    uint64_t elements = n;
    void* args[] = {&io, &src, &elements};
    // cudaLaunchKernel returns the launch's own error (cudaGetLastError would
    // also take the application's).
    result =
        cudaLaunchKernel(reinterpret_cast<const void*>(&reduce_kernel<T, Op>), grid, dim3(kThreads), args, 0, stream);
    return true;
  });
  return result;
}

}  // namespace veneer::kernels
