// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Shared pieces of the collectives tests: pretend node layouts, the element
// types and ops under test, deterministic fills, comparison with the
// library's result, and a check that all ranks hold the same bits.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "topology/hierarchy.h"

namespace veneer::test {

using algorithms::Call;
using algorithms::Collective;
using topology::Hierarchy;

int world_rank();
int world_size();

// VENEER_TEST_QUICK=1: a thinner matrix (fewer counts, types and ops), for
// launchers whose ranks busy-poll and crawl when they outnumber the cores.
bool quick();

// Hierarchies of MPI_COMM_WORLD for several pretend node layouts (duplicates
// dropped): one node, one rank per node, two per node, nodes of 3,2,3, and two
// interleaved nodes (not node-consecutive).
struct Layout {
  std::string name;
  std::unique_ptr<Hierarchy> h;
};
std::vector<Layout> layouts();

// Commits `type` the way an application under Veneer does: with the library,
// and noted in Veneer's type cache as the interposer's MPI_Type_commit notes
// it, so that the collectives describe it (and pack it) with Veneer's layout.
void commit(MPI_Datatype* type);

// The element types under test and how to fill and compare them.
enum class Kind { integer, floating, pair, affine };

// How values are drawn, so that results stay exact or in range.
enum class Values { any, small, logical, bits, near_one };

struct ElementType {
  std::string name;
  MPI_Datatype type;
  Kind kind;
  int64_t extent;
  // Writes value number `i` of this rank (in every data field of the element).
  std::function<void(void* element, int rank, int64_t i, Values v, uint32_t salt)> set;
  // Tolerance check for floating results; nullptr: compare packed bytes exactly.
  std::function<bool(const void* ours, const void* reference)> close;
};

struct OpCase {
  std::string name;
  MPI_Op op;
  Values values;
};

// The types, and per type the ops MPI defines on it (plus user ops).
struct TypeCase {
  ElementType type;
  std::vector<OpCase> ops;
};
std::vector<TypeCase> reduction_cases();  // quick(): a representative subset
// User ops: commutative a+b+1 on int/double; non-commutative composition of affine maps.
MPI_Op plus_one_op();
MPI_Op affine_op();

// Buffers of n elements, every byte (gaps included) set to `pattern` first.
std::vector<unsigned char> buffer(int64_t count, int64_t extent, unsigned char pattern = 0xA5);
void fill(const ElementType& t, void* buf, int64_t count, int rank, Values v, uint32_t salt);

// Compares `count` elements of ours against the reference (packed bytes, or the type's tolerance).
// Returns an empty string if they agree, else a description of the first difference.
std::string compare(const ElementType& t, const void* ours, const void* reference, int64_t count);
// Bytes of `count` elements as the library packs them.
std::vector<unsigned char> packed(MPI_Datatype type, const void* buf, int64_t count);
uint64_t fingerprint(const std::vector<unsigned char>& bytes);

// Records failures on this rank without stopping the sweep; prints the first few.
struct Failures {
  int count = 0;
  void add(const std::string& what);
};

// Whether every rank passes `value` in (collective over MPI_COMM_WORLD).
bool same_on_all_ranks(const std::vector<uint64_t>& values);

}  // namespace veneer::test
