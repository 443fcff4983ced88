// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// MPI handles are pointers in Open MPI and integers in MPICH: one hashable key for both.
#include <cstdint>
#include <type_traits>

namespace veneer {
template <class Handle>
uint64_t handle_key(Handle h) {
  if constexpr (std::is_pointer_v<Handle>) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h));
  } else {
    return static_cast<uint64_t>(h);
  }
}
}  // namespace veneer
