// MPI_Pack and MPI_Unpack through Veneer's packers. Anything the library
// would reject (bad counts, small buffers, unknown types) is passed through so
// that the library reports its own error.
#include "datatypes/pack.h"

#include <mpi.h>

#include "interposer/device.h"
#include "interposer/forward.h"
#include "interposer/switchboard.h"
#include "support/counters.h"
#include "support/staging.h"

using namespace veneer;

namespace {
// The quick answer for the common case: the call certainly goes to the
// library (switches off, no device memory possible in this process, a type
// Veneer does not know, or one contiguous run of bytes, which the library
// copies with one memcpy and less overhead). Zero bytes and MPI_BOTTOM stay
// with the full rules below.
[[gnu::always_inline]] inline bool pack_passes(const void* user_buf, int count, MPI_Datatype type) {
  const Config& c = config();
  if (!c.enabled || !c.datatypes || !c.pack) return true;
  if (c.device && !kernels::device_memory_surely_absent()) return false;
  const datatypes::Layout* layout = nullptr;
  if (!datatypes::peek_front(type, &layout)) return false;  // not seen on this thread yet: the full rules decide
  if (!layout) return true;
  return count > 0 && layout->size > 0 && user_buf != MPI_BOTTOM &&
         (layout->contiguous || (count == 1 && layout->block_count == 1));
}

// A borrowed pointer (datatypes::peek): valid for this call, which looks up no
// other type, and free of reference counting on this hot path.
const datatypes::Layout* pack_layout(const void* user_buf, int count, MPI_Datatype type, int size, const int* position,
                                     MPI_Comm comm) {
  const Config& c = config();
  if (!c.enabled || !c.datatypes || !c.pack || count < 0 || size < 0 || !position || *position < 0 ||
      comm == MPI_COMM_NULL)
    return nullptr;
  // Zero bytes (count 0 or a zero-size type) are a valid no-op that Veneer
  // answers itself: MPICH 4.0's own MPI_Unpack divides by zero on them.
  const datatypes::Layout* layout = datatypes::peek(type);
  if (!layout || layout->size < 0) return nullptr;
  if (int64_t{*position} + layout->size * count > int64_t{size}) return nullptr;
  // One contiguous run is one memcpy in the library too, with less overhead
  // than Veneer's lookup: pass it through. Zero bytes stay with Veneer, and so
  // does MPI_BOTTOM, which MPICH 4.0's MPI_Pack/Unpack refuse.
  if (layout->size * count > 0 && user_buf != MPI_BOTTOM &&
      (layout->contiguous || (count == 1 && layout->block_count == 1)))
    return nullptr;
  return layout;
}
// MPI_Pack / MPI_Unpack where either buffer is device memory. Returns false
// (the caller passes the call through) unless Veneer did it; *rc is then its
// result. `user` is the typed buffer, `packed` the packed one, at *position.
bool device_pack_call(bool packing, const void* user, int count, MPI_Datatype type, const void* packed, int size,
                      int* position, MPI_Comm comm, int* rc) {
  const Config& c = config();
  if (!c.enabled || !c.datatypes || !c.pack || !c.device || count <= 0 || size < 0 || !position || *position < 0 ||
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

[[gnu::noinline]] int pack_slow(const void* inbuf, int incount, MPI_Datatype type, void* outbuf, int outsize,
                                 int* position, MPI_Comm comm) {
  const datatypes::Layout* layout = outbuf ? pack_layout(inbuf, incount, type, outsize, position, comm) : nullptr;
  if (layout && !cpu_accessible(outbuf, offset_ptr(inbuf, layout->true_lb))) layout = nullptr;
  if (!layout) {
    if (int rc = 0; kernels::device_memory_possible() &&
                    device_pack_call(true, inbuf, incount, type, outbuf, outsize, position, comm, &rc))
      return rc;
    counters().add(Counter::pack_passed);
    return next::Pack(inbuf, incount, type, outbuf, outsize, position, comm);
  }
  ScopedTimer timer;
  const int64_t n = datatypes::pack_all(*layout, incount, inbuf, offset_ptr(outbuf, *position));
  *position += static_cast<int>(n);
  counters().add(Counter::pack_taken);
  counters().add(Counter::bytes_packed, static_cast<uint64_t>(n));
  return MPI_SUCCESS;
}

[[gnu::noinline]] int unpack_slow(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
                                   MPI_Datatype type, MPI_Comm comm) {
  const datatypes::Layout* layout = inbuf ? pack_layout(outbuf, outcount, type, insize, position, comm) : nullptr;
  if (layout && !cpu_accessible(inbuf, offset_ptr(outbuf, layout->true_lb))) layout = nullptr;
  if (!layout) {
    if (int rc = 0; kernels::device_memory_possible() &&
                    device_pack_call(false, outbuf, outcount, type, inbuf, insize, position, comm, &rc))
      return rc;
    counters().add(Counter::unpack_passed);
    return next::Unpack(inbuf, insize, position, outbuf, outcount, type, comm);
  }
  ScopedTimer timer;
  const int64_t n = datatypes::unpack_all(*layout, outcount, outbuf, offset_ptr(inbuf, *position));
  *position += static_cast<int>(n);
  counters().add(Counter::unpack_taken);
  counters().add(Counter::bytes_unpacked, static_cast<uint64_t>(n));
  return MPI_SUCCESS;
}

}  // namespace

// The entry points: the common pass-through in a few instructions (no stack
// frame), everything else out of line.
extern "C" int MPI_Pack(const void* inbuf, int incount, MPI_Datatype type, void* outbuf, int outsize, int* position,
                        MPI_Comm comm) {
  if (pack_passes(inbuf, incount, type)) {
    counters().add(Counter::pack_passed);
    return next::Pack(inbuf, incount, type, outbuf, outsize, position, comm);
  }
  return pack_slow(inbuf, incount, type, outbuf, outsize, position, comm);
}

extern "C" int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount, MPI_Datatype type,
                          MPI_Comm comm) {
  if (pack_passes(outbuf, outcount, type)) {
    counters().add(Counter::unpack_passed);
    return next::Unpack(inbuf, insize, position, outbuf, outcount, type, comm);
  }
  return unpack_slow(inbuf, insize, position, outbuf, outcount, type, comm);
}
