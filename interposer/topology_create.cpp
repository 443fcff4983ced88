// SPDX-License-Identifier: BSD-3-Clause
// Process topologies created with reorder true: MPI_Dist_graph_create_adjacent,
// MPI_Dist_graph_create, MPI_Cart_create and MPI_Graph_create. Where the
// communicator spans several nodes (pretend nodes count), Veneer partitions
// the communication graph over the nodes (topology/placement.h) and, when
// that cuts less weight between nodes, makes the topology on a reordered
// communicator: PMPI_Comm_split with key = the vertex each process plays,
// then the library's own constructor with reorder false. Every query and
// neighbourhood collective on the result is the library's own answer there.
//
// The process that gets new rank k plays graph vertex k (as the standard
// reads): vertex ids in every list are new ranks, so the lists pass
// unchanged, and only the adjacent form, where a process's lists are its own
// vertex's, hands vertex k's lists (gathered from old rank k) to new rank k.
//
// Where the placement gains nothing, Veneer's answer is the identity: the
// library's constructor with reorder false on the old communicator.
// Everything else goes to the library untouched: reorder false, one node,
// VENEER_PLACEMENT=0 or VENEER_DISABLE=1, arguments Veneer does not read
// (the library then reports its own errors), a Cartesian or graph topology
// over fewer processes than the communicator.
#include <mpi.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/state.h"
#include "support/config.h"
#include "support/log.h"
#include "topology/hierarchy.h"
#include "topology/machine.h"
#include "topology/placement.h"

namespace veneer {
// For the end-of-run report (interposer/report.cpp).
std::string placement_report_text();
}  // namespace veneer

