// SPDX-License-Identifier: BSD-3-Clause
// MPI_Pack and MPI_Unpack through Veneer's packers. Anything the library
// would reject (bad counts, small buffers, unknown types) is passed through so
// that the library reports its own error.
#include "datatypes/pack.h"

#include <mpi.h>

#include <cstring>

#include "interposer/device.h"
#include "interposer/forward.h"
#include "interposer/pack.h"
#include "interposer/switchboard.h"
#include "support/counters.h"
#include "support/staging.h"

using namespace veneer;

int64_t veneer::pack_on_host(bool packing, const void* user, int64_t count, MPI_Datatype type, const void* packed,
                             int64_t size, int64_t position, MPI_Comm comm) {
  if (!packed || position < 0) return -1;
  const datatypes::Layout* layout = pack_layout(count, type, size, position, comm);
  if (!layout || !cpu_accessible(packed, offset_ptr(user, layout->true_lb))) return -1;
  ScopedTimer timer;
  void* at = offset_ptr(packed, position);
  const int64_t n = packing ? datatypes::pack_all(*layout, count, user, at)
                            : datatypes::unpack_all(*layout, count, const_cast<void*>(user), at);
  counters().add(packing ? Counter::pack_taken : Counter::unpack_taken);
  counters().add(packing ? Counter::bytes_packed : Counter::bytes_unpacked, static_cast<uint64_t>(n));
  return n;
}

