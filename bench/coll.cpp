// SPDX-License-Identifier: BSD-3-Clause
// veneer-bench-coll: every collective algorithm of Veneer against the
// library's own (PMPI), side by side in one run, from 8 B to 64 MiB.
//
// Linked with the algorithms library directly (not libveneer), so the
// library's collectives are the plain MPI ones. For every collective and
// size it first runs each algorithm once and checks the result against the
// library's (integer-valued doubles: sums are exact in any order), then
// times all of them in interleaved batches and prints medians: latency,
// algorithm and bus bandwidth (nccl-tests convention) and the speed-up over
// the library; "auto" names the algorithm Veneer's selector would pick with
// the machine profile libveneer would load (VENEER_PROFILE or the default path).
// Node structure: the real one, or VENEER_RANKS_PER_NODE's pretend nodes.

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/measured.h"
#include "bench/coll_timing.h"
#include "topology/hierarchy.h"
#include "topology/machine.h"

namespace {

namespace alg = veneer::algorithms;
using alg::Collective;
using veneer::bench::parse_bytes;
using veneer::bench::run_once;
using veneer::bench::Workload;

const char* const kUsage =
    "usage: veneer-bench-coll [--quick] [--collective NAME|all] [--min BYTES] [--max BYTES]\n"
    "                         [--repetitions R] [--seconds S] [--csv FILE] [--explain]\n"
    "  --quick          8 B to 256 KiB, short batches, allreduce and alltoall only unless --collective\n"
    "  --collective C   allreduce, bcast, reduce, allgather, reduce_scatter, reduce_scatter_block,\n"
    "                   alltoall or all (default all)\n"
    "  --min/--max      message sizes in bytes, k/M suffixes (default 8 to 64M, x8 steps)\n"
    "  --repetitions R  timed batches per method; medians are reported (default 5)\n"
    "  --seconds S      length of one timed batch (default 0.02)\n"
    "  --csv FILE       also write the table as CSV (rank 0)\n"
    "  --explain        print the selector's view of every size (predicted times, choice); no timing\n";

struct Options {
  bool quick = false;
  bool explain = false;
  std::vector<Collective> collectives;
  int64_t min_bytes = 8, max_bytes = int64_t{64} << 20;
  int repetitions = 5;
  double batch_seconds = 0.02;
  std::string csv_path;
};

bool parse(int argc, char** argv, Options& o) {
  bool sizes_given = false, collectives_given = false;
  for (int a = 1; a < argc; ++a) {
    std::string flag = argv[a];
    auto value = [&]() -> const char* { return a + 1 < argc ? argv[++a] : nullptr; };
    if (flag == "--quick") {
      o.quick = true;
    } else if (flag == "--explain") {
      o.explain = true;
    } else if (flag == "--collective") {
      const char* v = value();
      if (!v) return false;
      collectives_given = true;
      if (std::string(v) == "all") {
        for (int i = 0; i < alg::collective_count; ++i) o.collectives.push_back(static_cast<Collective>(i));
      } else if (auto c = alg::collective_from_name(v)) {
        o.collectives.push_back(*c);
      } else {
        return false;
      }
    } else if (flag == "--min" || flag == "--max") {
      const char* v = value();
      if (!v) return false;
      (flag == "--min" ? o.min_bytes : o.max_bytes) = std::max<int64_t>(1, parse_bytes(v));
      sizes_given = true;
    } else if (flag == "--repetitions") {
      const char* v = value();
      if (!v) return false;
      o.repetitions = std::max(1, std::atoi(v));
    } else if (flag == "--seconds") {
      const char* v = value();
      if (!v) return false;
      o.batch_seconds = std::max(1e-4, std::atof(v));
    } else if (flag == "--csv") {
      const char* v = value();
      if (!v) return false;
      o.csv_path = v;
    } else {
      return false;
    }
  }
  if (o.quick) {
    if (!sizes_given) o.max_bytes = 256 << 10;
    o.repetitions = std::min(o.repetitions, 3);
    o.batch_seconds = std::min(o.batch_seconds, 0.002);
    if (!collectives_given) o.collectives = {Collective::allreduce, Collective::alltoall};
  }
  if (o.collectives.empty())
    for (int i = 0; i < alg::collective_count; ++i) o.collectives.push_back(static_cast<Collective>(i));
  return true;
}

// Bus bandwidth factor (nccl-tests): the fraction of the message each rank's link must carry.
double bus_factor(Collective c, int p) {
  switch (c) {
    case Collective::allreduce: return 2.0 * (p - 1) / p;
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::reduce_scatter_block:
    case Collective::alltoall: return static_cast<double>(p - 1) / p;
    default: return 1.0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int p = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Options o;
  if (!parse(argc, argv, o)) {
    if (rank == 0) std::fputs(kUsage, stderr);
    MPI_Finalize();
    return 2;
  }
  alg::collectives_init();
  // The machine profile, as libveneer loads it at MPI_Init: "auto" is the choice it leads to.
  const alg::ProfileInfo profile = alg::load_profile(MPI_COMM_WORLD);
  const veneer::topology::Hierarchy* h = veneer::topology::hierarchy(MPI_COMM_WORLD);
  if (!h) {
    if (rank == 0) std::fprintf(stderr, "veneer-bench-coll: no hierarchy for MPI_COMM_WORLD\n");
    MPI_Finalize();
    return 1;
  }
  FILE* csv = nullptr;
  if (rank == 0) {
    std::printf("# veneer-bench-coll: %s\n# machine: %s\n# model: %s\n", h->describe().c_str(),
                veneer::topology::machine().summary().c_str(), profile.describe().c_str());
    if (!o.explain)
      std::printf(
          "# medians of %d batches of ~%.0f ms; x lib = library time / this time (> 1: faster than the library)\n",
          o.repetitions, o.batch_seconds * 1e3);
    if (!o.csv_path.empty() && (csv = std::fopen(o.csv_path.c_str(), "w")))
      std::fprintf(csv,
                   "collective,ranks,nodes,bytes,method,latency_us,algbw_GBps,busbw_GBps,speedup_vs_library,auto\n");
  }
  if (o.explain) {
    for (Collective c : o.collectives)
      for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 8) {
        std::string text = alg::explain(c, bytes, MPI_COMM_WORLD);
        if (rank == 0) std::printf("\n%s", text.c_str());
      }
    MPI_Finalize();
    return 0;
  }
  int failures = 0;
  for (Collective c : o.collectives) {
    const std::string cname(alg::collective_name(c));
    if (rank == 0)
      std::printf("\n%s  (busbw = algbw x %.3f)\n%10s  %-22s %12s %11s %11s %8s\n", cname.c_str(), bus_factor(c, p),
                  "bytes", "method", "latency_us", "algbw_GB/s", "busbw_GB/s", "x lib");
    for (int64_t target = o.min_bytes; target <= o.max_bytes; target *= 8) {
      Workload w(c, target, p, rank);
      // The methods that run here, each checked once against the library.
      std::vector<std::string> wrong;
      const std::vector<std::string> runnable = veneer::bench::checked_methods(w, *h, &wrong);
      for (const std::string& m : wrong) {
        if (rank == 0)
          std::printf("%10lld  %-22s WRONG RESULT: not timed\n", static_cast<long long>(w.bytes), m.c_str());
        ++failures;
      }
      const int iterations = veneer::bench::batch_iterations(w, *h, o.batch_seconds);
      auto samples = veneer::bench::time_methods(runnable, w, *h, iterations, o.repetitions);
      // The slowest rank's time of each batch; the median over batches.
      std::vector<double> median(runnable.size());
      for (size_t m = 0; m < runnable.size(); ++m) {
        auto& s = samples[m];
        MPI_Allreduce(MPI_IN_PLACE, s.data(), static_cast<int>(s.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        std::sort(s.begin(), s.end());
        median[m] = s[s.size() / 2];
      }
      const std::string chosen(alg::chosen_for(w.call, *h));
      if (rank == 0) {
        for (size_t m = 0; m < runnable.size(); ++m) {
          const double algbw = static_cast<double>(w.bytes) / median[m] / 1e9;
          const bool is_auto = runnable[m] == chosen;
          std::printf("%10lld  %-22s %12.2f %11.3f %11.3f %8.2f%s\n", static_cast<long long>(w.bytes),
                      runnable[m].c_str(), median[m] * 1e6, algbw, algbw * bus_factor(c, p), median[0] / median[m],
                      is_auto ? "  <- auto" : "");
          if (csv)
            std::fprintf(csv, "%s,%d,%d,%lld,%s,%.4f,%.5f,%.5f,%.4f,%d\n", cname.c_str(), p, h->node_count,
                         static_cast<long long>(w.bytes), runnable[m].c_str(), median[m] * 1e6, algbw,
                         algbw * bus_factor(c, p), median[0] / median[m], is_auto ? 1 : 0);
        }
      }
    }
  }
  if (csv) std::fclose(csv);
  MPI_Finalize();
  return failures ? 1 : 0;
}