namespace {

using namespace veneer;
using topology::CommGraph;
using topology::Edge;
using topology::Placement;

// The next definition after Veneer's (a tool preloaded behind it), else the library's.
template <class Fn>
Fn next_of(const char* symbol, Fn library) {
  void* f = dlsym(RTLD_NEXT, symbol);
  return f ? reinterpret_cast<Fn>(f) : library;
}
auto next_dist_graph_adjacent() {
  static const auto fn = next_of("MPI_Dist_graph_create_adjacent", &PMPI_Dist_graph_create_adjacent);
  return fn;
}
auto next_dist_graph() {
  static const auto fn = next_of("MPI_Dist_graph_create", &PMPI_Dist_graph_create);
  return fn;
}
auto next_cart() {
  static const auto fn = next_of("MPI_Cart_create", &PMPI_Cart_create);
  return fn;
}
auto next_graph() {
  static const auto fn = next_of("MPI_Graph_create", &PMPI_Graph_create);
  return fn;
}

// The switch: VENEER_DISABLE=1 or VENEER_PLACEMENT=0 turn placement off
// (read at each call: topologies are made rarely).
bool placement_enabled() {
  if (!config().enabled) return false;
  const char* v = std::getenv("VENEER_PLACEMENT");
  return !v || std::strcmp(v, "0") != 0;
}

// What the report shows: how many topologies were placed or left, and the last few cuts.
struct Record {
  std::mutex lock;
  int64_t placed = 0, kept = 0;
  std::vector<std::string> recent;  // at most kRecent
};
constexpr size_t kRecent = 4;
Record& record() {
  static Record r;
  return r;
}

// Whether a byte between nodes costs more than one within a node: the
// calibrated profile's fits where both levels were fitted (a 64 KiB message
// each way), else assumed (with no profile a smaller cut is the gain).
bool network_costs_more() {
  const auto model = algorithms::current_model();
  if (!model || !model->fitted_intra || !model->fitted_inter) return true;
  constexpr double kBytes = 65536;
  return model->inter.alpha + kBytes * model->inter.beta > model->intra.alpha + kBytes * model->intra.beta;
}

// Where placement may apply: comm's hierarchy (its nodes) and the socket of
// every rank, numbered over comm (topology::number_sockets).
struct Levels {
  const topology::Hierarchy* h = nullptr;
  std::vector<int> socket_of_rank;
  int socket_count = 0;
  // "4 ranks on 2 nodes (2,2), node-consecutive, 4 sockets"
  std::string describe() const {
    std::string s = h->describe();
    if (socket_count > h->node_count) s += ", " + std::to_string(socket_count) + " sockets";
    return s;
  }
};

// The package this process runs on, as placement counts it: its pretend
// socket (VENEER_RANKS_PER_SOCKET), else the package holding its whole
// binding (hwloc), else -1 (unbound, or bound across packages).
int my_package(const topology::Hierarchy& h) {
  if (auto k = topology::pretend_socket_size_from_env()) return h.node_rank / *k;
  return topology::machine().bound_package;
}

// The levels of comm where placement may apply (several nodes, or one node
// with several sockets), else nullopt: pass through (*rc: a library error,
// if one happened). Every rank takes the same branches: the node count is
// agreed, the ranks of one node see one machine and one environment, and
// the sockets are gathered (one allgather on comm).
std::optional<Levels> levels_of(MPI_Comm comm, int* rc) {
  if (comm == MPI_COMM_NULL) return std::nullopt;
  const topology::Hierarchy* h = topology::hierarchy(comm, rc);
  if (!h) return std::nullopt;
  const bool sockets_possible = topology::pretend_socket_size_from_env() || topology::machine().packages > 1;
  if (h->node_count <= 1 && !sockets_possible) return std::nullopt;
  Levels l{h, {}, 0};
  const int mine = my_package(*h);
  std::vector<int> packages(static_cast<size_t>(h->size));
  *rc = PMPI_Allgather(&mine, 1, MPI_INT, packages.data(), 1, MPI_INT, comm);
  if (*rc != MPI_SUCCESS) return std::nullopt;
  l.socket_of_rank = topology::number_sockets(h->node_of_rank, packages, l.socket_count);
  if (h->node_count <= 1 && l.socket_count <= 1) return std::nullopt;
  return l;
}

void remember(const char* call, const Levels& l, const Placement& p, bool taken) {
  Record& r = record();
  const std::string line =
      std::string(call) + " on " + l.describe() + ": " + p.describe() + (taken ? ", placed" : ", kept (no gain)");
  {
    const std::lock_guard<std::mutex> hold(r.lock);
    (taken ? r.placed : r.kept) += 1;
    if (r.recent.size() == kRecent) r.recent.erase(r.recent.begin());
    r.recent.push_back(line);
  }
  if (l.h->rank == 0) log(LogLevel::info, "placement: %s", line.c_str());
}

// Veneer's answer for a topology whose graph it read: the placement of `g`
// on the nodes, then the sockets, where it is predicted to gain, else the
// identity (the library is then called with reorder false: Veneer has
// decided, and Open MPI's treematch, which can hang, is not reached). A move
// between nodes is taken where the profile says the network costs more (or
// there is no profile); within a node, a smaller cut between sockets is
// taken as the gain (no profile measures the sockets apart).
std::optional<Placement> worth_placing(const char* call, const Levels& l, const CommGraph& g) {
  const topology::Hierarchy& h = *l.h;
  Placement p = topology::place(g, h.node_of_rank, h.node_count, l.socket_of_rank, l.socket_count);
  if (p.cut_after < p.cut_before && !network_costs_more())
    p = topology::place(g, h.node_of_rank, h.node_count, l.socket_of_rank, l.socket_count, false);
  const bool taken = p.moves() && p.gains();
  remember(call, l, p, taken);
  if (!taken) return std::nullopt;
  return p;
}

// The reordered communicator: this process gets new rank `vertex`.
// RAII so that it is freed once the topology is made on it.
struct Reordered {
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_SUCCESS;
  Reordered(MPI_Comm old, int vertex) { rc = PMPI_Comm_split(old, 0, vertex, &comm); }
  Reordered(const Reordered&) = delete;
  Reordered& operator=(const Reordered&) = delete;
  ~Reordered() {
    if (comm != MPI_COMM_NULL) PMPI_Comm_free(&comm);
  }
};

// What a rank decided for a Cartesian or graph topology.
enum class Decision : int { pass = 0, keep = 1, place = 2 };

// The decision every rank agrees on: the arguments that the standard says are
// the same everywhere hash alike and every rank decided the same; else pass
// (the library sees the call as given). One allreduce.
Decision all_agree(MPI_Comm comm, Decision mine, uint32_t hash) {
  const int h = static_cast<int>(hash & 0x3fffffffU), d = static_cast<int>(mine);
  std::array<int, 4> v{d, -d, h, -h}, all{};
  if (PMPI_Allreduce(v.data(), all.data(), 4, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) return Decision::pass;
  return all[0] == d && -all[1] == d && all[2] == h && -all[3] == h ? mine : Decision::pass;
}

uint32_t fnv(uint32_t h, int value) {
  for (int b = 0; b < 4; ++b) h = (h ^ ((static_cast<uint32_t>(value) >> (8 * b)) & 0xffU)) * 16777619U;
  return h;
}

// ---- MPI_Dist_graph_create_adjacent ----

enum Weights : int { unweighted = 0, weighted = 1, empty = 2 };
int weights_kind(const int* w) {
  if (w == MPI_UNWEIGHTED) return unweighted;
  if (w == MPI_WEIGHTS_EMPTY) return empty;
  return weighted;
}
const int* weights_pointer(int kind, const int* values) {
  if (kind == unweighted) return MPI_UNWEIGHTED;
  if (kind == empty) return MPI_WEIGHTS_EMPTY;
  return values;
}

// One side (in or out) of this process's lists, as the library would read it.
bool side_valid(int degree, const int* ranks, const int* weights, int size) {
  if (degree < 0 || (degree > 0 && !ranks)) return false;
  if (weights_kind(weights) == empty && degree > 0) return false;
  const bool has_weights = weights_kind(weights) == weighted;
  if (has_weights && degree > 0 && !weights) return false;
  for (int i = 0; i < degree; ++i)
    if (ranks[i] < 0 || ranks[i] >= size || (has_weights && weights[i] < 0)) return false;
  return true;
}

// Every process's lists, gathered: per rank its header and its words
// (sources, source weights, destinations, destination weights).
struct AdjacentLists {
  static constexpr int kHeader = 5;  // indegree, outdegree, source kind, destination kind, valid
  std::vector<int> headers;
  std::vector<int> words;
  std::vector<int64_t> first;  // rank -> index of its first word
  int field(int r, int f) const { return headers[kHeader * static_cast<size_t>(r) + static_cast<size_t>(f)]; }
  int indegree(int r) const { return field(r, 0); }
  int outdegree(int r) const { return field(r, 1); }
  int source_kind(int r) const { return field(r, 2); }
  int destination_kind(int r) const { return field(r, 3); }
  bool valid(int r) const { return field(r, 4) != 0; }
  int64_t count(int r) const {
    return int64_t{indegree(r)} * (source_kind(r) == weighted ? 2 : 1) +
           int64_t{outdegree(r)} * (destination_kind(r) == weighted ? 2 : 1);
  }
  const int* sources(int r) const { return words.data() + first[static_cast<size_t>(r)]; }
  const int* source_weights(int r) const { return sources(r) + indegree(r); }
  const int* destinations(int r) const { return source_weights(r) + (source_kind(r) == weighted ? indegree(r) : 0); }
  const int* destination_weights(int r) const { return destinations(r) + outdegree(r); }
};

// Gathers the lists (two allgathers on comm). False: pass through (some
// process's arguments are not valid, or mix weighted and unweighted, or too
// large for one gather); *rc a library error, if one happened.
bool gather_adjacent(MPI_Comm comm, int size, int indegree, const int* sources, const int* sourceweights, int outdegree,
                     const int* destinations, const int* destweights, AdjacentLists& all, int* rc) {
  const bool valid =
      side_valid(indegree, sources, sourceweights, size) && side_valid(outdegree, destinations, destweights, size);
  const std::array<int, AdjacentLists::kHeader> mine{valid ? indegree : 0, valid ? outdegree : 0,
                                                     weights_kind(sourceweights), weights_kind(destweights),
                                                     valid ? 1 : 0};
  all.headers.resize(static_cast<size_t>(AdjacentLists::kHeader) * static_cast<size_t>(size));
  *rc = PMPI_Allgather(mine.data(), AdjacentLists::kHeader, MPI_INT, all.headers.data(), AdjacentLists::kHeader,
                       MPI_INT, comm);
  if (*rc != MPI_SUCCESS) return false;
  // MPI_UNWEIGHTED on all processes or on none (MPI_WEIGHTS_EMPTY goes with either).
  bool any_unweighted = false, any_weighted = false;
  int64_t total = 0;
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  all.first.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    if (!all.valid(r)) return false;
    for (int kind : {all.source_kind(r), all.destination_kind(r)}) {
      any_unweighted = any_unweighted || kind == unweighted;
      any_weighted = any_weighted || kind == weighted;
    }
    all.first[static_cast<size_t>(r)] = total;
    if (total > INT_MAX) return false;
    displs[static_cast<size_t>(r)] = static_cast<int>(total);
    counts[static_cast<size_t>(r)] = static_cast<int>(all.count(r));
    total += all.count(r);
  }
  if ((any_unweighted && any_weighted) || total > INT_MAX) return false;
  std::vector<int> my_words;
  my_words.insert(my_words.end(), sources, sources + indegree);
  if (weights_kind(sourceweights) == weighted) my_words.insert(my_words.end(), sourceweights, sourceweights + indegree);
  my_words.insert(my_words.end(), destinations, destinations + outdegree);
  if (weights_kind(destweights) == weighted) my_words.insert(my_words.end(), destweights, destweights + outdegree);
  all.words.resize(static_cast<size_t>(total));
  int rank = 0;
  *rc = PMPI_Comm_rank(comm, &rank);
  if (*rc != MPI_SUCCESS) return false;
  *rc = PMPI_Allgatherv(my_words.data(), counts[static_cast<size_t>(rank)], MPI_INT, all.words.data(), counts.data(),
                        displs.data(), MPI_INT, comm);
  return *rc == MPI_SUCCESS;
}

// The graph of the lists: every out-edge with its weight, every in-edge with
// its own (both ends declare an edge, so each counts twice; unweighted: 1).
CommGraph graph_of(const AdjacentLists& all, int size) {
  std::vector<Edge> edges;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < all.indegree(r); ++i)
      edges.push_back({all.sources(r)[i], r, all.source_kind(r) == weighted ? all.source_weights(r)[i] : 1});
    for (int i = 0; i < all.outdegree(r); ++i)
      edges.push_back(
          {r, all.destinations(r)[i], all.destination_kind(r) == weighted ? all.destination_weights(r)[i] : 1});
  }
  return topology::make_graph(size, edges);
}

