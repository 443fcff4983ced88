// SPDX-License-Identifier: BSD-3-Clause
// Node-aware alltoall: every rank hands its whole send buffer to its node
// leader; leaders exchange, per pair of nodes, one message holding all the
// blocks between them; each leader then sorts what arrived by destination and
// hands every local rank its receive buffer. (nodes - 1) network messages
// per node instead of (p - 1) per rank: for small blocks on many ranks per node.
// Not chosen by the model above 64 KiB a block: there every message is
// already long, the node's data is copied three more times, and no profile
// measured it ahead (1.5x behind the library at 128 KiB blocks on 2 hosts,
// 5-13x on one); on a 2-host TCP network it also ran 3x slower at times.
#include <cstring>
#include <vector>

#include "algorithms/primitives.h"

namespace veneer::algorithms {
namespace {

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes), p = s.ranks, nodes = s.nodes;
  const double ppn = s.max_ranks_per_node, b = n / p;
  const double node_phase = (ppn - 1) * m.intra.alpha + (ppn - 1) * n * m.intra.beta;
  return 2 * node_phase + (nodes - 1) * (m.inter.alpha + ppn * ppn * b * m.inter.beta) + 3 * ppn * n * m.intra.beta;
}

int run(const Args& a, const Hierarchy& h) {
  const int p = h.size;
  const int64_t b = a.count, row = p * b;  // a rank's whole send (or receive) buffer
  auto* out = static_cast<std::byte*>(a.rbuf);
  const void* in = a.sbuf == MPI_IN_PLACE ? a.rbuf : a.sbuf;
  const int here = h.node_index, local = h.node_size;
  int made = MPI_SUCCESS;
  const MPI_Comm leaders = h.leaders(&made);  // every rank: made on first use, collectively
  VENEER_TRY(made);
  if (h.node_rank != 0) {
    VENEER_TRY(gather_linear(in, nullptr, row, MPI_BYTE, 1, h.node_comm(), Tag::alltoall));
    return recv(out, row, MPI_BYTE, 0, Tag::alltoall, h.node_comm());
  }
  // rows[i] = the send buffer of my node's local rank i.
  Scratch rows(static_cast<size_t>(local * row));
  VENEER_TRY(gather_linear(in, rows.data(), row, MPI_BYTE, 1, h.node_comm(), Tag::alltoall));
  // arrived[node k] = blocks from k's ranks (i) to mine (t), i-major, at arrived_at[k].
  std::vector<int64_t> arrived_at(static_cast<size_t>(h.node_count) + 1, 0);
  for (int k = 0; k < h.node_count; ++k)
    arrived_at[static_cast<size_t>(k) + 1] =
        arrived_at[static_cast<size_t>(k)] + int64_t{h.node_size_of(k)} * local * b;
  Scratch arrived(static_cast<size_t>(arrived_at.back())), outgoing;
  for (int step = 0; step < h.node_count; ++step) {
    const int to = (here + step) % h.node_count, from = (here - step + h.node_count) % h.node_count;
    const auto& dests = h.node_ranks[static_cast<size_t>(to)];
    outgoing.reset(static_cast<size_t>(local * static_cast<int64_t>(dests.size()) * b));
    std::byte* put = outgoing.data();
    for (int i = 0; i < local; ++i)
      for (int d : dests) {
        std::memcpy(put, rows.data() + i * row + d * b, static_cast<size_t>(b));
        put += b;
      }
    std::byte* into = arrived.data() + arrived_at[static_cast<size_t>(from)];
    if (to == here) std::memcpy(into, outgoing.data(), outgoing.size());
    else
      VENEER_TRY(sendrecv(outgoing.data(), static_cast<int64_t>(outgoing.size()), MPI_BYTE, to, into,
                          arrived_at[static_cast<size_t>(from) + 1] - arrived_at[static_cast<size_t>(from)], MPI_BYTE,
                          from, Tag::alltoall, leaders));
  }
  // Sort by destination: local rank t receives, from every rank x, block (x -> t).
  Scratch sorted(static_cast<size_t>(local * row));
  for (int t = 0; t < local; ++t)
    for (int x = 0; x < p; ++x) {
      const size_t xx = static_cast<size_t>(x);
      const int64_t from = arrived_at[static_cast<size_t>(h.node_of_rank[xx])] + (h.local_rank_of[xx] * local + t) * b;
      std::memcpy(sorted.data() + t * row + x * b, arrived.data() + from, static_cast<size_t>(b));
    }
  std::vector<MPI_Request> requests(static_cast<size_t>(local - 1), MPI_REQUEST_NULL);
  int posting = MPI_SUCCESS;
  for (int t = 1; t < local && posting == MPI_SUCCESS; ++t)
    posting = isend(sorted.data() + t * row, row, MPI_BYTE, t, Tag::alltoall, h.node_comm(),
                    &requests[static_cast<size_t>(t - 1)]);
  std::memcpy(out, sorted.data(), static_cast<size_t>(row));
  return wait_all(requests, posting);
}

}  // namespace

extern const Algorithm alltoall_node_aware_algorithm{
    .collective = Collective::alltoall,
    .name = "node_aware",
    .needs = {.node_data_at_leader = true, .chosen_max_block = int64_t{64} << 10},
    .hierarchical = true,
    .predicted_seconds = predicted,
    .run = run};

}  // namespace veneer::algorithms
