#pragma once
// The take-over rules of the interposer, in one place.
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <memory>

#include "datatypes/cache.h"
#include "support/config.h"

namespace veneer {

// Address arithmetic in integers (buffers may be MPI_BOTTOM with absolute displacements).
inline void* offset_ptr(const void* base, int64_t offset) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(offset));
}

// The layout to pack `count` instances of `type` with for a send or receive,
// or null to pass the call through. The rule: the data is not contiguous, its
// mean contiguous block is at most VENEER_P2P_MAX_BLOCK bytes (the library's
// own copy loop is competitive for large blocks and avoids our extra copy), and
// the message fits VENEER_P2P_MAX_BYTES and an int byte count.
inline std::shared_ptr<const datatypes::Layout> p2p_layout(int count, MPI_Datatype type, int peer) {
  const Config& c = config();
  if (!c.enabled || !c.datatypes || !c.p2p || count <= 0 || peer == MPI_PROC_NULL) return nullptr;
  auto layout = datatypes::lookup(type);
  if (!layout || layout->contiguous || layout->size <= 0) return nullptr;
  const int64_t bytes = layout->size * count;
  if (bytes > c.p2p_max_bytes || bytes > INT_MAX || layout->mean_block() > c.p2p_max_block) return nullptr;
  return layout;
}

}  // namespace veneer