// ---- MPI_Dist_graph_create ----

// Every process's edges, gathered as (source, destination, weight) triples.
// False: pass through (invalid arguments somewhere, weighted mixed with
// unweighted, too large); *rc a library error, if one happened.
bool gather_edges(MPI_Comm comm, int size, int n, const int* nodes, const int* degrees, const int* targets,
                  const int* weights, std::vector<Edge>& edges, bool& any_weighted, int* rc) {
  std::vector<int> triples;
  bool valid = n >= 0 && (n == 0 || (nodes && degrees)) && (weights_kind(weights) != weighted || weights || n == 0);
  int64_t at = 0;
  for (int i = 0; valid && i < n; ++i) {
    valid = nodes[i] >= 0 && nodes[i] < size && degrees[i] >= 0 && (degrees[i] == 0 || targets);
    for (int j = 0; valid && j < degrees[i]; ++j, ++at) {
      const int w = weights_kind(weights) == weighted ? weights[at] : 1;
      valid = targets[at] >= 0 && targets[at] < size && w >= 0 && (weights_kind(weights) != empty);
      triples.insert(triples.end(), {nodes[i], targets[at], w});
    }
  }
  valid = valid && triples.size() <= INT_MAX;
  if (!valid) triples.clear();
  const std::array<int, 3> mine{valid ? 1 : 0, static_cast<int>(triples.size()), weights_kind(weights)};
  std::vector<int> headers(3 * static_cast<size_t>(size));
  *rc = PMPI_Allgather(mine.data(), 3, MPI_INT, headers.data(), 3, MPI_INT, comm);
  if (*rc != MPI_SUCCESS) return false;
  bool any_unweighted = false;
  any_weighted = false;
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    const size_t h = 3 * static_cast<size_t>(r);
    if (!headers[h]) return false;
    any_unweighted = any_unweighted || headers[h + 2] == unweighted;
    any_weighted = any_weighted || headers[h + 2] == weighted;
    if (total > INT_MAX) return false;
    displs[static_cast<size_t>(r)] = static_cast<int>(total);
    counts[static_cast<size_t>(r)] = headers[h + 1];
    total += headers[h + 1];
  }
  if ((any_unweighted && any_weighted) || total > INT_MAX) return false;
  std::vector<int> everything(static_cast<size_t>(total));
  *rc = PMPI_Allgatherv(triples.data(), static_cast<int>(triples.size()), MPI_INT, everything.data(), counts.data(),
                        displs.data(), MPI_INT, comm);
  if (*rc != MPI_SUCCESS) return false;
  edges.reserve(everything.size() / 3);
  for (size_t i = 0; i + 2 < everything.size(); i += 3)
    edges.push_back({everything[i], everything[i + 1], everything[i + 2]});
  return true;
}

