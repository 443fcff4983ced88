// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// MPI_Pack and MPI_Unpack with Veneer's host packer, shared by the int forms
// (interposer/pack.cpp) and the MPI-4 _c forms (interposer/large_count.cpp).
#include <mpi.h>

#include <cstdint>

namespace veneer {

// Packs (`packing`) `count` instances of `type` at `user` into the packed
// buffer `packed` of `size` bytes at byte `position`, or unpacks them from
// there into `user`, and counts it. Returns the bytes moved (the caller
// advances its position), or -1, having done nothing, where the take-over
// rule (pack_layout in interposer/switchboard.h) leaves the call to the
// library, a buffer is not the CPU's, `packed` is null or `position` is
// negative (-1: the caller's position pointer is null).
int64_t pack_on_host(bool packing, const void* user, int64_t count, MPI_Datatype type, const void* packed, int64_t size,
                     int64_t position, MPI_Comm comm);

}  // namespace veneer
