// SPDX-License-Identifier: BSD-3-Clause
#include "test/datatypes/typegen.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <sstream>

namespace veneer::test {

void TypeHandle::reset() {
  if (type_ != MPI_DATATYPE_NULL && !is_predefined(type_)) MPI_Type_free(&type_);
  type_ = MPI_DATATYPE_NULL;
}

int combiner_of(MPI_Datatype type) {
  int combiner = MPI_COMBINER_NAMED;
#ifdef VENEER_HAVE_LARGE_COUNT
  MPI_Count integers = 0, addresses = 0, counts = 0, types = 0;
  PMPI_Type_get_envelope_c(type, &integers, &addresses, &counts, &types, &combiner);
#else
  int integers = 0, addresses = 0, types = 0;
  PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner);
#endif
  return combiner;
}

bool is_predefined(MPI_Datatype type) { return combiner_of(type) == MPI_COMBINER_NAMED; }

TypeShape shape_of(MPI_Datatype type) {
  TypeShape s;
  MPI_Count size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  PMPI_Type_size_x(type, &size);
  PMPI_Type_get_extent_x(type, &lb, &extent);
  PMPI_Type_get_true_extent_x(type, &true_lb, &true_extent);
  s.size = size;
  s.lb = lb;
  s.extent = extent;
  s.true_lb = true_lb;
  s.true_extent = true_extent;
  return s;
}

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct Leaf {
  MPI_Datatype type;
  const char* name;
};