// Vertex k's lists from every process's edges, in the order they were
// gathered: for MPI_Dist_graph_create_adjacent, which MPI_Dist_graph_create
// becomes where Veneer decides (the order of MPI_Dist_graph_create's lists is
// the library's to choose; Open MPI's treematch component, which makes it and
// can hang in ompi_comm_nextcid even with reorder false, is not reached).
struct VertexLists {
  std::vector<int> in, in_weights, out, out_weights;
};
VertexLists lists_of_vertex(const std::vector<Edge>& edges, int k) {
  VertexLists l;
  for (const Edge& e : edges) {
    if (e.from == k) {
      l.out.push_back(e.to);
      l.out_weights.push_back(static_cast<int>(e.weight));
    }
    if (e.to == k) {
      l.in.push_back(e.from);
      l.in_weights.push_back(static_cast<int>(e.weight));
    }
  }
  return l;
}
const int* weights_or_marker(bool weighted, const std::vector<int>& w) {
  if (!weighted) return MPI_UNWEIGHTED;
  return w.empty() ? MPI_WEIGHTS_EMPTY : w.data();
}

// ---- MPI_Cart_create ----

// The grid's edges: each process to its neighbours at -1 and +1 in every
// dimension (wrapping where periodic), weighted by the face between them.
// Without the application's domain, Veneer takes it as a cube split evenly
// over the grid: the face normal to dimension d then has an area
// proportional to dims[d], the weight of the edges along d.
std::vector<Edge> grid_edges(int ndims, const int* dims, const int* periods, int vertices) {
  std::vector<Edge> edges;
  std::vector<int> coords(static_cast<size_t>(ndims));
  for (int v = 0; v < vertices; ++v) {
    for (int d = ndims - 1, rest = v; d >= 0; --d) {  // row-major: the last dimension fastest
      coords[static_cast<size_t>(d)] = rest % dims[d];
      rest /= dims[d];
    }
    int64_t stride = 1;
    for (int d = ndims - 1; d >= 0; --d) {
      for (int step : {-1, 1}) {
        int c = coords[static_cast<size_t>(d)] + step;
        if (c < 0 || c >= dims[d]) {
          if (!periods[d]) continue;
          c = (c + dims[d]) % dims[d];
        }
        const int64_t u = v + (c - coords[static_cast<size_t>(d)]) * stride;
        edges.push_back({v, static_cast<int>(u), dims[d]});
      }
      stride *= dims[d];
    }
  }
  return edges;
}

}  // namespace

