// SPDX-License-Identifier: BSD-3-Clause
#include "topology/placement.h"

#ifdef VENEER_HAVE_METIS
#include <metis.h>
#endif

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

namespace veneer::topology {
namespace {

// Weight between v and the vertices of part p.
int64_t weight_to_part(const CommGraph& g, std::span<const int> part_of, int v, int p) {
  int64_t w = 0;
  for (int64_t e = g.offsets[static_cast<size_t>(v)]; e < g.offsets[static_cast<size_t>(v) + 1]; ++e)
    if (part_of[static_cast<size_t>(g.neighbours[static_cast<size_t>(e)])] == p) w += g.weights[static_cast<size_t>(e)];
  return w;
}

int64_t weight_between(const CommGraph& g, int u, int v) {
  for (int64_t e = g.offsets[static_cast<size_t>(u)]; e < g.offsets[static_cast<size_t>(u) + 1]; ++e)
    if (g.neighbours[static_cast<size_t>(e)] == v) return g.weights[static_cast<size_t>(e)];
  return 0;
}

// The number of ways to fill parts of these sizes, capped at `cap` + 1.
int64_t balanced_assignments(std::span<const int> sizes, int64_t cap) {
  double ways = 1;
  int placed = 0;
  for (int s : sizes) {
    for (int k = 1; k <= s; ++k) {
      ways = ways * (placed + k) / k;  // C(placed + s, s), one factor at a time
      if (ways > static_cast<double>(cap)) return cap + 1;
    }
    placed += s;
  }
  return static_cast<int64_t>(ways);
}

// Branch and bound over the balanced assignments, vertex by vertex.
class ExactSearch {
 public:
  ExactSearch(const CommGraph& g, std::span<const int> sizes)
      : g_(g), left_(sizes.begin(), sizes.end()), sizes_(sizes.begin(), sizes.end()) {
    part_.assign(static_cast<size_t>(g.vertices), -1);
  }
  Partition run() {
    descend(0, 0);
    return {best_, best_cut_, PartitionMethod::exact};
  }

 private:
  void descend(int v, int64_t cut) {
    if (cut >= best_cut_) return;
    if (v == g_.vertices) {
      best_cut_ = cut;
      best_ = part_;
      return;
    }
    const auto parts = static_cast<int>(left_.size());
    for (int p = 0; p < parts; ++p) {
      const auto sp = static_cast<size_t>(p);
      if (left_[sp] == 0) continue;
      // Empty parts of one size are interchangeable: try only the first.
      if (left_[sp] == sizes_[sp] && first_empty_of_size(p) != p) continue;
      int64_t added = 0;
      for (int64_t e = g_.offsets[static_cast<size_t>(v)]; e < g_.offsets[static_cast<size_t>(v) + 1]; ++e) {
        const int u = g_.neighbours[static_cast<size_t>(e)];
        if (u < v && part_[static_cast<size_t>(u)] != p) added += g_.weights[static_cast<size_t>(e)];
      }
      part_[static_cast<size_t>(v)] = p;
      --left_[sp];
      descend(v + 1, cut + added);
      ++left_[sp];
      part_[static_cast<size_t>(v)] = -1;
    }
  }
  int first_empty_of_size(int p) const {
    for (int q = 0; q < p; ++q)
      if (sizes_[static_cast<size_t>(q)] == sizes_[static_cast<size_t>(p)] &&
          left_[static_cast<size_t>(q)] == sizes_[static_cast<size_t>(q)])
        return q;
    return p;
  }

