// SPDX-License-Identifier: BSD-3-Clause
// The differential test's subjects: a random type with its memory and
// reference type map, and the reference pack and unpack (differential.h).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "test/datatypes/differential.h"

namespace veneer::test::differential {

Options options() {
  Options o;
  if (const char* e = std::getenv("VENEER_DIFF_TYPES")) o.types = std::stoll(e);
  if (const char* e = std::getenv("VENEER_DIFF_SEED")) o.seed = std::stoull(e);
  for (const std::string& a : testing::internal::GetArgvs()) {
    if (a.rfind("--types=", 0) == 0) o.types = std::stoll(a.substr(8));
    if (a.rfind("--seed=", 0) == 0) o.seed = std::stoull(a.substr(7));
  }
  return o;
}

int error_class(int rc) {
  int c = rc;
  PMPI_Error_class(rc, &c);
  return c;
}

std::unique_ptr<Subject> make_subject(uint64_t seed) {
  auto s = std::make_unique<Subject>();
  s->seed = seed;
  veneer::test::TypeLimits limits;
  limits.zero_size_parts = !kMpich;
  limits.long_double = !kMpich;
  limits.large_count = kLargeCount;
  TypeGenerator generator(seed, limits);
  bool bottom = generator.rng()() % 10 == 0;
  s->gen = bottom ? generator.random_type_at_bottom() : generator.random_type();
  s->type = s->gen.type.get();
  s->shape = shape_of(s->type);
  s->count = bottom ? 1 : static_cast<int>(1 + generator.rng()() % 3);
  // A far extent (large-count types) puts the next instance out of reach.
  if (std::abs(s->shape.extent) > limits.max_true_extent) s->count = 1;
  // Where the library's true bounds disagree with the type map (a library
  // bug), use one instance and memory covering both.
  // (MPICH gives some zero-size types a negative true extent, and Open MPI a
  // true lower bound of INT64_MAX: such types touch no memory at all.)
  int64_t lo = 0, hi = 0;
  if (s->shape.true_extent > 0 && s->shape.true_lb <= INT64_MAX - s->shape.true_extent) {
    lo = s->shape.true_lb;
    hi = s->shape.true_lb + s->shape.true_extent;
  }
  std::vector<Segment> one = veneer::test::reference_type_map(s->type, 1, &s->element_ends);
  if (!one.empty()) {
    int64_t first = one[0].offset, end = one[0].offset + one[0].length;
    for (const Segment& g : one) {
      first = std::min(first, g.offset);
      end = std::max(end, g.offset + g.length);
    }
    s->reference_true_lb = first;
    s->reference_true_extent = end - first;
    s->library_bounds_wrong = first != s->shape.true_lb || end - first != s->shape.true_extent;
    if (s->library_bounds_wrong) {
      s->count = 1;
      lo = std::min(lo, first);
      hi = std::max(hi, end);
    }
  }
  s->stream = s->count * s->shape.size;
  if (bottom) {
    s->buf = MPI_BOTTOM;
    for (auto& a : s->gen.arrays) s->memory.add(a);
  } else {
    int64_t spread = (s->count - 1) * s->shape.extent;
    s->lo = lo + std::min<int64_t>(0, spread);
    hi += std::max<int64_t>(0, spread);
    s->storage.resize(hi - s->lo + 2 * kGuard);
    s->buf = reinterpret_cast<void*>(reinterpret_cast<intptr_t>(s->storage.data()) + kGuard - s->lo);
    s->memory.add(s->storage);
  }
  s->map = veneer::test::reference_type_map(s->type, s->count);
  return s;
}

std::string map_problem(const Subject& s) {
  int64_t bytes = 0;
  for (const Segment& g : s.map) {
    bytes += g.length;
    const unsigned char* first = s.at(g.offset);
    bool inside = false;
    for (auto r : s.memory.list()) {
      const unsigned char* begin = r.data() + (s.gen.at_bottom() ? GeneratedType::guard : kGuard);
      const unsigned char* end = r.data() + r.size() - (s.gen.at_bottom() ? GeneratedType::guard : kGuard);
      if (first >= begin && first + g.length <= end) inside = true;
    }
    if (!inside) return "reference type map leaves the true extent at offset " + std::to_string(g.offset);
  }
  if (bytes != s.stream)
    return "reference type map has " + std::to_string(bytes) + " bytes, the library's size says " +
           std::to_string(s.stream);
  return {};
}

bool map_overlaps(const Subject& s) {
  std::vector<Segment> sorted = s.map;
  std::sort(sorted.begin(), sorted.end(), [](const Segment& a, const Segment& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i].offset < sorted[i - 1].offset + sorted[i - 1].length) return true;
  return false;
}

std::vector<unsigned char> reference_pack(const Subject& s) {
  std::vector<unsigned char> out;
  out.reserve(s.stream);
  for (const Segment& g : s.map) out.insert(out.end(), s.at(g.offset), s.at(g.offset) + g.length);
  return out;
}

// Writes the first `length` bytes of `in` where the type map says.
void reference_unpack(Subject& s, const unsigned char* in, int64_t length) {
  for (const Segment& g : s.map) {
    int64_t n = std::min(g.length, length);
    if (n <= 0) return;
    std::memcpy(s.at(g.offset), in, n);
    in += n;
    length -= n;
  }
}

std::string where(const Subject& s, int64_t index) {
  std::ostringstream os;
  if (!s.gen.at_bottom()) {
    os << "memory byte " << index << " (offset " << index - kGuard + s.lo << " from the buffer pointer)";
    return os.str();
  }
  for (size_t k = 0; k < s.gen.arrays.size(); ++k) {
    int64_t n = static_cast<int64_t>(s.gen.arrays[k].size());
    if (index < n) {
      os << "array " << k << " byte " << index - GeneratedType::guard;
      return os.str();
    }
    index -= n;
  }
  return "past the memory";
}

void note(std::vector<std::string>& examples, const std::string& text) {
  if (examples.size() < 5) examples.push_back(text);
}

}  // namespace veneer::test::differential