extern "C" int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[],
                                              const int sourceweights[], int outdegree, const int destinations[],
                                              const int destweights[], MPI_Info info, int reorder,
                                              MPI_Comm* comm_dist_graph) {
  auto pass = [&] {
    return next_dist_graph_adjacent()(comm_old, indegree, sources, sourceweights, outdegree, destinations, destweights,
                                      info, reorder, comm_dist_graph);
  };
  if (!reorder || !placement_enabled()) return pass();
  int levels_rc = MPI_SUCCESS;
  const auto levels = levels_of(comm_old, &levels_rc);
  if (!levels) return levels_rc != MPI_SUCCESS ? levels_rc : pass();
  const topology::Hierarchy* h = levels->h;
  AdjacentLists all;
  int rc = MPI_SUCCESS;
  if (!gather_adjacent(comm_old, h->size, indegree, sources, sourceweights, outdegree, destinations, destweights, all,
                       &rc))
    return rc != MPI_SUCCESS ? rc : pass();
  const auto placed = worth_placing("MPI_Dist_graph_create_adjacent", *levels, graph_of(all, h->size));
  if (!placed)
    return next_dist_graph_adjacent()(comm_old, indegree, sources, sourceweights, outdegree, destinations, destweights,
                                      info, 0, comm_dist_graph);
  const int k = placed->vertex_of_rank[static_cast<size_t>(h->rank)];
  const Reordered reordered(comm_old, k);
  if (reordered.rc != MPI_SUCCESS) return reordered.rc;
  // This process plays vertex k: the lists old rank k gave.
  return next_dist_graph_adjacent()(
      reordered.comm, all.indegree(k), all.sources(k), weights_pointer(all.source_kind(k), all.source_weights(k)),
      all.outdegree(k), all.destinations(k), weights_pointer(all.destination_kind(k), all.destination_weights(k)), info,
      0, comm_dist_graph);
}

