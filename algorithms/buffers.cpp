#include "algorithms/buffers.h"

#include <climits>
#include <cstring>

#include "datatypes/decode.h"

namespace veneer::algorithms {

std::optional<TypeInfo> TypeInfo::of(MPI_Datatype type) {
  TypeInfo t;
  t.type = type;
  // 64-bit queries, and the combiner through datatypes::combiner_of: MPICH
  // refuses (fatally, by default) the int queries of large-count types.
  MPI_Count size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_size_x(type, &size) != MPI_SUCCESS ||
      PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS ||
      PMPI_Type_get_true_extent_x(type, &true_lb, &true_extent) != MPI_SUCCESS)
    return std::nullopt;
  if (size <= 0 || extent <= 0 || true_extent <= 0) return std::nullopt;
  const std::optional<int> combiner = datatypes::combiner_of(type);
  if (!combiner) return std::nullopt;
  t.size = size;
  t.extent = extent;
  t.true_lb = true_lb;
  t.true_extent = true_extent;
  t.named = *combiner == MPI_COMBINER_NAMED;
  // Derived types may reorder their bytes relative to memory, so only named ones
  // without gaps are taken as raw bytes.
  t.dense = t.named && size == extent && true_lb == 0 && true_extent == extent;
  return t;
}

TempBuffer::TempBuffer(int64_t count, const TypeInfo& t) {
  int64_t bytes = t.span(count);
  if (bytes <= 0) return;
  storage_ = std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(bytes));
  origin_ = storage_.get() - t.true_lb;
}

int copy(void* dst, const void* src, int64_t count, const TypeInfo& t) {
  if (count <= 0 || dst == src) return MPI_SUCCESS;
  if (t.dense) {
    std::memmove(dst, src, static_cast<size_t>(count * t.size));
    return MPI_SUCCESS;
  }
  // Counts above INT_MAX go in pieces; pack + unpack copies only the type's bytes.
  const int64_t piece = INT_MAX / (t.size > 0 ? t.size : 1);
  for (int64_t done = 0; done < count;) {
    int n = static_cast<int>(std::min<int64_t>(piece, count - done));
    int packed_size = 0;
    int rc = PMPI_Pack_size(n, t.type, MPI_COMM_SELF, &packed_size);
    if (rc != MPI_SUCCESS) return rc;
    std::vector<std::byte> packed(static_cast<size_t>(packed_size));
    int position = 0;
    rc = PMPI_Pack(element(src, done, t), n, t.type, packed.data(), packed_size, &position, MPI_COMM_SELF);
    if (rc != MPI_SUCCESS) return rc;
    int read = 0;
    rc = PMPI_Unpack(packed.data(), position, &read, element(dst, done, t), n, t.type, MPI_COMM_SELF);
    if (rc != MPI_SUCCESS) return rc;
    done += n;
  }
  return MPI_SUCCESS;
}

namespace {
thread_local Combiner t_combiner = nullptr;
}  // namespace

ScopedCombiner::ScopedCombiner(Combiner combiner) : previous_(t_combiner) { t_combiner = combiner; }
ScopedCombiner::~ScopedCombiner() { t_combiner = previous_; }

int reduce_local(const void* in, void* inout, int64_t count, const TypeInfo& t, MPI_Op op) {
  if (t_combiner && count > 0)
    if (const std::optional<int> rc = t_combiner(in, inout, count, t, op)) return *rc;
  for (int64_t done = 0; done < count;) {
    int n = static_cast<int>(std::min<int64_t>(INT_MAX, count - done));
    int rc = PMPI_Reduce_local(element(in, done, t), element(inout, done, t), n, t.type, op);
    if (rc != MPI_SUCCESS) return rc;
    done += n;
  }
  return MPI_SUCCESS;
}

std::optional<int64_t> type_bytes(int count, MPI_Datatype type) {
  MPI_Count size = 0;
  if (count < 0 || type == MPI_DATATYPE_NULL || PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size < 0)
    return std::nullopt;
  return static_cast<int64_t>(count) * size;
}

namespace {
bool dense_named(MPI_Datatype type) {
  auto t = TypeInfo::of(type);
  return t && t->dense;
}
}  // namespace

