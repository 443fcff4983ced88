// SPDX-License-Identifier: BSD-3-Clause
// veneer-halo3d: the halo exchange of a periodic 3-D structured-grid code.
//
// Every rank owns a block of n0 x n1 x n2 cells (q doubles per cell,
// interleaved, so the innermost dimension is q doubles) inside a halo of
// width r, and fills its halo from all 26 neighbours (6 faces, 12 edges,
// 8 corners), each region described by MPI_Type_create_subarray on the whole
// local array. Three ways of exchanging are timed: Isend/Irecv, one
// MPI_Neighbor_alltoallw on a distributed-graph communicator, and MPI_Pack
// into one buffer + MPI_Alltoallv of MPI_PACKED + MPI_Unpack.
//
// It is a plain MPI program: run it as is for the library's numbers and under
// LD_PRELOAD=libveneer.so for Veneer's. Every halo cell is checked after
// every exchange against a value computed from its global position, so a
// wrong packer cannot produce a number.
//
// --paired times both in one run: every iteration exchanges once through the
// MPI_ entry points (Veneer's, when it is preloaded) and once through the
// PMPI_ ones (the library's own, past Veneer), alternating which goes first,
// both verified; it prints the medians and their ratio. Without Veneer
// preloaded both are the library's, and the ratio shows the noise.
//
// --dims X,Y,Z sets the process grid (default: MPI_Dims_create). --reorder
// first makes a distributed graph of the 26 neighbours over MPI_COMM_WORLD,
// weighted by the cells each exchange carries, with reorder true, and
// decomposes the domain by the rank in it (the process with new rank k
// computes block k): a library or a preloaded Veneer that places ranks moves
// neighbours onto one node. Launched round-robin over nodes, it shows what
// placement gains.
//
// With --memory device the grid lives in device memory (bench/device_memory.h:
// CUDA, or the emulator in CI) and a fourth method is timed: what GPU codes
// do by hand when their library cannot read device memory: every region
// copied with 2-D device copies (cudaMemcpy2DAsync, one per z-plane) into
// pinned host memory, 26 contiguous sends, and 2-D copies back. The grid is
// copied to and from the device around each exchange, outside the timing.

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/device_memory.h"

namespace {

using veneer::bench::DeviceBuffer;
using veneer::kernels::DeviceRuntime;

// Dimension 0 varies slowest (z), dimension 2 fastest (x); the q doubles of a
// cell follow dimension 2.
using Index3 = std::array<int64_t, 3>;
using Offset3 = std::array<int, 3>;

constexpr int kNeighbours = 26;
constexpr double kPoison = -1.0;  // never a pattern value (those are >= 1)

const char* const kUsage =
    "usage: veneer-halo3d [--n N | --nx X --ny Y --nz Z] [--r R] [--q Q]\n"
    "                     [--iterations I] [--warmup W]\n"
    "                     [--method isend|neighbor|alltoallv|handpacked|all] [--json FILE]\n"
    "                     [--memory host|device] [--cuda-aware auto|yes|no] [--paired]\n"
    "                     [--dims X,Y,Z] [--reorder]\n"
    "  --n N          local interior cells per dimension (default 24)\n"
    "  --nx/--ny/--nz local interior cells along x (fastest), y, z\n"
    "  --r R          halo radius in cells (default 1, at most the local size)\n"
    "  --q Q          doubles per cell, interleaved (default 1)\n"
    "  --iterations I timed exchanges per method (default 10)\n"
    "  --warmup W     untimed (but verified) exchanges first (default 2)\n"
    "  --json FILE    append one JSON line with the results (rank 0)\n"
    "  --memory M     where the grid lives: host (default) or device (GPU)\n"
    "  --cuda-aware A whether the library reads device memory: ask it (auto),\n"
    "                 or say so (yes: the emulator then lets it)\n"
    "  --dims X,Y,Z   process grid (product = ranks; default MPI_Dims_create)\n"
    "  --reorder      ranks from a weighted distributed graph made with reorder true\n"
    "  --paired       every iteration exchanges through MPI_ (Veneer, if preloaded)\n"
    "                 and through PMPI_ (the library), alternating: medians, ratio\n"
    "  handpacked     (device memory only) 2-D device copies of every region to\n"
    "                 pinned host memory, contiguous sends, 2-D copies back\n";

struct Options {
  Index3 cells{24, 24, 24};
  int64_t radius = 1;
  int64_t quantities = 1;
  int64_t iterations = 10;
  int64_t warmup = 2;
  std::vector<std::string> methods{"isend", "neighbor", "alltoallv"};
  bool all_methods = true;
  std::string json_path;
  bool device = false;
  int cuda_aware = -1;    // -1: ask the library
  bool paired = false;    // time MPI_ and PMPI_ in the same run
  Offset3 dims{0, 0, 0};  // process grid, z y x (0: MPI_Dims_create)
  bool reorder = false;   // ranks from a distributed graph made with reorder true
};

std::optional<int64_t> parse_count(const char* text, int64_t min_value) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < min_value) return std::nullopt;
  return value;
}