  const CommGraph& g_;
  std::vector<int> left_, sizes_, part_, best_;
  int64_t best_cut_ = std::numeric_limits<int64_t>::max();
};

// Moves vertices out of parts above their size into parts below it, each
// time the move that adds least to the cut.
void repair_sizes(const CommGraph& g, std::vector<int>& part_of, std::span<const int> sizes) {
  const auto parts = static_cast<int>(sizes.size());
  std::vector<int> count(static_cast<size_t>(parts), 0);
  for (int p : part_of) ++count[static_cast<size_t>(p)];
  for (;;) {
    int best_v = -1, best_to = -1;
    int64_t best_delta = std::numeric_limits<int64_t>::max();
    for (int v = 0; v < g.vertices; ++v) {
      const int from = part_of[static_cast<size_t>(v)];
      if (count[static_cast<size_t>(from)] <= sizes[static_cast<size_t>(from)]) continue;
      const int64_t own = weight_to_part(g, part_of, v, from);
      for (int to = 0; to < parts; ++to) {
        if (count[static_cast<size_t>(to)] >= sizes[static_cast<size_t>(to)]) continue;
        const int64_t delta = own - weight_to_part(g, part_of, v, to);
        if (delta < best_delta) best_delta = delta, best_v = v, best_to = to;
      }
    }
    if (best_v < 0) return;
    --count[static_cast<size_t>(part_of[static_cast<size_t>(best_v)])];
    ++count[static_cast<size_t>(best_to)];
    part_of[static_cast<size_t>(best_v)] = best_to;
  }
}

// Swaps pairs of vertices between parts while a swap lowers the cut (sizes
// stay). Quadratic per pass: only for graphs of modest size.
void improve_by_swaps(const CommGraph& g, std::vector<int>& part_of) {
  constexpr int kMaxVertices = 512, kMaxPasses = 8;
  if (g.vertices > kMaxVertices) return;
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    bool improved = false;
    for (int u = 0; u < g.vertices; ++u) {
      for (int v = u + 1; v < g.vertices; ++v) {
        const int a = part_of[static_cast<size_t>(u)], b = part_of[static_cast<size_t>(v)];
        if (a == b) continue;
        const int64_t gain = weight_to_part(g, part_of, u, b) - weight_to_part(g, part_of, u, a) +
                             weight_to_part(g, part_of, v, a) - weight_to_part(g, part_of, v, b) -
                             2 * weight_between(g, u, v);
        if (gain > 0) {
          part_of[static_cast<size_t>(u)] = b;
          part_of[static_cast<size_t>(v)] = a;
          improved = true;
        }
      }
    }
    if (!improved) return;
  }
}

}  // namespace

CommGraph make_graph(int vertices, std::span<const Edge> edges) {
  CommGraph g;
  g.vertices = std::max(0, vertices);
  // Merged per unordered pair, in a deterministic order.
  std::map<std::pair<int, int>, int64_t> merged;
  for (const Edge& e : edges) {
    if (e.from == e.to || e.weight <= 0 || e.from < 0 || e.to < 0 || e.from >= g.vertices || e.to >= g.vertices)
      continue;
    merged[{std::min(e.from, e.to), std::max(e.from, e.to)}] += e.weight;
  }
  std::vector<int64_t> degree(static_cast<size_t>(g.vertices) + 1, 0);
  for (const auto& [pair, w] : merged) {
    ++degree[static_cast<size_t>(pair.first)];
    ++degree[static_cast<size_t>(pair.second)];
    g.total_weight += w;
  }
  g.offsets.assign(static_cast<size_t>(g.vertices) + 1, 0);
  for (int v = 0; v < g.vertices; ++v)
    g.offsets[static_cast<size_t>(v) + 1] = g.offsets[static_cast<size_t>(v)] + degree[static_cast<size_t>(v)];
  g.neighbours.resize(static_cast<size_t>(g.offsets.back()));
  g.weights.resize(static_cast<size_t>(g.offsets.back()));
  std::vector<int64_t> next(g.offsets.begin(), g.offsets.end() - 1);
  for (const auto& [pair, w] : merged) {
    for (auto [a, b] : {pair, std::pair{pair.second, pair.first}}) {
      const auto at = static_cast<size_t>(next[static_cast<size_t>(a)]++);
      g.neighbours[at] = b;
      g.weights[at] = w;
    }
  }
  return g;
}

int64_t cut_weight(const CommGraph& g, std::span<const int> part_of) {
  int64_t cut = 0;
  for (int v = 0; v < g.vertices; ++v)
    for (int64_t e = g.offsets[static_cast<size_t>(v)]; e < g.offsets[static_cast<size_t>(v) + 1]; ++e) {
      const int u = g.neighbours[static_cast<size_t>(e)];
      if (u > v && part_of[static_cast<size_t>(u)] != part_of[static_cast<size_t>(v)])
        cut += g.weights[static_cast<size_t>(e)];
    }
  return cut;
}

const char* method_name(PartitionMethod m) {
  switch (m) {
    case PartitionMethod::identity: return "identity";
    case PartitionMethod::exact: return "exact";
    case PartitionMethod::metis: return "METIS";
    case PartitionMethod::greedy: return "greedy";
  }
  return "?";
}

