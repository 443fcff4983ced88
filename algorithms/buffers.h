// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Buffers of `count` elements of an MPI type, as the reduction algorithms
// handle them: element i lives at buf + i*extent, temporaries are allocated to
// the type's true extent, local copies keep the type's gaps untouched.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "datatypes/layout.h"
#include "support/staging.h"

namespace veneer::algorithms {

// A type as the algorithms handle it: its handle (for messages and
// PMPI_Reduce_local) and Veneer's layout of it from datatypes::lookup(), the
// one description of a type's size, extents and packed stream.
struct ElementType {
  MPI_Datatype handle = MPI_DATATYPE_NULL;
  std::shared_ptr<const datatypes::Layout> layout;  // never null in a made ElementType
  bool named = false;                               // predefined (MPI_INT, MPI_2INT, ...)

  // nullopt for types the algorithms do not take: no layout (not seen
  // committed, or not describable), or a non-positive size or extent.
  static std::optional<ElementType> of(MPI_Datatype type);
  int64_t size() const { return layout->size; }
  int64_t extent() const { return layout->extent; }
  // `count` elements are count * size bytes in order from buf + true_lb: memmove copies them.
  bool contiguous() const { return layout->contiguous; }
};

inline void* element(void* buf, int64_t index, const ElementType& t) {
  return static_cast<std::byte*>(buf) + index * t.extent();
}
inline const void* element(const void* buf, int64_t index, const ElementType& t) {
  return static_cast<const std::byte*>(buf) + index * t.extent();
}

// Uninitialised scratch bytes for one call, from the staging pool
// (support/staging.h: freed buffers of 64 KiB and up kept for reuse, bounded
// by VENEER_STAGING_POOL). A collective repeated at one size, the common
// case, then works in memory whose pages are already mapped: glibc gives
// large freed blocks back to the system and each call faulted every page in
// again (a 1 MiB reduce-scatter on 4 ranks ran 190 or 430 us per call,
// depending on the heap's history).
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(size_t bytes) { reset(bytes); }
  Scratch(Scratch&& other) noexcept : storage_(std::move(other.storage_)), size_(std::exchange(other.size_, 0)) {}
  Scratch& operator=(Scratch&& other) noexcept {
    storage_ = std::move(other.storage_);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() = default;

  // `bytes` fresh (uninitialised) bytes; what was held goes back to the pool.
  void reset(size_t bytes) {
    storage_ = bytes ? Staging(bytes) : Staging();
    size_ = storage_.get() ? bytes : 0;
  }
  std::byte* data() const { return reinterpret_cast<std::byte*>(storage_.get()); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  Staging storage_;
  size_t size_ = 0;
};

// Scratch space for `count` elements; data() is the address to hand to MPI
// (already shifted by the type's true lower bound).
class TempBuffer {
 public:
  TempBuffer() = default;
  TempBuffer(int64_t count, const ElementType& t);
  void* data() const { return origin_; }

 private:
  Scratch storage_;
  void* origin_ = nullptr;
};

// dst[0..count) = src[0..count): memmove for contiguous types, else Veneer's
// packer and unpacker in bounded pieces (only the type's bytes are written).
int copy(void* dst, const void* src, int64_t count, const ElementType& t);

// inout = in op inout (in is the left operand), over `count` elements.
// PMPI_Reduce_local, unless the calling thread has a Combiner installed that takes the call.
int reduce_local(const void* in, void* inout, int64_t count, const ElementType& t, MPI_Op op);

// Another way to do reduce_local's combine (the interposer's combine on the
// GPU for collectives staged from device buffers): the same operands in the
// same order, so the bits are the same wherever it runs. Returns nullopt to
// decline (nothing written: reduce_local then combines as usual), else the
// MPI error code.
using Combiner = std::optional<int> (*)(const void* in, void* inout, int64_t count, const ElementType& t, MPI_Op op);
// Installs `combiner` for the calling thread while it lives (the previous one after).
class ScopedCombiner {
 public:
  explicit ScopedCombiner(Combiner combiner);
  ~ScopedCombiner();
  ScopedCombiner(const ScopedCombiner&) = delete;
  ScopedCombiner& operator=(const ScopedCombiner&) = delete;

 private:
  Combiner previous_;
};

// The contiguous bytes of `count` elements of a type: the buffer itself for
// a contiguous type, else a copy packed here (and unpacked by finish()) by
// Veneer's packer. Types Veneer has no layout for (not seen committed) are
// packed by the library (PMPI_Pack), so that every rank can run the
// algorithm all ranks chose: the bytes are the same either way.
class ByteView {
 public:
  // Fill an empty view, for a buffer that is read (packed now) or written
  // (unpacked by finish(); `preload` packs its current contents too).
  // MPI_ERR_TYPE for a type or count the view cannot hold, else the packer's code.
  int read(const void* buf, int count, MPI_Datatype type);
  int write(void* buf, int count, MPI_Datatype type, bool preload = false);
  std::byte* data() const { return bytes_; }
  int64_t size() const { return size_; }
  int finish();  // writes the bytes back into the user's buffer where they were packed
  // Packs elements [first, first + count) of the user's buffer into their place
  // in the bytes (for a written view whose part is also read: in-place allgather).
  int load(int64_t first, int count);

 private:
  std::byte* bytes_ = nullptr;
  int64_t size_ = 0;
  Scratch packed_;
  void* user_ = nullptr;  // set while the bytes are a packed copy to write back
  int count_ = 0;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  std::shared_ptr<const datatypes::Layout> layout_;  // null: the library packs
};

// Bytes of `count` elements of `type`; nullopt on an invalid type.
std::optional<int64_t> type_bytes(int count, MPI_Datatype type);

// Splits n elements into `parts` blocks, the first n % parts one element larger.
struct Blocks {
  std::vector<int64_t> counts;
  std::vector<int64_t> offsets;  // parts + 1 entries; offsets[parts] == n
  static Blocks even(int64_t n, int parts);
  static Blocks of_counts(const int* counts, int parts);
  static Blocks uniform(int64_t count, int parts);  // every block `count` elements
  int64_t count(int64_t first, int64_t last) const { return offsets[last] - offsets[first]; }  // blocks [first, last)
};

}  // namespace veneer::algorithms