// Predefined leaves, including the pair types whose extent has a gap after the
// int (MPI_DOUBLE_INT: 12 bytes of data in 16) and MPI_LONG_DOUBLE, whose
// extent includes padding bytes that the library still copies.
const std::vector<Leaf>& leaves() {
  static const std::vector<Leaf> list = {
      {MPI_CHAR, "MPI_CHAR"},
      {MPI_BYTE, "MPI_BYTE"},
      {MPI_SHORT, "MPI_SHORT"},
      {MPI_INT, "MPI_INT"},
      {MPI_FLOAT, "MPI_FLOAT"},
      {MPI_DOUBLE, "MPI_DOUBLE"},
      {MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE"},
      {MPI_INT64_T, "MPI_INT64_T"},
      {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR"},
      {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX"},
      {MPI_DOUBLE_INT, "MPI_DOUBLE_INT"},
      {MPI_SHORT_INT, "MPI_SHORT_INT"},
      {MPI_LONG_INT, "MPI_LONG_INT"},
      {MPI_2INT, "MPI_2INT"},
      {MPI_FLOAT_INT, "MPI_FLOAT_INT"},
      {MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT"},
  };
  return list;
}

// The bytes `blocks` consecutive instances of a type occupy, relative to the
// displacement of the first: where they start and how long they are.
struct Footprint {
  int64_t start = 0;
  int64_t length = 0;
};

Footprint footprint(const TypeShape& s, int64_t blocks) {
  if (blocks <= 0) return {};
  int64_t spread = (blocks - 1) * s.extent;
  return {s.true_lb + std::min<int64_t>(0, spread), s.true_extent + (spread < 0 ? -spread : spread)};
}

template <typename T>
std::string list_text(const std::vector<T>& values) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < values.size(); ++i) os << (i ? "," : "") << values[i];
  os << ']';
  return os.str();
}

}  // namespace

struct TypeGenerator::Built {
  TypeHandle type;
  std::string description;
  TypeShape shape;
  bool large_form = false, beyond_int = false;  // as in GeneratedType
  void inherit(const Built& part) {
    large_form |= part.large_form;
    beyond_int |= part.beyond_int;
  }
};

namespace {
constexpr int64_t kTwo31 = int64_t{1} << 31;

// The name of a constructor, with "_c" for its large-count form.
std::string form(const char* name, bool large) { return std::string(name) + (large ? "_c(" : "("); }
}  // namespace

TypeGenerator::TypeGenerator(uint64_t seed, TypeLimits limits)
    : rng_(splitmix(seed)), large_rng_(splitmix(seed ^ 0x6c61726765636e74ULL)), limits_(limits) {
#ifndef VENEER_HAVE_LARGE_COUNT
  limits_.large_count = false;
#endif
}

bool TypeGenerator::large(double p) {
  return limits_.large_count && std::uniform_real_distribution<double>(0, 1)(large_rng_) < p;
}

int64_t TypeGenerator::large_uniform(int64_t lo, int64_t hi) {
  if (!limits_.large_count || hi <= lo) return lo;
  return std::uniform_int_distribution<int64_t>(lo, hi)(large_rng_);
}

int64_t TypeGenerator::uniform(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
}

bool TypeGenerator::chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

bool TypeGenerator::fits(const TypeShape& s) const {
  // Memory use is bounded by size and true extent; with large counts, bounds
  // and extents may be far away (such types are used with a count of one).
  const int64_t far = limits_.large_count ? int64_t{1} << 56 : 4 * limits_.max_true_extent;
  const int64_t extent = limits_.large_count ? far : limits_.max_true_extent;
  return s.size <= limits_.max_size && s.true_extent <= limits_.max_true_extent && std::abs(s.extent) <= extent &&
         std::abs(s.lb) <= far && std::abs(s.true_lb) <= far;
}

// Mostly small counts, sometimes empty or single, bounded so that the type
// stays near this type's size goal.
int TypeGenerator::pick_count(int64_t unit_size, int64_t unit_span) {
  double r = std::uniform_real_distribution<double>(0, 1)(rng_);
  if (r < 0.06) return 0;
  if (r < 0.20) return 1;
  int64_t cap = r < 0.6 ? 4 : r < 0.9 ? 16 : 64;
  if (unit_size > 0) cap = std::min(cap, target_size_ / unit_size);
  if (unit_span > 0) cap = std::min(cap, limits_.max_true_extent / unit_span);
  if (cap < 2) return 1;
  return static_cast<int>(uniform(2, cap));
}

TypeGenerator::Built TypeGenerator::leaf() {
  const Leaf* pick = nullptr;
  do {
    pick = &leaves()[uniform(0, static_cast<int64_t>(leaves().size()) - 1)];
  } while (!limits_.long_double && (pick->type == MPI_LONG_DOUBLE || pick->type == MPI_LONG_DOUBLE_INT));
  const Leaf& l = *pick;
  Built b{TypeHandle(l.type), l.name, shape_of(l.type)};
  return b;
}

TypeGenerator::Built TypeGenerator::build(int depth) {
  Built b = build_any(depth);
  if (depth > 0 && !limits_.zero_size_parts && b.shape.size == 0) return leaf();
  return b;
}

TypeGenerator::Built TypeGenerator::build_any(int depth) {
  static const double leaf_chance[] = {0.05, 0.3, 0.45, 0.6, 1.0};
  if (depth >= limits_.max_depth || chance(leaf_chance[std::min(depth, 4)])) return leaf();
  // Weights of the constructors, in the order of the switch below.
  static const int weights[] = {10, 10, 10, 8, 8, 6, 6, 12, 8, 6, 10, 4};
  int total = 0;
  for (int w : weights) total += w;
  int pick = static_cast<int>(uniform(0, total - 1));
  int which = 0;
  while (pick >= weights[which]) pick -= weights[which++];
  switch (which) {
    case 0: return contiguous(depth);
    case 1: return vector(depth, false);
    case 2: return vector(depth, true);
    case 3: return indexed(depth, false, false);
    case 4: return indexed(depth, true, false);
    case 5: return indexed(depth, false, true);
    case 6: return indexed(depth, true, true);
    case 7: return structure(depth);
    case 8: return subarray(depth);
    case 9: return darray(depth);
    case 10: return resized(depth);
    default: return dup(depth);
  }
}

TypeGenerator::Built TypeGenerator::contiguous(int depth) {
  Built child = build(depth + 1);
  int n = pick_count(child.shape.size, std::max<int64_t>(std::abs(child.shape.extent), 1));
  Built b;
  b.inherit(child);
  b.large_form |= large(0.3);
#ifdef VENEER_HAVE_LARGE_COUNT
  if (b.large_form && depth == 0 && large(0.1)) {
    // A whole zero-size type: an empty one repeated beyond 2^31 times.
    TypeHandle empty;
    MPI_Type_contiguous(0, child.type.get(), empty.replace());
    const int64_t huge = large_uniform(kTwo31, int64_t{1} << 40);
    MPI_Type_contiguous_c(huge, empty.get(), b.type.replace());
    b.shape = shape_of(b.type.get());
    b.beyond_int = true;
    b.description = "contiguous_c(" + std::to_string(huge) + ", contiguous(0, " + child.description + "))";
    return b;
  }
  if (b.large_form) MPI_Type_contiguous_c(n, child.type.get(), b.type.replace());
  else
#endif
    MPI_Type_contiguous(n, child.type.get(), b.type.replace());
  b.shape = shape_of(b.type.get());
  if (!fits(b.shape)) return child;
  b.description = form("contiguous", b.large_form) + std::to_string(n) + ", " + child.description + ")";
  return b;
}

// vector (stride in extents of the child) or hvector (stride in bytes). Strides
// normally leave the blocks apart, with a gap, and are negative a third of the
// time; a few are short enough to overlap (fine for packing; the tests skip
// receiving into those).
TypeGenerator::Built TypeGenerator::vector(int depth, bool bytes) {
  Built child = build(depth + 1);
  const TypeShape& c = child.shape;
  int blocklength = chance(0.05) ? 0 : static_cast<int>(uniform(1, 3));
  Footprint fp = footprint(c, blocklength);
  static const int64_t gaps[] = {0, 0, 1, 3, 8, 13};
  int64_t stride = 0;
  if (bytes) {
    stride = fp.length + gaps[uniform(0, 5)];
    if (chance(0.06)) stride = uniform(-fp.length, fp.length);
  } else if (c.extent > 0) {
    stride = (fp.length + c.extent - 1) / c.extent + uniform(0, 2);
    if (chance(0.06)) stride = uniform(0, blocklength);
  } else {
    stride = uniform(0, 3);
  }
  if (chance(0.33)) stride = -stride;
  int64_t step = bytes ? std::abs(stride) : std::abs(stride * c.extent);
  int n = pick_count(blocklength * c.size, std::max<int64_t>(step, 1));
  Built b;
  b.inherit(child);
  b.large_form |= large(0.3);
  if (b.large_form && n <= 1 && (bytes || std::abs(c.extent) <= limits_.max_true_extent) && large(0.5)) {
    // A stride beyond 2^31 that a single block never takes.
    stride = (large(0.5) ? -1 : 1) * large_uniform(kTwo31, int64_t{1} << 40);
    b.beyond_int = true;
  }
#ifdef VENEER_HAVE_LARGE_COUNT
  if (b.large_form && bytes) MPI_Type_create_hvector_c(n, blocklength, stride, child.type.get(), b.type.replace());
  else if (b.large_form) MPI_Type_vector_c(n, blocklength, stride, child.type.get(), b.type.replace());
  else
#endif
      if (bytes)
    MPI_Type_create_hvector(n, blocklength, stride, child.type.get(), b.type.replace());
  else MPI_Type_vector(n, blocklength, static_cast<int>(stride), child.type.get(), b.type.replace());
  b.shape = shape_of(b.type.get());
  if (!fits(b.shape)) return child;
  b.description = form(bytes ? "hvector" : "vector", b.large_form) + std::to_string(n) + ", " +
                  std::to_string(blocklength) + ", " + std::to_string(stride) + ", " + child.description + ")";
  return b;
}

// indexed, hindexed, indexed_block and hindexed_block. Blocks are laid out
// apart in memory, then sometimes listed out of memory order and shifted to
// negative displacements.
TypeGenerator::Built TypeGenerator::indexed(int depth, bool bytes, bool same_blocklength) {
  Built child = build(depth + 1);
  const TypeShape& c = child.shape;
  int n = pick_count(2 * c.size, std::max<int64_t>(footprint(c, 2).length + 4, 1));
  int common = chance(0.05) ? 0 : static_cast<int>(uniform(1, 3));
  std::vector<int> blocklengths(n);
  std::vector<int64_t> displacements(n);  // in bytes, or extents of the child
  int64_t cursor = 0;
  for (int i = 0; i < n; ++i) {
    blocklengths[i] = same_blocklength ? common : static_cast<int>(uniform(0, 3));
    Footprint fp = footprint(c, blocklengths[i]);
    if (bytes) {
      displacements[i] = cursor + uniform(0, 9);
      cursor = displacements[i] + fp.length;
    } else {
      int64_t unit = std::max<int64_t>(c.extent, 1);
      displacements[i] = cursor + uniform(0, 2);
      cursor = displacements[i] + (fp.length + unit - 1) / unit;
    }
  }
  if (chance(0.4)) {
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng_);
    std::vector<int> bl2(n);
    std::vector<int64_t> d2(n);
    for (int i = 0; i < n; ++i) {
      bl2[i] = blocklengths[order[i]];
      d2[i] = displacements[order[i]];
    }
    if (!same_blocklength) blocklengths = bl2;
    displacements = d2;
  }
  if (chance(0.4)) {
    int64_t shift = uniform(0, cursor + 5);
    for (int64_t& d : displacements) d -= shift;
  }
  Built b;
  b.inherit(child);
  b.large_form |= large(0.3);
  if (b.large_form && n > 0 && (bytes || std::abs(c.extent) <= limits_.max_true_extent) && large(0.3)) {
    // Every block moved by the same distance beyond 2^31 (bytes, or extents of the child).
    const int64_t far = (large(0.5) ? -1 : 1) * large_uniform(kTwo31, int64_t{1} << 36);
    for (int64_t& d : displacements) d += far;
    b.beyond_int = true;
  }
  std::vector<int> int_displacements(displacements.begin(), displacements.end());
  std::vector<MPI_Aint> byte_displacements(displacements.begin(), displacements.end());
  std::string name;
#ifdef VENEER_HAVE_LARGE_COUNT
  if (b.large_form) {
    std::vector<MPI_Count> counts(blocklengths.begin(), blocklengths.end());
    std::vector<MPI_Count> large_displacements(displacements.begin(), displacements.end());
    if (same_blocklength && bytes)
      MPI_Type_create_hindexed_block_c(n, common, large_displacements.data(), child.type.get(), b.type.replace());
    else if (same_blocklength)
      MPI_Type_create_indexed_block_c(n, common, large_displacements.data(), child.type.get(), b.type.replace());
    else if (bytes)
      MPI_Type_create_hindexed_c(n, counts.data(), large_displacements.data(), child.type.get(), b.type.replace());
    else MPI_Type_indexed_c(n, counts.data(), large_displacements.data(), child.type.get(), b.type.replace());
    name = same_blocklength ? (bytes ? "hindexed_block_c" : "indexed_block_c") : (bytes ? "hindexed_c" : "indexed_c");
  } else
#endif
      if (same_blocklength && bytes) {
    name = "hindexed_block";
    MPI_Type_create_hindexed_block(n, common, byte_displacements.data(), child.type.get(), b.type.replace());
  } else if (same_blocklength) {
    name = "indexed_block";
    MPI_Type_create_indexed_block(n, common, int_displacements.data(), child.type.get(), b.type.replace());
  } else if (bytes) {
    name = "hindexed";
    MPI_Type_create_hindexed(n, blocklengths.data(), byte_displacements.data(), child.type.get(), b.type.replace());
  } else {
    name = "indexed";
    MPI_Type_indexed(n, blocklengths.data(), int_displacements.data(), child.type.get(), b.type.replace());
  }
  b.shape = shape_of(b.type.get());
  if (!fits(b.shape)) return child;
  std::string bl_text = same_blocklength ? std::to_string(common) : list_text(blocklengths);
  b.description = name + "(" + std::to_string(n) + ", " + bl_text + ", " + list_text(displacements) + ", " +
                  child.description + ")";
  return b;
}

