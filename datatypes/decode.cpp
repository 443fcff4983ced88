// SPDX-License-Identifier: BSD-3-Clause
#include "datatypes/decode.h"

#include <optional>
#include <vector>

#include "support/log.h"

namespace veneer::datatypes {
namespace {

// Result of decoding one (sub)type: its stream and its extent (for repetition).
struct Decoded {
  Node node;
  int64_t extent = 0;
};

using Result = std::variant<Decoded, DecodeError>;

DecodeError fail(std::string why) { return DecodeError{std::move(why)}; }

// Arithmetic on constructor arguments, which large counts bring near 2^63:
// an overflow is remembered and fails the decode (the type passes through).
class Wide {
 public:
  int64_t mul(int64_t a, int64_t b) {
    int64_t r = 0;
    overflow_ |= __builtin_mul_overflow(a, b, &r);
    return r;
  }
  int64_t add(int64_t a, int64_t b) {
    int64_t r = 0;
    overflow_ |= __builtin_add_overflow(a, b, &r);
    return r;
  }
  bool overflow() const { return overflow_; }

 private:
  bool overflow_ = false;
};

// A derived type's constructor arguments, 64-bit, where the MPI-3 form of
// MPI_Type_get_contents puts them (integers, addresses), whichever form the
// type was built with. The handles of the old types are freed unless predefined.
struct Contents {
  int combiner = MPI_COMBINER_NAMED;
  std::vector<int64_t> ints;
  std::vector<int64_t> addrs;
  std::vector<MPI_Datatype> types;
  Contents() = default;
  Contents(const Contents&) = delete;
  Contents& operator=(const Contents&) = delete;
  ~Contents() {
    for (MPI_Datatype& t : types) {
      const std::optional<int> combiner = combiner_of(t);
      if (combiner && *combiner != MPI_COMBINER_NAMED && PMPI_Type_free(&t) != MPI_SUCCESS)
        log(LogLevel::debug, "datatypes: MPI_Type_free of a constituent type failed (it stays allocated)");
    }
  }
};

#ifdef VENEER_HAVE_LARGE_COUNT
// A type built by an MPI-4 _c constructor answers MPI_Type_get_contents_c
// with its counts, blocklengths, displacements and strides in one array of
// MPI_Count, `large` (MPI-4.0, section 5.1.13, the table of combiners); its
// other integers (ndims, order, distribs, dargs, psizes) stay in `in`. Moves
// each to its MPI-3 place; false if the arrays do not have the standard's shape.
bool from_large(const std::vector<int>& in, const std::vector<MPI_Count>& large, Contents& c) {
  const size_t nc = large.size();
  auto counts = [&](size_t from, size_t to) {
    return std::vector<int64_t>(large.begin() + static_cast<std::ptrdiff_t>(from),
                                large.begin() + static_cast<std::ptrdiff_t>(to));
  };
  // Combiners listing `n` blocks: their count comes first.
  const int64_t n = nc > 0 ? large[0] : -1;
  const bool listed = n >= 0 && static_cast<uint64_t>(n) <= nc;
  const size_t un = listed ? static_cast<size_t>(n) : 0;
  switch (c.combiner) {
    case MPI_COMBINER_CONTIGUOUS:
      if (nc != 1 || !in.empty()) return false;
      c.ints = counts(0, 1);
      return true;
    case MPI_COMBINER_VECTOR:
      if (nc != 3 || !in.empty()) return false;
      c.ints = counts(0, 3);
      return true;
    case MPI_COMBINER_HVECTOR:
      if (nc != 3 || !in.empty()) return false;
      c.ints = counts(0, 2);
      c.addrs = counts(2, 3);
      return true;
    case MPI_COMBINER_INDEXED:
      if (!listed || nc != 2 * un + 1 || !in.empty()) return false;
      c.ints = counts(0, nc);
      return true;
    case MPI_COMBINER_HINDEXED:
    case MPI_COMBINER_STRUCT:
      if (!listed || nc != 2 * un + 1 || !in.empty()) return false;
      c.ints = counts(0, un + 1);
      c.addrs = counts(un + 1, nc);
      return true;
    case MPI_COMBINER_INDEXED_BLOCK:
      if (!listed || nc != un + 2 || !in.empty()) return false;
      c.ints = counts(0, nc);
      return true;
    case MPI_COMBINER_HINDEXED_BLOCK:
      if (!listed || nc != un + 2 || !in.empty()) return false;
      c.ints = counts(0, 2);
      c.addrs = counts(2, nc);
      return true;
    case MPI_COMBINER_SUBARRAY: {
      // in: ndims, order; large: sizes, subsizes, starts.
      if (in.size() != 2 || in[0] < 0 || nc != 3 * static_cast<size_t>(in[0])) return false;
      c.ints = {in[0]};
      c.ints.insert(c.ints.end(), large.begin(), large.end());
      c.ints.push_back(in[1]);
      return true;
    }
    case MPI_COMBINER_DARRAY: {
      // in: size, rank, ndims, distribs, dargs, psizes, order; large: gsizes.
      if (in.size() < 3 || in[2] < 0) return false;
      const size_t nd = static_cast<size_t>(in[2]);
      if (nc != nd || in.size() != 3 * nd + 4) return false;
      c.ints.assign(in.begin(), in.begin() + 3);
      c.ints.insert(c.ints.end(), large.begin(), large.end());
      c.ints.insert(c.ints.end(), in.begin() + 3, in.end());
      return true;
    }
    case MPI_COMBINER_RESIZED:
      if (nc != 2 || !in.empty()) return false;
      c.addrs = counts(0, 2);
      return true;
    default: return false;
  }
}
#endif

// Fills `c` from the library; an error message if it cannot.
std::optional<std::string> read_contents(MPI_Datatype type, Contents& c) {
#ifdef VENEER_HAVE_LARGE_COUNT
  MPI_Count ni = 0, na = 0, nc = 0, nt = 0;
  if (PMPI_Type_get_envelope_c(type, &ni, &na, &nc, &nt, &c.combiner) != MPI_SUCCESS) return "get_envelope failed";
#else
  int ni = 0, na = 0, nt = 0;
  const int nc = 0;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nt, &c.combiner) != MPI_SUCCESS) return "get_envelope failed";
#endif
  if (c.combiner == MPI_COMBINER_NAMED) return std::nullopt;
  std::vector<int> ints(static_cast<size_t>(ni));
  std::vector<MPI_Aint> addrs(static_cast<size_t>(na));
  c.types.assign(static_cast<size_t>(nt), MPI_DATATYPE_NULL);
#ifdef VENEER_HAVE_LARGE_COUNT
  std::vector<MPI_Count> large(static_cast<size_t>(nc));
  const int rc =
      PMPI_Type_get_contents_c(type, ni, na, nc, nt, ints.data(), addrs.data(), large.data(), c.types.data());
#else
  const int rc = PMPI_Type_get_contents(type, ni, na, nt, ints.data(), addrs.data(), c.types.data());
#endif
  if (rc != MPI_SUCCESS) {
    c.types.clear();
    return "get_contents failed";
  }
  if (nc == 0) {
    c.ints.assign(ints.begin(), ints.end());
    c.addrs.assign(addrs.begin(), addrs.end());
    return std::nullopt;
  }
#ifdef VENEER_HAVE_LARGE_COUNT
  if (!from_large(ints, large, c)) return "unexpected large-count contents for combiner " + std::to_string(c.combiner);
#endif
  return std::nullopt;
}

