// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Address arithmetic in integers. A buffer may be MPI_BOTTOM (null) with
// absolute displacements, and a layout's offsets may be negative: pointer
// arithmetic from such a base is undefined, integer arithmetic is exact.
// Every layer that adds a displacement to a user's address uses these
// (datatypes/pack.cpp, kernels/, interposer/switchboard.h). Header only; the
// integer forms also compile for the device (kernels/pack_items.h).
#include <cstdint>

#if defined(__CUDACC__)
#define VENEER_ADDRESS_HD __host__ __device__ __forceinline__
#else
#define VENEER_ADDRESS_HD inline
#endif

namespace veneer::address {

// The address `p` as an integer.
template <class T>
VENEER_ADDRESS_HD uintptr_t of(T* p) {
  return reinterpret_cast<uintptr_t>(p);
}

// The integer address `offset` bytes past `address` (the offset may be negative).
VENEER_ADDRESS_HD constexpr uintptr_t advance(uintptr_t address, int64_t offset) {
  return address + static_cast<uintptr_t>(offset);
}

// The byte `offset` bytes past `base`, as a pointer of the same type (char,
// void, const or not); `base` may be null (MPI_BOTTOM).
template <class T>
VENEER_ADDRESS_HD T* at(T* base, int64_t offset) {
  return reinterpret_cast<T*>(advance(of(base), offset));
}

}  // namespace veneer::address
