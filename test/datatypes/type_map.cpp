// SPDX-License-Identifier: BSD-3-Clause
// The hand-written reference type map of test/datatypes/typegen.h: a type
// read back through MPI_Type_get_envelope/get_contents (or _c) and expanded
// by the definitions of the constructors in the MPI standard.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "test/datatypes/typegen.h"

namespace veneer::test {

namespace {

// A type read back through MPI_Type_get_envelope/get_contents. The arguments
// are 64-bit, in the places MPI-3's MPI_Type_get_contents gives them.
struct MapNode {
  int combiner = MPI_COMBINER_NAMED;
  MPI_Datatype named = MPI_DATATYPE_NULL;
  std::vector<int64_t> ints;
  std::vector<int64_t> addresses;
  std::vector<MapNode> children;
  int64_t extent = 0;
  int64_t size = 0;  // no data: an empty type map, however large its counts
};

#ifdef VENEER_HAVE_LARGE_COUNT
// The _c constructors' arguments come back from MPI_Type_get_contents_c with
// counts, blocklengths, strides and displacements in `large` (MPI-4.0, the
// table of combiners in section 5.1.13); `ints` keeps the rest.
void from_large(MapNode& n, const std::vector<int>& ints, const std::vector<MPI_Count>& large) {
  const auto L = [&](size_t i) { return static_cast<int64_t>(large.at(i)); };
  const size_t count = large.empty() ? 0 : static_cast<size_t>(L(0));
  switch (n.combiner) {
    case MPI_COMBINER_HVECTOR:  // count, blocklength | stride
      n.ints = {L(0), L(1)};
      n.addresses = {L(2)};
      return;
    case MPI_COMBINER_HINDEXED:  // count, blocklengths | displacements
    case MPI_COMBINER_STRUCT:
      for (size_t i = 0; i <= count; ++i) n.ints.push_back(L(i));
      for (size_t i = 0; i < count; ++i) n.addresses.push_back(L(count + 1 + i));
      return;
    case MPI_COMBINER_HINDEXED_BLOCK:  // count, blocklength | displacements
      n.ints = {L(0), L(1)};
      for (size_t i = 0; i < count; ++i) n.addresses.push_back(L(2 + i));
      return;
    case MPI_COMBINER_RESIZED:  // | lb, extent
      n.addresses = {L(0), L(1)};
      return;
    case MPI_COMBINER_SUBARRAY: {  // ndims, [sizes, subsizes, starts], order
      n.ints = {ints.at(0)};
      for (MPI_Count v : large) n.ints.push_back(v);
      n.ints.push_back(ints.at(1));
      return;
    }
    case MPI_COMBINER_DARRAY: {  // size, rank, ndims, [gsizes], distribs, dargs, psizes, order
      n.ints = {ints.at(0), ints.at(1), ints.at(2)};
      for (MPI_Count v : large) n.ints.push_back(v);
      for (size_t i = 3; i < ints.size(); ++i) n.ints.push_back(ints[i]);
      return;
    }
    default:  // contiguous, vector, indexed, indexed_block: all in order
      for (MPI_Count v : large) n.ints.push_back(v);
      return;
  }
}
#endif

MapNode read_back(MPI_Datatype type) {
  MapNode n;
  n.combiner = combiner_of(type);
  const TypeShape shape = shape_of(type);
  n.extent = shape.extent;
  n.size = shape.size;
  if (n.combiner == MPI_COMBINER_NAMED) {
    n.named = type;
    return n;
  }
#ifdef VENEER_HAVE_LARGE_COUNT
  MPI_Count ni = 0, na = 0, nc = 0, nt = 0;
  PMPI_Type_get_envelope_c(type, &ni, &na, &nc, &nt, &n.combiner);
  std::vector<MPI_Count> large(nc);
#else
  int ni = 0, na = 0, nt = 0;
  PMPI_Type_get_envelope(type, &ni, &na, &nt, &n.combiner);
#endif
  std::vector<int> ints(ni);
  std::vector<MPI_Aint> addresses(na);
  std::vector<MPI_Datatype> types(nt);
#ifdef VENEER_HAVE_LARGE_COUNT
  PMPI_Type_get_contents_c(type, ni, na, nc, nt, ints.data(), addresses.data(), large.data(), types.data());
  if (nc > 0) {
    from_large(n, ints, large);
  } else
#else
  PMPI_Type_get_contents(type, ni, na, nt, ints.data(), addresses.data(), types.data());
#endif
  {
    n.ints.assign(ints.begin(), ints.end());
    n.addresses.assign(addresses.begin(), addresses.end());
  }
  for (MPI_Datatype t : types) {
    n.children.push_back(read_back(t));
    if (!is_predefined(t)) PMPI_Type_free(&t);
  }
  return n;
}

class MapWriter {
 public:
  explicit MapWriter(std::vector<Segment>& out, std::vector<int64_t>* element_ends = nullptr)
      : out_(out), ends_(element_ends) {}
  // `length` bytes of data; `element_end` if a basic element ends with them.
  void add(int64_t offset, int64_t length, bool element_end = true) {
    if (length <= 0) return;
    if (!out_.empty() && out_.back().offset + out_.back().length == offset) out_.back().length += length;
    else out_.push_back({offset, length});
    stream_ += length;
    if (ends_ && element_end) ends_->push_back(stream_);
  }