Node sequence(int64_t offset, std::vector<Dim> dims, Node child) {
  Node n;
  n.offset = offset;
  n.dims = std::move(dims);
  n.children.push_back(std::move(child));
  return n;
}

Result decode_type(MPI_Datatype type, int depth);

// A type's size, extent and true extent, as the library gives them; nullopt
// where it refuses one of them.
struct Extents {
  MPI_Count size = 0, lb = 0, extent = 0, tlb = 0, textent = 0;
};
std::optional<Extents> extents_of(MPI_Datatype type) {
  Extents e;
  if (PMPI_Type_size_x(type, &e.size) != MPI_SUCCESS || PMPI_Type_get_extent_x(type, &e.lb, &e.extent) != MPI_SUCCESS ||
      PMPI_Type_get_true_extent_x(type, &e.tlb, &e.textent) != MPI_SUCCESS)
    return std::nullopt;
  return e;
}

Result named(MPI_Datatype type) {
  const std::optional<Extents> e = extents_of(type);
  if (!e) return fail("size or extent unknown");
  const MPI_Count size = e->size, extent = e->extent, tlb = e->tlb, textent = e->textent;
  Decoded d;
  d.extent = extent;
  if (size == 0) return d;  // an empty sequence
  if (tlb == 0 && size == textent) {
    d.node.block = size;
    return d;
  }
  // Pair types of MINLOC/MAXLOC: {value at 0, int at the end}, possibly with a gap.
  if (type == MPI_FLOAT_INT || type == MPI_DOUBLE_INT || type == MPI_LONG_INT || type == MPI_SHORT_INT ||
      type == MPI_LONG_DOUBLE_INT || type == MPI_2INT) {
    const int64_t int_size = static_cast<int64_t>(sizeof(int));
    Node value, index;
    value.block = size - int_size;
    index.block = int_size;
    index.offset = tlb + textent - int_size;
    value.offset = tlb;
    if (value.block <= 0 || index.offset < value.offset + value.block) return fail("unexpected pair type shape");
    d.node.children.push_back(std::move(value));
    d.node.children.push_back(std::move(index));
    return d;
  }
  return fail("predefined type with gaps that Veneer does not know");
}