TypeGenerator::Built TypeGenerator::structure(int depth) {
  int members = chance(0.05) ? 0 : static_cast<int>(uniform(1, 4));
  std::vector<Built> parts;
  std::vector<int> blocklengths;
  std::vector<MPI_Aint> displacements;
  int64_t cursor = 0;
  for (int i = 0; i < members; ++i) {
    parts.push_back(build(depth + 1));
    const TypeShape& c = parts.back().shape;
    int bl = chance(0.1) ? 0 : static_cast<int>(uniform(1, 3));
    Footprint fp = footprint(c, bl);
    if (fp.length > limits_.max_true_extent / 4) {
      bl = std::min(bl, 1);
      fp = footprint(c, bl);
    }
    blocklengths.push_back(bl);
    displacements.push_back(cursor - fp.start + uniform(0, 9));
    cursor = displacements.back() + fp.start + fp.length;
  }
  if (chance(0.4)) {
    std::vector<int> order(members);
    for (int i = 0; i < members; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng_);
    std::vector<Built> p2;
    std::vector<int> bl2;
    std::vector<MPI_Aint> d2;
    for (int i : order) {
      p2.push_back(std::move(parts[i]));
      bl2.push_back(blocklengths[i]);
      d2.push_back(displacements[i]);
    }
    parts = std::move(p2);
    blocklengths = bl2;
    displacements = d2;
  }
  if (chance(0.4)) {
    int64_t shift = uniform(0, cursor + 5);
    for (MPI_Aint& d : displacements) d -= shift;
  }
  std::vector<MPI_Datatype> types;
  for (const Built& p : parts) types.push_back(p.type.get());
  Built b;
  for (const Built& p : parts) b.inherit(p);
  b.large_form |= large(0.3);
  if (b.large_form && members > 0 && large(0.3)) {
    // Every member moved by the same number of bytes beyond 2^31.
    const int64_t far = (large(0.5) ? -1 : 1) * large_uniform(kTwo31, int64_t{1} << 40);
    for (MPI_Aint& d : displacements) d += far;
    b.beyond_int = true;
  }
#ifdef VENEER_HAVE_LARGE_COUNT
  if (b.large_form) {
    std::vector<MPI_Count> counts(blocklengths.begin(), blocklengths.end());
    std::vector<MPI_Count> large_displacements(displacements.begin(), displacements.end());
    MPI_Type_create_struct_c(members, counts.data(), large_displacements.data(), types.data(), b.type.replace());
  } else
#endif
    MPI_Type_create_struct(members, blocklengths.data(), displacements.data(), types.data(), b.type.replace());
  b.shape = shape_of(b.type.get());
  if (!fits(b.shape)) return members ? std::move(parts[0]) : leaf();
  std::ostringstream os;
  os << form("struct", b.large_form) << members << ", " << list_text(blocklengths) << ", " << list_text(displacements)
     << ", [";
  for (int i = 0; i < members; ++i) os << (i ? ", " : "") << parts[i].description;
  os << "])";
  b.description = os.str();
  return b;
}

