// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A seeded generator of random MPI datatypes, in the spirit of MPICH's DTPools:
// every type constructor, nested, with negative strides and displacements,
// odd lower bounds and extents, empty and one-element dimensions, and
// zero-size types. The same seed builds the same type on every rank and in
// every run, so a failure is reproduced from its seed alone.
#include <mpi.h>

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace veneer::test {

// Owns one MPI datatype handle and frees it (through MPI_Type_free) unless it
// is a predefined type.
class TypeHandle {
 public:
  TypeHandle() = default;
  explicit TypeHandle(MPI_Datatype type) : type_(type) {}
  ~TypeHandle() { reset(); }
  TypeHandle(TypeHandle&& other) noexcept : type_(std::exchange(other.type_, MPI_DATATYPE_NULL)) {}
  TypeHandle& operator=(TypeHandle&& other) noexcept {
    if (this != &other) {
      reset();
      type_ = std::exchange(other.type_, MPI_DATATYPE_NULL);
    }
    return *this;
  }
  TypeHandle(const TypeHandle&) = delete;
  TypeHandle& operator=(const TypeHandle&) = delete;

  MPI_Datatype get() const { return type_; }
  // For the output argument of a type constructor.
  MPI_Datatype* replace() {
    reset();
    return &type_;
  }
  void reset();

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

bool is_predefined(MPI_Datatype type);
// The combiner (MPI_COMBINER_NAMED for a predefined type), asked in the
// large-count form where the library has it (MPICH refuses the int form for
// the types of the _c constructors).
int combiner_of(MPI_Datatype type);

// What the library says about a type (PMPI_Type_size_x and friends).
struct TypeShape {
  int64_t size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
};
TypeShape shape_of(MPI_Datatype type);

struct TypeLimits {
  int64_t max_size = 256 << 10;       // bytes of data in one instance
  int64_t max_true_extent = 1 << 20;  // bytes spanned by one instance (and |extent|)
  int max_depth = 4;                  // constructor nesting
  // Zero-size types inside other types. MPICH 4.0 divides by zero packing a
  // struct that holds one (vector(29, 0, 0, subarray(...)), say), so tests
  // against MPICH turn them off; whole zero-size types still come.
  bool zero_size_parts = true;
  // MPI_LONG_DOUBLE and MPI_LONG_DOUBLE_INT. MPICH copies an x87 long double
  // as its 10 significant bytes, so the other 6 of its 16 are not data there.
  bool long_double = true;
  // MPI-4 large-count constructors (MPI_Type_contiguous_c and the rest), for
  // a library that has them (VENEER_HAVE_LARGE_COUNT). Some constructors take
  // their _c form with the same arguments, and some types get arguments
  // beyond 2^31 that touch little memory: huge strides with a count of one,
  // huge displacements, huge extents and array sizes, huge counts of a
  // zero-size type. Such types can have an |extent| far above
  // max_true_extent: use those with a count of one. These choices come from a
  // second random stream, so the rest of each type is as without them.
  bool large_count = false;
};

// A committed random type. Types built from absolute addresses (`at_bottom`)
// are used at MPI_BOTTOM with count 1 and point into `arrays`, which they own;
// each array has `guard` bytes before and after the part the type covers.
struct GeneratedType {
  TypeHandle type;
  std::string description;
  std::vector<std::vector<unsigned char>> arrays;
  static constexpr int64_t guard = 16;
  bool large_form = false;  // some part built by an MPI-4 _c constructor
  bool beyond_int = false;  // some constructor argument beyond 2^31
  bool at_bottom() const { return !arrays.empty(); }
};

class TypeGenerator {
 public:
  explicit TypeGenerator(uint64_t seed, TypeLimits limits = {});

  // A random committed type built from relative displacements.
  GeneratedType random_type();
  // A committed struct (or hindexed) whose members are random types placed at
  // the absolute addresses of separate heap arrays, for use at MPI_BOTTOM.
  GeneratedType random_type_at_bottom();

  std::mt19937_64& rng() { return rng_; }

 private:
  struct Built;
  Built build(int depth);
  Built build_any(int depth);
  Built leaf();
  Built contiguous(int depth);
  Built vector(int depth, bool bytes);
  Built indexed(int depth, bool bytes, bool same_blocklength);
  Built structure(int depth);
  Built subarray(int depth);
  Built darray(int depth);
  Built resized(int depth);
  Built dup(int depth);

  bool fits(const TypeShape& s) const;
  int64_t uniform(int64_t lo, int64_t hi);  // inclusive
  bool chance(double p);
  int pick_count(int64_t unit_size, int64_t unit_span);
  // From the large-count stream; false / lo without TypeLimits::large_count.
  bool large(double p);
  int64_t large_uniform(int64_t lo, int64_t hi);

  std::mt19937_64 rng_;
  std::mt19937_64 large_rng_;
  TypeLimits limits_;
  int64_t target_size_ = 0;  // per-type size goal, so most types stay small
};

// One contiguous run of a type map: `length` bytes at `offset` from the
// buffer pointer.
struct Segment {
  int64_t offset = 0;
  int64_t length = 0;
};

// The hand-written reference: the type map of `count` instances of `type`,
// read back with MPI_Type_get_contents and expanded by the definitions of the
// constructors in the MPI standard (only bounds and extents come from the
// library). Runs in type map order; adjacent runs are merged. If
// `element_ends` is given, it receives, for one instance, the stream position
// after each basic element (where a message may legally end).
std::vector<Segment> reference_type_map(MPI_Datatype type, int64_t count, std::vector<int64_t>* element_ends = nullptr);

// The bytes a type may touch, as a list of spans (with guard bytes around),
// so that tests can fill them with a pattern, snapshot them, and compare.
class Regions {
 public:
  void add(std::span<unsigned char> region) { regions_.push_back(region); }
  const std::vector<std::span<unsigned char>>& list() const { return regions_; }
  int64_t total() const;
  // A pseudo-random pattern determined by `salt` and the regions' sizes.
  void fill(uint64_t salt);
  std::vector<unsigned char> snapshot() const;

 private:
  std::vector<std::span<unsigned char>> regions_;
};

void fill_pattern(std::span<unsigned char> bytes, uint64_t salt);

// Index of the first differing byte of two equally long byte strings, or -1.
int64_t first_difference(std::span<const unsigned char> a, std::span<const unsigned char> b);

}  // namespace veneer::test