Partition partition_exact(const CommGraph& g, std::span<const int> part_sizes) {
  return ExactSearch(g, part_sizes).run();
}

Partition partition_metis(const CommGraph& g, std::span<const int> part_sizes) {
  const int parts = static_cast<int>(part_sizes.size());
  if (parts <= 1 || g.vertices <= parts) return {};
#ifdef VENEER_HAVE_METIS
  // METIS takes 32-bit weights whose sum must not overflow: scale large ones down (each at least 1).
  int64_t largest = 1;
  for (int64_t w : g.weights) largest = std::max(largest, w);
  const int64_t limit = std::numeric_limits<idx_t>::max() / std::max<int64_t>(1, 4 * g.offsets.back());
  const double scale = largest > limit ? static_cast<double>(limit) / static_cast<double>(largest) : 1.0;
  std::vector<idx_t> xadj(g.offsets.begin(), g.offsets.end()), adjncy(g.neighbours.begin(), g.neighbours.end());
  std::vector<idx_t> adjwgt(g.weights.size());
  for (size_t i = 0; i < g.weights.size(); ++i)
    adjwgt[i] =
        static_cast<idx_t>(std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(g.weights[i]) * scale)));
  std::vector<real_t> target(static_cast<size_t>(parts));
  for (int p = 0; p < parts; ++p)
    target[static_cast<size_t>(p)] =
        static_cast<real_t>(part_sizes[static_cast<size_t>(p)]) / static_cast<real_t>(g.vertices);
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = 1;  // the same answer on every rank
  options[METIS_OPTION_NUMBERING] = 0;
  options[METIS_OPTION_UFACTOR] = 1;  // 0.1% imbalance; repaired to exact sizes below
  idx_t n = g.vertices, constraints = 1, nparts = parts, objective = 0;
  real_t imbalance = 1.001F;
  std::vector<idx_t> part(static_cast<size_t>(g.vertices), 0);
  // Recursive bisection for few parts (METIS's advice), k-way beyond.
  auto* const run = parts <= 8 ? &METIS_PartGraphRecursive : &METIS_PartGraphKway;
  const int rc = run(&n, &constraints, xadj.data(), adjncy.data(), nullptr, nullptr, adjwgt.data(), &nparts,
                     target.data(), &imbalance, options, &objective, part.data());
  if (rc != METIS_OK) return {};
  Partition result{std::vector<int>(part.begin(), part.end()), 0, PartitionMethod::metis};
#else
  // Built without METIS: vertices dealt to the parts in order, then the same repairs.
  Partition result{std::vector<int>(static_cast<size_t>(g.vertices)), 0, PartitionMethod::greedy};
  for (int v = 0, p = 0, used = 0; v < g.vertices; ++v) {
    if (used == part_sizes[static_cast<size_t>(p)]) ++p, used = 0;
    result.part_of[static_cast<size_t>(v)] = p;
    ++used;
  }
#endif
  repair_sizes(g, result.part_of, part_sizes);
  improve_by_swaps(g, result.part_of);
  result.cut = cut_weight(g, result.part_of);
  return result;
}

Partition partition(const CommGraph& g, std::span<const int> part_sizes, int64_t exact_limit) {
  if (balanced_assignments(part_sizes, exact_limit) <= exact_limit) return partition_exact(g, part_sizes);
  return partition_metis(g, part_sizes);
}

bool Placement::moves() const {
  for (size_t r = 0; r < vertex_of_rank.size(); ++r)
    if (vertex_of_rank[r] != static_cast<int>(r)) return true;
  return false;
}

std::string Placement::describe() const {
  char text[160];
  std::snprintf(text, sizeof text, "cut %lld -> %lld of %lld (%s)", static_cast<long long>(cut_before),
                static_cast<long long>(cut_after), static_cast<long long>(total_weight), method_name(method));
  std::string s = text;
  if (socket_cut_before >= 0) {
    std::snprintf(text, sizeof text, "; sockets %lld -> %lld", static_cast<long long>(socket_cut_before),
                  static_cast<long long>(socket_cut_after));
    s += text;
  }
  return s;
}

