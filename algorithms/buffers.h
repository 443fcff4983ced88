#pragma once
// Buffers of `count` elements of an MPI type, as the reduction algorithms
// handle them: element i lives at buf + i*extent, temporaries are allocated to
// the type's true extent, local copies keep the type's gaps untouched.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace veneer::algorithms {

struct TypeInfo {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int64_t size = 0;
  int64_t extent = 0;
  int64_t true_lb = 0;
  int64_t true_extent = 0;
  bool named = false;  // predefined (MPI_INT, MPI_2INT, ...)
  bool dense = false;  // count elements are exactly count*size bytes at buf + true_lb: memcpy copies them

  // nullopt for types the algorithms do not take (non-positive extent or size).
  static std::optional<TypeInfo> of(MPI_Datatype type);
  // Bytes a buffer of `count` elements spans from its true lower bound.
  int64_t span(int64_t count) const { return count > 0 ? true_extent + (count - 1) * extent : 0; }
};

inline void* element(void* buf, int64_t index, const TypeInfo& t) {
  return static_cast<std::byte*>(buf) + index * t.extent;
}
inline const void* element(const void* buf, int64_t index, const TypeInfo& t) {
  return static_cast<const std::byte*>(buf) + index * t.extent;
}

// Scratch space for `count` elements; data() is the address to hand to MPI
// (already shifted by the type's true lower bound).
class TempBuffer {
 public:
  TempBuffer() = default;
  TempBuffer(int64_t count, const TypeInfo& t);
  void* data() const { return origin_; }

 private:
  std::unique_ptr<std::byte[]> storage_;
  void* origin_ = nullptr;
};

// dst[0..count) = src[0..count); memcpy for dense types, pack + unpack otherwise.
int copy(void* dst, const void* src, int64_t count, const TypeInfo& t);

// inout = in op inout (in is the left operand), over `count` elements.
// PMPI_Reduce_local, unless the calling thread has a Combiner installed that takes the call.
int reduce_local(const void* in, void* inout, int64_t count, const TypeInfo& t, MPI_Op op);

// Another way to do reduce_local's combine (the interposer's combine on the
// GPU for collectives staged from device buffers): the same operands in the
// same order, so the bits are the same wherever it runs. Returns nullopt to
// decline (nothing written: reduce_local then combines as usual), else the
// MPI error code.
using Combiner = std::optional<int> (*)(const void* in, void* inout, int64_t count, const TypeInfo& t, MPI_Op op);
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

// The contiguous bytes of `count` elements of a named dense type (the buffer
// itself) or of any other type (a packed copy made here, unpacked by finish()).
class ByteView {
 public:
  // For a buffer that is read (pack now).
  static std::optional<ByteView> reading(const void* buf, int count, MPI_Datatype type);
  // For a buffer that is written (unpack in finish()); `preload` packs the current contents too.
  static std::optional<ByteView> writing(void* buf, int count, MPI_Datatype type, bool preload = false);
  std::byte* data() const { return bytes_; }
  int64_t size() const { return size_; }
  int finish();  // writes the bytes back into the user's buffer where they were packed
  // Packs elements [first, first + count) of the user's buffer into their place
  // in the bytes (for a written view whose part is also read: in-place allgather).
  int load(int64_t first, int count);

 private:
  std::byte* bytes_ = nullptr;
  int64_t size_ = 0;
  std::vector<std::byte> packed_;
  void* user_ = nullptr;
  int count_ = 0;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
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
