// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// What the quick paths of the collectives with a count or a type per peer
// (Reduce_scatter, Alltoallw, Neighbor_alltoallw) need to know of a
// communicator: how many counts or types to read. Asking the library costs
// 4 ns (MPI_Comm_size) or more (a topology's degrees), so the answers are
// noted per thread, a few communicators at a time.
//
// An answer holds in the epoch it was noted in (g_cache_epoch) and is noted
// only for a communicator whose free forgets it (a watched one:
// algorithms::watch_communicator, whose free clears the answers about it,
// forget_noted, or moves the epoch). A freed handle made again for a
// smaller communicator is then never read with the old answer, which would
// read past its arrays.
#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>

#include "support/config.h"
#include "support/handle.h"

namespace veneer {

enum class CommFact : uint8_t {
  size = 1,        // the group's size (send and recv alike)
  peers = 2,       // Alltoallw's blocks a side on an intracommunicator
  neighbours = 3,  // a neighbourhood collective's blocks sent and received
};

struct NotedComms {
  struct Entry {
    uint64_t comm = 0, epoch = 0;  // epochs start at 1: an empty entry never holds
    CommFact fact = CommFact::size;
    int send = 0, recv = 0;
  };
  std::array<Entry, 4> entries{};
  unsigned next = 0;
};
extern thread_local constinit NotedComms t_noted_comms [[gnu::tls_model("initial-exec")]];

// comm's noted answer for `fact` in this epoch: true with send and recv set.
[[gnu::always_inline]] inline bool noted(MPI_Comm comm, CommFact fact, int& send, int& recv) {
  const uint64_t key = handle_key(comm), epoch = g_cache_epoch.load(std::memory_order_acquire);
  for (const NotedComms::Entry& e : t_noted_comms.entries)
    if (e.comm == key && e.epoch == epoch && e.fact == fact) {
      send = e.send;
      recv = e.recv;
      return true;
    }
  return false;
}

// Notes comm's answer for `fact` in the current epoch, over the oldest
// entry. Only for a watched communicator (see above).
void note(MPI_Comm comm, CommFact fact, int send, int recv);
// Clears this thread's answers about `comm`, which is being freed
// (algorithms::set_comm_freed_hook).
void forget_noted(MPI_Comm comm);

}  // namespace veneer
