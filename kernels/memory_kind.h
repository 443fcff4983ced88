#pragma once
// Where a buffer lives: host, device or managed memory.
//
// Asked on every call that Veneer might take over, so it must be cheap and
// must never change the process: it never initialises CUDA and never creates
// a context. A process that has not loaded the CUDA driver (libcuda.so.1)
// cannot hold device memory, so the answer is `host` at once; once the driver
// is loaded (by the application), the driver itself is asked through
// cuPointerGetAttributes, looked up with dlsym, so Veneer does not link
// against it. Plain C++ with no CUDA headers: built into every libveneer,
// with or without the CUDA kernels, so that even a build without CUDA sees
// device buffers and passes them through.
namespace veneer::kernels {

enum class MemoryKind {
  host,     // ordinary, pinned or registered host memory: the CPU may touch it
  device,   // device memory: only the GPU (or a CUDA-aware MPI) may touch it
  managed,  // managed (unified) memory: either, with page migration
  unknown,  // the driver gave an answer Veneer does not understand: pass through
};

// The memory kind of `p`. If `device` is not null it receives the ordinal of
// the device holding device or managed memory (-1 for host memory).
// Thread-safe. Driver errors read as host: they come from pointers the driver
// does not know (including any pointer before the application's cuInit).
MemoryKind memory_kind(const void* p, int* device = nullptr);

// Whether the CUDA driver library is loaded into this process (by anyone).
bool cuda_driver_loaded();

const char* to_string(MemoryKind kind);

}  // namespace veneer::kernels
