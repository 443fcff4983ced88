// SPDX-License-Identifier: BSD-3-Clause
// Admission: the (op, type) pairs MPI defines for its predefined ops, the
// limits Veneer takes calls within, and the Shape of an admitted call.
#include "algorithms/admission.h"

#include <climits>

#include "algorithms/buffers.h"
#include "datatypes/cache.h"
#include "datatypes/decode.h"

namespace veneer::algorithms {
namespace {

// ---- Which (op, type) pairs MPI defines for the predefined ops --------------

enum class TypeClass { none, integer, floating, logical, complex, byte, pair };

TypeClass type_class(MPI_Datatype t) {
  const MPI_Datatype integers[] = {MPI_INT,         MPI_LONG,          MPI_SHORT,     MPI_UNSIGNED_SHORT,
                                   MPI_UNSIGNED,    MPI_UNSIGNED_LONG, MPI_LONG_LONG, MPI_UNSIGNED_LONG_LONG,
                                   MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_INT8_T,    MPI_INT16_T,
                                   MPI_INT32_T,     MPI_INT64_T,       MPI_UINT8_T,   MPI_UINT16_T,
                                   MPI_UINT32_T,    MPI_UINT64_T,      MPI_AINT,      MPI_OFFSET,
                                   MPI_COUNT};
  for (MPI_Datatype x : integers)
    if (t == x) return TypeClass::integer;
  if (t == MPI_FLOAT || t == MPI_DOUBLE || t == MPI_LONG_DOUBLE) return TypeClass::floating;
  if (t == MPI_C_BOOL) return TypeClass::logical;
  if (t == MPI_C_FLOAT_COMPLEX || t == MPI_C_DOUBLE_COMPLEX || t == MPI_C_LONG_DOUBLE_COMPLEX)
    return TypeClass::complex;
  if (t == MPI_BYTE) return TypeClass::byte;
  if (t == MPI_FLOAT_INT || t == MPI_DOUBLE_INT || t == MPI_LONG_INT || t == MPI_2INT || t == MPI_SHORT_INT ||
      t == MPI_LONG_DOUBLE_INT)
    return TypeClass::pair;
  // Fortran's named types (reductions combine with PMPI_Reduce_local, which knows them).
  if (t == MPI_DATATYPE_NULL) return TypeClass::none;  // an optional type the library lacks is null
  if (t == MPI_INTEGER || t == MPI_INTEGER1 || t == MPI_INTEGER2 || t == MPI_INTEGER4 || t == MPI_INTEGER8)
    return TypeClass::integer;
  if (t == MPI_REAL || t == MPI_DOUBLE_PRECISION || t == MPI_REAL4 || t == MPI_REAL8) return TypeClass::floating;
  if (t == MPI_LOGICAL) return TypeClass::logical;
  if (t == MPI_COMPLEX || t == MPI_DOUBLE_COMPLEX) return TypeClass::complex;
  if (t == MPI_2INTEGER || t == MPI_2REAL || t == MPI_2DOUBLE_PRECISION) return TypeClass::pair;
  return TypeClass::none;  // MPI_CHAR, MPI_CHARACTER, ...: left to the library
}

// nullopt: not a predefined op; else whether it is defined on types of class k.
std::optional<bool> predefined_op_accepts(MPI_Op op, TypeClass k) {
  using K = TypeClass;
  if (op == MPI_MAX || op == MPI_MIN) return k == K::integer || k == K::floating;
  if (op == MPI_SUM || op == MPI_PROD) return k == K::integer || k == K::floating || k == K::complex;
  if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR) return k == K::integer || k == K::logical;
  if (op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR) return k == K::integer || k == K::byte;
  if (op == MPI_MAXLOC || op == MPI_MINLOC) return k == K::pair;
  if (op == MPI_REPLACE || op == MPI_NO_OP) return false;
  return std::nullopt;
}

}  // namespace

bool is_reduction(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter ||
         c == Collective::reduce_scatter_block;
}

std::optional<Shape> admit(const Call& c, int p, std::string* why) {
  auto refuse = [&](const char* reason) -> std::optional<Shape> {
    if (why) *why = reason;
    return std::nullopt;
  };
  Shape out;
  out.collective = c.collective;
  out.ranks = p;
  if (is_reduction(c.collective)) {
    // The algorithms allocate, copy and combine by Veneer's layout of the type
    // (the same type on every rank: MPI requires it of reductions).
    auto t = ElementType::of(c.type);
    if (!t) return refuse("type without a layout, size or extent");
    int64_t total = 0;
    switch (c.collective) {
      case Collective::reduce_scatter:
        if (!c.rcounts) return refuse("no receive counts");
        for (int i = 0; i < p; ++i) {
          if (c.rcounts[i] < 0) return refuse("negative count");
          total += c.rcounts[i];
        }
        break;
      case Collective::reduce_scatter_block: total = static_cast<int64_t>(c.count) * p; break;
      default: total = c.count;
    }
    if (c.count < 0) return refuse("negative count");
    // Whole vectors travel in one message, with an int count.
    if (total > INT_MAX) return refuse("more than INT_MAX elements");
    if (auto accepts = predefined_op_accepts(c.op, type_class(c.type))) {
      if (!t->named) return refuse("predefined op on a derived type");
      if (!*accepts) return refuse("op not defined on this type");
    } else {
      int commutative = 1;
      if (c.op == MPI_OP_NULL || PMPI_Op_commutative(c.op, &commutative) != MPI_SUCCESS) return refuse("bad op");
      out.predefined_op = false;
      out.commutative = commutative != 0;
    }
    if (c.collective == Collective::reduce && (c.root < 0 || c.root >= p)) return refuse("bad root");
    out.predefined_type = t->named;
    out.count = total;
    out.bytes = total * t->size();
    // For Reduce, MPI_IN_PLACE is the root's alone: not a shared argument.
    out.in_place = c.collective != Collective::reduce && c.sbuf == MPI_IN_PLACE;
    return out;
  }
  // Bcast, Allgather and Alltoall move bytes: only the size of the (receive)
  // type matters here, as the type handles may differ between ranks.
  auto block = type_bytes(c.count, c.type);
  if (!block) return refuse("bad count or type");
  switch (c.collective) {
    case Collective::bcast: out.bytes = *block; break;
    case Collective::allgather:
    case Collective::alltoall:
      out.bytes = *block * p;
      out.in_place = c.sbuf == MPI_IN_PLACE;
      break;
    default: return refuse("unknown collective");
  }
  if (out.bytes > INT_MAX) return refuse("more than INT_MAX bytes");
  if (c.collective == Collective::bcast && (c.root < 0 || c.root >= p)) return refuse("bad root");
  out.count = out.bytes;
  return out;
}