TypeGenerator::Built TypeGenerator::subarray(int depth) {
  Built child = build(depth + 1);
  if (child.shape.extent <= 0) return child;
  int ndims = static_cast<int>(uniform(1, 3));
  std::vector<int> sizes(ndims), subsizes(ndims), starts(ndims);
  int64_t elements = 1;
  int64_t max_elements = std::max<int64_t>(1, limits_.max_true_extent / child.shape.extent);
  for (int i = 0; i < ndims; ++i) {
    sizes[i] = static_cast<int>(uniform(1, elements * 8 <= max_elements ? 8 : 2));
    elements *= sizes[i];
    // A one-element dimension away from the origin now and then.
    if (chance(0.2)) {
      subsizes[i] = 1;
    } else {
      subsizes[i] = static_cast<int>(uniform(1, sizes[i]));
    }
    starts[i] = static_cast<int>(uniform(0, sizes[i] - subsizes[i]));
  }
  bool fortran = chance(0.5);
  Built b;
  b.inherit(child);
  b.large_form |= large(0.3);
  std::vector<int64_t> large_sizes(sizes.begin(), sizes.end()), large_subsizes(subsizes.begin(), subsizes.end()),
      large_starts(starts.begin(), starts.end());
  if (b.large_form && child.shape.extent <= limits_.max_true_extent && large(0.3)) {
    // The outermost dimension beyond 2^31 elements, a few of them taken near its end.
    const size_t d = fortran ? static_cast<size_t>(ndims - 1) : 0;
    large_sizes[d] = large_uniform(kTwo31, int64_t{1} << 34);
    large_subsizes[d] = large_uniform(1, 3);
    large_starts[d] = large_sizes[d] - large_subsizes[d] - large_uniform(0, 2);
    b.beyond_int = true;
  }
#ifdef VENEER_HAVE_LARGE_COUNT
  if (b.large_form) {
    std::vector<MPI_Count> sz(large_sizes.begin(), large_sizes.end()),
        sub(large_subsizes.begin(), large_subsizes.end()), st(large_starts.begin(), large_starts.end());
    MPI_Type_create_subarray_c(ndims, sz.data(), sub.data(), st.data(), fortran ? MPI_ORDER_FORTRAN : MPI_ORDER_C,
                               child.type.get(), b.type.replace());
  } else
#endif
    MPI_Type_create_subarray(ndims, sizes.data(), subsizes.data(), starts.data(),
                             fortran ? MPI_ORDER_FORTRAN : MPI_ORDER_C, child.type.get(), b.type.replace());
  b.shape = shape_of(b.type.get());
  if (!fits(b.shape)) return child;
  b.description = form("subarray", b.large_form) + std::to_string(ndims) + ", " + list_text(large_sizes) + ", " +
                  list_text(large_subsizes) + ", " + list_text(large_starts) + (fortran ? ", fortran, " : ", c, ") +
                  child.description + ")";
  return b;
}