// One dimension of a darray: the runs of global indices this process owns.
struct Run {
  int64_t start, length;
};

std::optional<std::vector<Run>> darray_runs(int64_t gsize, int64_t distrib, int64_t darg, int64_t psize, int64_t coord,
                                            Wide& w) {
  std::vector<Run> runs;
  if (psize <= 0) return std::nullopt;
  if (distrib == MPI_DISTRIBUTE_NONE) {
    runs.push_back({0, gsize});
  } else if (distrib == MPI_DISTRIBUTE_BLOCK) {
    const int64_t b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (gsize + psize - 1) / psize : darg;
    if (b <= 0) return std::nullopt;
    const int64_t lo = w.mul(coord, b);
    const int64_t hi = std::min(gsize, w.add(lo, b));
    if (hi > lo) runs.push_back({lo, hi - lo});
  } else if (distrib == MPI_DISTRIBUTE_CYCLIC) {
    const int64_t b = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
    if (b <= 0) return std::nullopt;
    const int64_t step = w.mul(psize, b);
    for (int64_t lo = w.mul(coord, b); lo < gsize && !w.overflow(); lo = w.add(lo, step))
      runs.push_back({lo, std::min(b, gsize - lo)});
  } else {
    return std::nullopt;
  }
  return runs;
}

// The library's extent replaces the one computed here (MPI_Type_get_extent).
Result darray(const Contents& c, const Decoded& child, Wide& w) {
  // ints: size, rank, ndims, gsizes, distribs, dargs, psizes, order.
  const int64_t rank = c.ints[1], nd = c.ints[2];
  const size_t und = static_cast<size_t>(nd);
  if (nd < 0 || c.ints.size() != 4 * und + 4) return fail("unexpected darray contents");
  const int64_t* gsizes = &c.ints[3];
  const int64_t* distribs = &c.ints[3 + und];
  const int64_t* dargs = &c.ints[3 + 2 * und];
  const int64_t* psizes = &c.ints[3 + 3 * und];
  const int64_t order = c.ints[3 + 4 * und];
  // Process coordinates: row-major over psizes whatever the array order.
  std::vector<int64_t> coords(und);
  int64_t r = rank;
  for (int64_t i = nd - 1; i >= 0; --i) {
    if (psizes[i] <= 0) return fail("bad darray process grid");
    coords[static_cast<size_t>(i)] = r % psizes[i];
    r /= psizes[i];
  }
  std::vector<int64_t> stride(und);
  int64_t s = child.extent;
  // Dimensions from innermost to outermost.
  std::vector<int64_t> inner_to_outer;
  for (int64_t k = 0; k < nd; ++k) inner_to_outer.push_back(order == MPI_ORDER_C ? nd - 1 - k : k);
  for (int64_t dim : inner_to_outer) {
    stride[static_cast<size_t>(dim)] = s;
    s = w.mul(s, gsizes[dim]);
  }
  Node current = child.node;
  for (int64_t dim : inner_to_outer) {
    auto runs = darray_runs(gsizes[dim], distribs[dim], dargs[dim], psizes[dim], coords[static_cast<size_t>(dim)], w);
    if (!runs) return fail("bad darray distribution");
    Node level;
    const int64_t st = stride[static_cast<size_t>(dim)];
    for (const Run& run : *runs) level.children.push_back(sequence(w.mul(run.start, st), {{run.length, st}}, current));
    if (runs->empty()) level = Node{};
    current = std::move(level);
  }
  Decoded d;
  d.node = std::move(current);
  return d;
}

