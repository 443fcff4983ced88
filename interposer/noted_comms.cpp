// SPDX-License-Identifier: BSD-3-Clause
#include "interposer/noted_comms.h"

#include "algorithms/decisions.h"

namespace veneer {

thread_local constinit NotedComms t_noted_comms [[gnu::tls_model("initial-exec")]];

void note(MPI_Comm comm, CommFact fact, int send, int recv) {
  int s = 0, r = 0;
  if (noted(comm, fact, s, r) && s == send && r == recv) return;
  algorithms::hold_communicator_state();
  NotedComms& n = t_noted_comms;
  n.entries[n.next++ % n.entries.size()] = {.comm = handle_key(comm),
                                            .epoch = g_cache_epoch.load(std::memory_order_acquire),
                                            .fact = fact,
                                            .send = send,
                                            .recv = recv};
}

void forget_noted(MPI_Comm comm) {
  const uint64_t key = handle_key(comm);
  for (NotedComms::Entry& e : t_noted_comms.entries)
    if (e.comm == key) e = {};
}

}  // namespace veneer