TypeGenerator::Built TypeGenerator::darray(int depth) {
  Built child = build(depth + 1);
  // Open MPI 4.1 rejects a zero-size old type here (MPI_ERR_TYPE).
  if (child.shape.extent <= 0 || child.shape.size == 0) return child;
  int procs = static_cast<int>(uniform(1, 4));
  int rank = static_cast<int>(uniform(0, procs - 1));
  int ndims = static_cast<int>(uniform(1, 3));
  std::vector<int> gsizes(ndims), distribs(ndims), dargs(ndims, MPI_DISTRIBUTE_DFLT_DARG), psizes(ndims, 1);
  static const int kinds[] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_NONE};
  std::vector<int> distributed;
  for (int i = 0; i < ndims; ++i) {
    distribs[i] = kinds[uniform(0, 2)];
    if (distribs[i] != MPI_DISTRIBUTE_NONE) distributed.push_back(i);
  }
  if (procs > 1 && distributed.empty()) {
    distribs[0] = MPI_DISTRIBUTE_BLOCK;
    distributed.push_back(0);
  }
  // Spread the prime factors of the process count over the distributed dimensions.
  for (int factor : {2, 3}) {
    for (int left = procs; left % factor == 0; left /= factor)
      psizes[distributed[uniform(0, static_cast<int64_t>(distributed.size()) - 1)]] *= factor;
  }
  int64_t elements = 1;
  int64_t max_elements = std::max<int64_t>(1, limits_.max_true_extent / child.shape.extent);
  for (int i = 0; i < ndims; ++i) {
    gsizes[i] = static_cast<int>(uniform(1, elements * 10 <= max_elements ? 10 : 2));
    elements *= gsizes[i];
    if (distribs[i] == MPI_DISTRIBUTE_BLOCK && chance(0.3))
      dargs[i] = (gsizes[i] + psizes[i] - 1) / psizes[i] + static_cast<int>(uniform(0, 2));
    if (distribs[i] == MPI_DISTRIBUTE_CYCLIC && chance(0.5)) dargs[i] = static_cast<int>(uniform(1, 3));
  }
  bool fortran = chance(0.5);
  Built b;
  b.inherit(child);
  b.large_form |= large(0.3);
  std::vector<int64_t> large_gsizes(gsizes.begin(), gsizes.end());
  if (b.large_form && child.shape.extent <= limits_.max_true_extent && large(0.3)) {
    // One dimension beyond 2^31 elements in blocks of 2^30: the last of 3 or 4
    // processes owns the few elements past the others' blocks.
    procs = static_cast<int>(large_uniform(3, 4));
    rank = procs - 1;
    ndims = 1;
    large_gsizes = {(procs - 1) * (int64_t{1} << 30) + large_uniform(1, 4)};
    distribs = {MPI_DISTRIBUTE_BLOCK};
    dargs = {1 << 30};
    psizes = {procs};
    gsizes = {-1};  // not representable as an int
    b.beyond_int = true;
  }