namespace {

// Re-deals vertices among the ranks of one level. Item i is a rank that plays
// vertex plays[i] from group group[i] (a node, or a socket of one node;
// groups 0 .. groups-1); part[i] is the part the partition gave that vertex,
// parts sized as the groups. Parts go to the groups of their size holding
// most of their vertices; a rank already playing a vertex of its group's
// part keeps it, the others take the rest of the part in ascending order.
// The new vertex of every item.
std::vector<int> redeal(std::span<const int> plays, std::span<const int> group, std::span<const int> part, int groups) {
  const auto g = static_cast<size_t>(groups);
  std::vector<int> sizes(g, 0);
  for (int q : group) ++sizes[static_cast<size_t>(q)];
  std::vector<std::vector<int>> overlap(g, std::vector<int>(g, 0));
  for (size_t i = 0; i < plays.size(); ++i) ++overlap[static_cast<size_t>(part[i])][static_cast<size_t>(group[i])];
  struct Pair {
    int shared, part, group;
  };
  std::vector<Pair> pairs;
  for (int p = 0; p < groups; ++p)
    for (int q = 0; q < groups; ++q)
      if (sizes[static_cast<size_t>(p)] == sizes[static_cast<size_t>(q)])
        pairs.push_back({overlap[static_cast<size_t>(p)][static_cast<size_t>(q)], p, q});
  std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) { return a.shared > b.shared; });
  std::vector<int> group_of_part(g, -1), part_of_group(g, -1);
  for (const Pair& pr : pairs) {
    if (group_of_part[static_cast<size_t>(pr.part)] >= 0 || part_of_group[static_cast<size_t>(pr.group)] >= 0) continue;
    group_of_part[static_cast<size_t>(pr.part)] = pr.group;
    part_of_group[static_cast<size_t>(pr.group)] = pr.part;
  }
  // The vertices each group takes from ranks of other groups.
  std::vector<std::vector<int>> incoming(g);
  for (size_t i = 0; i < plays.size(); ++i) {
    const int to = group_of_part[static_cast<size_t>(part[i])];
    if (to != group[i]) incoming[static_cast<size_t>(to)].push_back(plays[i]);
  }
  for (auto& v : incoming) std::sort(v.begin(), v.end());
  std::vector<size_t> next(g, 0);
  std::vector<int> result(plays.size());
  for (size_t i = 0; i < plays.size(); ++i) {
    const auto q = static_cast<size_t>(group[i]);
    result[i] = part[i] == part_of_group[q] ? plays[i] : incoming[q][next[q]++];
  }
  return result;
}

// The weight between vertices played on different groups, where rank r
// plays vertex_of_rank[r] on group group_of_rank[r].
int64_t cut_as_played(const CommGraph& g, std::span<const int> vertex_of_rank, std::span<const int> group_of_rank) {
  std::vector<int> group_of_vertex(vertex_of_rank.size());
  for (size_t r = 0; r < vertex_of_rank.size(); ++r)
    group_of_vertex[static_cast<size_t>(vertex_of_rank[r])] = group_of_rank[r];
  return cut_weight(g, group_of_vertex);
}

// Within node `ranks` (ascending), the vertices they play partitioned over
// their sockets where that cuts less between the sockets.
bool place_on_sockets(const CommGraph& g, const std::vector<int>& ranks, std::span<const int> socket_of_rank,
                      std::vector<int>& vertex_of_rank, PartitionMethod& method) {
  const size_t m = ranks.size();
  std::vector<int> plays(m), group(m), local_of_socket;
  std::vector<int> local_of_vertex(static_cast<size_t>(g.vertices), -1);
  for (size_t i = 0; i < m; ++i) {
    const auto r = static_cast<size_t>(ranks[i]);
    plays[i] = vertex_of_rank[r];
    local_of_vertex[static_cast<size_t>(plays[i])] = static_cast<int>(i);
    const auto at = std::find(local_of_socket.begin(), local_of_socket.end(), socket_of_rank[r]);
    group[i] = static_cast<int>(at - local_of_socket.begin());
    if (at == local_of_socket.end()) local_of_socket.push_back(socket_of_rank[r]);
  }
  const int groups = static_cast<int>(local_of_socket.size());
  if (groups <= 1) return false;
  std::vector<Edge> edges;
  for (size_t i = 0; i < m; ++i) {
    const auto v = static_cast<size_t>(plays[i]);
    for (int64_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e) {
      const int j = local_of_vertex[static_cast<size_t>(g.neighbours[static_cast<size_t>(e)])];
      if (j > static_cast<int>(i)) edges.push_back({static_cast<int>(i), j, g.weights[static_cast<size_t>(e)]});
    }
  }
  const CommGraph sub = make_graph(static_cast<int>(m), edges);
  const int64_t now = cut_weight(sub, group);
  if (now == 0) return false;
  std::vector<int> sizes(static_cast<size_t>(groups), 0);
  for (int q : group) ++sizes[static_cast<size_t>(q)];
  const Partition part = partition(sub, sizes);
  if (part.part_of.size() != m || part.cut >= now) return false;
  const std::vector<int> dealt = redeal(plays, group, part.part_of, groups);
  for (size_t i = 0; i < m; ++i) vertex_of_rank[static_cast<size_t>(ranks[i])] = dealt[i];
  if (method == PartitionMethod::identity) method = part.method;
  return true;
}

}  // namespace

