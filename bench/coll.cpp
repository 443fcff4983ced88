// veneer-bench-coll: every collective algorithm of Veneer against the
// library's own (PMPI), side by side in one run, from 8 B to 64 MiB.
//
// Linked with the algorithms library directly (not libveneer), so the
// library's collectives are the plain MPI ones. For every collective and
// size it first runs each algorithm once and checks the result against the
// library's (integer-valued doubles: sums are exact in any order), then
// times all of them in interleaved batches and prints medians: latency,
// algorithm and bus bandwidth (nccl-tests convention) and the speed-up over
// the library; "auto" names the algorithm Veneer's selector would pick.
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
#include "topology/hierarchy.h"
#include "topology/machine.h"

namespace {

namespace alg = veneer::algorithms;
using alg::Collective;

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

int64_t parse_bytes(const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end && (*end == 'k' || *end == 'K')) v *= 1024;
  if (end && (*end == 'm' || *end == 'M')) v *= 1024 * 1024;
  return static_cast<int64_t>(v);
}

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

// One call of collective c moving about `bytes` (as the tuning rules count
// them), on buffers owned here.
struct Workload {
  Collective collective;
  int p = 1, rank = 0;
  int64_t bytes = 0;  // as actually moved
  std::vector<double> send, recv;
  std::vector<int> rcounts;
  alg::Call call;

  Workload(Collective c, int64_t target, int size, int me) : collective(c), p(size), rank(me) {
    call.collective = c;
    const bool reduction = c == Collective::allreduce || c == Collective::reduce ||
                           c == Collective::reduce_scatter || c == Collective::reduce_scatter_block;
    const int64_t elements = std::max<int64_t>(1, target / 8);
    if (reduction) {
      call.type = MPI_DOUBLE;
      call.op = MPI_SUM;
      int64_t in = elements, out = elements;
      if (c == Collective::reduce_scatter || c == Collective::reduce_scatter_block) {
        const int64_t block = std::max<int64_t>(1, elements / p);
        in = block * p;
        out = block;
        call.count = static_cast<int>(block);
        rcounts.assign(static_cast<size_t>(p), static_cast<int>(block));
        call.rcounts = rcounts.data();
      } else {
        call.count = static_cast<int>(elements);
      }
      send.resize(static_cast<size_t>(in));
      recv.resize(static_cast<size_t>(std::max(in, out)));
      bytes = in * 8;
      // Small integers: sums are exact whatever the order, so results compare exactly.
      for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<double>((i * 7 + static_cast<size_t>(rank) * 3) % 17);
    } else {
      call.type = MPI_BYTE;
      call.stype = MPI_BYTE;
      if (c == Collective::bcast) {
        call.count = static_cast<int>(target);
        recv.resize(static_cast<size_t>((target + 7) / 8));
        bytes = target;
      } else {
        const int64_t block = std::max<int64_t>(1, target / p);
        call.count = call.scount = static_cast<int>(block);
        recv.resize(static_cast<size_t>((block * p + 7) / 8));
        send.resize(static_cast<size_t>(((c == Collective::alltoall ? block * p : block) + 7) / 8));
        bytes = block * p;
      }
      for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<double>(i % 251 + static_cast<size_t>(rank));
      for (size_t i = 0; i < recv.size(); ++i) recv[i] = static_cast<double>(i % 13 + static_cast<size_t>(rank));
    }
    call.sbuf = send.data();
    call.rbuf = recv.data();
  }
};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Runs one call; on the bcast root the buffer is its input, so it is refilled only by the check.
bool run_once(const std::string& method, Workload& w, const veneer::topology::Hierarchy& h) {
  auto rc = alg::run_with(method, w.call, h);
  return rc && *rc == MPI_SUCCESS;
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
  const veneer::topology::Hierarchy* h = veneer::topology::hierarchy(MPI_COMM_WORLD);
  if (!h) {
    if (rank == 0) std::fprintf(stderr, "veneer-bench-coll: no hierarchy for MPI_COMM_WORLD\n");
    MPI_Finalize();
    return 1;
  }
  FILE* csv = nullptr;
  if (rank == 0) {
    std::printf("# veneer-bench-coll: %s\n# machine: %s\n", h->describe().c_str(),
                veneer::topology::machine().summary().c_str());
    if (!o.explain)
      std::printf("# medians of %d batches of ~%.0f ms; x lib = library time / this time (> 1: faster than the library)\n",
                  o.repetitions, o.batch_seconds * 1e3);
    if (!o.csv_path.empty() && (csv = std::fopen(o.csv_path.c_str(), "w")))
      std::fprintf(csv, "collective,ranks,nodes,bytes,method,latency_us,algbw_GBps,busbw_GBps,speedup_vs_library,auto\n");
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
      std::vector<std::string> methods{"library"};
      for (const auto* a : alg::algorithms_for(c)) methods.emplace_back(a->name);
      const std::vector<double> original = w.recv;
      std::vector<double> expected = original;
      w.call.rbuf = expected.data();
      run_once("library", w, *h);
      std::vector<std::string> runnable{"library"};
      for (size_t m = 1; m < methods.size(); ++m) {
        std::vector<double> got = original;
        w.call.rbuf = got.data();
        auto rc = alg::run_with(methods[m], w.call, *h);
        if (!rc) continue;  // not eligible here (same answer on every rank)
        // Reduce: only the root's result counts; reduce_scatter: only this rank's block.
        size_t compare = got.size();
        if (c == Collective::reduce_scatter || c == Collective::reduce_scatter_block)
          compare = static_cast<size_t>(w.call.count);
        bool ok = *rc == MPI_SUCCESS &&
                  (c == Collective::reduce && rank != 0 ? true
                                                        : std::equal(got.begin(), got.begin() + static_cast<long>(compare), expected.begin()));
        int all_ok = ok ? 1 : 0;
        MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all_ok) {
          if (rank == 0) std::printf("%10lld  %-22s WRONG RESULT: not timed\n", static_cast<long long>(w.bytes), methods[m].c_str());
          ++failures;
          continue;
        }
        runnable.push_back(methods[m]);
      }
      w.call.rbuf = w.recv.data();
      // Batch length: calibrated on the library by rank 0, the same on all ranks.
      double t0 = now();
      run_once("library", w, *h);
      double once = now() - t0;
      MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      int iterations = static_cast<int>(std::clamp(o.batch_seconds / std::max(once, 1e-7), 1.0, 20000.0));
      MPI_Bcast(&iterations, 1, MPI_INT, 0, MPI_COMM_WORLD);
      std::vector<std::vector<double>> samples(runnable.size());
      for (int r = 0; r < o.repetitions; ++r) {
        for (size_t k = 0; k < runnable.size(); ++k) {
          const size_t m = (k + static_cast<size_t>(r)) % runnable.size();  // rotate who goes first
          run_once(runnable[m], w, *h);                                      // warm
          MPI_Barrier(MPI_COMM_WORLD);
          double start = now();
          for (int i = 0; i < iterations; ++i) run_once(runnable[m], w, *h);
          double t = (now() - start) / iterations;
          MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          samples[m].push_back(t);
        }
      }
      std::vector<double> median(runnable.size());
      for (size_t m = 0; m < runnable.size(); ++m) {
        auto& s = samples[m];
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