#ifdef VENEER_HAVE_LARGE_COUNT
  if (b.large_form) {
    std::vector<MPI_Count> g(large_gsizes.begin(), large_gsizes.end());
    MPI_Type_create_darray_c(procs, rank, ndims, g.data(), distribs.data(), dargs.data(), psizes.data(),
                             fortran ? MPI_ORDER_FORTRAN : MPI_ORDER_C, child.type.get(), b.type.replace());
  } else
#endif
    MPI_Type_create_darray(procs, rank, ndims, gsizes.data(), distribs.data(), dargs.data(), psizes.data(),
                           fortran ? MPI_ORDER_FORTRAN : MPI_ORDER_C, child.type.get(), b.type.replace());
  b.shape = shape_of(b.type.get());
  if (!fits(b.shape)) return child;
  std::vector<std::string> kind_names;
  for (int d : distribs)
    kind_names.push_back(d == MPI_DISTRIBUTE_BLOCK ? "block" : d == MPI_DISTRIBUTE_CYCLIC ? "cyclic" : "none");
  b.description = form("darray", b.large_form) + std::to_string(procs) + ", " + std::to_string(rank) + ", " +
                  std::to_string(ndims) + ", " + list_text(large_gsizes) + ", " + list_text(kind_names) + ", " +
                  list_text(dargs) + ", " + list_text(psizes) + (fortran ? ", fortran, " : ", c, ") +
                  child.description + ")";
  return b;
}