// Returns the options, or an error message (empty for --help).
std::pair<std::optional<Options>, std::string> parse_options(int argc, char** argv) {
  Options o;
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    if (flag == "--help" || flag == "-h") return {std::nullopt, ""};
    if (flag == "--paired") {
      o.paired = true;
      continue;
    }
    if (flag == "--reorder") {
      o.reorder = true;
      continue;
    }
    if (a + 1 >= argc) return {std::nullopt, "missing value after " + flag};
    const char* value = argv[++a];
    // Reads the value as a count of at least min_value into `into`.
    std::string bad = "bad value '" + std::string(value) + "' for " + flag;
    auto read = [&](int64_t min_value, int64_t& into) {
      auto v = parse_count(value, min_value);
      if (v) into = *v;
      return v.has_value();
    };
    bool ok = true;
    if (flag == "--n" || flag == "-n") {
      ok = read(1, o.cells[0]);
      o.cells[1] = o.cells[2] = o.cells[0];
    } else if (flag == "--nx") {
      ok = read(1, o.cells[2]);
    } else if (flag == "--ny") {
      ok = read(1, o.cells[1]);
    } else if (flag == "--nz") {
      ok = read(1, o.cells[0]);
    } else if (flag == "--r" || flag == "-r") {
      ok = read(1, o.radius);
    } else if (flag == "--q" || flag == "-q") {
      ok = read(1, o.quantities);
    } else if (flag == "--iterations" || flag == "-i") {
      ok = read(1, o.iterations);
    } else if (flag == "--warmup") {
      ok = read(0, o.warmup);
    } else if (flag == "--method" || flag == "-m") {
      std::string_view m = value;
      if (m == "all") {
        o.methods = {"isend", "neighbor", "alltoallv"};
        o.all_methods = true;
      } else if (m == "isend" || m == "neighbor" || m == "alltoallv" || m == "handpacked") {
        o.methods = {std::string(m)};
        o.all_methods = false;
      } else {
        return {std::nullopt, "unknown method '" + std::string(m) + "'"};
      }
    } else if (flag == "--dims") {
      // X,Y,Z: x fastest, stored z y x like the cells.
      int x = 0, y = 0, z = 0, used = 0;
      ok = std::sscanf(value, "%d,%d,%d%n", &x, &y, &z, &used) == 3 && value[used] == '\0' && x > 0 && y > 0 && z > 0;
      o.dims = {z, y, x};
    } else if (flag == "--json") {
      o.json_path = value;
    } else if (flag == "--memory") {
      std::string_view m = value;
      if (m != "host" && m != "device") return {std::nullopt, bad};
      o.device = m == "device";
    } else if (flag == "--cuda-aware") {
      std::string_view m = value;
      if (m != "auto" && m != "yes" && m != "no") return {std::nullopt, bad};
      o.cuda_aware = m == "auto" ? -1 : (m == "yes" ? 1 : 0);
    } else {
      return {std::nullopt, "unknown option " + flag};
    }
    if (!ok) return {std::nullopt, bad};
  }
  for (int k = 0; k < 3; ++k)
    if (o.radius > o.cells[k]) return {std::nullopt, "the halo radius must not exceed the local size in any dimension"};
  if (!o.device && !o.all_methods && o.methods[0] == "handpacked")
    return {std::nullopt, "the handpacked method needs --memory device"};
  return {o, ""};
}