extern "C" int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int nodes[], const int degrees[],
                                     const int targets[], const int weights[], MPI_Info info, int reorder,
                                     MPI_Comm* newcomm) {
  auto pass = [&] { return next_dist_graph()(comm_old, n, nodes, degrees, targets, weights, info, reorder, newcomm); };
  if (!reorder || !placement_enabled()) return pass();
  int levels_rc = MPI_SUCCESS;
  const auto levels = levels_of(comm_old, &levels_rc);
  if (!levels) return levels_rc != MPI_SUCCESS ? levels_rc : pass();
  const topology::Hierarchy* h = levels->h;
  std::vector<Edge> edges;
  bool weighted = false;
  int rc = MPI_SUCCESS;
  if (!gather_edges(comm_old, h->size, n, nodes, degrees, targets, weights, edges, weighted, &rc))
    return rc != MPI_SUCCESS ? rc : pass();
  const auto placed = worth_placing("MPI_Dist_graph_create", *levels, topology::make_graph(h->size, edges));
  // Vertex ids are new ranks: the process with new rank k makes vertex k's
  // lists (the identity: on the old communicator, with its own rank as k).
  const int k = placed ? placed->vertex_of_rank[static_cast<size_t>(h->rank)] : h->rank;
  const VertexLists l = lists_of_vertex(edges, k);
  std::optional<Reordered> reordered;
  if (placed) {
    reordered.emplace(comm_old, k);
    if (reordered->rc != MPI_SUCCESS) return reordered->rc;
  }
  return next_dist_graph_adjacent()(placed ? reordered->comm : comm_old, static_cast<int>(l.in.size()), l.in.data(),
                                    weights_or_marker(weighted, l.in_weights), static_cast<int>(l.out.size()),
                                    l.out.data(), weights_or_marker(weighted, l.out_weights), info, 0, newcomm);
}

extern "C" int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder,
                               MPI_Comm* comm_cart) {
  auto pass = [&] { return next_cart()(comm_old, ndims, dims, periods, reorder, comm_cart); };
  if (!reorder || !placement_enabled() || ndims <= 0 || !dims || !periods) return pass();
  int levels_rc = MPI_SUCCESS;
  const auto levels = levels_of(comm_old, &levels_rc);
  if (!levels) return levels_rc != MPI_SUCCESS ? levels_rc : pass();
  const topology::Hierarchy* h = levels->h;
  // Only a grid of exactly the communicator's processes (others get MPI_COMM_NULL: left to the library).
  int64_t vertices = 1;
  uint32_t hash = fnv(2166136261U, ndims);
  for (int d = 0; d < ndims; ++d) {
    vertices = dims[d] > 0 ? vertices * dims[d] : 0;
    if (vertices > h->size) vertices = 0;
    hash = fnv(fnv(hash, dims[d]), periods[d] ? 1 : 0);
  }
  std::optional<Placement> placed;
  Decision mine = Decision::pass;
  if (vertices == h->size) {
    placed = worth_placing("MPI_Cart_create", *levels,
                           topology::make_graph(h->size, grid_edges(ndims, dims, periods, h->size)));
    mine = placed ? Decision::place : Decision::keep;
  }
  const Decision agreed = all_agree(comm_old, mine, hash);
  if (agreed == Decision::pass) return pass();
  if (agreed == Decision::keep) return next_cart()(comm_old, ndims, dims, periods, 0, comm_cart);
  const Reordered reordered(comm_old, placed->vertex_of_rank[static_cast<size_t>(h->rank)]);
  if (reordered.rc != MPI_SUCCESS) return reordered.rc;
  return next_cart()(reordered.comm, ndims, dims, periods, 0, comm_cart);
}