// Odd lower bounds and extents; mostly an extent past the true extent (instances
// apart), sometimes a smaller one (instances interleave, as in FFT transposes).
TypeGenerator::Built TypeGenerator::resized(int depth) {
  Built child = build(depth + 1);
  const TypeShape& c = child.shape;
  int64_t lb = c.lb;
  double r = std::uniform_real_distribution<double>(0, 1)(rng_);
  if (r < 0.4) lb = c.true_lb - (2 * uniform(0, 3) + 1);
  else if (r < 0.7) lb = c.lb + (chance(0.5) ? 1 : -1) * (2 * uniform(0, 4) + 1);
  int64_t extent = c.true_extent + 2 * uniform(0, 3) + 1;
  r = std::uniform_real_distribution<double>(0, 1)(rng_);
  if (r < 0.15) extent = uniform(1, std::max<int64_t>(1, c.true_extent - 1)) | 1;
  else if (r < 0.2) extent = std::max<int64_t>(c.true_extent, 1);
  Built b;
  b.inherit(child);
  b.large_form |= large(0.3);
  if (b.large_form && large(0.3)) {
    // An extent beyond 2^31 (instances far apart), sometimes a far lower bound too.
    extent = large_uniform(kTwo31, int64_t{1} << 40);
    if (large(0.5)) lb = c.true_lb - large_uniform(kTwo31, int64_t{1} << 40);
    b.beyond_int = true;
  }
#ifdef VENEER_HAVE_LARGE_COUNT
  if (b.large_form) MPI_Type_create_resized_c(child.type.get(), lb, extent, b.type.replace());
  else
#endif
    MPI_Type_create_resized(child.type.get(), lb, extent, b.type.replace());
  b.shape = shape_of(b.type.get());
  if (!fits(b.shape)) return child;
  b.description = form("resized", b.large_form) + child.description + ", lb " + std::to_string(lb) + ", extent " +
                  std::to_string(extent) + ")";
  return b;
}

TypeGenerator::Built TypeGenerator::dup(int depth) {
  Built child = build(depth + 1);
  Built b;
  MPI_Type_dup(child.type.get(), b.type.replace());
  b.shape = shape_of(b.type.get());
  b.inherit(child);
  b.description = "dup(" + child.description + ")";
  return b;
}

GeneratedType TypeGenerator::random_type() {
  // Equal odds for every power of two from 64 B to the size limit, so that
  // most types are small and thousands run quickly, yet large ones appear.
  double top = std::log2(static_cast<double>(std::max<int64_t>(limits_.max_size, 128)));
  target_size_ = static_cast<int64_t>(std::exp2(std::uniform_real_distribution<double>(6, top)(rng_)));
  Built b = build(0);
  GeneratedType g;
  if (is_predefined(b.type.get())) {
    if (chance(0.5)) {
      g.description = b.description;
      g.type = std::move(b.type);
      return g;
    }
    Built d;
    MPI_Type_dup(b.type.get(), d.type.replace());
    d.description = "dup(" + b.description + ")";
    b = std::move(d);
  }
  MPI_Datatype t = b.type.get();
  MPI_Type_commit(&t);
  g.description = b.description;
  g.type = std::move(b.type);
  g.large_form = b.large_form;
  g.beyond_int = b.beyond_int;
  return g;
}