bool Placement::gains() const {
  return cut_after < cut_before ||
         (cut_after == cut_before && socket_cut_before >= 0 && socket_cut_after < socket_cut_before);
}

Placement place(const CommGraph& g, std::span<const int> node_of_rank, int node_count) {
  return place(g, node_of_rank, node_count, {}, 0);
}

Placement place(const CommGraph& g, std::span<const int> node_of_rank, int node_count,
                std::span<const int> socket_of_rank, int socket_count, bool across_nodes) {
  const int n = g.vertices;
  Placement placed;
  placed.vertex_of_rank.resize(static_cast<size_t>(n));
  std::iota(placed.vertex_of_rank.begin(), placed.vertex_of_rank.end(), 0);
  placed.total_weight = g.total_weight;
  if (static_cast<int>(node_of_rank.size()) != n) return placed;
  const bool by_socket = static_cast<int>(socket_of_rank.size()) == n && socket_count > node_count;
  if (node_count <= 1 && !by_socket) return placed;
  placed.cut_before = placed.cut_after = node_count > 1 ? cut_weight(g, node_of_rank) : 0;

  if (across_nodes && placed.cut_before > 0) {
    std::vector<int> sizes(static_cast<size_t>(node_count), 0);
    for (int q : node_of_rank) ++sizes[static_cast<size_t>(q)];
    const Partition part = partition(g, sizes);
    if (static_cast<int>(part.part_of.size()) == n && part.cut < placed.cut_before) {
      placed.vertex_of_rank = redeal(placed.vertex_of_rank, node_of_rank, part.part_of, node_count);
      placed.cut_after = part.cut;
      placed.method = part.method;
    }
  }
  if (!by_socket) return placed;

  placed.socket_cut_before = cut_weight(g, socket_of_rank);
  std::vector<std::vector<int>> ranks_at(static_cast<size_t>(node_count));
  for (int r = 0; r < n; ++r) ranks_at[static_cast<size_t>(node_of_rank[static_cast<size_t>(r)])].push_back(r);
  for (const auto& ranks : ranks_at) place_on_sockets(g, ranks, socket_of_rank, placed.vertex_of_rank, placed.method);
  placed.socket_cut_after = cut_as_played(g, placed.vertex_of_rank, socket_of_rank);
  return placed;
}

std::vector<int> number_sockets(std::span<const int> node_of_rank, std::span<const int> package_of_rank,
                                int& socket_count) {
  const size_t n = node_of_rank.size();
  std::vector<int> socket_of_rank(n, 0);
  socket_count = 0;
  if (package_of_rank.size() != n) return socket_of_rank;
  std::map<int, bool> unknown;  // node -> some rank's package unknown
  for (size_t r = 0; r < n; ++r) unknown[node_of_rank[r]] = unknown[node_of_rank[r]] || package_of_rank[r] < 0;
  std::map<std::pair<int, int>, int> number;
  for (size_t r = 0; r < n; ++r) {
    const std::pair<int, int> key{node_of_rank[r], unknown[node_of_rank[r]] ? -1 : package_of_rank[r]};
    socket_of_rank[r] = number.try_emplace(key, socket_count).first->second;
    if (socket_of_rank[r] == socket_count) ++socket_count;
  }
  return socket_of_rank;
}

}  // namespace veneer::topology
