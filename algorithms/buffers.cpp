// SPDX-License-Identifier: BSD-3-Clause
#include "algorithms/buffers.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "algorithms/p2p.h"
#include "datatypes/cache.h"
#include "datatypes/decode.h"
#include "datatypes/pack.h"
#include "support/config.h"

namespace veneer::algorithms {

std::optional<ElementType> ElementType::of(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return std::nullopt;
  ElementType t;
  t.handle = type;
  t.layout = datatypes::lookup(type);
  if (!t.layout || t.layout->size <= 0 || t.layout->extent <= 0 || t.layout->true_extent <= 0) return std::nullopt;
  // The combiner through datatypes::combiner_of: MPICH refuses (fatally, by
  // default) the int query of large-count types.
  const std::optional<int> combiner = datatypes::combiner_of(type);
  if (!combiner) return std::nullopt;
  t.named = *combiner == MPI_COMBINER_NAMED;
  return t;
}

TempBuffer::TempBuffer(int64_t count, const ElementType& t) {
  const datatypes::Span span = t.layout->span(count);
  if (span.bytes <= 0) return;
  storage_.reset(static_cast<size_t>(span.bytes));
  if (!storage_.empty()) origin_ = storage_.data() - span.low;
}

namespace {

// Bytes a non-contiguous copy moves at a time: bounds its scratch.
constexpr int64_t kCopyPiece = int64_t{1} << 20;

// Whether Veneer's packer may pack: VENEER_DATATYPES=0 turns the datatype
// engine off, and the library packs what the collectives move.
bool veneer_packs(const std::shared_ptr<const datatypes::Layout>& layout) { return layout && config().datatypes; }

// copy() by the library's pack and unpack, in pieces of at most INT_MAX bytes.
int library_copy(void* dst, const void* src, int64_t count, const ElementType& t) {
  const int64_t per_piece = std::max<int64_t>(1, INT_MAX / t.size());
  Scratch packed;
  for (int64_t done = 0; done < count;) {
    const int n = static_cast<int>(std::min(per_piece, count - done));
    int packed_size = 0, position = 0, read = 0;
    VENEER_TRY(PMPI_Pack_size(n, t.handle, MPI_COMM_SELF, &packed_size));
    packed.reset(static_cast<size_t>(packed_size));
    VENEER_TRY(PMPI_Pack(element(src, done, t), n, t.handle, packed.data(), packed_size, &position, MPI_COMM_SELF));
    VENEER_TRY(PMPI_Unpack(packed.data(), position, &read, element(dst, done, t), n, t.handle, MPI_COMM_SELF));
    done += n;
  }
  return MPI_SUCCESS;
}

}  // namespace

int copy(void* dst, const void* src, int64_t count, const ElementType& t) {
  if (count <= 0 || dst == src) return MPI_SUCCESS;
  const datatypes::Layout& l = *t.layout;
  if (l.contiguous) {
    std::memmove(static_cast<std::byte*>(dst) + l.true_lb, static_cast<const std::byte*>(src) + l.true_lb,
                 static_cast<size_t>(count * l.size));
    return MPI_SUCCESS;
  }
  if (!veneer_packs(t.layout)) return library_copy(dst, src, count, t);
  // The packed stream in pieces: only the type's bytes are written, its gaps keep their values.
  const int64_t total = count * l.size;
  Scratch piece(static_cast<size_t>(std::min(total, kCopyPiece)));
  for (int64_t done = 0; done < total;) {
    const int64_t n = datatypes::pack(l, count, src, done, kCopyPiece, piece.data());
    if (n <= 0 || datatypes::unpack(l, count, dst, done, n, piece.data()) != n) return MPI_ERR_INTERN;
    done += n;
  }
  return MPI_SUCCESS;
}

namespace {
thread_local Combiner t_combiner = nullptr;
}  // namespace

ScopedCombiner::ScopedCombiner(Combiner combiner) : previous_(t_combiner) { t_combiner = combiner; }
ScopedCombiner::~ScopedCombiner() { t_combiner = previous_; }

int reduce_local(const void* in, void* inout, int64_t count, const ElementType& t, MPI_Op op) {
  if (t_combiner && count > 0)
    if (const std::optional<int> rc = t_combiner(in, inout, count, t, op)) return *rc;
  for (int64_t done = 0; done < count;) {
    int n = static_cast<int>(std::min<int64_t>(INT_MAX, count - done));
    VENEER_TRY(PMPI_Reduce_local(element(in, done, t), element(inout, done, t), n, t.handle, op));
    done += n;
  }
  return MPI_SUCCESS;
}

std::optional<int64_t> type_bytes(int count, MPI_Datatype type) {
  if (count < 0 || type == MPI_DATATYPE_NULL) return std::nullopt;
  if (auto layout = datatypes::lookup(type)) return int64_t{count} * layout->size;
  MPI_Count size = 0;  // a type Veneer has no layout for
  if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size < 0) return std::nullopt;
  return int64_t{count} * size;
}

