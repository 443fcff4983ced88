// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The benchmarks' GPU, for runs on device buffers (`--memory device`): the
// memory and copies of kernels::DeviceRuntime, from
// - the device emulator of test/device (a build with VENEER_EMULATED_GPU_BENCH:
//   device memory the CPU cannot touch, for CI on machines without a GPU;
//   installed into a preloaded libveneer as well, so Veneer carries it), or
// - CUDA (a build with CUDA: cudaMalloc, cudaMemcpy2DAsync), or
// - nothing (the benchmark says so and runs on host memory only).
// The benchmarks stay plain MPI programs: they never link libveneer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "kernels/device_runtime.h"

namespace veneer::bench {

struct DeviceChoice {
  kernels::DeviceRuntime* rt = nullptr;  // null: no device memory in this build or process
  std::string name;                      // "emulator", "cuda" or why there is none
  bool emulated = false;
  bool installed_into_veneer = false;  // the emulator was handed to a preloaded libveneer
};

// Opens the build's device; call before MPI_Init (Veneer reads its device
// runtime from then on). `library_reads_device`: the emulator lets the MPI
// library read and write device memory, as a CUDA-aware one would.
DeviceChoice open_device(bool library_reads_device);

// Whether libveneer is in this process (preloaded): asked of the dynamic
// linker, not read from LD_PRELOAD, where other libraries may carry the name.
bool veneer_loaded();

// After MPI_Init: whether the library underneath says it reads device memory
// (Open MPI's MPIX_Query_cuda_support, MPICH's MPIX_GPU_query_support).
bool library_says_cuda_aware();

// Whether the emulator counted a step that would have faulted (0 for CUDA),
// and its counters as one line (empty for CUDA).
int64_t device_failed_steps();
std::string device_counters();

// Device or pinned host memory, freed with its runtime.
class DeviceBuffer {
 public:
  enum class Kind { device, pinned };
  DeviceBuffer() = default;
  DeviceBuffer(kernels::DeviceRuntime& rt, Kind kind, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(rt_, other.rt_);
    std::swap(kind_, other.kind_);
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* get() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  kernels::DeviceRuntime* rt_ = nullptr;
  Kind kind_ = Kind::device;
  char* data_ = nullptr;
  size_t bytes_ = 0;
};

// Synchronous copies between host and device memory (outside timed regions).
bool upload(kernels::DeviceRuntime& rt, void* device, const void* host, size_t bytes);
bool download(kernels::DeviceRuntime& rt, void* host, const void* device, size_t bytes);

}  // namespace veneer::bench