extern "C" int MPI_Graph_create(MPI_Comm comm_old, int nnodes, const int index[], const int edges[], int reorder,
                                MPI_Comm* comm_graph) {
  auto pass = [&] { return next_graph()(comm_old, nnodes, index, edges, reorder, comm_graph); };
  if (!reorder || !placement_enabled() || nnodes <= 0 || !index) return pass();
  int levels_rc = MPI_SUCCESS;
  const auto levels = levels_of(comm_old, &levels_rc);
  if (!levels) return levels_rc != MPI_SUCCESS ? levels_rc : pass();
  const topology::Hierarchy* h = levels->h;
  // Every process passes the whole graph; only one over all of comm's processes is placed.
  std::vector<Edge> list;
  uint32_t hash = fnv(2166136261U, nnodes);
  bool valid = nnodes == h->size && index[nnodes - 1] >= 0 && (index[nnodes - 1] == 0 || edges);
  for (int v = 0; valid && v < nnodes; ++v) {
    const int begin = v ? index[v - 1] : 0;
    valid = begin >= 0 && index[v] >= begin;
    for (int e = begin; valid && e < index[v]; ++e) {
      valid = edges[e] >= 0 && edges[e] < nnodes;
      list.push_back({v, edges[e], 1});
      hash = fnv(fnv(hash, v), edges[e]);
    }
  }
  std::optional<Placement> placed;
  Decision mine = Decision::pass;
  if (valid) {
    placed = worth_placing("MPI_Graph_create", *levels, topology::make_graph(h->size, list));
    mine = placed ? Decision::place : Decision::keep;
  }
  const Decision agreed = all_agree(comm_old, mine, hash);
  if (agreed == Decision::pass) return pass();
  if (agreed == Decision::keep) return next_graph()(comm_old, nnodes, index, edges, 0, comm_graph);
  const Reordered reordered(comm_old, placed->vertex_of_rank[static_cast<size_t>(h->rank)]);
  if (reordered.rc != MPI_SUCCESS) return reordered.rc;
  return next_graph()(reordered.comm, nnodes, index, edges, 0, comm_graph);
}

namespace veneer {
std::string placement_report_text() {
  Record& r = record();
  const std::lock_guard<std::mutex> hold(r.lock);
  if (r.placed + r.kept == 0) return {};
  char counts[160];
  std::snprintf(counts, sizeof counts, "  %-28s %14lld\n  %-28s %14lld\n", "topologies placed",
                static_cast<long long>(r.placed), "topologies kept (no gain)", static_cast<long long>(r.kept));
  std::string text = counts;
  for (const std::string& line : r.recent) text += "    " + line + "\n";
  return text;
}
}  // namespace veneer

#ifdef OPEN_MPI
// ---- Fortran ----
// Open MPI's Fortran bindings call PMPI_* directly, so Fortran programs would
// not reach the entry points above: these convert the arguments as Open MPI's
// binding does (handles with f2c/c2f, LOGICAL as nonzero, MPI_UNWEIGHTED and
// MPI_WEIGHTS_EMPTY as the addresses of its common blocks, ierror optional in
// mpi_f08) and call them. MPICH's bindings already call MPI_*.
extern "C" {
extern int mpi_fortran_unweighted_ __attribute__((weak));
extern int mpi_fortran_weights_empty_ __attribute__((weak));
}