int ByteView::read(const void* buf, int count, MPI_Datatype type) {
  *this = ByteView();
  const std::optional<int64_t> bytes = type_bytes(count, type);
  if (!bytes || *bytes > INT_MAX) return MPI_ERR_TYPE;
  size_ = *bytes;
  if (size_ == 0) return MPI_SUCCESS;
  layout_ = datatypes::lookup(type);
  if (layout_ && layout_->contiguous) {
    bytes_ = static_cast<std::byte*>(const_cast<void*>(buf)) + layout_->true_lb;
    return MPI_SUCCESS;
  }
  if (!veneer_packs(layout_)) layout_.reset();  // the library packs
  if (layout_) {
    packed_.reset(static_cast<size_t>(size_));
    if (datatypes::pack_all(*layout_, count, buf, packed_.data()) != size_) return MPI_ERR_INTERN;
  } else {
    int packed_size = 0, position = 0;
    VENEER_TRY(PMPI_Pack_size(count, type, MPI_COMM_SELF, &packed_size));
    packed_.reset(static_cast<size_t>(std::max<int64_t>(packed_size, size_)));
    VENEER_TRY(PMPI_Pack(buf, count, type, packed_.data(), packed_size, &position, MPI_COMM_SELF));
    if (position != size_) return MPI_ERR_TYPE;  // not the raw bytes: not for this view
  }
  bytes_ = packed_.data();
  return MPI_SUCCESS;
}

int ByteView::write(void* buf, int count, MPI_Datatype type, bool preload) {
  if (preload) {
    VENEER_TRY(read(buf, count, type));
  } else {
    *this = ByteView();
    const std::optional<int64_t> bytes = type_bytes(count, type);
    if (!bytes || *bytes > INT_MAX) return MPI_ERR_TYPE;
    size_ = *bytes;
    if (size_ == 0) return MPI_SUCCESS;
    layout_ = datatypes::lookup(type);
    if (layout_ && layout_->contiguous) {
      bytes_ = static_cast<std::byte*>(buf) + layout_->true_lb;
      return MPI_SUCCESS;
    }
    if (!veneer_packs(layout_)) layout_.reset();  // the library unpacks
    packed_.reset(static_cast<size_t>(size_));
    bytes_ = packed_.data();
  }
  if (!packed_.empty()) {
    user_ = buf;
    count_ = count;
    type_ = type;
  }
  return MPI_SUCCESS;
}

int ByteView::finish() {
  if (!user_ || size_ == 0) return MPI_SUCCESS;
  if (layout_)
    return datatypes::unpack_all(*layout_, count_, user_, packed_.data()) == size_ ? MPI_SUCCESS : MPI_ERR_INTERN;
  int position = 0;
  return PMPI_Unpack(packed_.data(), static_cast<int>(size_), &position, user_, count_, type_, MPI_COMM_SELF);
}

int ByteView::load(int64_t first, int count) {
  if (!user_ || count <= 0 || count_ <= 0) return MPI_SUCCESS;
  const int64_t element_bytes = size_ / count_;
  if (layout_) {
    // Bytes [first, first + count) elements into the stream of all count_ elements.
    const int64_t want = count * element_bytes;
    const int64_t n =
        datatypes::pack(*layout_, count_, user_, first * element_bytes, want, bytes_ + first * element_bytes);
    return n == want ? MPI_SUCCESS : MPI_ERR_INTERN;
  }
  MPI_Aint lb = 0, extent = 0;
  VENEER_TRY(PMPI_Type_get_extent(type_, &lb, &extent));
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
