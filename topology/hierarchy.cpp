// SPDX-License-Identifier: BSD-3-Clause
#include "topology/hierarchy.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include "support/config.h"
#include "support/log.h"
#include "topology/mpi_error.h"

namespace veneer::topology {
namespace {

std::atomic<int> g_live{0};
std::atomic<int64_t> g_created{0};

// Every communicator Veneer makes goes through here, so that tests can count them.
int made(int rc) {
  if (rc == MPI_SUCCESS) g_created.fetch_add(1, std::memory_order_relaxed);
  return rc;
}

void free_comm(MPI_Comm& c) {
  if (c != MPI_COMM_NULL) failed(PMPI_Comm_free(&c), "MPI_Comm_free");
  c = MPI_COMM_NULL;
}

// What the hierarchy's attribute holds while a communicator was only seen
// (hierarchy_after_sightings): the count of sightings, shifted up one bit
// and tagged by the low bit (a Hierarchy's address is even).
bool is_sightings(const void* attribute) { return (reinterpret_cast<uintptr_t>(attribute) & 1u) != 0; }
uintptr_t sightings_of(const void* attribute) { return reinterpret_cast<uintptr_t>(attribute) >> 1; }
void* as_attribute(uintptr_t sightings) { return reinterpret_cast<void*>(sightings << 1 | 1u); }

int delete_cached(MPI_Comm /*comm*/, int /*keyval*/, void* attribute, void* /*extra_state*/) {
  if (is_sightings(attribute)) return MPI_SUCCESS;
  // Owning the pointer again frees the hierarchy and its communicators.
  std::unique_ptr<Hierarchy> owned(static_cast<Hierarchy*>(attribute));
  return MPI_SUCCESS;
}

int g_keyval = MPI_KEYVAL_INVALID;
std::once_flag g_keyval_once;

int keyval() {
  std::call_once(g_keyval_once, [] {
    // A duplicated communicator builds its own hierarchy: copying would share
    // sub-communicators between two parents.
    if (failed(PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_cached, &g_keyval, nullptr),
               "MPI_Comm_create_keyval"))
      g_keyval = MPI_KEYVAL_INVALID;
  });
  return g_keyval;
}

// More ranks on this machine than hardware threads: the launcher's count of
// local ranks against the online processors (not this process's binding).
bool locally_oversubscribed() {
  static const bool value = [] {
    const char* local = nullptr;
    for (const char* name :
         {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"})
      if ((local = std::getenv(name))) break;
    const long ranks = local ? std::atol(local) : 0;
    const long processors = sysconf(_SC_NPROCESSORS_ONLN);
    return ranks > 0 && processors > 0 && ranks > processors;
  }();
  return value;
}

// MPI_COMM_WORLD's ranks' real node keys and oversubscription (two words a
// rank, as build_hierarchy gathers them), kept from its build at MPI_Init
// (learn_world_nodes, build_world_hierarchy_keeping_keys), so that a communicator made later (a
// duplicate, a split: one per solve in some codes) learns its nodes without
// an allgather: 2.8 us of the first collective on a duplicate of
// MPI_COMM_WORLD at 2 ranks (Open MPI) went to building its hierarchy. The
// keys are the processes' own (the host name's hash, the launcher's rank
// count), the same at every build, so what is derived is what an allgather
// would give; and every rank of a communicator takes the same way: all
// kept the keys at MPI_Init, before any call of the program's (or none did),
// and all find, or all miss, their ranks among MPI_COMM_WORLD's.
std::mutex g_world_keys_mutex;
std::shared_ptr<const std::vector<int64_t>> g_world_keys;

void keep_world_keys(const std::vector<int64_t>& all) {
  auto kept = std::make_shared<const std::vector<int64_t>>(all);
  std::lock_guard<std::mutex> lock(g_world_keys_mutex);
  g_world_keys = std::move(kept);
}

// Fills `all` (two words for each rank of comm) from MPI_COMM_WORLD's kept
// keys; false where none were kept, a rank of comm is not one of
// MPI_COMM_WORLD's (a job of spawned or connected processes), or the library
// could not translate the ranks.
bool keys_from_world(MPI_Comm comm, std::vector<int64_t>& all) {
  std::shared_ptr<const std::vector<int64_t>> world;
  {
    std::lock_guard<std::mutex> lock(g_world_keys_mutex);
    world = g_world_keys;
  }
  if (!world) return false;
  const int n = static_cast<int>(all.size() / 2), world_size = static_cast<int>(world->size() / 2);
  std::vector<int> in_world(static_cast<size_t>(n));
  if (comm == MPI_COMM_WORLD) {
    if (n != world_size) return false;
    for (int i = 0; i < n; ++i) in_world[static_cast<size_t>(i)] = i;
  } else {
    MPI_Group group = MPI_GROUP_NULL;
    if (failed(PMPI_Comm_group(comm, &group), "MPI_Comm_group")) return false;
    std::optional<std::vector<int>> translated = world_ranks_of(group);
    failed(PMPI_Group_free(&group), "MPI_Group_free");
    if (!translated || translated->size() != in_world.size()) return false;
    in_world = std::move(*translated);
  }
  for (int i = 0; i < n; ++i) {
    const int w = in_world[static_cast<size_t>(i)];
    if (w == MPI_UNDEFINED || w < 0 || w >= world_size) return false;
    all[2 * static_cast<size_t>(i)] = (*world)[2 * static_cast<size_t>(w)];
    all[2 * static_cast<size_t>(i) + 1] = (*world)[2 * static_cast<size_t>(w) + 1];
  }
  return true;
}

}  // namespace

std::optional<std::vector<int>> world_ranks_of(MPI_Group group) {
  MPI_Group world_group = MPI_GROUP_NULL;
  std::optional<std::vector<int>> out;
  int n = 0;
  if (!failed(PMPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group (MPI_COMM_WORLD)") &&
      !failed(PMPI_Group_size(group, &n), "MPI_Group_size")) {
    std::vector<int> ranks(static_cast<size_t>(n)), in_world(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) ranks[static_cast<size_t>(i)] = i;
    if (!failed(PMPI_Group_translate_ranks(group, n, ranks.data(), world_group, in_world.data()),
                "MPI_Group_translate_ranks"))
      out = std::move(in_world);
  }
  if (world_group != MPI_GROUP_NULL) failed(PMPI_Group_free(&world_group), "MPI_Group_free");
  return out;
}

Hierarchy::~Hierarchy() {
  int finalized = 1;
  if (!failed(PMPI_Finalized(&finalized), "MPI_Finalized") && !finalized) {
    free_comm(lane_comm_);
    free_comm(leader_comm_);
    free_comm(node_comm_);
    free_comm(comm_);
  }
  g_live.fetch_sub(1, std::memory_order_relaxed);
}

// Each is made once, by every rank at the same point (see hierarchy.h); a
// failure leaves MPI_COMM_NULL and is not retried, so ranks stay in step; its
// code is kept and handed to every later caller that asks.
MPI_Comm Hierarchy::make_comm(int* rc) const {
  comm_made_ = true;
  comm_rc_ = made(PMPI_Comm_dup(parent, &comm_));
  if (failed(comm_rc_, "MPI_Comm_dup (Veneer's duplicate)")) comm_ = MPI_COMM_NULL;
  report_to(rc, comm_rc_);
  return comm_;
}

MPI_Comm Hierarchy::make_node_comm(int* rc) const {
  node_comm_made_ = true;
  const MPI_Comm all = comm(&node_comm_rc_);
  if (all != MPI_COMM_NULL) {
    node_comm_rc_ = made(PMPI_Comm_split(all, node_index, rank, &node_comm_));
    if (failed(node_comm_rc_, "MPI_Comm_split (node communicator)")) node_comm_ = MPI_COMM_NULL;
  }
  report_to(rc, node_comm_rc_);
  return node_comm_;
}

MPI_Comm Hierarchy::leaders(int* rc) const {
  if (!leaders_made_) {
    leaders_made_ = true;
    const MPI_Comm all = comm(&leaders_rc_);
    if (all != MPI_COMM_NULL) {
      leaders_rc_ = made(PMPI_Comm_split(all, node_rank == 0 ? 0 : MPI_UNDEFINED, node_index, &leader_comm_));
      if (failed(leaders_rc_, "MPI_Comm_split (leader communicator)")) leader_comm_ = MPI_COMM_NULL;
    }
  }
  report_to(rc, leaders_rc_);
  return leader_comm_;
}

MPI_Comm Hierarchy::lanes(int* rc) const {
  if (!lanes_made_) {
    lanes_made_ = true;
    const MPI_Comm all = comm(&lanes_rc_);
    if (all != MPI_COMM_NULL) {
      lanes_rc_ = made(PMPI_Comm_split(all, node_rank, node_index, &lane_comm_));
      if (failed(lanes_rc_, "MPI_Comm_split (lane communicator)")) lane_comm_ = MPI_COMM_NULL;
    }
  }
  report_to(rc, lanes_rc_);
  return lane_comm_;
}

int Hierarchy::communicators_made() const {
  int n = 0;
  for (MPI_Comm c : {comm_, node_comm_, leader_comm_, lane_comm_}) n += c != MPI_COMM_NULL;
  return n;
}

std::string Hierarchy::describe() const {
  std::string s = std::to_string(size) + (size == 1 ? " rank on " : " ranks on ") + std::to_string(node_count) +
                  (node_count == 1 ? " node (" : " nodes (");
  for (int n = 0; n < node_count; ++n) s += (n ? "," : "") + std::to_string(node_size_of(n));
  s += ")";
  s += node_consecutive ? ", node-consecutive" : ", not node-consecutive";
  if (pretend) s += ", pretend nodes";
  return s;
}

std::optional<std::vector<int>> parse_node_sizes(std::string_view text) {
  std::vector<int> sizes;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    auto value = parse_size(item);
    if (!value || *value <= 0 || *value > (1 << 24)) return std::nullopt;
    sizes.push_back(static_cast<int>(*value));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return std::nullopt;  // trailing comma
  }
  if (sizes.empty()) return std::nullopt;
  return sizes;
}

int node_of_index(int index, const std::vector<int>& sizes) {
  int64_t period = 0;
  for (int s : sizes) period += s;
  int64_t round = index / period, within = index % period;
  int node = 0;
  while (within >= sizes[static_cast<size_t>(node)]) within -= sizes[static_cast<size_t>(node++)];
  return static_cast<int>(round * static_cast<int64_t>(sizes.size()) + node);
}

std::optional<std::vector<int>> pretend_node_sizes_from_env() {
  const char* text = std::getenv("VENEER_RANKS_PER_NODE");
  if (!text || !*text) return std::nullopt;
  auto sizes = parse_node_sizes(text);
  if (!sizes) log(LogLevel::warn, "VENEER_RANKS_PER_NODE=\"%s\" is not a size or a comma list; ignored", text);
  return sizes;
}

std::optional<int> pretend_socket_size_from_env() {
  const char* text = std::getenv("VENEER_RANKS_PER_SOCKET");
  if (!text || !*text) return std::nullopt;
  auto size = parse_size(text);
  if (!size || *size <= 0 || *size > (1 << 24)) {
    log(LogLevel::warn, "VENEER_RANKS_PER_SOCKET=\"%s\" is not a positive size; ignored", text);
    return std::nullopt;
  }
  return static_cast<int>(*size);
}

int64_t host_key() {
  static const int64_t key = [] {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (const char* c = name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 0x100000001b3ull;
    return static_cast<int64_t>(h);
  }();
  return key;
}

namespace {
// build_hierarchy; `keep_keys`: MPI_COMM_WORLD's real node keys are kept for
// the communicators made later (keys_from_world).
std::unique_ptr<Hierarchy> build(MPI_Comm comm, std::optional<int> node_key, int* rc, bool keep_keys) {
  // Not an error of the library's: a communicator Veneer does not describe.
  if (comm == MPI_COMM_NULL) return report_to(rc, MPI_ERR_COMM), nullptr;
  int inter = 0;
  if (int e = PMPI_Comm_test_inter(comm, &inter); failed(e, "MPI_Comm_test_inter")) return report_to(rc, e), nullptr;
  if (inter) return report_to(rc, MPI_ERR_COMM), nullptr;
  auto h = std::make_unique<Hierarchy>();
  g_live.fetch_add(1, std::memory_order_relaxed);
  h->parent = comm;
  if (int e = PMPI_Comm_rank(comm, &h->rank); failed(e, "MPI_Comm_rank")) return report_to(rc, e), nullptr;
  if (int e = PMPI_Comm_size(comm, &h->size); failed(e, "MPI_Comm_size")) return report_to(rc, e), nullptr;

  if (!node_key) {
    if (auto sizes = pretend_node_sizes_from_env()) {
      int world_rank = 0;
      if (int e = PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank); failed(e, "MPI_Comm_rank (MPI_COMM_WORLD)"))
        return report_to(rc, e), nullptr;
      node_key = node_of_index(world_rank, *sizes);
    }
  }
  h->pretend = node_key.has_value();
  // Every rank learns every rank's node key, and whether its real node is
  // oversubscribed: from MPI_COMM_WORLD's, where they were gathered and
  // every rank of comm is one of its ranks, else one allgather on the
  // user's communicator; no new communicator either way.
  std::vector<int64_t> all(2 * static_cast<size_t>(h->size));
  if (h->pretend || !keys_from_world(comm, all)) {
    const int64_t mine[2] = {node_key ? std::max(0, *node_key) : host_key(), locally_oversubscribed() ? 1 : 0};
    if (int e = PMPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, comm);
        failed(e, "MPI_Allgather (node keys)"))
      return report_to(rc, e), nullptr;
    if (keep_keys && !h->pretend && comm == MPI_COMM_WORLD) keep_world_keys(all);
  }

  // Nodes are numbered in the order of their lowest rank; a rank's index on
  // its node is its place among the node's ranks in rank order.
  // A node's index by its key: the last node found first (ranks come in
  // runs), then the others in order, and past kScanned nodes a hash map
  // (building the map was a tenth of deciding a new communicator's first
  // call at 2 ranks).
  constexpr size_t kScanned = 64;
  std::vector<int64_t> keys_of_nodes;
  std::unordered_map<int64_t, int> node_of_key;
  int last = -1;
  auto node_for = [&](int64_t key) {
    if (last >= 0 && keys_of_nodes[static_cast<size_t>(last)] == key) return last;
    if (keys_of_nodes.size() <= kScanned) {
      for (size_t n = 0; n < keys_of_nodes.size(); ++n)
        if (keys_of_nodes[n] == key) return last = static_cast<int>(n);
    } else if (auto it = node_of_key.find(key); it != node_of_key.end()) {
      return last = it->second;
    }
    last = static_cast<int>(keys_of_nodes.size());
    keys_of_nodes.push_back(key);
    h->node_ranks.emplace_back();
    if (keys_of_nodes.size() == kScanned + 1)
      for (size_t n = 0; n < keys_of_nodes.size(); ++n) node_of_key.emplace(keys_of_nodes[n], static_cast<int>(n));
    else if (keys_of_nodes.size() > kScanned + 1) node_of_key.emplace(key, last);
    return last;
  };
  h->node_of_rank.resize(static_cast<size_t>(h->size));
  h->local_rank_of.resize(static_cast<size_t>(h->size));
  for (int r = 0; r < h->size; ++r) {
    const int node = node_for(all[2 * static_cast<size_t>(r)]);
    auto& members = h->node_ranks[static_cast<size_t>(node)];
    h->node_of_rank[static_cast<size_t>(r)] = node;
    h->local_rank_of[static_cast<size_t>(r)] = static_cast<int>(members.size());
    members.push_back(r);
    h->oversubscribed = h->oversubscribed || all[2 * static_cast<size_t>(r) + 1] != 0;
  }
  h->node_count = static_cast<int>(h->node_ranks.size());
  h->node_index = h->node_of_rank[static_cast<size_t>(h->rank)];
  h->node_rank = h->local_rank_of[static_cast<size_t>(h->rank)];
  h->node_size = h->node_size_of(h->node_index);
  h->min_ranks_per_node = h->size;
  h->max_ranks_per_node = 0;
  for (const auto& members : h->node_ranks) {
    int n = static_cast<int>(members.size());
    h->min_ranks_per_node = std::min(h->min_ranks_per_node, n);
    h->max_ranks_per_node = std::max(h->max_ranks_per_node, n);
    if (members.back() - members.front() + 1 != n) h->node_consecutive = false;
  }
  h->equal_ranks_per_node = h->min_ranks_per_node == h->max_ranks_per_node;
  report_to(rc, MPI_SUCCESS);
  return h;
}
}  // namespace

std::unique_ptr<Hierarchy> build_hierarchy(MPI_Comm comm, std::optional<int> node_key, int* rc) {
  return build(comm, node_key, rc, false);
}

std::unique_ptr<Hierarchy> build_world_hierarchy_keeping_keys(int* rc) {
  return build(MPI_COMM_WORLD, std::nullopt, rc, true);
}

const Hierarchy* hierarchy(MPI_Comm comm, int* rc) {
  const int key = keyval();
  if (comm == MPI_COMM_NULL) return report_to(rc, MPI_ERR_COMM), nullptr;
  if (key == MPI_KEYVAL_INVALID) return report_to(rc, MPI_ERR_KEYVAL), nullptr;
  void* cached = nullptr;
  int found = 0;
  if (int e = PMPI_Comm_get_attr(comm, key, &cached, &found); failed(e, "MPI_Comm_get_attr"))
    return report_to(rc, e), nullptr;
  if (found && !is_sightings(cached)) return report_to(rc, MPI_SUCCESS), static_cast<Hierarchy*>(cached);
  std::unique_ptr<Hierarchy> built = build_hierarchy(comm, std::nullopt, rc);
  if (!built) return nullptr;
  if (int e = PMPI_Comm_set_attr(comm, key, built.get()); failed(e, "MPI_Comm_set_attr"))
    return report_to(rc, e), nullptr;
  if (logs(LogLevel::debug)) log(LogLevel::debug, "hierarchy: %s", built->describe().c_str());
  return built.release();  // now owned by the attribute
}

const Hierarchy* cached_hierarchy(MPI_Comm comm) {
  const int key = keyval();
  if (comm == MPI_COMM_NULL || key == MPI_KEYVAL_INVALID) return nullptr;
  void* cached = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, key, &cached, &found) != MPI_SUCCESS || !found || is_sightings(cached)) return nullptr;
  return static_cast<const Hierarchy*>(cached);
}