Result subarray(const Contents& c, const Decoded& child, Wide& w) {
  // ints: ndims, sizes, subsizes, starts, order.
  const int64_t nd = c.ints[0];
  const size_t und = static_cast<size_t>(nd);
  if (nd < 0 || c.ints.size() != 3 * und + 2) return fail("unexpected subarray contents");
  const int64_t* sizes = &c.ints[1];
  const int64_t* subsizes = &c.ints[1 + und];
  const int64_t* starts = &c.ints[1 + 2 * und];
  const int64_t order = c.ints[1 + 3 * und];
  std::vector<Dim> dims(und);
  int64_t s = child.extent, offset = 0;
  for (int64_t k = 0; k < nd; ++k) {
    const int64_t dim = order == MPI_ORDER_C ? nd - 1 - k : k;  // innermost first
    const size_t slot = static_cast<size_t>(nd - 1 - k);        // dims are outermost first
    dims[slot] = {subsizes[dim], s};
    offset = w.add(offset, w.mul(starts[dim], s));
    s = w.mul(s, sizes[dim]);
  }
  Decoded d;
  d.node = sequence(offset, std::move(dims), child.node);
  return d;
}

// The `n` blocks of (h)indexed(_block): blocks of `old` with their own
// blocklengths (or one for all) at displacements in units of `disp_unit` bytes.
void listed_blocks(Node& out, int64_t n, const int64_t* blocklengths, bool one_blocklength, const int64_t* disps,
                   int64_t disp_unit, const Decoded& old, Wide& w) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t bl = one_blocklength ? blocklengths[0] : blocklengths[i];
    out.children.push_back(sequence(w.mul(disps[i], disp_unit), {{bl, old.extent}}, old.node));
  }
}