// Owns a committed MPI datatype.
class Datatype {
 public:
  Datatype() = default;
  explicit Datatype(MPI_Datatype type) : type_(type) {}
  Datatype(Datatype&& other) noexcept : type_(std::exchange(other.type_, MPI_DATATYPE_NULL)) {}
  Datatype& operator=(Datatype&& other) noexcept {
    std::swap(type_, other.type_);
    return *this;
  }
  Datatype(const Datatype&) = delete;
  Datatype& operator=(const Datatype&) = delete;
  ~Datatype() {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// The MPI calls an exchange makes: through the MPI_ entry points (Veneer's
// when it is preloaded: the symbols resolve to it) or straight to the
// library's PMPI_ ones.
struct Calls {
  const char* name;
  decltype(&MPI_Irecv) irecv;
  decltype(&MPI_Isend) isend;
  decltype(&MPI_Waitall) waitall;
  decltype(&MPI_Neighbor_alltoallw) neighbor_alltoallw;
  decltype(&MPI_Pack) pack;
  decltype(&MPI_Alltoallv) alltoallv;
  decltype(&MPI_Unpack) unpack;
};
const Calls kMpiCalls{"MPI_",    &MPI_Irecv,     &MPI_Isend, &MPI_Waitall, &MPI_Neighbor_alltoallw,
                      &MPI_Pack, &MPI_Alltoallv, &MPI_Unpack};
const Calls kLibraryCalls{"PMPI_",    &PMPI_Irecv,     &PMPI_Isend, &PMPI_Waitall, &PMPI_Neighbor_alltoallw,
                          &PMPI_Pack, &PMPI_Alltoallv, &PMPI_Unpack};

// Owns a communicator we created.
class Communicator {
 public:
  Communicator() = default;
  explicit Communicator(MPI_Comm comm) : comm_(comm) {}
  Communicator(Communicator&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}
  Communicator& operator=(Communicator&& other) noexcept {
    std::swap(comm_, other.comm_);
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

struct Box {
  Index3 start;
  Index3 size;
  int64_t cells() const { return size[0] * size[1] * size[2]; }
};

// The 26 neighbour directions in one fixed order (z slowest), the same on
// every rank: send i, receive i and the tags of the Isend method follow it.
std::array<Offset3, kNeighbours> neighbour_directions() {
  std::array<Offset3, kNeighbours> dirs{};
  int i = 0;
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx)
        if (dz != 0 || dy != 0 || dx != 0) dirs[i++] = {dz, dy, dx};
  return dirs;
}

// The local array of one rank: interior cells plus halo, and the pattern.
class Field {
 public:
  Field(const Options& o, const Offset3& process_grid, const Offset3& coords)
      : n_(o.cells), r_(o.radius), q_(o.quantities) {
    for (int k = 0; k < 3; ++k) {
      extent_[k] = n_[k] + 2 * r_;
      global_[k] = n_[k] * process_grid[k];
      first_global_[k] = n_[k] * coords[k];
    }
    values_.assign(static_cast<size_t>(extent_[0] * extent_[1] * extent_[2] * q_), 0.0);
  }

  // Where the exchange reads and writes: the host array, or its device copy.
  double* data() { return device_.get() ? reinterpret_cast<double*>(device_.get()) : values_.data(); }
  const Index3& extent() const { return extent_; }
  size_t bytes() const { return values_.size() * sizeof(double); }

  // Keeps the grid in device memory; false if it cannot be allocated.
  bool place_on_device(DeviceRuntime& rt) {
    rt_ = &rt;
    device_ = DeviceBuffer(rt, DeviceBuffer::Kind::device, bytes());
    return device_.get() != nullptr;
  }
  // Host array -> device copy before an exchange, and back after it.
  bool upload() { return !rt_ || veneer::bench::upload(*rt_, device_.get(), values_.data(), bytes()); }
  bool download() { return !rt_ || veneer::bench::download(*rt_, values_.data(), device_.get(), bytes()); }
  int64_t quantities() const { return q_; }

  // Largest pattern value for `exchanges` exchanges; must stay below 2^53 so
  // that every value is exact.
  double largest_value(int64_t exchanges) const {
    return static_cast<double>(exchanges) * static_cast<double>(global_[0]) * static_cast<double>(global_[1]) *
           static_cast<double>(global_[2]) * static_cast<double>(q_);
  }

  // Interior cells a rank sends in direction d: the slab of width r on that side.
  Box send_box(const Offset3& d) const {
    Box b{};
    for (int k = 0; k < 3; ++k) {
      b.start[k] = d[k] > 0 ? n_[k] : r_;
      b.size[k] = d[k] == 0 ? n_[k] : r_;
    }
    return b;
  }

  // Halo cells on the side of direction d.
  Box halo_box(const Offset3& d) const {
    Box b{};
    for (int k = 0; k < 3; ++k) {
      b.start[k] = d[k] < 0 ? 0 : (d[k] > 0 ? n_[k] + r_ : r_);
      b.size[k] = d[k] == 0 ? n_[k] : r_;
    }
    return b;
  }

  Box interior() const { return Box{{r_, r_, r_}, n_}; }

  // The value of quantity c of the global cell under local cell l after
  // exchange number `step`: distinct for every cell, quantity and step.
  double pattern(const Index3& l, int64_t c, int64_t step) const {
    int64_t v = step;
    for (int k = 0; k < 3; ++k) v = v * global_[k] + global_index(l, k);
    return static_cast<double>(v * q_ + c + 1);
  }

  int64_t global_index(const Index3& l, int k) const {
    int64_t g = (first_global_[k] + l[k] - r_) % global_[k];
    return g < 0 ? g + global_[k] : g;
  }

  int64_t offset(const Index3& l) const { return ((l[0] * extent_[1] + l[1]) * extent_[2] + l[2]) * q_; }

  template <class Visit>
  void for_each_cell(const Box& b, Visit visit) {
    Index3 l{};
    for (l[0] = b.start[0]; l[0] < b.start[0] + b.size[0]; ++l[0])
      for (l[1] = b.start[1]; l[1] < b.start[1] + b.size[1]; ++l[1])
        for (l[2] = b.start[2]; l[2] < b.start[2] + b.size[2]; ++l[2]) visit(l, &values_[offset(l)]);
  }

  void write_interior(int64_t step) {
    for_each_cell(interior(), [&](const Index3& l, double* cell) {
      for (int64_t c = 0; c < q_; ++c) cell[c] = pattern(l, c, step);
    });
  }

  void poison(const Box& b) {
    for_each_cell(b, [&](const Index3&, double* cell) { std::fill(cell, cell + q_, kPoison); });
  }

  struct Mismatch {
    Index3 local;
    Index3 global;
    int64_t quantity;
    double expected;
    double found;
  };

  std::optional<Mismatch> check(const Box& b, int64_t step) {
    std::optional<Mismatch> bad;
    for_each_cell(b, [&](const Index3& l, double* cell) {
      if (bad) return;
      for (int64_t c = 0; c < q_; ++c) {
        double want = pattern(l, c, step);
        if (cell[c] != want) {
          bad = Mismatch{l, {global_index(l, 0), global_index(l, 1), global_index(l, 2)}, c, want, cell[c]};
          return;
        }
      }
    });
    return bad;
  }

 private:
  Index3 n_;
  int64_t r_;
  int64_t q_;
  Index3 extent_{};
  Index3 global_{};
  Index3 first_global_{};
  std::vector<double> values_;
  DeviceRuntime* rt_ = nullptr;
  DeviceBuffer device_;  // empty for host memory
};

Datatype make_subarray(const Field& f, const Box& b) {
  int sizes[4], subsizes[4], starts[4];
  for (int k = 0; k < 3; ++k) {
    sizes[k] = static_cast<int>(f.extent()[k]);
    subsizes[k] = static_cast<int>(b.size[k]);
    starts[k] = static_cast<int>(b.start[k]);
  }
  sizes[3] = subsizes[3] = static_cast<int>(f.quantities());
  starts[3] = 0;
  MPI_Datatype t;
  MPI_Type_create_subarray(4, sizes, subsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &t);
  MPI_Type_commit(&t);
  return Datatype(t);
}

// The communication plan of one rank: neighbour ranks, region types and the
// communicators of the three methods.
class HaloExchange {
 public:
  // `rt`: the field is in its device memory (null: host memory).
  HaloExchange(Field& field, MPI_Comm cart, DeviceRuntime* rt) : field_(field), cart_(cart), rt_(rt) {
    Offset3 coords{};
    int rank = 0;
    MPI_Comm_rank(cart, &rank);
    MPI_Cart_coords(cart, rank, 3, coords.data());
    const auto dirs = neighbour_directions();
    for (int i = 0; i < kNeighbours; ++i) {
      // Send i goes to the rank at +d_i; receive i comes from the rank at
      // -d_i, which sent its slab towards +d_i into our halo on side -d_i.
      Offset3 ahead{}, behind{}, back{};
      for (int k = 0; k < 3; ++k) {
        ahead[k] = coords[k] + dirs[i][k];
        behind[k] = coords[k] - dirs[i][k];
        back[k] = -dirs[i][k];
      }
      MPI_Cart_rank(cart, ahead.data(), &destinations_[i]);
      MPI_Cart_rank(cart, behind.data(), &sources_[i]);
      send_boxes_[i] = field.send_box(dirs[i]);
      recv_boxes_[i] = field.halo_box(back);
      send_types_.push_back(make_subarray(field, send_boxes_[i]));
      recv_types_.push_back(make_subarray(field, recv_boxes_[i]));
      bytes_sent_ += send_boxes_[i].cells() * field.quantities() * static_cast<int64_t>(sizeof(double));
    }

    // With one or two ranks along a dimension several of the 26 neighbours
    // are the same rank (or this one); the graph lists every edge, and
    // messages between one pair keep their order, so receive i still
    // matches send i.
    MPI_Comm graph;
    MPI_Dist_graph_create_adjacent(cart, kNeighbours, sources_.data(), MPI_UNWEIGHTED, kNeighbours,
                                   destinations_.data(), MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &graph);
    graph_ = Communicator(graph);

    plan_packed_exchange();
    if (rt_) plan_handpacked_exchange();
  }

  // False if a buffer of the device methods could not be allocated.
  bool ready() const {
    return !rt_ || (send_device_.get() && recv_device_.get() && hand_send_.get() && hand_recv_.get());
  }

  int64_t bytes_sent() const { return bytes_sent_; }
  const std::array<Box, kNeighbours>& halo_boxes() const { return recv_boxes_; }

  void exchange(const std::string& method, const Calls& calls = kMpiCalls) {
    if (method == "isend") {
      exchange_isend(calls);
    } else if (method == "neighbor") {
      exchange_neighbor(calls);
    } else if (method == "handpacked") {
      exchange_handpacked(calls);
    } else {
      exchange_alltoallv(calls);
    }
  }

 private:
  void exchange_isend(const Calls& mpi) {
    std::array<MPI_Request, 2 * kNeighbours> requests{};
    for (int i = 0; i < kNeighbours; ++i)
      mpi.irecv(field_.data(), 1, recv_types_[i].get(), sources_[i], i, cart_, &requests[i]);
    for (int i = 0; i < kNeighbours; ++i)
      mpi.isend(field_.data(), 1, send_types_[i].get(), destinations_[i], i, cart_, &requests[kNeighbours + i]);
    mpi.waitall(2 * kNeighbours, requests.data(), MPI_STATUSES_IGNORE);
  }

  void exchange_neighbor(const Calls& mpi) {
    std::array<int, kNeighbours> counts;
    std::array<MPI_Aint, kNeighbours> displacements{};
    std::array<MPI_Datatype, kNeighbours> send_types, recv_types;
    counts.fill(1);
    for (int i = 0; i < kNeighbours; ++i) {
      send_types[i] = send_types_[i].get();
      recv_types[i] = recv_types_[i].get();
    }
    // The send regions (interior) and receive regions (halo) are disjoint
    // parts of one array, as in any halo code.
    mpi.neighbor_alltoallw(field_.data(), counts.data(), displacements.data(), send_types.data(), field_.data(),
                           counts.data(), displacements.data(), recv_types.data(), graph_.get());
  }

  // The packed buffer holds, per peer rank in rank order, the regions for that
  // peer in neighbour order, each in a slot of MPI_Pack_size bytes. A region
  // and the halo it lands in have the same shape, so both sides agree on
  // every slot.
  void plan_packed_exchange() {
    int size = 0;
    MPI_Comm_size(cart_, &size);
    send_counts_.assign(size, 0);
    recv_counts_.assign(size, 0);
    send_displacements_.assign(size, 0);
    recv_displacements_.assign(size, 0);
    std::vector<int64_t> send_bytes(size, 0), recv_bytes(size, 0);
    std::array<int, kNeighbours> send_slot{}, recv_slot{};
    for (int i = 0; i < kNeighbours; ++i) {
      MPI_Pack_size(1, send_types_[i].get(), cart_, &send_slot[i]);
      MPI_Pack_size(1, recv_types_[i].get(), cart_, &recv_slot[i]);
      send_bytes[destinations_[i]] += send_slot[i];
      recv_bytes[sources_[i]] += recv_slot[i];
    }
    int64_t send_total = 0, recv_total = 0;
    for (int p = 0; p < size; ++p) {
      send_displacements_[p] = checked_int(send_total);
      recv_displacements_[p] = checked_int(recv_total);
      send_counts_[p] = checked_int(send_bytes[p]);
      recv_counts_[p] = checked_int(recv_bytes[p]);
      send_total += send_bytes[p];
      recv_total += recv_bytes[p];
    }
    checked_int(send_total);
    checked_int(recv_total);
    // Slot positions: walk the neighbours in order, per peer.
    std::vector<int64_t> send_next(send_displacements_.begin(), send_displacements_.end());
    std::vector<int64_t> recv_next(recv_displacements_.begin(), recv_displacements_.end());
    for (int i = 0; i < kNeighbours; ++i) {
      send_positions_[i] = checked_int(send_next[destinations_[i]]);
      send_next[destinations_[i]] += send_slot[i];
      send_slot_end_[i] = checked_int(send_next[destinations_[i]]);
      recv_positions_[i] = checked_int(recv_next[sources_[i]]);
      recv_next[sources_[i]] += recv_slot[i];
    }
    send_buffer_.assign(static_cast<size_t>(std::max<int64_t>(send_total, 1)), 0);
    recv_buffer_.assign(static_cast<size_t>(std::max<int64_t>(recv_total, 1)), 0);
    send_packed_ = send_buffer_.data();
    recv_packed_ = recv_buffer_.data();
    if (rt_) {
      // A GPU code packs into device memory and hands that to MPI.
      send_device_ = DeviceBuffer(*rt_, DeviceBuffer::Kind::device, send_buffer_.size());
      recv_device_ = DeviceBuffer(*rt_, DeviceBuffer::Kind::device, recv_buffer_.size());
      send_packed_ = send_device_.get();
      recv_packed_ = recv_device_.get();
    }
  }

  // The hand-packed exchange: region i occupies bytes [hand_offsets_[i],
  // + its size) of the pinned send (receive) buffer.
  void plan_handpacked_exchange() {
    int64_t send_total = 0, recv_total = 0;
    for (int i = 0; i < kNeighbours; ++i) {
      hand_send_offsets_[i] = send_total;
      hand_recv_offsets_[i] = recv_total;
      send_total += region_bytes(send_boxes_[i]);
      recv_total += region_bytes(recv_boxes_[i]);
    }
    hand_send_ = DeviceBuffer(*rt_, DeviceBuffer::Kind::pinned, static_cast<size_t>(send_total));
    hand_recv_ = DeviceBuffer(*rt_, DeviceBuffer::Kind::pinned, static_cast<size_t>(recv_total));
  }

  int64_t region_bytes(const Box& b) const {
    return b.cells() * field_.quantities() * static_cast<int64_t>(sizeof(double));
  }

  // One 2-D copy per z-plane of the box, between the device grid and `packed`
  // (rows of x cells, y rows per plane); queued on `stream`.
  bool copy_region(const Box& b, char* packed, bool to_packed, veneer::kernels::DeviceStream stream) {
    const auto q_bytes = static_cast<size_t>(field_.quantities()) * sizeof(double);
    const size_t row = static_cast<size_t>(b.size[2]) * q_bytes;
    const size_t pitch = static_cast<size_t>(field_.extent()[2]) * q_bytes;
    const auto rows = static_cast<size_t>(b.size[1]);
    char* grid = reinterpret_cast<char*>(field_.data());
    for (int64_t z = 0; z < b.size[0]; ++z) {
      char* plane =
          grid + field_.offset({b.start[0] + z, b.start[1], b.start[2]}) * static_cast<int64_t>(sizeof(double));
      char* slab = packed + static_cast<size_t>(z) * row * rows;
      const bool ok = to_packed ? rt_->copy_2d(slab, row, plane, pitch, row, rows, stream)
                                : rt_->copy_2d(plane, pitch, slab, row, row, rows, stream);
      if (!ok) return false;
    }
    return true;
  }

  void exchange_handpacked(const Calls& mpi) {
    veneer::kernels::DeviceStream stream = rt_->stream(1);
    bool ok = stream != nullptr;
    for (int i = 0; ok && i < kNeighbours; ++i)
      ok = copy_region(send_boxes_[i], hand_send_.get() + hand_send_offsets_[i], true, stream);
    ok = rt_->synchronize(stream) && ok;
    if (!ok) device_failed("packing by hand");
    std::array<MPI_Request, 2 * kNeighbours> requests{};
    for (int i = 0; i < kNeighbours; ++i)
      mpi.irecv(hand_recv_.get() + hand_recv_offsets_[i], static_cast<int>(region_bytes(recv_boxes_[i])), MPI_BYTE,
                sources_[i], i, cart_, &requests[i]);
    for (int i = 0; i < kNeighbours; ++i)
      mpi.isend(hand_send_.get() + hand_send_offsets_[i], static_cast<int>(region_bytes(send_boxes_[i])), MPI_BYTE,
                destinations_[i], i, cart_, &requests[kNeighbours + i]);
    mpi.waitall(2 * kNeighbours, requests.data(), MPI_STATUSES_IGNORE);
    for (int i = 0; ok && i < kNeighbours; ++i)
      ok = copy_region(recv_boxes_[i], hand_recv_.get() + hand_recv_offsets_[i], false, stream);
    ok = rt_->synchronize(stream) && ok;
    if (!ok) device_failed("unpacking by hand");
  }

  [[noreturn]] static void device_failed(const char* what) {
    std::fprintf(stderr, "halo3d: a device copy failed while %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 4);
    std::abort();
  }

  static int checked_int(int64_t v) {
    if (v > std::numeric_limits<int>::max()) {
      std::fprintf(stderr, "halo3d: packed exchange of %" PRId64 " bytes does not fit an int count\n", v);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return static_cast<int>(v);
  }

  void exchange_alltoallv(const Calls& mpi) {
    const int send_size = static_cast<int>(send_buffer_.size());
    const int recv_size = static_cast<int>(recv_buffer_.size());
    for (int i = 0; i < kNeighbours; ++i) {
      int position = send_positions_[i];
      mpi.pack(field_.data(), 1, send_types_[i].get(), send_packed_, send_size, &position, cart_);
      if (position > send_slot_end_[i]) {
        std::fprintf(stderr, "halo3d: MPI_Pack wrote past its MPI_Pack_size slot (region %d)\n", i);
        MPI_Abort(MPI_COMM_WORLD, 3);
      }
    }
    mpi.alltoallv(send_packed_, send_counts_.data(), send_displacements_.data(), MPI_PACKED, recv_packed_,
                  recv_counts_.data(), recv_displacements_.data(), MPI_PACKED, cart_);
    for (int i = 0; i < kNeighbours; ++i) {
      int position = recv_positions_[i];
      mpi.unpack(recv_packed_, recv_size, &position, field_.data(), 1, recv_types_[i].get(), cart_);
    }
  }

  Field& field_;
  MPI_Comm cart_;
  DeviceRuntime* rt_;
  Communicator graph_;
  std::array<int, kNeighbours> destinations_{}, sources_{};
  std::array<Box, kNeighbours> send_boxes_{}, recv_boxes_{};
  std::vector<Datatype> send_types_, recv_types_;
  int64_t bytes_sent_ = 0;
  std::vector<int> send_counts_, recv_counts_, send_displacements_, recv_displacements_;
  std::array<int, kNeighbours> send_positions_{}, send_slot_end_{}, recv_positions_{};
  std::vector<unsigned char> send_buffer_, recv_buffer_;  // host memory (sizes also for device memory)
  void* send_packed_ = nullptr;
  void* recv_packed_ = nullptr;
  DeviceBuffer send_device_, recv_device_;  // device memory: the packed buffers
  DeviceBuffer hand_send_, hand_recv_;      // device memory: pinned staging of the handpacked method
  std::array<int64_t, kNeighbours> hand_send_offsets_{}, hand_recv_offsets_{};
};

struct MethodResult {
  std::string method;
  double seconds_per_exchange = 0;  // mean over iterations, max over ranks
  double min_seconds = 0;           // fastest single exchange, max over ranks
  // Per exchange the slowest rank's time, then over the iterations the median
  // (--paired: also the fastest, and for the library the mean, of each side).
  double median_seconds = 0;
  double library_median_seconds = 0, library_min_seconds = 0, library_seconds_per_exchange = 0;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean(const std::vector<double>& v) {
  double total = 0;
  for (double x : v) total += x;
  return v.empty() ? 0 : total / static_cast<double>(v.size());
}

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string v(text, static_cast<size_t>(length));
  v = v.substr(0, v.find('\n'));
  std::replace(v.begin(), v.end(), '\t', ' ');
  while (!v.empty() && (v.back() == ' ' || v.back() == '\0' || v.back() == '\r')) v.pop_back();
  return v;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\u%04x", c);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

const char* preload() {
  const char* p = std::getenv("LD_PRELOAD");
  return p ? p : "";
}

// Asked of the dynamic linker: LD_PRELOAD may name other libraries with
// "veneer" in their names (the MPICH tests' yield helper).
bool veneer_preloaded() { return veneer::bench::veneer_loaded(); }

// --reorder: the 26-neighbour graph of the process grid over MPI_COMM_WORLD
// (block k at the grid position of rank k, row-major like a Cartesian
// communicator), each edge weighted by the doubles it carries, made with
// reorder true. The grid is then laid on its ranks: new rank k computes block k.
Communicator place_by_graph(const Options& o, const Offset3& grid) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const Offset3 coords{rank / (grid[1] * grid[2]), rank / grid[2] % grid[1], rank % grid[2]};
  const auto dirs = neighbour_directions();
  std::array<int, kNeighbours> sources{}, destinations{}, weights{};
  for (int i = 0; i < kNeighbours; ++i) {
    int ahead = 0, behind = 0;
    int64_t doubles = o.quantities;
    for (int k = 0; k < 3; ++k) {
      ahead = ahead * grid[k] + (coords[k] + dirs[i][k] + grid[k]) % grid[k];
      behind = behind * grid[k] + (coords[k] - dirs[i][k] + grid[k]) % grid[k];
      doubles *= dirs[i][k] == 0 ? o.cells[k] : o.radius;  // the region sent towards dirs[i]
    }
    destinations[i] = ahead;
    sources[i] = behind;
    weights[i] = static_cast<int>(std::min<int64_t>(doubles, std::numeric_limits<int>::max()));
  }
  MPI_Comm graph = MPI_COMM_NULL;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, kNeighbours, sources.data(), weights.data(), kNeighbours,
                                 destinations.data(), weights.data(), MPI_INFO_NULL, 1, &graph);
  return Communicator(graph);
}

int run(Options o, const veneer::bench::DeviceChoice& device) {
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  // Device memory: which methods can run. The library itself can carry the
  // grid only if it reads device memory; Veneer (preloaded, and given the
  // emulator where there is one) carries it for any library.
  bool cuda_aware = false;
  if (o.device) {
    if (!device.rt) {
      if (rank == 0) std::fprintf(stderr, "halo3d: --memory device, but no device: %s\n", device.name.c_str());
      return 2;
    }
    if (device.emulated && veneer_preloaded() && !device.installed_into_veneer) {
      if (rank == 0) std::fprintf(stderr, "halo3d: Veneer is preloaded but the emulator could not be handed to it\n");
      return 2;
    }
    cuda_aware = o.cuda_aware >= 0 ? o.cuda_aware == 1 : veneer::bench::library_says_cuda_aware();
    const bool carried = cuda_aware || veneer_preloaded();
    if (o.all_methods) {
      o.methods = {"isend", "neighbor", "alltoallv", "handpacked"};
      if (!carried) o.methods = {"handpacked"};
    } else if (!carried && o.methods[0] != "handpacked") {
      if (rank == 0)
        std::fprintf(stderr,
                     "halo3d: the library is not CUDA-aware (it cannot read device memory) and Veneer is not "
                     "preloaded: method %s would hand it device pointers; use --method handpacked\n",
                     o.methods[0].c_str());
      return 2;
    }
    if (o.paired && !cuda_aware) {
      if (rank == 0)
        std::fprintf(stderr,
                     "halo3d: --paired with device memory needs a CUDA-aware library: the PMPI_ side hands it "
                     "device pointers\n");
      return 2;
    }
    if (!carried && rank == 0)
      std::printf(
          "halo3d: the library is not CUDA-aware: it cannot read device memory, so only the application's "
          "own workaround runs (handpacked: 2-D device copies to pinned host memory, contiguous sends)\n");
  }

  Offset3 grid = o.dims;
  if (grid[0] == 0) {
    MPI_Dims_create(size, 3, grid.data());
  } else if (grid[0] * grid[1] * grid[2] != size) {
    if (rank == 0) std::fprintf(stderr, "halo3d: --dims %dx%dx%d is not %d ranks\n", grid[2], grid[1], grid[0], size);
    return 2;
  }
  const Offset3 periodic{1, 1, 1};
  // --reorder: the grid is made on the ranks of a placed distributed graph.
  Communicator placed;
  if (o.reorder) placed = place_by_graph(o, grid);
  MPI_Comm cart_handle;
  MPI_Cart_create(o.reorder ? placed.get() : MPI_COMM_WORLD, 3, grid.data(), periodic.data(), 0, &cart_handle);
  Communicator cart(cart_handle);
  Offset3 coords{};
  int cart_rank = 0;
  MPI_Comm_rank(cart.get(), &cart_rank);
  MPI_Cart_coords(cart.get(), cart_rank, 3, coords.data());
  int moved = cart_rank != rank ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &moved, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

  for (int k = 0; k < 3; ++k) {
    if (o.cells[k] + 2 * o.radius > std::numeric_limits<int>::max() / 2) {
      if (rank == 0) std::fprintf(stderr, "halo3d: local grid too large for MPI int sizes\n");
      return 2;
    }
  }
  Field field(o, grid, coords);
  if (o.device && !field.place_on_device(*device.rt)) {
    if (rank == 0) std::fprintf(stderr, "halo3d: cannot allocate %zu bytes of device memory\n", field.bytes());
    return 2;
  }
  const int64_t per_method = o.warmup + o.iterations;
  const int64_t total_exchanges = per_method * static_cast<int64_t>(o.methods.size()) * (o.paired ? 2 : 1);
  if (field.largest_value(total_exchanges + 1) >= 9007199254740992.0) {
    if (rank == 0) std::fprintf(stderr, "halo3d: grid x iterations too large for exact pattern values\n");
    return 2;
  }

  HaloExchange halo(field, cart.get(), o.device ? device.rt : nullptr);
  if (!halo.ready()) {
    std::fprintf(stderr, "halo3d: rank %d cannot allocate its device or pinned buffers\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0) {
    std::printf("halo3d: %d ranks, process grid %dx%dx%d, local cells %" PRId64 "x%" PRId64 "x%" PRId64
                " (x y z), halo %" PRId64 ", %" PRId64 " doubles per cell, %" PRId64 " iterations (+%" PRId64
                " warm-up)\n",
                size, grid[2], grid[1], grid[0], o.cells[2], o.cells[1], o.cells[0], o.radius, o.quantities,
                o.iterations, o.warmup);
    std::printf("halo3d: %s; Veneer preloaded: %s\n", library_version().c_str(), veneer_preloaded() ? "yes" : "no");
    if (o.reorder)
      std::printf("halo3d: --reorder: %d of %d ranks compute another block than their own rank's\n", moved, size);
    if (o.device)
      std::printf("halo3d: grid in device memory (%s); the library %s CUDA-aware\n", device.name.c_str(),
                  cuda_aware ? "is" : "is not");
    if (o.paired) {
      std::printf(
          "halo3d: paired: every iteration once through MPI_ (%s) and once through PMPI_ (the library's "
          "own), alternating which goes first; medians over iterations of the slowest rank's time\n",
          veneer_preloaded() ? "Veneer's entry points" : "also the library: Veneer is not preloaded");
      std::printf("%-10s %12s %12s %11s %12s %12s %11s %20s\n", "method", "MPI_ us", "PMPI_ us", "PMPI_/MPI_",
                  "best MPI_", "best PMPI_", "best ratio", "bytes/exchange/rank");
    } else {
      std::printf("%-10s %16s %16s %20s %16s %16s\n", "method", "us/exchange", "best us", "bytes/exchange/rank",
                  "GB/s per rank", "GB/s all ranks");
    }
    std::fflush(stdout);
  }

  std::vector<MethodResult> results;
  int64_t step = 0;  // counts exchanges across methods, so stale halos never match
  int64_t verified = 0;
  // One exchange through `calls`, every halo cell checked; `elapsed` is the
  // exchange's own time. False (reported) if a cell was wrong on any rank.
  auto exchange_checked = [&](const std::string& method, const Calls& calls, double& elapsed) {
    field.write_interior(step);
    for (const Box& b : halo.halo_boxes()) field.poison(b);
    if (!field.upload()) {
      std::fprintf(stderr, "halo3d: rank %d: copy to the device failed\n", rank);
      MPI_Abort(MPI_COMM_WORLD, 4);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    halo.exchange(method, calls);
    elapsed = MPI_Wtime() - start;
    if (!field.download()) {
      std::fprintf(stderr, "halo3d: rank %d: copy from the device failed\n", rank);
      MPI_Abort(MPI_COMM_WORLD, 4);
    }
    int bad = 0;
    for (int i = 0; i < kNeighbours && !bad; ++i) {
      if (auto m = field.check(halo.halo_boxes()[i], step)) {
        std::fprintf(stderr,
                     "halo3d: MISMATCH rank %d method %s (%s) exchange %" PRId64 ": halo cell local (x %" PRId64
                     ", y %" PRId64 ", z %" PRId64 ") global (x %" PRId64 ", y %" PRId64 ", z %" PRId64
                     ") quantity %" PRId64 ": expected %.17g, found %.17g\n",
                     rank, method.c_str(), calls.name, step, m->local[2], m->local[1], m->local[0], m->global[2],
                     m->global[1], m->global[0], m->quantity, m->expected, m->found);
        bad = 1;
      }
    }
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
      if (rank == 0) std::printf("halo3d: FAILED (method %s, exchange %" PRId64 ")\n", method.c_str(), step);
      return false;
    }
    ++verified;
    ++step;
    return true;
  };
  for (const std::string& method : o.methods) {
    if (o.paired) {
      std::vector<double> mine, library;  // per timed iteration
      for (int64_t it = 0; it < per_method; ++it) {
        double through_mpi = 0, through_pmpi = 0;
        const bool library_first = it % 2 == 1;
        if (!exchange_checked(method, library_first ? kLibraryCalls : kMpiCalls,
                              library_first ? through_pmpi : through_mpi) ||
            !exchange_checked(method, library_first ? kMpiCalls : kLibraryCalls,
                              library_first ? through_mpi : through_pmpi))
          return 1;
        if (it >= o.warmup) {
          mine.push_back(through_mpi);
          library.push_back(through_pmpi);
        }
      }
      const int n = static_cast<int>(mine.size());
      MPI_Allreduce(MPI_IN_PLACE, mine.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, library.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MethodResult r{method, mean(mine), *std::min_element(mine.begin(), mine.end())};
      r.median_seconds = median(mine);
      r.library_median_seconds = median(library);
      r.library_min_seconds = *std::min_element(library.begin(), library.end());
      r.library_seconds_per_exchange = mean(library);
      results.push_back(r);
      if (rank == 0) {
        std::printf("%-10s %12.2f %12.2f %11.3f %12.2f %12.2f %11.3f %20" PRId64 "\n", method.c_str(),
                    r.median_seconds * 1e6, r.library_median_seconds * 1e6, r.library_median_seconds / r.median_seconds,
                    r.min_seconds * 1e6, r.library_min_seconds * 1e6, r.library_min_seconds / r.min_seconds,
                    halo.bytes_sent());
        std::fflush(stdout);
      }
      continue;
    }
    double total = 0, best = std::numeric_limits<double>::infinity();
    std::vector<double> times;  // per timed exchange, then the slowest rank's
    for (int64_t it = 0; it < per_method; ++it) {
      double elapsed = 0;
      if (!exchange_checked(method, kMpiCalls, elapsed)) return 1;
      if (it >= o.warmup) {
        total += elapsed;
        best = std::min(best, elapsed);
        times.push_back(elapsed);
      }
    }
    double local[2] = {total / static_cast<double>(o.iterations), best};
    double slowest[2] = {0, 0};
    MPI_Reduce(local, slowest, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, times.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    results.push_back({method, slowest[0], slowest[1], median(times)});
    if (rank == 0) {
      double bytes = static_cast<double>(halo.bytes_sent());
      std::printf("%-10s %16.2f %16.2f %20" PRId64 " %16.3f %16.3f\n", method.c_str(), slowest[0] * 1e6,
                  slowest[1] * 1e6, halo.bytes_sent(), bytes / slowest[0] / 1e9, bytes * size / slowest[0] / 1e9);
      std::fflush(stdout);
    }
  }

  if (rank == 0 && !o.json_path.empty()) {
    if (FILE* f = std::fopen(o.json_path.c_str(), "a")) {
      std::fprintf(f,
                   "{\"bench\":\"halo3d\",\"library\":\"%s\",\"preload\":\"%s\",\"veneer\":%s,\"memory\":\"%s\","
                   "\"cuda_aware\":%s,\"ranks\":%d,"
                   "\"process_grid\":[%d,%d,%d],\"cells\":[%" PRId64 ",%" PRId64 ",%" PRId64 "],\"radius\":%" PRId64
                   ",\"quantities\":%" PRId64 ",\"iterations\":%" PRId64 ",\"warmup\":%" PRId64
                   ",\"bytes_per_exchange_per_rank\":%" PRId64 ",\"verified\":%" PRId64
                   ",\"paired\":%s,"
                   "\"reorder\":%s,\"ranks_moved\":%d,\"results\":[",
                   json_escape(library_version()).c_str(), json_escape(preload()).c_str(),
                   veneer_preloaded() ? "true" : "false", o.device ? "device" : "host", cuda_aware ? "true" : "false",
                   size, grid[2], grid[1], grid[0], o.cells[2], o.cells[1], o.cells[0], o.radius, o.quantities,
                   o.iterations, o.warmup, halo.bytes_sent(), verified, o.paired ? "true" : "false",
                   o.reorder ? "true" : "false", moved);
      for (size_t m = 0; m < results.size(); ++m) {
        double bytes = static_cast<double>(halo.bytes_sent());
        std::fprintf(f,
                     "%s{\"method\":\"%s\",\"seconds_per_exchange\":%.9g,\"best_seconds\":%.9g,"
                     "\"gbytes_per_s_per_rank\":%.6g",
                     m ? "," : "", results[m].method.c_str(), results[m].seconds_per_exchange, results[m].min_seconds,
                     bytes / results[m].seconds_per_exchange / 1e9);
        if (!o.paired) std::fprintf(f, ",\"median_seconds\":%.9g", results[m].median_seconds);
        if (o.paired)
          std::fprintf(f,
                       ",\"median_seconds\":%.9g,\"library_median_seconds\":%.9g,\"library_best_seconds\":%.9g,"
                       "\"library_seconds_per_exchange\":%.9g",
                       results[m].median_seconds, results[m].library_median_seconds, results[m].library_min_seconds,
                       results[m].library_seconds_per_exchange);
        std::fprintf(f, "}");
      }
      std::fprintf(f, "]}\n");
      std::fclose(f);
    } else {
      std::fprintf(stderr, "halo3d: cannot open %s for appending\n", o.json_path.c_str());
      return 1;
    }
  }
  if (o.device) {
    // Every method against the application's own workaround, side by side in this run.
    const auto hand =
        std::find_if(results.begin(), results.end(), [](const MethodResult& r) { return r.method == "handpacked"; });
    if (rank == 0 && hand != results.end() && results.size() > 1) {
      std::printf("halo3d: speed-up over handpacked (its time / the method's):");
      for (const MethodResult& r : results)
        if (r.method != "handpacked")
          std::printf(" %s %.2fx", r.method.c_str(), hand->seconds_per_exchange / r.seconds_per_exchange);
      std::printf("\n");
    }
    // The emulator counts device steps that would have faulted on a GPU.
    int64_t failed = veneer::bench::device_failed_steps(), any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !veneer::bench::device_counters().empty())
      std::printf("halo3d: device (rank 0): %s\n", veneer::bench::device_counters().c_str());
    if (any_failed) {
      if (rank == 0) std::printf("halo3d: FAILED (device steps failed)\n");
      return 1;
    }
  }
  if (rank == 0) std::printf("halo3d: verified %" PRId64 " exchanges\n", verified);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Options first: the device (and the emulator handed to Veneer) must be
  // there before MPI_Init.
  auto [options, error] = parse_options(argc, argv);
  veneer::bench::DeviceChoice device;
  if (options && options->device) device = veneer::bench::open_device(options->cuda_aware == 1);
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int status = 2;
  if (!options) {
    if (rank == 0) {
      if (!error.empty()) std::fprintf(stderr, "halo3d: %s\n", error.c_str());
      std::fputs(kUsage, error.empty() ? stdout : stderr);
    }
    status = error.empty() ? 0 : 2;
  } else {
    status = run(*options, device);
  }
  MPI_Finalize();
  return status;
}
