// SPDX-License-Identifier: BSD-3-Clause
#include "topology/peer_level.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "topology/hierarchy.h"
#include "topology/mpi_error.h"

namespace veneer::topology {
namespace {

// One communicator's peers: their common level (unknown when they differ),
// and each one's when they differ.
struct PeerLevels {
  PeerLevel common = PeerLevel::unknown;
  int hosts = 0;                   // MPI_COMM_WORLD's only: the hosts its ranks run on
  std::vector<PeerLevel> of_rank;  // empty when every peer shares `common`
  PeerLevel at(int peer) const {
    if (peer == MPI_ANY_SOURCE || of_rank.empty()) return common;
    return peer >= 0 && static_cast<size_t>(peer) < of_rank.size() ? of_rank[static_cast<size_t>(peer)]
                                                                   : PeerLevel::unknown;
  }
};

// MPI_COMM_WORLD's, each world rank's level relative to this rank: set at
// MPI_Init before other threads call, read after.
std::shared_ptr<const PeerLevels> g_world;

int delete_levels(MPI_Comm /*comm*/, int /*keyval*/, void* attribute, void* /*extra_state*/) {
  std::unique_ptr<PeerLevels> owned(static_cast<PeerLevels*>(attribute));
  return MPI_SUCCESS;
}

int g_keyval = MPI_KEYVAL_INVALID;
std::once_flag g_keyval_once;
std::mutex g_build_mutex;  // one builder per communicator at a time

int keyval() {
  std::call_once(g_keyval_once, [] {
    if (failed(PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_levels, &g_keyval, nullptr),
               "MPI_Comm_create_keyval"))
      g_keyval = MPI_KEYVAL_INVALID;
  });
  return g_keyval;
}

// Fills `common` from of_rank, dropping of_rank when every peer agrees.
void settle(PeerLevels& l) {
  l.common = l.of_rank.empty() ? PeerLevel::unknown : l.of_rank.front();
  for (PeerLevel v : l.of_rank)
    if (v != l.common) {
      l.common = PeerLevel::unknown;
      return;
    }
  l.of_rank.clear();
}

// comm's peers (its remote group for an intercommunicator) through the world map.
std::unique_ptr<PeerLevels> build(MPI_Comm comm, const PeerLevels& world) {
  int inter = 0;
  if (failed(PMPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter")) return nullptr;
  MPI_Group peers = MPI_GROUP_NULL;
  if (failed(inter ? PMPI_Comm_remote_group(comm, &peers) : PMPI_Comm_group(comm, &peers), "MPI_Comm_group"))
    return nullptr;
  std::unique_ptr<PeerLevels> out;
  if (const std::optional<std::vector<int>> in_world = world_ranks_of(peers)) {
    const size_t n = in_world->size();
    out = std::make_unique<PeerLevels>();
    out->of_rank.resize(n, PeerLevel::unknown);
    for (size_t i = 0; i < n; ++i) {
      const int w = (*in_world)[i];
      out->of_rank[i] = w == MPI_UNDEFINED ? PeerLevel::unknown : world.at(w);
    }
    settle(*out);
  }
  failed(PMPI_Group_free(&peers), "MPI_Group_free");
  return out;
}

}  // namespace

bool learn_world_nodes(int* rc) {
  g_world.reset();
  std::unique_ptr<Hierarchy> h = build_world_hierarchy_keeping_keys(rc);
  if (!h) return false;
  auto world = std::make_shared<PeerLevels>();
  world->of_rank.reserve(h->node_of_rank.size());
  for (int node : h->node_of_rank)
    world->of_rank.push_back(node == h->node_index ? PeerLevel::same_node : PeerLevel::other_node);
  world->hosts = h->node_count;
  if (h->pretend) {
    // Pretend nodes: the hosts themselves, by their names' keys.
    std::vector<int64_t> keys(h->node_of_rank.size());
    const int64_t mine = host_key();
    if (int e = PMPI_Allgather(&mine, 1, MPI_INT64_T, keys.data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
        failed(e, "MPI_Allgather (host keys)")) {
      if (rc) *rc = e;
      return false;
    }
    std::sort(keys.begin(), keys.end());
    world->hosts = static_cast<int>(std::unique(keys.begin(), keys.end()) - keys.begin());
  }
  settle(*world);
  g_world = std::move(world);
  return true;
}

void forget_world_nodes() { g_world.reset(); }

int world_host_count() {
  const PeerLevels* world = g_world.get();
  return world ? world->hosts : 0;
}

PeerLevel peer_level(MPI_Comm comm, int peer) {
  const PeerLevels* world = g_world.get();
  if (!world || comm == MPI_COMM_NULL) return PeerLevel::unknown;
  if (comm == MPI_COMM_WORLD) return world->at(peer);
  const int key = keyval();
  if (key == MPI_KEYVAL_INVALID) return PeerLevel::unknown;
  void* cached = nullptr;
  int found = 0;
  if (failed(PMPI_Comm_get_attr(comm, key, &cached, &found), "MPI_Comm_get_attr")) return PeerLevel::unknown;
  if (!found) {
    // Built once per communicator; the attribute is never replaced, so a
    // pointer read without the lock stays valid until the communicator is freed.
    std::lock_guard<std::mutex> lock(g_build_mutex);
    if (failed(PMPI_Comm_get_attr(comm, key, &cached, &found), "MPI_Comm_get_attr")) return PeerLevel::unknown;
    if (!found) {
      std::unique_ptr<PeerLevels> built = build(comm, *world);
      if (!built || failed(PMPI_Comm_set_attr(comm, key, built.get()), "MPI_Comm_set_attr")) return PeerLevel::unknown;
      cached = built.release();  // now owned by the attribute
    }
  }
  return static_cast<const PeerLevels*>(cached)->at(peer);
}

}  // namespace veneer::topology