Result decode_type(MPI_Datatype type, int depth) {
  if (depth > 64) return fail("type nested too deeply");
  const std::optional<int> combiner = combiner_of(type);
  if (!combiner) return fail("get_envelope failed");
  if (*combiner == MPI_COMBINER_NAMED) return named(type);

  MPI_Count size = 0, lb = 0, extent = 0;
  if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size == MPI_UNDEFINED ||
      PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS || extent == MPI_UNDEFINED)
    return fail("size or extent unknown");
  Decoded d;
  d.extent = extent;
  // No data: an empty stream, whatever the (possibly huge) counts inside.
  if (size == 0) return d;

  Contents c;
  if (std::optional<std::string> why = read_contents(type, c)) return fail(*why);
  std::vector<Decoded> kids;
  for (MPI_Datatype t : c.types) {
    Result r = decode_type(t, depth + 1);
    if (auto* e = std::get_if<DecodeError>(&r)) return *e;
    kids.push_back(std::move(std::get<Decoded>(r)));
  }
  const std::vector<int64_t>& I = c.ints;
  const std::vector<int64_t>& A = c.addrs;
  // The shapes the standard gives each combiner's arguments (the library's own).
  auto shaped = [&](size_t ints, size_t addrs, size_t types) {
    return I.size() >= ints && A.size() >= addrs && kids.size() >= types;
  };
  const int64_t n = I.empty() ? 0 : I[0];
  const size_t un = n > 0 ? static_cast<size_t>(n) : 0;
  Wide w;
  Result r = fail("unexpected contents for combiner " + std::to_string(c.combiner));
  switch (c.combiner) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:
      if (!shaped(0, 0, 1)) break;
      d.node = std::move(kids[0].node);
      r = std::move(d);
      break;
    case MPI_COMBINER_CONTIGUOUS:
      if (!shaped(1, 0, 1)) break;
      d.node = sequence(0, {{I[0], kids[0].extent}}, std::move(kids[0].node));
      r = std::move(d);
      break;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
      const bool bytes = c.combiner == MPI_COMBINER_HVECTOR;
      if (!shaped(bytes ? 2 : 3, bytes ? 1 : 0, 1)) break;
      const int64_t ce = kids[0].extent;
      const int64_t stride = bytes ? A[0] : w.mul(I[2], ce);
      Node row = sequence(0, {{I[1], ce}}, std::move(kids[0].node));
      d.node = sequence(0, {{I[0], stride}}, std::move(row));
      r = std::move(d);
      break;
    }
    case MPI_COMBINER_INDEXED:
      if (!shaped(2 * un + 1, 0, 1)) break;
      listed_blocks(d.node, n, &I[1], false, &I[1 + un], kids[0].extent, kids[0], w);
      r = std::move(d);
      break;
    case MPI_COMBINER_HINDEXED:
      if (!shaped(un + 1, un, 1)) break;
      listed_blocks(d.node, n, &I[1], false, A.data(), 1, kids[0], w);
      r = std::move(d);
      break;
    case MPI_COMBINER_INDEXED_BLOCK:
      if (!shaped(un + 2, 0, 1)) break;
      listed_blocks(d.node, n, &I[1], true, &I[2], kids[0].extent, kids[0], w);
      r = std::move(d);
      break;
    case MPI_COMBINER_HINDEXED_BLOCK:
      if (!shaped(2, un, 1)) break;
      listed_blocks(d.node, n, &I[1], true, A.data(), 1, kids[0], w);
      r = std::move(d);
      break;
    case MPI_COMBINER_STRUCT:
      if (!shaped(un + 1, un, un)) break;
      for (size_t i = 0; i < un; ++i)
        d.node.children.push_back(sequence(A[i], {{I[1 + i], kids[i].extent}}, kids[i].node));
      r = std::move(d);
      break;
    case MPI_COMBINER_SUBARRAY:
      if (!shaped(1, 0, 1)) break;
      r = subarray(c, kids[0], w);
      break;
    case MPI_COMBINER_DARRAY:
      if (!shaped(3, 0, 1)) break;
      r = darray(c, kids[0], w);
      break;
    default: {
      // Fortran's parameterised types behave like predefined ones when they have no gaps.
      MPI_Count tlb = 0, textent = 0;
      if (PMPI_Type_get_true_extent_x(type, &tlb, &textent) != MPI_SUCCESS) {
        r = fail("true extent unknown");
      } else if (c.types.empty() && size == textent) {
        d.node.offset = tlb;
        d.node.block = size;
        r = std::move(d);
      } else {
        r = fail("combiner " + std::to_string(c.combiner) + " is not supported");
      }
      break;
    }
  }
  if (w.overflow()) return fail("constructor arguments overflow 64 bits");
  if (auto* ok = std::get_if<Decoded>(&r)) ok->extent = extent;
  return r;
}

}  // namespace

std::variant<Layout, DecodeError> decode(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return fail("MPI_DATATYPE_NULL");
  Result r = decode_type(type, 0);
  if (auto* e = std::get_if<DecodeError>(&r)) return *e;
  Layout l;
  l.root = std::move(std::get<Decoded>(r).node);
  simplify(l.root);
  const std::optional<Extents> e = extents_of(type);
  if (!e) return fail("size or extent unknown");
  l.size = e->size;
  l.lb = e->lb;
  l.extent = e->extent;
  l.true_lb = e->tlb;
  l.true_extent = e->textent;
  if (e->size == MPI_UNDEFINED || l.root.bytes() != l.size)
    return fail("decoded size " + std::to_string(l.root.bytes()) + " differs from MPI_Type_size " +
                std::to_string(l.size));
  finish(l);
  return l;
}

}  // namespace veneer::datatypes