namespace {
// `count` instances of `type` in bytes, nullopt where that cannot be told
// (type_bytes, from this thread's front of the type cache where it knows the type).
std::optional<int64_t> bytes_of(int count, MPI_Datatype type) {
  if (count < 0) return std::nullopt;
  if (const datatypes::Layout* layout = datatypes::peek(type); layout && layout->size >= 0)
    return int64_t{count} * layout->size;
  return type_bytes(count, type);
}
}  // namespace

Call agreed_call(const Call& c, bool bucket) {
  if (!moves_bytes(c.collective)) return c;
  const std::optional<int64_t> bytes = bytes_of(c.count, c.type);
  if (!bytes || *bytes > INT_MAX) return c;
  const auto exact = static_cast<int>(*bytes);
  Call out = c;
  out.type = MPI_BYTE;
  out.count = bucket && counts_bucketed(c.collective) ? decision_count(exact) : exact;
  if (c.collective != Collective::bcast && c.sbuf != MPI_IN_PLACE) {
    out.stype = MPI_BYTE;
    out.scount = out.count;
  }
  return out;
}

void place(Shape& s, const Hierarchy& h) {
  s.ranks = h.size;
  s.nodes = h.node_count;
  s.min_ranks_per_node = h.min_ranks_per_node;
  s.max_ranks_per_node = h.max_ranks_per_node;
  s.equal_ranks_per_node = h.equal_ranks_per_node;
  s.node_consecutive = h.node_consecutive;
  s.oversubscribed = h.oversubscribed;
}

Shape shape_of(Collective c, int64_t bytes, const Hierarchy& h) {
  Shape s;
  s.collective = c;
  s.bytes = bytes;
  s.count = bytes;
  place(s, h);
  return s;
}

namespace {
// rememberable() but for reduce_scatter's counts.
bool handles_rememberable(const Call& c) {
  if (is_reduction(c.collective) && !predefined_op_accepts(c.op, TypeClass::none)) return false;
  // A derived type only while its free will be seen (datatypes::watched):
  // every free forgets all decisions, as its handle may be reused.
  for (MPI_Datatype t : {c.type, c.stype}) {
    if (t == MPI_DATATYPE_NULL) continue;
    auto combiner = datatypes::combiner_of(t);
    if (!combiner) return false;
    if (*combiner != MPI_COMBINER_NAMED && !datatypes::watched(t)) return false;
  }
  return true;
}
}  // namespace

namespace {
// A broadcast, allgather or alltoall is decided for its bucket of bytes
// (agreed_call) and remembered by its bucket of counts (decision_key):
// only where every count of that bucket has one bucket of bytes (always,
// for a type whose size is a power of two; for a 24-byte type, often not).
bool one_bucket_of_bytes(const Call& c) {
  if (!moves_bytes(c.collective) || !counts_bucketed(c.collective) || c.count < 16) return true;
  const int low = decision_count(c.count);
  const int high = low | ((1 << (28 - __builtin_clz(static_cast<unsigned>(c.count)))) - 1);
  const std::optional<int64_t> a = bytes_of(low, c.type), b = bytes_of(high, c.type);
  if (!a || !b || *b > INT_MAX) return false;
  return decision_count(static_cast<int>(*a)) == decision_count(static_cast<int>(*b));
}
}  // namespace

bool rememberable(const Call& c) {
  return c.collective != Collective::reduce_scatter && handles_rememberable(c) && one_bucket_of_bytes(c);
}

bool user_op_call(const Call& c) {
  if (!is_reduction(c.collective) || c.op == MPI_OP_NULL || predefined_op_accepts(c.op, TypeClass::none)) return false;
  Call predefined = c;
  predefined.op = MPI_SUM;
  return handles_rememberable(predefined);
}

std::optional<int> scatter_total(const int* rcounts, MPI_Comm comm) {
  int p = 0;
  if (!rcounts || comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &p) != MPI_SUCCESS || p <= 0) return std::nullopt;
  return counts_total(rcounts, p);
}

bool key_scatter_total(const Call& c, MPI_Comm comm, DecisionKey& key) {
  if (c.collective != Collective::reduce_scatter || !(handles_rememberable(c) || user_op_call(c))) return false;
  const std::optional<int> total = scatter_total(c.rcounts, comm);
  if (!total) return false;
  key.count = *total;
  return true;
}

}  // namespace veneer::algorithms