namespace {

using F = MPI_Fint;

void set_error(F* ierror, int rc) {
  if (ierror) *ierror = rc;
}

const int* fortran_weights(const F* w) {
  if (&mpi_fortran_unweighted_ != nullptr && w == &mpi_fortran_unweighted_) return MPI_UNWEIGHTED;
  if (&mpi_fortran_weights_empty_ != nullptr && w == &mpi_fortran_weights_empty_) return MPI_WEIGHTS_EMPTY;
  return w;
}

// After the call (not as an argument beside it: `c` must be read once the call has set it).
void made(int rc, MPI_Comm c, F* out, F* ierror) {
  if (rc == MPI_SUCCESS) *out = PMPI_Comm_c2f(c);
  set_error(ierror, rc);
}

}  // namespace

extern "C" {

void veneer_fortran_cart_create(F* comm_old, F* ndims, F* dims, F* periods, F* reorder, F* comm_cart, F* ierror) {
  std::vector<int> open_or_periodic(static_cast<size_t>(std::max(0, *ndims)));
  for (size_t d = 0; d < open_or_periodic.size(); ++d) open_or_periodic[d] = periods[d] != 0;
  MPI_Comm c = MPI_COMM_NULL;
  const int rc = MPI_Cart_create(PMPI_Comm_f2c(*comm_old), *ndims, dims, open_or_periodic.data(), *reorder != 0, &c);
  made(rc, c, comm_cart, ierror);
}

void veneer_fortran_graph_create(F* comm_old, F* nnodes, F* index, F* edges, F* reorder, F* comm_graph, F* ierror) {
  MPI_Comm c = MPI_COMM_NULL;
  const int rc = MPI_Graph_create(PMPI_Comm_f2c(*comm_old), *nnodes, index, edges, *reorder != 0, &c);
  made(rc, c, comm_graph, ierror);
}

void veneer_fortran_dist_graph_create_adjacent(F* comm_old, F* indegree, F* sources, F* sourceweights, F* outdegree,
                                               F* destinations, F* destweights, F* info, F* reorder, F* comm_dist_graph,
                                               F* ierror) {
  MPI_Comm c = MPI_COMM_NULL;
  const int rc = MPI_Dist_graph_create_adjacent(PMPI_Comm_f2c(*comm_old), *indegree, sources,
                                                fortran_weights(sourceweights), *outdegree, destinations,
                                                fortran_weights(destweights), PMPI_Info_f2c(*info), *reorder != 0, &c);
  made(rc, c, comm_dist_graph, ierror);
}

void veneer_fortran_dist_graph_create(F* comm_old, F* n, F* sources, F* degrees, F* destinations, F* weights, F* info,
                                      F* reorder, F* comm_dist_graph, F* ierror) {
  MPI_Comm c = MPI_COMM_NULL;
  const int rc = MPI_Dist_graph_create(PMPI_Comm_f2c(*comm_old), *n, sources, degrees, destinations,
                                       fortran_weights(weights), PMPI_Info_f2c(*info), *reorder != 0, &c);
  made(rc, c, comm_dist_graph, ierror);
}

}  // extern "C"

// mpif.h and `use mpi` in every name-mangling convention, and mpi_f08 (the same arguments).
#define VENEER_ALIAS(impl, name) extern "C" decltype(impl) name __attribute__((alias(#impl)));
#define VENEER_FORTRAN_NAMES(impl, lower, UPPER) \
  VENEER_ALIAS(impl, lower##_)                   \
  VENEER_ALIAS(impl, lower##__) VENEER_ALIAS(impl, lower) VENEER_ALIAS(impl, UPPER) VENEER_ALIAS(impl, lower##_f08_)
VENEER_FORTRAN_NAMES(veneer_fortran_cart_create, mpi_cart_create, MPI_CART_CREATE)
VENEER_FORTRAN_NAMES(veneer_fortran_graph_create, mpi_graph_create, MPI_GRAPH_CREATE)
VENEER_FORTRAN_NAMES(veneer_fortran_dist_graph_create_adjacent, mpi_dist_graph_create_adjacent,
                     MPI_DIST_GRAPH_CREATE_ADJACENT)
VENEER_FORTRAN_NAMES(veneer_fortran_dist_graph_create, mpi_dist_graph_create, MPI_DIST_GRAPH_CREATE)
#undef VENEER_FORTRAN_NAMES
#undef VENEER_ALIAS
#endif  // OPEN_MPI
