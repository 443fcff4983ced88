#pragma once
// The take-over rules of the interposer, in one place.
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <memory>

#include "datatypes/cache.h"
#include "kernels/device_runtime.h"
#include "support/config.h"

namespace veneer {

// Address arithmetic in integers (buffers may be MPI_BOTTOM with absolute displacements).
inline void* offset_ptr(const void* base, int64_t offset) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(offset));
}

// True if the CPU may touch the buffer (host or managed memory). Device
// memory (a CUDA-aware MPI's business) passes through untouched. `first` is
// the address of the first byte the operation touches.
inline bool cpu_accessible(const void* first) {
  const auto kind = kernels::buffer_kind(first);
  return kind == kernels::MemoryKind::host || kind == kernels::MemoryKind::managed;
}
inline bool cpu_accessible(const void* a, const void* b) {
  if (!kernels::device_memory_possible()) return true;  // no driver: no device memory anywhere
  return cpu_accessible(a) && cpu_accessible(b);
}

// The quick answer every send and receive asks first: true when the call
// certainly goes to the library untouched (switches off, no partner, nothing
// to move, no device memory possible in this process, a type Veneer knows to
// be contiguous or does not know). A few loads on the pass-through path;
// false sends the call through the full rules below.
[[gnu::always_inline]] inline bool p2p_passes(int count, MPI_Datatype type, int peer) {
  const Config& c = config();
  if (!c.enabled || !c.p2p || peer == MPI_PROC_NULL || count <= 0) return true;
  if (c.device && !kernels::device_memory_surely_absent()) return false;
  if (!c.datatypes) return true;
  const datatypes::Layout* seen = nullptr;
  if (!datatypes::peek_front(type, &seen)) return false;  // not seen on this thread yet: the full rules look it up
  if (!seen || seen->contiguous || seen->size <= 0) return true;
  // Mean block above the threshold (size / blocks > max, i.e. (max + 1) *
  // blocks <= size, exactly and without a division): the library's own copy
  // loop is as fast (see p2p_layout). max >= size never passes, so max + 1
  // cannot overflow below.
  int64_t product = 0;
  if (c.p2p_max_block < seen->size &&
      !__builtin_mul_overflow(c.p2p_max_block + 1, seen->block_count, &product) && product <= seen->size)
    return true;
  // Below the smallest message taken over (a product beyond int64 is not).
  return !__builtin_mul_overflow(seen->size, int64_t{count}, &product) && product < c.p2p_min_bytes;
}

// The layout to pack `count` instances of `type` with for a send or receive,
// or null to pass the call through. The rule: the data is not contiguous, its
// mean contiguous block is at most VENEER_P2P_MAX_BLOCK bytes (the library's
// own copy loop is competitive for large blocks and avoids our extra copy), and
// the message is at least VENEER_P2P_MIN_BYTES and fits VENEER_P2P_MAX_BYTES and an int byte count.
inline std::shared_ptr<const datatypes::Layout> p2p_layout(const void* buf, int count, MPI_Datatype type, int peer) {
  const Config& c = config();
  if (!c.enabled || !c.datatypes || !c.p2p || count <= 0 || peer == MPI_PROC_NULL) return nullptr;
  const datatypes::Layout* seen = datatypes::peek(type);  // no reference count for the common pass-through
  if (!seen || seen->contiguous || seen->size <= 0) return nullptr;
  auto layout = datatypes::lookup(type);
  if (!layout) return nullptr;
  const int64_t bytes = layout->size * count;
  if (bytes < c.p2p_min_bytes || bytes > c.p2p_max_bytes || bytes > INT_MAX || layout->mean_block() > c.p2p_max_block)
    return nullptr;
  if (!cpu_accessible(offset_ptr(buf, layout->true_lb))) return nullptr;
  return layout;
}

}  // namespace veneer