GeneratedType TypeGenerator::random_type_at_bottom() {
  target_size_ = 1 << 14;
  GeneratedType g;
  int members = static_cast<int>(uniform(1, 4));
  bool same_type = chance(0.25);
  std::vector<Built> parts;
  std::vector<int> blocklengths;
  std::vector<MPI_Aint> addresses;
  for (int i = 0; i < members; ++i) {
    if (!same_type || i == 0) parts.push_back(build(1));
    const TypeShape& c = parts.back().shape;
    int bl = static_cast<int>(uniform(1, 2));
    if (std::abs(c.extent) > limits_.max_true_extent) bl = 1;  // a far extent (large counts)
    Footprint fp = footprint(c, bl);
    // Cover the bytes the type map really touches as well as those the library
    // believes it does (they differ where the library has a bounds bug), so
    // that nobody reads or writes outside the array.
    std::vector<Segment> map = reference_type_map(parts.back().type.get(), bl);
    if (!map.empty()) {
      int64_t first = fp.start, end = fp.start + fp.length;
      for (const Segment& s : map) {
        first = std::min(first, s.offset);
        end = std::max(end, s.offset + s.length);
      }
      fp = {first, end - first};
    }
    std::vector<unsigned char> array(fp.length + 2 * GeneratedType::guard);
    MPI_Aint address = 0;
    MPI_Get_address(array.data() + GeneratedType::guard, &address);
    blocklengths.push_back(bl);
    addresses.push_back(address - fp.start);
    g.arrays.push_back(std::move(array));
  }
  Built b;
  for (const Built& p : parts) b.inherit(p);
  b.large_form |= large(0.3);
  std::ostringstream os;
#ifdef VENEER_HAVE_LARGE_COUNT
  std::vector<MPI_Count> large_blocklengths(blocklengths.begin(), blocklengths.end());
  std::vector<MPI_Count> large_addresses(addresses.begin(), addresses.end());
#endif
  if (same_type) {
#ifdef VENEER_HAVE_LARGE_COUNT
    if (b.large_form)
      MPI_Type_create_hindexed_c(members, large_blocklengths.data(), large_addresses.data(), parts[0].type.get(),
                                 b.type.replace());
    else
#endif
      MPI_Type_create_hindexed(members, blocklengths.data(), addresses.data(), parts[0].type.get(), b.type.replace());
    os << (b.large_form ? "hindexed_c" : "hindexed") << "@MPI_BOTTOM(" << members << ", " << list_text(blocklengths)
       << ", <addresses of " << members << " arrays>, " << parts[0].description << ")";
  } else {
    std::vector<MPI_Datatype> types;
    for (const Built& p : parts) types.push_back(p.type.get());
#ifdef VENEER_HAVE_LARGE_COUNT
    if (b.large_form)
      MPI_Type_create_struct_c(members, large_blocklengths.data(), large_addresses.data(), types.data(),
                               b.type.replace());
    else
#endif
      MPI_Type_create_struct(members, blocklengths.data(), addresses.data(), types.data(), b.type.replace());
    os << (b.large_form ? "struct_c" : "struct") << "@MPI_BOTTOM(" << members << ", " << list_text(blocklengths)
       << ", <addresses of " << members << " arrays>, [";
    for (int i = 0; i < members; ++i) os << (i ? ", " : "") << parts[i].description;
    os << "])";
  }
  MPI_Datatype t = b.type.get();
  MPI_Type_commit(&t);
  g.type = std::move(b.type);
  g.description = os.str();
  g.large_form = b.large_form;
  g.beyond_int = b.beyond_int;
  return g;
}

int64_t Regions::total() const {
  int64_t n = 0;
  for (const auto& r : regions_) n += static_cast<int64_t>(r.size());
  return n;
}

static uint8_t pattern_byte(uint64_t salt, uint64_t i) {
  return static_cast<uint8_t>(splitmix(splitmix(salt) ^ (i / 8)) >> (8 * (i % 8)));
}

void fill_pattern(std::span<unsigned char> bytes, uint64_t salt) {
  uint64_t key = splitmix(salt);
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word = splitmix(key ^ (i / 8));
    std::memcpy(bytes.data() + i, &word, 8);
  }
  for (; i < bytes.size(); ++i) bytes[i] = pattern_byte(salt, i);
}

void Regions::fill(uint64_t salt) {
  // Each region gets its own salt so that the pattern does not depend on how
  // the bytes are split into regions beyond their order.
  uint64_t k = 0;
  for (auto& r : regions_) fill_pattern(r, salt * 1000003 + k++);
}

std::vector<unsigned char> Regions::snapshot() const {
  std::vector<unsigned char> out;
  out.reserve(total());
  for (const auto& r : regions_) out.insert(out.end(), r.begin(), r.end());
  return out;
}

int64_t first_difference(std::span<const unsigned char> a, std::span<const unsigned char> b) {
  size_t n = std::min(a.size(), b.size());
  if (n > 0 && std::memcmp(a.data(), b.data(), n) == 0) return a.size() == b.size() ? -1 : static_cast<int64_t>(n);
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  return a.size() == b.size() ? -1 : static_cast<int64_t>(n);
}

}  // namespace veneer::test