std::optional<ByteView> ByteView::reading(const void* buf, int count, MPI_Datatype type) {
  auto bytes = type_bytes(count, type);
  if (!bytes || *bytes > INT_MAX) return std::nullopt;
  ByteView v;
  v.size_ = *bytes;
  if (*bytes == 0) return v;
  if (dense_named(type)) {
    v.bytes_ = static_cast<std::byte*>(const_cast<void*>(buf));
    return v;
  }
  int packed_size = 0;
  if (PMPI_Pack_size(count, type, MPI_COMM_SELF, &packed_size) != MPI_SUCCESS) return std::nullopt;
  v.packed_.resize(static_cast<size_t>(std::max<int64_t>(packed_size, *bytes)));
  int position = 0;
  if (PMPI_Pack(buf, count, type, v.packed_.data(), packed_size, &position, MPI_COMM_SELF) != MPI_SUCCESS ||
      position != *bytes)
    return std::nullopt;
  v.bytes_ = v.packed_.data();
  return v;
}

std::optional<ByteView> ByteView::writing(void* buf, int count, MPI_Datatype type, bool preload) {
  if (preload) {
    auto v = reading(buf, count, type);
    if (v && !v->packed_.empty()) {
      v->user_ = buf;
      v->count_ = count;
      v->type_ = type;
    }
    return v;
  }
  auto bytes = type_bytes(count, type);
  if (!bytes || *bytes > INT_MAX) return std::nullopt;
  ByteView v;
  v.size_ = *bytes;
  if (*bytes == 0) return v;
  if (dense_named(type)) {
    v.bytes_ = static_cast<std::byte*>(buf);
    return v;
  }
  v.packed_.resize(static_cast<size_t>(*bytes));
  v.bytes_ = v.packed_.data();
  v.user_ = buf;
  v.count_ = count;
  v.type_ = type;
  return v;
}

int ByteView::finish() {
  if (!user_ || size_ == 0) return MPI_SUCCESS;
  int position = 0;
  return PMPI_Unpack(packed_.data(), static_cast<int>(size_), &position, user_, count_, type_, MPI_COMM_SELF);
}

int ByteView::load(int64_t first, int count) {
  if (!user_ || count <= 0) return MPI_SUCCESS;
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(type_, &lb, &extent);
  const int64_t element_bytes = size_ / count_;
  int position = 0;
  return PMPI_Pack(static_cast<std::byte*>(user_) + first * extent, count, type_, bytes_ + first * element_bytes,
                   static_cast<int>(count * element_bytes), &position, MPI_COMM_SELF);
}

Blocks Blocks::even(int64_t n, int parts) {
  Blocks b;
  b.counts.resize(static_cast<size_t>(parts));
  b.offsets.resize(static_cast<size_t>(parts) + 1);
  int64_t base = n / parts, extra = n % parts, offset = 0;
  for (int i = 0; i < parts; ++i) {
    b.counts[static_cast<size_t>(i)] = base + (i < extra ? 1 : 0);
    b.offsets[static_cast<size_t>(i)] = offset;
    offset += b.counts[static_cast<size_t>(i)];
  }
  b.offsets[static_cast<size_t>(parts)] = offset;
  return b;
}

Blocks Blocks::uniform(int64_t count, int parts) {
  Blocks b;
  b.counts.assign(static_cast<size_t>(parts), count);
  b.offsets.resize(static_cast<size_t>(parts) + 1);
  for (int i = 0; i <= parts; ++i) b.offsets[static_cast<size_t>(i)] = count * i;
  return b;
}

Blocks Blocks::of_counts(const int* counts, int parts) {
  Blocks b;
  b.counts.resize(static_cast<size_t>(parts));
  b.offsets.resize(static_cast<size_t>(parts) + 1);
  int64_t offset = 0;
  for (int i = 0; i < parts; ++i) {
    b.counts[static_cast<size_t>(i)] = counts[i];
    b.offsets[static_cast<size_t>(i)] = offset;
    offset += counts[i];
  }
  b.offsets[static_cast<size_t>(parts)] = offset;
  return b;
}

}  // namespace veneer::algorithms
