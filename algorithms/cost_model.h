#pragma once
// The cost model, NCCL-style: a latency (alpha), a per-byte transfer time
// (beta) and a per-byte reduction time (gamma) for each level of the
// machine, and helpers the algorithms' formulas are written with. The
// defaults stand in until a calibrated profile exists.
#include <cstdint>

namespace veneer::algorithms {

struct Shape;

struct LinkCost {
  double alpha = 0;  // seconds per message
  double beta = 0;   // seconds per byte sent
  double gamma = 0;  // seconds per byte reduced
};

struct CostModel {
  LinkCost intra{0.4e-6, 1.0 / 8e9, 1.0 / 6e9};    // shared memory within a node
  LinkCost inter{2.0e-6, 1.0 / 12e9, 1.0 / 6e9};   // the network between nodes
  int nic_streams = 4;            // concurrent inter-node streams a node sustains at full speed each
  // An algorithm replaces the library only when predicted below this
  // fraction of the library's estimate: the model is rough, the library is tuned.
  double library_margin = 0.8;
  double oversubscribed_margin = 0.5;  // stricter when ranks share cores
  // The library runs the flat algorithms with its own tuning; a calibrated
  // profile may say it is slower (factor > 1) or faster than their formulas.
  double library_factor = 1.0;
};

const CostModel& default_cost_model();

int ceil_log2(int64_t p);                                // 0 for p <= 1
int floor_pow2(int p);                                   // largest power of two <= p
// Link of a flat algorithm's step between ranks `distance` apart (recursive
// doubling): within a node if every node is a run of a multiple of 2*distance
// ranks, else the network crowded by all of a node's ranks at once.
LinkCost link_at_distance(const Shape& s, const CostModel& m, int64_t distance);
// Link a flat algorithm's slowest step crosses, when one rank per node crosses at a time (rings, trees).
const LinkCost& flat_link(const Shape& s, const CostModel& m);
// The network when every rank of a node sends across at once (pairwise
// exchanges): beyond nic_streams, the node's ranks share its bandwidth.
LinkCost crowded_link(const Shape& s, const CostModel& m);

// The library's own estimate: the best of the flat algorithms (the library
// has all of them), whatever their preconditions.
double library_seconds(const Shape& s, const CostModel& m);

}  // namespace veneer::algorithms
