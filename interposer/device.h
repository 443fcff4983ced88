// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Device (GPU) buffers in the interposer: deciding that Veneer carries one,
// packing it for the library, and unpacking what the library received into
// it. The moves themselves are kernels/device_transfer.h; this is the policy:
//
// - A buffer is carried when the runtime says its first byte is device
//   memory (managed memory is the CPU's too and takes the host path), the
//   type is decoded, and VENEER_DEVICE is not 0.
// - With a CUDA-aware library (asked at MPI_Init, or VENEER_CUDA_AWARE), a
//   contiguous device buffer is the library's business; a non-contiguous one
//   is packed into device memory and the packed bytes are handed over.
// - Otherwise every device buffer, contiguous or not, travels through pinned
//   host memory: one-shot for messages up to VENEER_DEVICE_ONESHOT_MAX, the
//   staged pipeline above it (VENEER_DEVICE_METHOD forces either).
// - A layout the device packer refuses goes to a CUDA-aware library as it
//   is; for any other library its whole span is copied to pinned host memory
//   and packed there (receives: the span is read, unpacked into on the host
//   and written back, gaps included, at completion).
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "algorithms/buffers.h"
#include "datatypes/layout.h"
#include "kernels/device_runtime.h"
#include "kernels/device_transfer.h"

namespace veneer::device {

// A device buffer Veneer carries, and what it needs to move its bytes.
struct Carried {
  kernels::DeviceRuntime* rt = nullptr;
  int device = -1;
  std::shared_ptr<const datatypes::Layout> layout;
  std::shared_ptr<const kernels::DevicePacker> packer;
  int64_t bytes = 0;      // packed bytes of the whole buffer (count * size)
  bool via_host = false;  // no packer: the span is copied through host memory
  explicit operator bool() const { return rt != nullptr; }
};

// Whether `count` instances of `type` at `buf` are device memory Veneer
// carries (see above); an empty Carried means: not Veneer's (host memory, or
// pass through). `to_library`: the bytes are for the library's own transfer,
// so a contiguous buffer stays with a CUDA-aware library.
Carried classify(const void* buf, int64_t count, MPI_Datatype type, bool to_library);
// The memory kind of `p` as Veneer's device runtime sees it.
bool is_device(const void* p);

// Whether the library underneath reads and writes device memory itself.
bool library_cuda_aware();

// What a send hands to the library: `data` holds `bytes` packed bytes, in
// pinned host memory or (CUDA-aware library) device memory.
struct Packed {
  kernels::PooledBuffer storage;
  const void* data = nullptr;
  int64_t bytes = 0;
};
// Packs `count` instances at `buf`; false (nothing sent yet) if the device failed.
bool pack_for_library(const Carried& c, int64_t count, const void* buf, Packed& out);

// Lower level, for callers that place several buffers in one staging area
// (Alltoallv): `count` instances at `buf` packed into (unpacked from) `staging`,
// which is pinned host memory, or device memory when `on_device`.
bool pack_into(const Carried& c, int64_t count, const void* buf, void* staging, bool on_device);
bool unpack_from(const Carried& c, int64_t count, void* buf, const void* staging, int64_t bytes, bool on_device);

// Where the library should receive `bytes` for a carried receive buffer.
bool landing_for_library(const Carried& c, Packed& out);
// Unpacks the first `received` bytes of `landing` into the `count` instances at `buf`.
bool unpack_from_library(const Carried& c, int64_t count, void* buf, const Packed& landing, int64_t received);

// MPI_Pack / MPI_Unpack with a device buffer on either side. `packed` is the
// packed side (host or device memory), `user` the typed one.
bool pack(const Carried& c, int64_t count, const void* user, void* packed);
bool unpack(const Carried& c, int64_t count, void* user, const void* packed);

// Copies `bytes` between any two of host, pinned and device memory; false if
// there is no runtime or it failed.
bool copy_bytes(void* dst, const void* src, int64_t bytes);

// The combine step of a reduction on the GPU (algorithms::Combiner, see
// device_reduce.cpp): `in` and `inout` (host memory: the staged mirrors and
// the algorithms' temporaries) are copied to device memory, combined there
// with DeviceRuntime::reduce() and the result copied back. Declines (nullopt,
// nothing written) what the kernel does not do exactly as the library:
// derived and non-dense types, user ops, floating MIN/MAX, SUM/PROD/MIN/MAX
// of 8- and 16-bit integers, MPI_CHAR and other types outside the C integer
// and float/double families.
std::optional<int> combine_on_device(const void* in, void* inout, int64_t count, const algorithms::ElementType& t,
                                     MPI_Op op);
// Whether reductions staged from device buffers combine on the device
// (VENEER_DEVICE_REDUCE; auto means host for now).
bool combine_on_device_wanted();

// At MPI_Init (detects CUDA-awareness) and MPI_Finalize (frees packers and pools).
void start();
void stop();
// Device packers cached now (for the report and the long-run test).
int64_t cached_packers();

}  // namespace veneer::device