// Counts one more sighting of comm where nothing was built for it; its
// hierarchy (built now, where it was seen `passes` times before) or null.
const Hierarchy* sighted(MPI_Comm comm, uintptr_t passes, bool build, bool* passed) {
  *passed = false;
  const int key = keyval();
  if (comm == MPI_COMM_NULL || key == MPI_KEYVAL_INVALID) return build ? hierarchy(comm) : nullptr;
  void* cached = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, key, &cached, &found) != MPI_SUCCESS) return build ? hierarchy(comm) : nullptr;
  if (found && !is_sightings(cached)) return static_cast<const Hierarchy*>(cached);
  const uintptr_t seen = found ? sightings_of(cached) : 0;
  if (build && seen >= passes) return hierarchy(comm);  // (setting the hierarchy replaces the count)
  *passed = true;                                       // (a count the library could not keep is logged)
  failed(PMPI_Comm_set_attr(comm, key, as_attribute(seen + 1)), "MPI_Comm_set_attr");
  return nullptr;
}

void count_sighting(MPI_Comm comm) {
  bool passed = false;
  sighted(comm, 0, false, &passed);
}

const Hierarchy* hierarchy_after_sightings(MPI_Comm comm, int passes, bool* passed) {
  return sighted(comm, static_cast<uintptr_t>(std::max(passes, 0)), true, passed);
}

int forget_hierarchy(MPI_Comm comm) {
  const int key = keyval();
  if (key == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL) return MPI_SUCCESS;  // nothing was cached
  void* cached = nullptr;
  int found = 0;
  if (int e = PMPI_Comm_get_attr(comm, key, &cached, &found); failed(e, "MPI_Comm_get_attr")) return e;
  if (!found) return MPI_SUCCESS;
  const int e = PMPI_Comm_delete_attr(comm, key);
  failed(e, "MPI_Comm_delete_attr");
  return e;
}

int live_hierarchies() { return g_live.load(std::memory_order_relaxed); }
int64_t communicators_created() { return g_created.load(std::memory_order_relaxed); }

}  // namespace veneer::topology