namespace {
// What the entry point does without a stack frame: hand the call to the
// library (switches off, a type Veneer does not describe), copy one
// contiguous run itself (a memcpy: measured 1.1-1.9x faster than Open MPI's
// own MPI_Pack of one run of 16 B-2 KiB and 1.2-7x MPICH's, whose fixed costs
// are 12-30 ns and 60-150 ns; equal at 1 MiB), or go
// through the full rules (device memory possible, a type not seen on this
// thread yet, several runs, zero bytes, MPI_BOTTOM).
enum class Quick { library, copy, full };

[[gnu::always_inline]] inline Quick pack_quick(const void* user_buf, int count, MPI_Datatype type,
                                               const datatypes::Layout** run) {
  const Config& c = config();
  if (!takes_pack(c)) return Quick::library;
  // Device memory possible: the full rules look at the buffers (with
  // VENEER_DEVICE=0 too, so that a device buffer is never copied by the CPU).
  const bool device_possible = !kernels::device_memory_surely_absent();
  if (carries_device(c) && device_possible) return Quick::full;
  const datatypes::Layout* layout = nullptr;
  if (!datatypes::peek_front(type, &layout)) return Quick::full;  // not seen on this thread yet: the full rules decide
  if (!layout) return Quick::library;
  if (count > 0 && layout->size > 0 && user_buf != MPI_BOTTOM && layout->one_run(count) && !device_possible) {
    *run = layout;
    return Quick::copy;
  }
  return Quick::full;
}

// The bytes of `count` instances of a one-run type at `*position` of a packed
// buffer of `size` bytes, or -1 when the arguments are ones the library must
// judge (it reports its own error).
[[gnu::always_inline]] inline int64_t run_bytes(const datatypes::Layout& run, int count, const void* packed, int size,
                                                const int* position, MPI_Comm comm) {
  if (!packed || !position || *position < 0 || size < 0 || comm == MPI_COMM_NULL) return -1;
  const int64_t bytes = run.size * count;
  return int64_t{*position} + bytes <= int64_t{size} ? bytes : -1;
}

// MPI_Pack / MPI_Unpack where either buffer is device memory. Returns false
// (the caller passes the call through) unless Veneer did it; *rc is then its
// result. `user` is the typed buffer, `packed` the packed one, at *position.
bool device_pack_call(bool packing, const void* user, int count, MPI_Datatype type, const void* packed, int size,
                      int* position, MPI_Comm comm, int* rc) {
  const Config& c = config();
  if (!takes_pack(c) || !carries_device(c) || count <= 0 || size < 0 || !position || *position < 0 ||
      comm == MPI_COMM_NULL || !packed || !kernels::device_runtime())
    return false;
  auto seen = datatypes::lookup(type);
  if (!seen || seen->size <= 0) return false;
  const int64_t bytes = seen->size * count;
  if (int64_t{*position} + bytes > int64_t{size}) return false;  // the library reports the error
  void* at = offset_ptr(packed, *position);
  if (device::Carried d = device::classify(user, count, type, false)) {
    const bool ok = packing ? device::pack(d, count, user, at) : device::unpack(d, count, const_cast<void*>(user), at);
    if (!ok) return false;
  } else if (device::is_device(at)) {
    // Host data, device packed buffer: packed on the host, then copied.
    Staging staging(static_cast<size_t>(bytes));
    if (!staging.get()) return false;
    ScopedTimer timer;
    if (packing) {
      datatypes::pack_all(*seen, count, user, staging.get());
      if (!device::copy_bytes(at, staging.get(), bytes)) return false;
    } else {
      if (!device::copy_bytes(staging.get(), at, bytes)) return false;
      datatypes::unpack_all(*seen, count, const_cast<void*>(user), staging.get());
    }
  } else {
    return false;
  }
  *position += static_cast<int>(bytes);
  counters().add(packing ? Counter::pack_taken : Counter::unpack_taken);
  *rc = MPI_SUCCESS;
  return true;
}

// MPI_Pack (`packing`) and MPI_Unpack in the terms both share: `count`
// instances of `type` at `user`, a packed buffer of `size` bytes at
// `*position` (a send buffer of the call is const: `User` when packing,
// `Packed` when unpacking). The library's call with the same arguments:
template <bool packing, class User, class Packed>
int library_call(User* user, int count, MPI_Datatype type, Packed* packed, int size, int* position, MPI_Comm comm) {
  if constexpr (packing) {
    return next::Pack(user, count, type, packed, size, position, comm);
  } else {
    return next::Unpack(packed, size, position, user, count, type, comm);
  }
}

// By the full rules, out of line: Veneer's host packer, else the device
// path, else the library.
template <bool packing, class User, class Packed>
int pack_full(User* user, int count, MPI_Datatype type, Packed* packed, int size, int* position, MPI_Comm comm) {
  if (const int64_t n = pack_on_host(packing, user, count, type, packed, size, position ? *position : -1, comm);
      n >= 0) {
    *position += static_cast<int>(n);
    return MPI_SUCCESS;
  }
  if (int rc = 0; kernels::device_memory_possible() &&
                  device_pack_call(packing, user, count, type, packed, size, position, comm, &rc))
    return rc;
  counters().add(packing ? Counter::pack_passed : Counter::unpack_passed);
  return library_call<packing>(user, count, type, packed, size, position, comm);
}

// Out of line with the entry point's own arguments, so the entry point jumps here without a frame.
[[gnu::noinline]] int pack_slow(const void* inbuf, int incount, MPI_Datatype type, void* outbuf, int outsize,
                                int* position, MPI_Comm comm) {
  return pack_full<true>(inbuf, incount, type, outbuf, outsize, position, comm);
}
[[gnu::noinline]] int unpack_slow(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
                                  MPI_Datatype type, MPI_Comm comm) {
  return pack_full<false>(outbuf, outcount, type, inbuf, insize, position, comm);
}

// The entry points: the common pass-through and one-run copies in a few
// instructions (always inlined, no stack frame), everything else out of line.
template <bool packing, class User, class Packed>
[[gnu::always_inline]] inline int pack_entry(User* user, int count, MPI_Datatype type, Packed* packed, int size,
                                             int* position, MPI_Comm comm) {
  const datatypes::Layout* run = nullptr;
  switch (pack_quick(user, count, type, &run)) {
    case Quick::library: break;
    case Quick::copy:
      if (const int64_t n = run_bytes(*run, count, packed, size, position, comm); n >= 0) {
        void* at = offset_ptr(packed, *position);
        void* typed = offset_ptr(user, run->true_lb);
        std::memcpy(packing ? at : typed, packing ? typed : at, static_cast<size_t>(n));
        *position += static_cast<int>(n);
        counters().add(packing ? Counter::pack_taken : Counter::unpack_taken);
        counters().add(packing ? Counter::bytes_packed : Counter::bytes_unpacked, static_cast<uint64_t>(n));
        return MPI_SUCCESS;
      }
      break;
    case Quick::full:
      if constexpr (packing) {
        return pack_slow(user, count, type, packed, size, position, comm);
      } else {
        return unpack_slow(packed, size, position, user, count, type, comm);
      }
  }
  counters().add(packing ? Counter::pack_passed : Counter::unpack_passed);
  return library_call<packing>(user, count, type, packed, size, position, comm);
}

}  // namespace

extern "C" int MPI_Pack(const void* inbuf, int incount, MPI_Datatype type, void* outbuf, int outsize, int* position,
                        MPI_Comm comm) {
  return pack_entry<true>(inbuf, incount, type, outbuf, outsize, position, comm);
}

extern "C" int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount, MPI_Datatype type,
                          MPI_Comm comm) {
  return pack_entry<false>(outbuf, outcount, type, inbuf, insize, position, comm);
}
