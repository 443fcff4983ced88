// SPDX-License-Identifier: BSD-3-Clause
// veneer-calibrate: measures this machine for Veneer's cost model and writes
// the machine profile (topology/profile.h) that libveneer reads at MPI_Init.
//
//   mpirun -np N veneer-calibrate [--quick] [--out FILE] ...
//
// Run it with the rank count and placement of the jobs it should speed up:
// collective timings are keyed by the communicator's shape (ranks, nodes,
// ranks per node), and shapes it did not see fall back to the fitted
// per-level costs. It measures, on MPI_COMM_WORLD (real nodes, or the
// pretend nodes of VENEER_RANKS_PER_NODE):
//  - point-to-point one-way times within a node and between nodes (ping-pong
//    of 1..k concurrent rank pairs at a few sizes), fitted to alpha + beta * bytes
//    per level with the fit's relative RMS error;
//  - the local reduction rate (MPI_SUM of doubles, seconds per byte);
//  - every collective with every algorithm eligible on this communicator and
//    the library's own (PMPI), over a ladder of sizes, in interleaved batches
//    (bench/coll_timing.h, as veneer-bench-coll): per repeat the slowest
//    rank's batch time, their median over the repeats, and the spread: how
//    far that median may be off (relative standard error of a median, from
//    the inter-quartile range of the repeats).
//    Collectives of 128 KiB and up are timed twice, with the heap keeping
//    large freed blocks and with it handing them back to the system
//    (topology::Timing::returned): a library that allocates a temporary per
//    call is up to 7x slower in the second state, and a job's heap may be in
//    either;
//  - the same on the communicators a job meets besides the whole world:
//    ranks 0..s-1 for a ladder of smaller sizes s (every size below 8
//    ranks; halves and powers of two above) and the node leaders, each
//    timed alone at every other ladder size with a third of the repetitions, so
//    that sub-communicators and smaller jobs find measured points of their
//    own shape;
//  - point-to-point take-over: for strided vectors (blocks of 1 B to 4 KiB,
//    stride twice the block) at a few message sizes, the one-way ping-pong
//    time of the library's typed send/receive against Veneer's way (pack,
//    send bytes, receive bytes, unpack), within a node and between nodes, and
//    MPI_Pack against Veneer's packer on every rank; interleaved batches,
//    medians, the slowest rank. Sends and receives use the two ping-pong
//    tables per peer level (support/send_rule.h); the largest block class
//    where Veneer pays (topology::p2p_max_block) becomes Alltoallv/w's threshold.
// Linked with the algorithms library directly, not libveneer: the library's
// collectives are the plain MPI ones.
#include <mpi.h>

#if __has_include(<malloc.h>)
#include <malloc.h>  // glibc's mallopt
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "algorithms/collectives.h"
#include "bench/coll_timing.h"
#include "datatypes/decode.h"
#include "datatypes/pack.h"
#include "topology/hierarchy.h"
#include "topology/machine.h"
#include "topology/profile.h"

namespace {

namespace alg = veneer::algorithms;
namespace topo = veneer::topology;
namespace bench = veneer::bench;
using alg::Collective;

const char* const kUsage =
    "usage: veneer-calibrate [--quick] [--out FILE] [--collective NAME|all] [--min BYTES] [--max BYTES]\n"
    "                        [--step K] [--repetitions R] [--seconds S]\n"
    "  --quick          8 B to 64 KiB in x8 steps, 3 repetitions of 1 ms batches (a few seconds; for CI)\n"
    "  --out FILE       where to write the profile (default: VENEER_PROFILE, else\n"
    "                   ${XDG_CACHE_HOME:-$HOME/.cache}/veneer/profile.json)\n"
    "  --collective C   allreduce, bcast, reduce, allgather, reduce_scatter, reduce_scatter_block,\n"
    "                   alltoall, all or none (default all; repeatable)\n"
    "  --min/--max      ladder of message sizes in bytes, k/M suffixes (default 8 to 4M)\n"
    "  --step K         ladder step factor (default 4; the largest size is always measured)\n"
    "  --repetitions R  interleaved timed batches per method and size (default 31)\n"
    "  --seconds S      length of one timed batch (default 0.005)\n";

struct Options {
  bool quick = false;
  std::string out;
  std::vector<Collective> collectives;
  bool no_collectives = false;  // --collective none: levels and point-to-point only
  int64_t min_bytes = 8, max_bytes = int64_t{4} << 20;
  int64_t step = 4;
  int repetitions = 31;
  double batch_seconds = 0.005;
};

bool parse(int argc, char** argv, Options& o) {
  bool sizes_given = false, step_given = false, reps_given = false, seconds_given = false;
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    auto value = [&]() -> const char* { return a + 1 < argc ? argv[++a] : nullptr; };
    if (flag == "--quick") {
      o.quick = true;
      continue;
    }
    const char* v = value();
    if (!v) return false;
    if (flag == "--out") {
      o.out = v;
    } else if (flag == "--collective") {
      if (std::string(v) == "none") {
        o.no_collectives = true;
      } else if (std::string(v) == "all") {
        for (int i = 0; i < alg::collective_count; ++i) o.collectives.push_back(static_cast<Collective>(i));
      } else if (auto c = alg::collective_from_name(v)) {
        o.collectives.push_back(*c);
      } else {
        return false;
      }
    } else if (flag == "--min" || flag == "--max") {
      (flag == "--min" ? o.min_bytes : o.max_bytes) = std::max<int64_t>(1, bench::parse_bytes(v));
      sizes_given = true;
    } else if (flag == "--step") {
      o.step = std::max<int64_t>(2, std::atoll(v));
      step_given = true;
    } else if (flag == "--repetitions") {
      o.repetitions = std::max(1, std::atoi(v));
      reps_given = true;
    } else if (flag == "--seconds") {
      o.batch_seconds = std::max(1e-4, std::atof(v));
      seconds_given = true;
    } else {
      return false;
    }
  }
  if (o.quick) {
    if (!sizes_given) o.max_bytes = 64 << 10;
    if (!step_given) o.step = 8;
    if (!reps_given) o.repetitions = 3;
    if (!seconds_given) o.batch_seconds = 0.001;
  }
  if (o.collectives.empty() && !o.no_collectives)
    for (int i = 0; i < alg::collective_count; ++i) o.collectives.push_back(static_cast<Collective>(i));
  return o.min_bytes <= o.max_bytes;
}

