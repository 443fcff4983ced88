// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The launcher of the reduction kernel (device_reduce.cu), for the CUDA
// runtime (cuda_runtime.cpp). Only with CUDA.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/device_reduce.h"

namespace veneer::kernels {

// inout[i] = in[i] op inout[i] for i < count, queued on `stream` (one thread
// per element, grid-stride). Both pointers are device, managed or mapped
// pinned memory aligned to the element; cudaErrorInvalidValue for an
// unsupported (op, type) or a misaligned pointer, nothing queued then.
cudaError_t device_reduce(ReduceOp op, ReduceType type, void* inout, const void* in, int64_t count,
                          cudaStream_t stream);

}  // namespace veneer::kernels
