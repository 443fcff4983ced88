// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The canonical layout of one instance of an MPI datatype.
//
// A Node describes a stream of bytes: it repeats over `dims` (outermost first,
// signed 64-bit count and byte stride) and, at each repetition, yields either
// one contiguous block of `block` bytes (a leaf) or, if `block` is 0, the streams
// of its `children` one after another (a sequence). A leaf may end in an
// irregular innermost level: `offsets`, a list of displacements each holding
// one block (indexed_block and friends). All displacements are bytes relative
// to the user's buffer pointer, so MPI_BOTTOM and absolute addresses just work.
#include <cstdint>
#include <string>
#include <vector>

namespace veneer::datatypes {

struct Dim {
  int64_t count = 1;
  int64_t stride = 0;
  bool operator==(const Dim&) const = default;
};

struct Node {
  int64_t offset = 0;            // byte displacement of the first repetition
  std::vector<Dim> dims;         // repetitions, outermost first
  int64_t block = 0;             // leaf: contiguous bytes per element; 0 for a sequence
  std::vector<int64_t> offsets;  // leaf: optional irregular innermost level
  std::vector<Node> children;    // sequence: parts, each with its own offset
  int64_t unit = 0;              // packed bytes per repetition of dims

  bool is_leaf() const { return block > 0; }
  // Packed bytes of the whole node.
  int64_t bytes() const {
    int64_t n = unit;
    for (const Dim& d : dims) n *= d.count;
    return n;
  }
  // Number of contiguous blocks the node touches (for the take-over rules).
  int64_t blocks() const;
  bool operator==(const Node&) const = default;
};

// The bytes `count` instances of a type touch, relative to the buffer
// pointer: [low, low + bytes). Extents and lower bounds may be negative.
struct Span {
  int64_t low = 0;
  int64_t bytes = 0;
};

struct Layout {
  Node root;
  int64_t size = 0;  // MPI_Type_size
  int64_t lb = 0;    // MPI_Type_get_extent
  int64_t extent = 0;
  int64_t true_lb = 0;  // MPI_Type_get_true_extent
  int64_t true_extent = 0;
  // One instance is a single block at true_lb and instances abut (size == extent):
  // `count` instances are one contiguous run of count*size bytes.
  bool contiguous = false;
  int64_t block_count = 0;  // contiguous blocks per instance
  // Mean contiguous block in bytes (size / block_count), for the take-over rules.
  int64_t mean_block() const { return block_count ? size / block_count : 0; }
  // `count` instances are one contiguous run of bytes, starting at true_lb.
  bool one_run(int64_t count) const { return contiguous || (count == 1 && block_count == 1); }
  // The memory `count` instances touch (none for count <= 0).
  Span span(int64_t count) const {
    if (count <= 0) return {};
    const int64_t reach = (count - 1) * extent;
    const int64_t low = true_lb + (reach < 0 ? reach : 0);
    return {low, true_extent + (reach < 0 ? -reach : reach)};
  }
  std::string describe() const;  // human-readable, for logs and failing tests
};

// Builds the derived fields (unit, sizes) bottom-up and simplifies the tree:
// drops empty parts and count-1 dimensions, merges abutting blocks and
// dimensions, turns regular sequences into dimensions and uniform block lists
// into leaves with offsets. The byte stream is unchanged.
void simplify(Node& node);
// Fills Layout::contiguous and block_count from root/size/extent.
void finish(Layout& layout);

std::string describe(const Node& node);

}  // namespace veneer::datatypes
