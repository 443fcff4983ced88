#include "datatypes/decode.h"

#include <optional>
#include <vector>

namespace veneer::datatypes {
namespace {

// Result of decoding one (sub)type: its stream and its extent (for repetition).
struct Decoded {
  Node node;
  int64_t extent = 0;
};

using Result = std::variant<Decoded, DecodeError>;

DecodeError fail(std::string why) { return DecodeError{std::move(why)}; }

// The handles MPI_Type_get_contents returns must be freed unless predefined.
struct Contents {
  std::vector<int> ints;
  std::vector<MPI_Aint> addrs;
  std::vector<MPI_Datatype> types;
  Contents() = default;
  Contents(const Contents&) = delete;
  Contents& operator=(const Contents&) = delete;
  ~Contents() {
    for (MPI_Datatype& t : types) {
      int ni = 0, na = 0, nt = 0, combiner = 0;
      if (PMPI_Type_get_envelope(t, &ni, &na, &nt, &combiner) == MPI_SUCCESS && combiner != MPI_COMBINER_NAMED)
        PMPI_Type_free(&t);
    }
  }
};

Node sequence(int64_t offset, std::vector<Dim> dims, Node child) {
  Node n;
  n.offset = offset;
  n.dims = std::move(dims);
  n.children.push_back(std::move(child));
  return n;
}

Result decode_type(MPI_Datatype type, int depth);

Result named(MPI_Datatype type) {
  MPI_Count size = 0, lb = 0, extent = 0, tlb = 0, textent = 0;
  PMPI_Type_size_x(type, &size);
  PMPI_Type_get_extent_x(type, &lb, &extent);
  PMPI_Type_get_true_extent_x(type, &tlb, &textent);
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

std::optional<std::vector<Run>> darray_runs(int64_t gsize, int distrib, int darg, int64_t psize, int64_t coord) {
  std::vector<Run> runs;
  if (distrib == MPI_DISTRIBUTE_NONE) {
    runs.push_back({0, gsize});
  } else if (distrib == MPI_DISTRIBUTE_BLOCK) {
    const int64_t b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (gsize + psize - 1) / psize : darg;
    if (b <= 0) return std::nullopt;
    const int64_t lo = coord * b;
    const int64_t hi = std::min(gsize, lo + b);
    if (hi > lo) runs.push_back({lo, hi - lo});
  } else if (distrib == MPI_DISTRIBUTE_CYCLIC) {
    const int64_t b = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
    if (b <= 0) return std::nullopt;
    for (int64_t lo = coord * b; lo < gsize; lo += psize * b) runs.push_back({lo, std::min(b, gsize - lo)});
  } else {
    return std::nullopt;
  }
  return runs;
}

Result darray(const Contents& c, const Decoded& child) {
  const int size = c.ints[0], rank = c.ints[1], nd = c.ints[2];
  const int* gsizes = &c.ints[3];
  const int* distribs = &c.ints[3 + nd];
  const int* dargs = &c.ints[3 + 2 * nd];
  const int* psizes = &c.ints[3 + 3 * nd];
  const int order = c.ints[3 + 4 * nd];
  (void)size;
  // Process coordinates: row-major over psizes whatever the array order.
  std::vector<int64_t> coords(static_cast<size_t>(nd));
  int64_t r = rank;
  for (int i = nd - 1; i >= 0; --i) {
    coords[static_cast<size_t>(i)] = r % psizes[i];
    r /= psizes[i];
  }
  std::vector<int64_t> stride(static_cast<size_t>(nd));
  int64_t s = child.extent;
  int64_t total = child.extent;
  for (int k = 0; k < nd; ++k) total *= gsizes[k];
  // Dimensions from innermost to outermost.
  std::vector<int> inner_to_outer;
  for (int k = 0; k < nd; ++k) inner_to_outer.push_back(order == MPI_ORDER_C ? nd - 1 - k : k);
  for (int dim : inner_to_outer) {
    stride[static_cast<size_t>(dim)] = s;
    s *= gsizes[dim];
  }
  Node current = child.node;
  for (int dim : inner_to_outer) {
    auto runs = darray_runs(gsizes[dim], distribs[dim], dargs[dim], psizes[dim], coords[static_cast<size_t>(dim)]);
    if (!runs) return fail("bad darray distribution");
    Node level;
    const int64_t st = stride[static_cast<size_t>(dim)];
    for (const Run& run : *runs) level.children.push_back(sequence(run.start * st, {{run.length, st}}, current));
    if (runs->empty()) level = Node{};
    current = std::move(level);
  }
  Decoded d;
  d.node = std::move(current);
  d.extent = total;
  return d;
}

Result subarray(const Contents& c, const Decoded& child) {
  const int nd = c.ints[0];
  const int* sizes = &c.ints[1];
  const int* subsizes = &c.ints[1 + nd];
  const int* starts = &c.ints[1 + 2 * nd];
  const int order = c.ints[1 + 3 * nd];
  std::vector<Dim> dims(static_cast<size_t>(nd));
  int64_t s = child.extent, offset = 0, total = child.extent;
  for (int k = 0; k < nd; ++k) {
    const int dim = order == MPI_ORDER_C ? nd - 1 - k : k;  // innermost first
    const size_t slot = static_cast<size_t>(nd - 1 - k);    // dims are outermost first
    dims[slot] = {subsizes[dim], s};
    offset += starts[dim] * s;
    s *= sizes[dim];
    total *= sizes[dim];
  }
  Decoded d;
  d.node = sequence(offset, std::move(dims), child.node);
  d.extent = total;
  return d;
}

Result decode_type(MPI_Datatype type, int depth) {
  if (depth > 64) return fail("type nested too deeply");
  int ni = 0, na = 0, nt = 0, combiner = 0;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nt, &combiner) != MPI_SUCCESS) return fail("get_envelope failed");
  if (combiner == MPI_COMBINER_NAMED) return named(type);

  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  Contents c;
  c.ints.resize(static_cast<size_t>(ni));
  c.addrs.resize(static_cast<size_t>(na));
  c.types.resize(static_cast<size_t>(nt), MPI_DATATYPE_NULL);
  if (PMPI_Type_get_contents(type, ni, na, nt, c.ints.data(), c.addrs.data(), c.types.data()) != MPI_SUCCESS) {
    c.types.clear();
    return fail("get_contents failed");
  }
  std::vector<Decoded> kids;
  for (MPI_Datatype t : c.types) {
    Result r = decode_type(t, depth + 1);
    if (auto* e = std::get_if<DecodeError>(&r)) return *e;
    kids.push_back(std::move(std::get<Decoded>(r)));
  }
  Decoded d;
  d.extent = extent;
  switch (combiner) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:
      d.node = std::move(kids[0].node);
      return d;
    case MPI_COMBINER_CONTIGUOUS:
      d.node = sequence(0, {{c.ints[0], kids[0].extent}}, std::move(kids[0].node));
      return d;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
      const int64_t ce = kids[0].extent;
      const int64_t stride = combiner == MPI_COMBINER_VECTOR ? int64_t{c.ints[2]} * ce : int64_t{c.addrs[0]};
      Node row = sequence(0, {{c.ints[1], ce}}, std::move(kids[0].node));
      d.node = sequence(0, {{c.ints[0], stride}}, std::move(row));
      return d;
    }
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED: {
      const int n = c.ints[0];
      const int64_t ce = kids[0].extent;
      for (int i = 0; i < n; ++i) {
        const int64_t disp = combiner == MPI_COMBINER_INDEXED ? int64_t{c.ints[1 + n + i]} * ce
                                                              : int64_t{c.addrs[static_cast<size_t>(i)]};
        d.node.children.push_back(sequence(disp, {{c.ints[1 + i], ce}}, kids[0].node));
      }
      return d;
    }
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK: {
      const int n = c.ints[0], bl = c.ints[1];
      const int64_t ce = kids[0].extent;
      for (int i = 0; i < n; ++i) {
        const int64_t disp = combiner == MPI_COMBINER_INDEXED_BLOCK ? int64_t{c.ints[2 + i]} * ce
                                                                    : int64_t{c.addrs[static_cast<size_t>(i)]};
        d.node.children.push_back(sequence(disp, {{bl, ce}}, kids[0].node));
      }
      return d;
    }
    case MPI_COMBINER_STRUCT: {
      const int n = c.ints[0];
      for (int i = 0; i < n; ++i) {
        const Decoded& k = kids[static_cast<size_t>(i)];
        d.node.children.push_back(sequence(c.addrs[static_cast<size_t>(i)], {{c.ints[1 + i], k.extent}}, k.node));
      }
      return d;
    }
    case MPI_COMBINER_SUBARRAY: {
      Result r = subarray(c, kids[0]);
      if (auto* ok = std::get_if<Decoded>(&r)) ok->extent = extent;
      return r;
    }
    case MPI_COMBINER_DARRAY: {
      Result r = darray(c, kids[0]);
      if (auto* ok = std::get_if<Decoded>(&r)) ok->extent = extent;
      return r;
    }
    default:
      break;
  }
  // Fortran's parameterised types behave like predefined ones when they have no gaps.
  MPI_Count size = 0, tlb = 0, textent = 0;
  PMPI_Type_size_x(type, &size);
  PMPI_Type_get_true_extent_x(type, &tlb, &textent);
  if (nt == 0 && size == textent) {
    d.node.offset = tlb;
    d.node.block = size;
    return d;
  }
  return fail("combiner " + std::to_string(combiner) + " is not supported");
}

}  // namespace

std::variant<Layout, DecodeError> decode(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return fail("MPI_DATATYPE_NULL");
  Result r = decode_type(type, 0);
  if (auto* e = std::get_if<DecodeError>(&r)) return *e;
  Layout l;
  l.root = std::move(std::get<Decoded>(r).node);
  simplify(l.root);
  MPI_Count size = 0, lb = 0, extent = 0, tlb = 0, textent = 0;
  PMPI_Type_size_x(type, &size);
  PMPI_Type_get_extent_x(type, &lb, &extent);
  PMPI_Type_get_true_extent_x(type, &tlb, &textent);
  l.size = size;
  l.lb = lb;
  l.extent = extent;
  l.true_lb = tlb;
  l.true_extent = textent;
  if (size == MPI_UNDEFINED || l.root.bytes() != l.size)
    return fail("decoded size " + std::to_string(l.root.bytes()) + " differs from MPI_Type_size " +
                std::to_string(l.size));
  finish(l);
  return l;
}

}  // namespace veneer::datatypes