 private:
  std::vector<Segment>& out_;
  std::vector<int64_t>* ends_;
  int64_t stream_ = 0;
};

template <typename A, typename B>
struct PairOf {
  A first;
  B second;
};

// The named types with more than one block: the pair types of MINLOC/MAXLOC,
// laid out as the C structs they stand for. A pair counts as one element for
// where a message may end (MPICH will not end one inside a pair).
void expand_named(MPI_Datatype t, int64_t base, MapWriter& out) {
  auto pair = [&](int64_t first, int64_t second_at) {
    out.add(base, first, false);
    out.add(base + second_at, sizeof(int));
  };
  using DoubleInt = PairOf<double, int>;
  using ShortInt = PairOf<short, int>;
  using LongInt = PairOf<long, int>;
  using FloatInt = PairOf<float, int>;
  using LongDoubleInt = PairOf<long double, int>;
  using IntInt = PairOf<int, int>;
  if (t == MPI_DOUBLE_INT) return pair(sizeof(double), offsetof(DoubleInt, second));
  if (t == MPI_SHORT_INT) return pair(sizeof(short), offsetof(ShortInt, second));
  if (t == MPI_LONG_INT) return pair(sizeof(long), offsetof(LongInt, second));
  if (t == MPI_FLOAT_INT) return pair(sizeof(float), offsetof(FloatInt, second));
  if (t == MPI_LONG_DOUBLE_INT) return pair(sizeof(long double), offsetof(LongDoubleInt, second));
  if (t == MPI_2INT) return pair(sizeof(int), offsetof(IntInt, second));
  int size = 0;
  PMPI_Type_size(t, &size);
  out.add(base, size);
}

void expand(const MapNode& n, int64_t base, MapWriter& out);

// Elements of an n-dimensional array in array order, C (dimension 0 slowest)
// or Fortran (dimension 0 fastest); `indices[d]` lists the indices taken in
// dimension d, in order.
void expand_array(const MapNode& child, int64_t base, const std::vector<int64_t>& sizes,
                  const std::vector<std::vector<int64_t>>& indices, bool fortran, MapWriter& out) {
  const int ndims = static_cast<int>(sizes.size());
  std::vector<int64_t> stride(ndims, 1);
  if (fortran) {
    for (int d = 1; d < ndims; ++d) stride[d] = stride[d - 1] * sizes[d - 1];
  } else {
    for (int d = ndims - 2; d >= 0; --d) stride[d] = stride[d + 1] * sizes[d + 1];
  }
  auto walk = [&](auto&& self, int level, int64_t element) -> void {
    if (level == ndims) {
      expand(child, base + element * child.extent, out);
      return;
    }
    int d = fortran ? ndims - 1 - level : level;
    for (int64_t i : indices[d]) self(self, level + 1, element + i * stride[d]);
  };
  walk(walk, 0, 0);
}

void expand(const MapNode& n, int64_t base, MapWriter& out) {
  const std::vector<int64_t>& I = n.ints;
  const std::vector<int64_t>& A = n.addresses;
  if (n.size == 0) return;
  switch (n.combiner) {
    case MPI_COMBINER_NAMED: return expand_named(n.named, base, out);
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:  // bounds change, the type map does not
      return expand(n.children[0], base, out);
    case MPI_COMBINER_CONTIGUOUS:
      for (int64_t i = 0; i < I[0]; ++i) expand(n.children[0], base + i * n.children[0].extent, out);
      return;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
      const int64_t e = n.children[0].extent;
      const int64_t stride = n.combiner == MPI_COMBINER_VECTOR ? I[2] * e : A[0];
      for (int64_t i = 0; i < I[0]; ++i)
        for (int64_t j = 0; j < I[1]; ++j) expand(n.children[0], base + i * stride + j * e, out);
      return;
    }
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED: {
      const int64_t e = n.children[0].extent;
      const int64_t count = I[0];
      for (int64_t i = 0; i < count; ++i) {
        int64_t at = n.combiner == MPI_COMBINER_INDEXED ? I[1 + count + i] * e : A[i];
        for (int64_t j = 0; j < I[1 + i]; ++j) expand(n.children[0], base + at + j * e, out);
      }
      return;
    }
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK: {
      const int64_t e = n.children[0].extent;
      for (int64_t i = 0; i < I[0]; ++i) {
        int64_t at = n.combiner == MPI_COMBINER_INDEXED_BLOCK ? I[2 + i] * e : A[i];
        for (int64_t j = 0; j < I[1]; ++j) expand(n.children[0], base + at + j * e, out);
      }
      return;
    }
    case MPI_COMBINER_STRUCT:
      for (int64_t i = 0; i < I[0]; ++i)
        for (int64_t j = 0; j < I[1 + i]; ++j) expand(n.children[i], base + A[i] + j * n.children[i].extent, out);
      return;
    case MPI_COMBINER_SUBARRAY: {
      const int ndims = static_cast<int>(I[0]);
      std::vector<int64_t> sizes(ndims);
      std::vector<std::vector<int64_t>> indices(ndims);
      for (int d = 0; d < ndims; ++d) {
        sizes[d] = I[1 + d];
        for (int64_t k = 0; k < I[1 + ndims + d]; ++k) indices[d].push_back(I[1 + 2 * ndims + d] + k);
      }
      return expand_array(n.children[0], base, sizes, indices, I[1 + 3 * ndims] == MPI_ORDER_FORTRAN, out);
    }
    case MPI_COMBINER_DARRAY: {
      // ints: size, rank, ndims, gsizes, distribs, dargs, psizes, order.
      const int64_t rank = I[1];
      const int ndims = static_cast<int>(I[2]);
      auto gsize = [&](int d) { return I[3 + d]; };
      auto distrib = [&](int d) { return I[3 + ndims + d]; };
      auto darg = [&](int d) { return I[3 + 2 * ndims + d]; };
      auto psize = [&](int d) { return I[3 + 3 * ndims + d]; };
      // The process grid is row-major whatever the array order.
      std::vector<int64_t> coord(ndims);
      int64_t r = rank;
      for (int d = ndims - 1; d >= 0; --d) {
        coord[d] = r % psize(d);
        r /= psize(d);
      }
      std::vector<int64_t> sizes(ndims);
      std::vector<std::vector<int64_t>> indices(ndims);
      for (int d = 0; d < ndims; ++d) {
        const int64_t g = gsize(d), p = psize(d);
        sizes[d] = g;
        if (distrib(d) == MPI_DISTRIBUTE_NONE) {
          for (int64_t i = 0; i < g; ++i) indices[d].push_back(i);
        } else if (distrib(d) == MPI_DISTRIBUTE_BLOCK) {
          int64_t b = darg(d) == MPI_DISTRIBUTE_DFLT_DARG ? (g + p - 1) / p : darg(d);
          for (int64_t i = coord[d] * b; i < std::min(g, (coord[d] + 1) * b); ++i) indices[d].push_back(i);
        } else {
          int64_t k = darg(d) == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg(d);
          for (int64_t i = 0; i < g; ++i)
            if ((i / k) % p == coord[d]) indices[d].push_back(i);
        }
      }
      return expand_array(n.children[0], base, sizes, indices, I[3 + 4 * ndims] == MPI_ORDER_FORTRAN, out);
    }
    default: return;  // not made by the generator
  }
}

}  // namespace

std::vector<Segment> reference_type_map(MPI_Datatype type, int64_t count, std::vector<int64_t>* element_ends) {
  MapNode root = read_back(type);
  std::vector<Segment> one;
  MapWriter w1(one, element_ends);
  expand(root, 0, w1);
  std::vector<Segment> all;
  MapWriter w(all);
  for (int64_t k = 0; k < count; ++k)
    for (const Segment& s : one) w.add(s.offset + k * root.extent, s.length);
  return all;
}

}  // namespace veneer::test