std::vector<int64_t> ladder(int64_t lo, int64_t hi, int64_t step) {
  std::vector<int64_t> sizes;
  for (int64_t b = lo; b <= hi; b *= step) sizes.push_back(b);
  if (sizes.empty() || sizes.back() != hi) sizes.push_back(hi);
  return sizes;
}

// Concurrency levels 1, 2, 4, ... up to `most`, and `most` itself.
std::vector<int> pair_counts(int most) {
  std::vector<int> k;
  for (int n = 1; n <= most; n *= 2) k.push_back(n);
  if (most >= 1 && k.back() != most) k.push_back(most);
  return k;
}

// ---- Point-to-point per level --------------------------------------------------------

// One-way time of `bytes` between the pairs (first pings, second pongs), all
// pairs at once: each pinger's median over the repeats, the slowest pair's.
// Collective over MPI_COMM_WORLD; ranks in no pair wait.
double pingpong(const std::vector<std::pair<int, int>>& pairs, int64_t bytes, int repetitions, double batch_seconds,
                int rank) {
  int peer = -1;
  bool pinger = false;
  for (const auto& [a, b] : pairs) {
    if (rank == a) peer = b, pinger = true;
    if (rank == b) peer = a;
  }
  std::vector<char> buf(static_cast<size_t>(std::max<int64_t>(1, bytes)), 1);
  const int n = static_cast<int>(bytes);
  auto rounds = [&](int count) {
    for (int i = 0; i < count && peer >= 0; ++i) {
      if (pinger) {
        MPI_Send(buf.data(), n, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
        MPI_Recv(buf.data(), n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf.data(), n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf.data(), n, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
      }
    }
  };
  rounds(2);  // warm
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = bench::now();
  rounds(1);
  double once = pinger ? bench::now() - t0 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const int iterations = static_cast<int>(std::clamp(batch_seconds / std::max(once, 1e-7), 1.0, 10000.0));
  std::vector<double> samples;
  for (int r = 0; r < repetitions; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = bench::now();
    rounds(iterations);
    samples.push_back((bench::now() - t0) / iterations / 2);
  }
  double mine = pinger ? bench::median_of(samples) : 0;
  MPI_Allreduce(MPI_IN_PLACE, &mine, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return mine;
}

// alpha + beta * bytes through the single-pair points, least squares on the
// relative error (times span orders of magnitude); the fit's relative RMS error.
void fit(topo::LevelFit& level) {
  double uu = 0, uv = 0, vv = 0, u1 = 0, v1 = 0;
  int n = 0;
  for (const auto& p : level.points) {
    if (p.pairs != 1) continue;
    const double u = 1 / p.seconds, v = static_cast<double>(p.bytes) / p.seconds;
    uu += u * u, uv += u * v, vv += v * v, u1 += u, v1 += v;
    ++n;
  }
  if (n == 0) return;
  auto error_of = [&](double a, double b) {
    double e = 0;
    for (const auto& p : level.points)
      if (p.pairs == 1) e += std::pow((a + b * static_cast<double>(p.bytes)) / p.seconds - 1, 2);
    return std::sqrt(e / n);
  };
  double alpha = 0, beta = 0;
  const double det = uu * vv - uv * uv;
  if (n >= 2 && det > 0) {
    alpha = (u1 * vv - v1 * uv) / det;
    beta = (uu * v1 - uv * u1) / det;
  }
  if (n < 2 || det <= 0 || alpha < 0 || beta < 0) {
    // The better of the one-parameter fits (latency only, bandwidth only).
    alpha = u1 / uu, beta = 0;
    if (vv > 0 && error_of(0, v1 / vv) < error_of(alpha, 0)) alpha = 0, beta = v1 / vv;
  }
  level.alpha = alpha;
  level.beta = beta;
  level.fit_error = error_of(alpha, beta);
}

// Seconds per byte of MPI_SUM on doubles, the slowest rank's median.
double reduction_rate(int repetitions, double batch_seconds) {
  const int n = 32768;  // 256 KiB: a typical reduction chunk, cache-resident
  std::vector<double> in(n, 1.0), inout(n, 2.0);
  MPI_Reduce_local(in.data(), inout.data(), n, MPI_DOUBLE, MPI_SUM);
  double t0 = bench::now();
  MPI_Reduce_local(in.data(), inout.data(), n, MPI_DOUBLE, MPI_SUM);
  double once = bench::now() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const int iterations = static_cast<int>(std::clamp(batch_seconds / std::max(once, 1e-8), 1.0, 10000.0));
  std::vector<double> samples;
  for (int r = 0; r < repetitions; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = bench::now();
    for (int i = 0; i < iterations; ++i) MPI_Reduce_local(in.data(), inout.data(), n, MPI_DOUBLE, MPI_SUM);
    samples.push_back((bench::now() - t0) / iterations / (8.0 * n));
  }
  double mine = bench::median_of(samples);
  MPI_Allreduce(MPI_IN_PLACE, &mine, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return mine;
}

// Both levels, from the hierarchy: within the first node with two ranks or
// more, and between the first two nodes (lane i of one with lane i of the other).
void measure_levels(const topo::Hierarchy& h, const Options& o, topo::Profile& profile) {
  const std::vector<int64_t> sizes =
      o.quick ? std::vector<int64_t>{8, 16384, 262144} : std::vector<int64_t>{8, 1024, 16384, 262144, 1 << 20};
  const int reps = std::min(o.repetitions, 5);
  const double batch = std::min(o.batch_seconds, 0.002);
  auto measure = [&](const std::vector<std::pair<int, int>>& all_pairs, const char* name) {
    topo::LevelFit level;
    for (int k : pair_counts(static_cast<int>(all_pairs.size()))) {
      const std::vector<std::pair<int, int>> pairs(all_pairs.begin(), all_pairs.begin() + k);
      // Concurrent pairs only at the largest size (how the bandwidth is shared); latency and the fit from one pair.
      for (int64_t bytes : sizes) {
        if (k > 1 && bytes != sizes.back()) continue;
        const double t = pingpong(pairs, bytes, reps, batch, h.rank);
        level.points.push_back({bytes, k, t});
      }
    }
    fit(level);
    if (h.rank == 0)
      std::printf("# %s: alpha %.2f us, beta %.3f GB/s, fit error %.1f%% (%zu pair%s at most)\n", name,
                  level.alpha * 1e6, level.beta > 0 ? 1e-9 / level.beta : 0.0, level.fit_error * 100, all_pairs.size(),
                  all_pairs.size() == 1 ? "" : "s");
    return level;
  };
  for (int node = 0; node < h.node_count; ++node) {
    const std::vector<int>& ranks = h.node_ranks[static_cast<size_t>(node)];
    if (ranks.size() < 2) continue;
    std::vector<std::pair<int, int>> pairs;
    for (size_t i = 0; i + 1 < ranks.size(); i += 2) pairs.emplace_back(ranks[i], ranks[i + 1]);
    profile.intra = measure(pairs, "intra-node");
    break;
  }
  if (h.node_count >= 2) {
    const std::vector<int>& a = h.node_ranks[0];
    const std::vector<int>& b = h.node_ranks[1];
    std::vector<std::pair<int, int>> pairs;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) pairs.emplace_back(a[i], b[i]);
    profile.inter = measure(pairs, "inter-node");
    // Streams a node sustains at full speed: concurrent pairs whose time stays within 25% of one pair's.
    double single = 0;
    int streams = 1;
    for (const auto& p : profile.inter->points) {
      if (p.bytes != sizes.back()) continue;
      if (p.pairs == 1) single = p.seconds;
      else if (single > 0 && p.seconds <= 1.25 * single) streams = std::max(streams, p.pairs);
    }
    profile.nic_streams = streams;
  }
  const double gamma = reduction_rate(reps, batch);
  if (h.rank == 0) std::printf("# reduction (MPI_SUM, double): %.2f GB/s\n", gamma > 0 ? 1e-9 / gamma : 0.0);
  if (profile.intra) profile.intra->gamma = gamma;
  if (profile.inter) profile.inter->gamma = gamma;
  if (!profile.intra && !profile.inter) {  // one rank per node and one node: still record the reduction rate
    topo::LevelFit local;
    local.gamma = gamma;
    local.fit_error = 1;  // nothing fitted: the formulas keep their widest margin
    local.alpha = veneer::algorithms::default_cost_model().intra.alpha;
    local.beta = veneer::algorithms::default_cost_model().intra.beta;
    profile.intra = local;
  }
}

// ---- Point-to-point and MPI_Pack take-over -----------------------------------------------

// `bytes` of data in blocks of `block` bytes, one block in every two (doubles
// where the block holds whole ones, else bytes): the type, its layout as
// Veneer's packer sees it, the user's buffer and Veneer's staging buffer.
struct StridedVector {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  veneer::datatypes::Layout layout;
  std::vector<double> data;    // the user's buffer (doubles: aligned as an application's)
  std::vector<double> packed;  // Veneer's staging
  int64_t bytes = 0;
  bool ok = false;

  StridedVector(int64_t block, int64_t message) : bytes(message) {
    const int blocks = static_cast<int>(message / block);
    const bool doubles = block % 8 == 0;
    const int unit = static_cast<int>(doubles ? block / 8 : block);
    if (PMPI_Type_vector(blocks, unit, 2 * unit, doubles ? MPI_DOUBLE : MPI_BYTE, &type) != MPI_SUCCESS) return;
    PMPI_Type_commit(&type);
    auto decoded = veneer::datatypes::decode(type);
    if (!std::holds_alternative<veneer::datatypes::Layout>(decoded)) return;
    layout = std::get<veneer::datatypes::Layout>(std::move(decoded));
    data.assign(static_cast<size_t>(2 * message / 8 + 1), 1.5);
    packed.assign(static_cast<size_t>(message / 8 + 1), 0.0);
    ok = !layout.contiguous && layout.size == message;
  }
  ~StridedVector() {
    if (type != MPI_DATATYPE_NULL) PMPI_Type_free(&type);
  }
  StridedVector(const StridedVector&) = delete;
  StridedVector& operator=(const StridedVector&) = delete;
};

const std::vector<int64_t> kBlockClasses = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};

std::vector<int64_t> p2p_message_sizes(const Options& o) {
  return o.quick ? std::vector<int64_t>{4096, 65536} : std::vector<int64_t>{4096, 65536, 1 << 20};
}

// Times method 0 (the library) and method 1 (Veneer) with `run(method, iterations)`
// in interleaved batches (the order alternating between repeats), seconds per
// iteration divided by `per`; each rank's median and its spread, the largest
// over MPI_COMM_WORLD (ranks with `active` false contribute nothing but wait
// at the barriers).
template <typename Run>
std::array<topo::Timing, 2> time_pair(bool active, int reps, double batch, double per, Run run) {
  run(0, 1), run(1, 1);  // warm
  MPI_Barrier(MPI_COMM_WORLD);
  double once = 0;
  for (int m = 0; m < 2; ++m) {
    const double t0 = bench::now();
    if (active) run(m, 1);
    once = std::max(once, bench::now() - t0);
  }
  MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const int iterations = static_cast<int>(std::clamp(batch / std::max(once, 1e-7), 1.0, 10000.0));
  std::array<std::vector<double>, 2> samples;
  for (int r = 0; r < reps; ++r) {
    for (int i = 0; i < 2; ++i) {
      const int m = r % 2 ? 1 - i : i;
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = bench::now();
      if (active) run(m, iterations);
      samples[static_cast<size_t>(m)].push_back((bench::now() - t0) / iterations / per);
    }
  }
  double stats[4] = {};
  if (active)
    for (size_t m = 0; m < 2; ++m) {
      stats[m] = bench::median_of(samples[m]);
      stats[2 + m] = bench::relative_median_error(samples[m]);
    }
  MPI_Allreduce(MPI_IN_PLACE, stats, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return {topo::Timing{stats[0], stats[2]}, topo::Timing{stats[1], stats[3]}};
}

// One-way time between ranks a (pings) and b (pongs): the library's typed
// send and receive against what interposer/p2p.cpp does (pack into a staging
// buffer, send bytes; receive bytes into staging, unpack). Collective over
// MPI_COMM_WORLD. PMPI throughout: the library's own calls even under LD_PRELOAD.
std::array<topo::Timing, 2> p2p_pingpong(int a, int b, StridedVector& v, int reps, double batch, int rank) {
  const bool active = rank == a || rank == b;
  const bool pinger = rank == a;
  const int peer = pinger ? b : a;
  const int n = static_cast<int>(v.bytes);
  auto run = [&](int method, int iterations) {
    if (!active) return;
    for (int i = 0; i < iterations; ++i) {
      if (method == 0) {
        if (pinger) {
          PMPI_Send(v.data.data(), 1, v.type, peer, 9, MPI_COMM_WORLD);
          PMPI_Recv(v.data.data(), 1, v.type, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          PMPI_Recv(v.data.data(), 1, v.type, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          PMPI_Send(v.data.data(), 1, v.type, peer, 9, MPI_COMM_WORLD);
        }
      } else if (pinger) {
        veneer::datatypes::pack_all(v.layout, 1, v.data.data(), v.packed.data());
        PMPI_Send(v.packed.data(), n, MPI_BYTE, peer, 9, MPI_COMM_WORLD);
        PMPI_Recv(v.packed.data(), n, MPI_BYTE, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        veneer::datatypes::unpack_all(v.layout, 1, v.data.data(), v.packed.data());
      } else {
        PMPI_Recv(v.packed.data(), n, MPI_BYTE, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        veneer::datatypes::unpack_all(v.layout, 1, v.data.data(), v.packed.data());
        veneer::datatypes::pack_all(v.layout, 1, v.data.data(), v.packed.data());
        PMPI_Send(v.packed.data(), n, MPI_BYTE, peer, 9, MPI_COMM_WORLD);
      }
    }
  };
  return time_pair(active, reps, batch, 2.0, run);
}

// MPI_Pack of the vector (the library's) against Veneer's packer, on every rank.
std::array<topo::Timing, 2> pack_times(StridedVector& v, int reps, double batch) {
  std::vector<char> out(static_cast<size_t>(v.bytes));
  auto run = [&](int method, int iterations) {
    for (int i = 0; i < iterations; ++i) {
      if (method == 0) {
        int position = 0;
        PMPI_Pack(v.data.data(), 1, v.type, out.data(), static_cast<int>(out.size()), &position, MPI_COMM_WORLD);
      } else {
        veneer::datatypes::pack_all(v.layout, 1, v.data.data(), out.data());
      }
    }
  };
  return time_pair(true, reps, batch, 1.0, run);
}

template <typename Measure>
std::pair<topo::Timing, topo::Timing> measure_pair(Measure& measure, StridedVector& v) {
  const std::array<topo::Timing, 2> t = measure(v);
  return {t[0], t[1]};
}

// One table (a level's ping-pong, or packing): every block class at every
// message size with at least two blocks, printed by rank 0 as it goes.
template <typename Measure>
topo::P2pLevel measure_p2p_table(const char* name, const Options& o, int rank, Measure measure) {
  topo::P2pLevel level;
  const std::vector<int64_t> sizes = p2p_message_sizes(o);
  // Every block class at every message size with at least two blocks.
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int64_t block : kBlockClasses)
    for (int64_t bytes : sizes)
      if (bytes / block >= 2) shapes.emplace_back(block, bytes);
  auto measure_at = [&](int64_t block, int64_t bytes) -> std::optional<topo::P2pPoint> {
    StridedVector v(block, bytes);
    int ok = v.ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) return std::nullopt;
    topo::P2pPoint point{block, bytes, {}, {}};
    std::tie(point.library, point.veneer) = measure_pair(measure, v);
    return point;
  };
  for (const auto& [block, bytes] : shapes)
    if (auto point = measure_at(block, bytes)) level.points.push_back(*point);
  // A loss stops the take-over at its block and above, and on a shared machine
  // a point's batches can all fall in one busy spell: each loss is measured
  // twice more once the whole table is done (at other moments), and the middle
  // of the three by ratio is kept. Every rank holds the same times (maxima
  // over ranks), so every rank re-measures the same points.
  std::vector<bool> again(level.points.size(), false);
  for (size_t i = 0; i < level.points.size(); ++i) {
    if (topo::p2p_outcome(level.points[i]) != topo::P2pOutcome::loss) continue;
    std::vector<topo::P2pPoint> tries = {level.points[i]};
    for (int k = 0; k < 2; ++k)
      if (auto p = measure_at(level.points[i].block, level.points[i].bytes)) tries.push_back(*p);
    std::sort(tries.begin(), tries.end(), [](const topo::P2pPoint& x, const topo::P2pPoint& y) {
      return x.library.median * y.veneer.median < y.library.median * x.veneer.median;
    });
    level.points[i] = tries[tries.size() / 2];
    again[i] = true;
  }
  level.max_block = topo::p2p_max_block(level.points);
  if (rank == 0) {
    std::printf(
        "# %s: us per call, library / veneer (library/veneer ratio; r: a loss at first, the middle of three"
        " measurements)\n# %8s",
        name, "block");
    for (int64_t bytes : sizes) std::printf(" %29lld", static_cast<long long>(bytes));
    std::printf("\n");
    for (int64_t block : kBlockClasses) {
      std::printf("  %8lld", static_cast<long long>(block));
      for (int64_t bytes : sizes) {
        size_t i = 0;
        while (i < level.points.size() && (level.points[i].block != block || level.points[i].bytes != bytes)) ++i;
        if (i == level.points.size()) {
          std::printf(" %29s", "-");
          continue;
        }
        const topo::P2pPoint& p = level.points[i];
        std::printf(" %9.2f / %7.2f (%5.2fx)%s", p.library.median * 1e6, p.veneer.median * 1e6,
                    p.library.median / p.veneer.median, again[i] ? "r" : " ");
      }
      std::printf("\n");
    }
    std::printf("# %s: Veneer pays up to a mean block of %lld B\n", name, static_cast<long long>(level.max_block));
    std::fflush(stdout);
  }
  return level;
}

// Within the first node with two ranks, between the first ranks of the first two nodes, and packing.
void measure_p2p(const topo::Hierarchy& h, const Options& o, topo::Profile& profile) {
  const int reps = std::clamp(o.repetitions, 3, 11);
  const double batch = std::min(o.batch_seconds, 0.002);
  topo::P2pProfile p2p;
  for (int node = 0; node < h.node_count; ++node) {
    const std::vector<int>& ranks = h.node_ranks[static_cast<size_t>(node)];
    if (ranks.size() < 2) continue;
    const int a = ranks[0], b = ranks[1];
    const std::string name = "p2p intra-node (ranks " + std::to_string(a) + ", " + std::to_string(b) + ")";
    p2p.intra = measure_p2p_table(name.c_str(), o, h.rank,
                                  [&](StridedVector& v) { return p2p_pingpong(a, b, v, reps, batch, h.rank); });
    break;
  }
  if (h.node_count >= 2) {
    const int a = h.node_ranks[0][0], b = h.node_ranks[1][0];
    const std::string name = "p2p inter-node (ranks " + std::to_string(a) + ", " + std::to_string(b) + ")";
    p2p.inter = measure_p2p_table(name.c_str(), o, h.rank,
                                  [&](StridedVector& v) { return p2p_pingpong(a, b, v, reps, batch, h.rank); });
  }
  p2p.pack = measure_p2p_table("MPI_Pack (every rank)", o, h.rank,
                               [&](StridedVector& v) { return pack_times(v, reps, batch); });
  if (h.rank == 0) {
    if (auto t = p2p.takeover_max_block())
      std::printf(
          "# send/receive take-over: the ping-pong tables above, per peer level (%s); Alltoallv/w: mean block"
          " <= %lld B (from the %s level)\n",
          p2p.inter ? "same node, other node" : "same node only: other-node peers pass through",
          static_cast<long long>(*t), p2p.inter ? "inter-node" : "intra-node");
    else std::printf("# one rank: no point-to-point to measure (the built-in take-over threshold stays)\n");
  }
  profile.p2p = std::move(p2p);
}

// ---- Collectives ------------------------------------------------------------------------

// Collectives from this size up are timed in both heap states. glibc maps
// blocks of 128 KiB and more by default; below, a library's temporaries come
// from the heap's free lists either way.
constexpr int64_t kHeapStatesFrom = int64_t{128} << 10;

// Puts glibc's heap into one of its two ways with large freed blocks:
// keeping them (thresholds far above any temporary: freed memory is reused
// and its pages stay mapped) or handing them back (glibc's fixed defaults,
// 128 KiB: every large block is mapped on malloc and unmapped on free, as in
// a job that set MALLOC_TRIM_THRESHOLD_ or whose heap history left the
// adaptive thresholds low). Either setting turns glibc's adaptive thresholds
// off for this process, which is the calibration's own. False where this is
// not glibc (the state is then left as it is).
bool use_heap(bool keep) {
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
  const int mmap_threshold = keep ? 32 << 20 : 128 << 10;  // 32 MiB: the largest glibc accepts
  const int trim_threshold = keep ? 1 << 30 : 128 << 10;
  return mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1 && mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1;
#else
  (void)keep;
  return false;
#endif
}

// Times every eligible method of collective `c` on h's communicator at
// every size of the ladder; `speak`: this rank prints the table.
void measure_collective(Collective c, const topo::Hierarchy& h, const Options& o, topo::Profile& profile, int* failures,
                        bool speak) {
  const std::string cname(alg::collective_name(c));
  int64_t previous = -1;
  for (int64_t target : ladder(o.min_bytes, o.max_bytes, o.step)) {
    bench::Workload w(c, target, h.size, h.rank);
    if (w.bytes == previous) continue;  // rounded to the same message (blocks per rank)
    previous = w.bytes;
    std::vector<std::string> wrong;
    const std::vector<std::string> methods = bench::checked_methods(w, h, &wrong);
    for (const std::string& m : wrong) {
      if (speak)
        std::printf("%-20s %9lld  %s WRONG RESULT: not timed\n", cname.c_str(), static_cast<long long>(w.bytes),
                    m.c_str());
      ++*failures;
    }
    const int iterations = bench::batch_iterations(w, h, o.batch_seconds, 2000);
    // Both heap states for large messages, where every rank can set them (all
    // ranks must time the same batches).
    int can = w.bytes >= kHeapStatesFrom && use_heap(true) ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &can, 1, MPI_INT, MPI_MIN, h.parent);
    const bool both = can != 0;
    // Per repetition the slowest rank's batch, as the model check times
    // them. Taking each rank's own median and spread and then the largest
    // of each would let a broadcast's root, which only sends and leaves
    // early, bring a spread of up to 175% of its own short median to another
    // rank's median, and keep the library where an algorithm was 1.3-1.7x
    // faster.
    bench::SlowestRank kept =
        bench::slowest_rank(bench::time_methods(methods, w, h, iterations, o.repetitions), h.parent);
    std::vector<double> returned(methods.size(), 0.0);
    if (both) {
      use_heap(false);
      const bench::SlowestRank back =
          bench::slowest_rank(bench::time_methods(methods, w, h, iterations, o.repetitions), h.parent);
      use_heap(true);
      returned = back.medians;
      for (size_t m = 0; m < methods.size(); ++m) kept.spreads[m] = std::max(kept.spreads[m], back.spreads[m]);
    }
    // Applications' patterns (bench::Pattern), at every size: every
    // collective one call between barriers (stored as `patterns`), and
    // rooted collectives with the root rotating (where the data must end or
    // start moves with it; stored as `rotating`). Large messages between
    // barriers too: back to back, a library's reduce of 512 KiB overlapped
    // one call's tail with the next call's start, and a binomial tree timed
    // that way ran at 0.79x of it called between barriers. The model scores
    // a fixed-root choice by its slowest fixed-root condition, and a call
    // whose root moved by the rotating time, so a choice is taken only where
    // it wins the way applications call, not only in back-to-back batches
    // with root 0.
    std::vector<double> patterns(methods.size(), 0.0), rotating(methods.size(), 0.0);
    std::vector<bench::Pattern> timed;
    timed.push_back({.barrier_between = true});
    if (c == Collective::bcast || c == Collective::reduce) timed.push_back({.rotate_root = true});
    // A barrier per call makes a batch of the smallest messages ten times
    // longer than the back-to-back one: fewer calls per batch, fewer batches.
    const int pattern_reps = std::max(5, o.repetitions / 3), pattern_calls = std::min(iterations, 250);
    for (const bench::Pattern& pattern : timed) {
      const bench::SlowestRank got =
          bench::slowest_rank(bench::time_methods(methods, w, h, pattern_calls, pattern_reps, pattern), h.parent);
      for (size_t m = 0; m < methods.size(); ++m) {
        double& into = pattern.rotate_root ? rotating[m] : patterns[m];
        into = std::max(into, got.medians[m]);
        kept.spreads[m] = std::max(kept.spreads[m], got.spreads[m]);
      }
    }
    std::vector<topo::Timing> timings;
    for (size_t m = 0; m < methods.size(); ++m)
      timings.push_back({kept.medians[m], kept.spreads[m], returned[m], patterns[m], rotating[m]});
    topo::CollectivePoint point;
    point.collective = cname;
    point.ranks = h.size;
    point.nodes = h.node_count;
    point.ranks_per_node = h.max_ranks_per_node;
    point.min_ranks_per_node = h.min_ranks_per_node;
    point.node_consecutive = h.node_consecutive;
    point.bytes = w.bytes;
    size_t fastest = 0;
    for (size_t m = 0; m < methods.size(); ++m) {
      if (timings[m].median <= 0) continue;
      point.times.emplace_back(methods[m], timings[m]);
      if (timings[m].worst() < timings[fastest].worst()) fastest = m;
    }
    if (speak) {
      std::printf("%-20s %9lld ", cname.c_str(), static_cast<long long>(w.bytes));
      for (size_t m = 0; m < methods.size(); ++m) {
        std::printf(" %s %.1f", methods[m].c_str(), timings[m].median * 1e6);
        if (both) std::printf("/%.1f", timings[m].returned * 1e6);
        if (timings[m].patterns > 0) std::printf(" (%.1f", timings[m].patterns * 1e6);
        if (timings[m].rotating > 0) std::printf(", %.1f", timings[m].rotating * 1e6);
        if (timings[m].patterns > 0) std::printf(")");
        std::printf("%s", m == fastest ? "*" : "");
      }
      std::printf("  (us%s%s, %d x %d calls)\n", both ? ": heap keeping/returning freed blocks" : "",
                  timed.size() > 1 ? "; (between barriers, root rotating)" : "; (between barriers)", o.repetitions,
                  iterations);
      std::fflush(stdout);
    }
    profile.collectives.push_back(std::move(point));
  }
}

// The communicators a job meets besides its whole self: halves and a ladder
// of smaller sizes (row and column communicators, the rank counts of smaller
// jobs: ranks 0..s-1 of the world), and the node leaders. Each is timed
// alone, the other ranks waiting, at every other size of the ladder with
// a third of the repetitions, so that the model has measured points at the rank
// counts it will be asked about instead of one count standing for all.
std::vector<int> sub_sizes(int p) {
  std::vector<int> sizes;
  for (int s = p - 1; s >= 2; --s)
    if (p <= 8 || (s & (s - 1)) == 0 || s == p / 2) sizes.push_back(s);
  return sizes;
}

struct ShapeKey {
  int ranks, nodes, max_rpn, min_rpn;
  bool consecutive;
  bool operator==(const ShapeKey&) const = default;
};

void measure_sub_communicators(const topo::Hierarchy& world, const Options& o, topo::Profile& profile, int* failures) {
  Options sub = o;
  sub.step = o.step * 2;
  sub.repetitions = std::max(5, o.repetitions / 3);
  std::vector<ShapeKey> seen{
      {world.size, world.node_count, world.max_ranks_per_node, world.min_ranks_per_node, world.node_consecutive}};
  std::vector<std::pair<std::string, int>> groups;  // (label, color of this rank; MPI_UNDEFINED: waits)
  for (int s : sub_sizes(world.size))
    groups.emplace_back(std::to_string(s) + " of " + std::to_string(world.size) + " ranks",
                        world.rank < s ? 0 : MPI_UNDEFINED);
  if (world.node_count >= 2)
    groups.emplace_back("the " + std::to_string(world.node_count) + " node leaders",
                        world.node_rank == 0 ? 0 : MPI_UNDEFINED);
  for (const auto& [label, color] : groups) {
    MPI_Comm comm = MPI_COMM_NULL;
    if (PMPI_Comm_split(MPI_COMM_WORLD, color, world.rank, &comm) != MPI_SUCCESS) comm = MPI_COMM_NULL;
    const bool comm_was_null = comm == MPI_COMM_NULL;
    if (!comm_was_null) {
      // World rank 0 is in every group (rank 0 of the ladder, leader of node 0).
      const topo::Hierarchy* h = topo::hierarchy(comm);
      const ShapeKey key =
          h ? ShapeKey{h->size, h->node_count, h->max_ranks_per_node, h->min_ranks_per_node, h->node_consecutive}
            : ShapeKey{};
      // A shape already timed (the world's, or an earlier group's) is not timed again.
      if (h && std::find(seen.begin(), seen.end(), key) == seen.end()) {
        seen.push_back(key);
        if (world.rank == 0) {
          std::printf("# collectives on %s: %s\n", label.c_str(), h->describe().c_str());
          std::fflush(stdout);
        }
        for (Collective c : o.collectives) measure_collective(c, *h, sub, profile, failures, world.rank == 0);
      }
      PMPI_Comm_free(&comm);
    }
    // The ranks outside the group wait asleep, not spinning in a barrier on
    // the cores the group is timed on (blocking and nonblocking barriers do
    // not match: everyone takes the nonblocking one).
    MPI_Request done = MPI_REQUEST_NULL;
    MPI_Ibarrier(MPI_COMM_WORLD, &done);
    if (comm_was_null) {
      for (int finished = 0; !finished;) {
        MPI_Test(&done, &finished, MPI_STATUS_IGNORE);
        if (!finished) std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    } else {
      MPI_Wait(&done, MPI_STATUS_IGNORE);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const double started = bench::now();
  int p = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Options o;
  if (!parse(argc, argv, o)) {
    if (rank == 0) std::fputs(kUsage, stderr);
    MPI_Finalize();
    return 2;
  }
  std::string path = o.out.empty() ? topo::profile_path() : o.out;
  if (path.empty()) {
    if (rank == 0) std::fprintf(stderr, "veneer-calibrate: VENEER_PROFILE=off: name a file with --out\n");
    MPI_Finalize();
    return 2;
  }
  alg::collectives_init();
  const topo::Hierarchy* h = topo::hierarchy(MPI_COMM_WORLD);
  if (!h) {
    if (rank == 0) std::fprintf(stderr, "veneer-calibrate: no hierarchy for MPI_COMM_WORLD\n");
    MPI_Finalize();
    return 1;
  }
  topo::Profile profile;
  profile.fingerprint = topo::current_fingerprint();
  profile.created = topo::utc_timestamp();
  profile.machine = topo::machine().summary();
  const bool pinned = bench::all_ranks_pinned();
  const std::string placement = bench::placement_warning(h->oversubscribed, pinned);
  if (rank == 0) {
    std::printf("# veneer-calibrate: %s\n# machine: %s\n# fingerprint: %s (%s; %s; %s)\n# profile: %s\n",
                h->describe().c_str(), profile.machine.c_str(), profile.fingerprint.digest().c_str(),
                profile.fingerprint.cpu.c_str(), profile.fingerprint.mpi.c_str(), profile.fingerprint.transport.c_str(),
                path.c_str());
    if (!placement.empty()) {
      std::printf("# warning: %s\n", placement.c_str());
      std::fprintf(stderr, "veneer-calibrate: warning: %s\n", placement.c_str());
    }
  }
  measure_levels(*h, o, profile);
  measure_p2p(*h, o, profile);
  int failures = 0;
  if (p >= 2 && !o.collectives.empty()) {
    if (rank == 0)
      std::printf("# collectives: median per rank of %d interleaved batches of ~%.0f ms, slowest rank; * fastest\n",
                  o.repetitions, o.batch_seconds * 1e3);
    for (Collective c : o.collectives) measure_collective(c, *h, o, profile, &failures, rank == 0);
    measure_sub_communicators(*h, o, profile, &failures);
  } else if (rank == 0 && p < 2) {
    std::printf("# one rank: no collectives to measure (Veneer passes them through)\n");
  }
  double elapsed = bench::now() - started;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  {
    veneer::json::Value cal = veneer::json::Value::object();
    cal.set("ranks", p);
    cal.set("nodes", h->node_count);
    cal.set("ranks_per_node", h->max_ranks_per_node);
    cal.set("pretend_nodes", h->pretend);
    cal.set("oversubscribed", h->oversubscribed);
    cal.set("pinned", pinned);
    cal.set("repetitions", o.repetitions);
    cal.set("batch_seconds", o.batch_seconds);
    cal.set("min_bytes", o.min_bytes);
    cal.set("max_bytes", o.max_bytes);
    cal.set("step", o.step);
    cal.set("quick", o.quick);
    cal.set("seconds", elapsed);
    profile.calibration = std::move(cal);
  }
  int status = failures ? 1 : 0;
  if (rank == 0) {
    if (auto error = topo::write_profile(profile, path)) {
      std::fprintf(stderr, "veneer-calibrate: %s\n", error->c_str());
      status = 1;
    } else {
      std::printf("veneer-calibrate: wrote %s (%zu collective points) in %.1f s\n", path.c_str(),
                  profile.collectives.size(), elapsed);
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  alg::collectives_finalize();
  MPI_Finalize();
  return status;
}
