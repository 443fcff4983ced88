// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The measured take-over rule for typed sends and receives: per peer level
// (same node, other node), a table of whether Veneer's way (pack, send bytes,
// unpack) beat the library's typed transfer beyond both measured spreads, per
// block class and message size (the calibrated profile's "p2p" rows,
// topology/profile.h). Plain data, no MPI: installed at MPI_Init from the
// profile (algorithms/measured.cpp), asked by the switchboard's p2p_layout.
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace veneer {

// Where a point-to-point peer runs relative to this rank. `unknown`: a
// receive from MPI_ANY_SOURCE on a communicator that spans both levels, or a
// peer outside MPI_COMM_WORLD (spawned or connected processes).
enum class PeerLevel : uint8_t { same_node, other_node, unknown };

// One level's table. Outcome per (block class, message size) point: a win
// (Veneer faster beyond both spreads), a loss, or neither (a tie, or not
// measured).
struct SendTable {
  enum class Outcome : int8_t { loss = -1, none = 0, win = 1 };
  std::vector<int64_t> blocks;    // block classes, bytes, ascending
  std::vector<int64_t> sizes;     // message sizes, bytes, ascending
  std::vector<Outcome> outcomes;  // [block index * sizes.size() + size index]
  // Where the nearest point is a tie (or not measured), the level's block
  // threshold decides, as the single threshold did: the largest block class
  // that won at most sizes (topology::p2p_max_block), from `tie_min_bytes` on.
  int64_t tie_max_block = 0;
  int64_t tie_min_bytes = std::numeric_limits<int64_t>::max();

  // Records a point (grows the axes as needed; a later point replaces an earlier one).
  void set(int64_t block, int64_t bytes, Outcome outcome);
  Outcome at(size_t block_index, size_t size_index) const { return outcomes[block_index * sizes.size() + size_index]; }

  // Whether to take over a message of `bytes` whose mean contiguous block is
  // `mean_block` bytes. Only where measured: of the table points around it
  // (the block classes at or just below and above the mean block, the message
  // sizes at or just below and above `bytes`; beyond the largest class or
  // size, the largest), none may be a loss, and the nearest (in log size
  // along each axis) must be a win, as the collectives' rule between
  // measured sizes (algorithms/cost_model.h), or a tie within the tie
  // threshold above. Below the smallest measured size: no.
  bool takes(double mean_block, int64_t bytes) const;

  // Bounds for the pass-through fast path: no message below min_bytes() and
  // no mean block above max_block() is ever taken. A win at a point reaches
  // half-way (in log size) towards the next class and the size below, so the
  // bounds are the class after the largest winning one (INT64_MAX when the
  // largest class wins somewhere) and the size before the smallest winning
  // one; 0 and INT64_MAX when nothing wins.
  int64_t max_block() const;
  int64_t min_bytes() const;

 private:
  int64_t max_winning_block() const;
  int64_t min_winning_bytes() const;
};

struct SendRules {
  std::optional<SendTable> same_node, other_node;

  // The rule for a peer at `level`. An unknown level takes over only where
  // every measured level does. No table for the level: no take-over.
  bool takes(PeerLevel level, double mean_block, int64_t bytes) const;
  // The loosest bounds over both tables (see SendTable).
  int64_t max_block() const;
  int64_t min_bytes() const;
  bool empty() const { return !same_node && !other_node; }
};

}  // namespace veneer
