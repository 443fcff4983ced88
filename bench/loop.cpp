// SPDX-License-Identifier: BSD-3-Clause
// veneer-bench-loop: one collective per iteration between computations, as
// applications call them, through Veneer and through the library side by side.
//
// Each iteration busy-waits for a compute time that differs by rank and by
// iteration (0.5-1.5x --compute, the same sequence on both sides), then makes
// one collective call. A round runs --iterations such iterations through the
// MPI_ entry points (Veneer's, when it is preloaded) and as many through the
// PMPI_ ones (the library's own), which side goes first alternating by round.
// Before a shape's first round, --prime calls (200 unless said) go through the
// library untimed: a library's first calls of a size can be slow for longer
// than a side's warm-up (MPICH 4.0's 16 KiB allreduce on 4 ranks: its first
// hundred calls 2-5x its later ones), and in a separate job of its own each
// side would pay them; in one job only the side that went first would (the
// library against itself read 0.21-0.35 there). Veneer's side is warmed up
// by nothing beyond --warmup calls a side: what it spends on trying
// algorithms on the job's own pattern, and its algorithms' own first calls,
// are in its time. Every result of
// every call is checked against values computed by hand; a wrong byte is
// reported and the exit status is 1.
//
//   mpirun -np N [-x LD_PRELOAD=libveneer.so] veneer-bench-loop
//       [--coll allreduce,bcast,...|all] [--bytes 8,16,64k,512k] [--compute US]
//       [--iterations N] [--rounds R] [--warmup N] [--prime N] [--osu] [--json FILE] [--quick]
//
// Collectives: allreduce (doubles, sum), reduce (doubles, sum, the root moving
// with the iteration), bcast (the root moving), bcast-barrier (a barrier, then
// a broadcast from rank 0: the pattern of OSU's timing loop), allgather and
// alltoall (--bytes per rank). Reported per shape: microseconds per iteration
// of the slowest rank, compute included, for each side, the mean over rounds;
// the library's time over Veneer's for the whole run (above 1: Veneer faster;
// Veneer's trials on the first round included), and its range over rounds.
// The program never links libveneer; without the preload both sides are the
// library, and the ratio shows the noise.
//
// --osu runs OSU's timing loop instead: no compute; each call timed alone,
// a barrier after it (through the same side's entry point, untimed); the
// root of bcast and reduce fixed at rank 0; OSU's iteration counts (1000
// timed after 200 warm-up calls up to 8 KiB, 100 after 10 above, unless
// --iterations, --warmup or --quick say otherwise) and its sizes, 8 B-1 MiB in powers
// of two; reported per shape: the time of one call averaged over the calls
// and then over the ranks (OSU's "Avg Latency"), and the ratio of the
// slowest rank's averages (OSU's "Max Latency"), which an application that
// waits for every rank feels.
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

enum class Coll { allreduce, reduce, bcast, bcast_barrier, allgather, alltoall };

struct CollName {
  Coll coll;
  const char* name;
};
constexpr CollName kColls[] = {{Coll::allreduce, "allreduce"}, {Coll::reduce, "reduce"},
                               {Coll::bcast, "bcast"},         {Coll::bcast_barrier, "bcast-barrier"},
                               {Coll::allgather, "allgather"}, {Coll::alltoall, "alltoall"}};

const char* name_of(Coll c) {
  for (const auto& n : kColls)
    if (n.coll == c) return n.name;
  return "?";
}

struct Options {
  std::vector<Coll> colls;
  std::vector<long> bytes;
  double compute_us = 100;
  int iterations = 400;
  int rounds = 4;
  int warmup = 5;
  int prime = 200;  // the library's calls of a shape before its first round
  bool osu = false;
  bool iterations_given = false, warmup_given = false;
  std::string json_path;
};

long parse_size(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v <= 0) return -1;
  double scale = 1;
  if (*end == 'k' || *end == 'K') scale = 1024, ++end;
  if (*end == 'm' || *end == 'M') scale = 1024.0 * 1024, ++end;
  if (*end != '\0') return -1;
  return static_cast<long>(v * scale);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    const size_t end = comma == std::string::npos ? s.size() : comma;
    if (end > at) out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

bool parse_colls(const std::string& list, std::vector<Coll>& out) {
  for (const auto& word : split(list)) {
    if (word == "all") {
      for (const auto& n : kColls) out.push_back(n.coll);
      continue;
    }
    bool found = false;
    for (const auto& n : kColls)
      if (word == n.name) out.push_back(n.coll), found = true;
    if (!found) return false;
  }
  return !out.empty();
}

bool parse(int argc, char** argv, Options& o) {
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    const char* v = a + 1 < argc ? argv[a + 1] : nullptr;
    if (flag == "--quick") {
      o.iterations = 40;
      o.rounds = 2;
      o.compute_us = 20;
      o.prime = 10;
      o.iterations_given = o.warmup_given = true;  // OSU's loop too
      continue;
    }
    if (flag == "--osu") {
      o.osu = true;
      continue;
    }
    if (!v) return false;
    ++a;
    if (flag == "--coll") {
      o.colls.clear();
      if (!parse_colls(v, o.colls)) return false;
    } else if (flag == "--bytes") {
      o.bytes.clear();
      for (const auto& w : split(v)) {
        const long b = parse_size(w);
        if (b <= 0) return false;
        o.bytes.push_back(b);
      }
      if (o.bytes.empty()) return false;
    } else if (flag == "--compute") {
      o.compute_us = std::max(0.0, std::atof(v));
    } else if (flag == "--iterations") {
      o.iterations = std::max(1, std::atoi(v));
      o.iterations_given = true;
    } else if (flag == "--rounds") {
      o.rounds = std::max(1, std::atoi(v));
    } else if (flag == "--warmup") {
      o.warmup = std::max(0, std::atoi(v));
      o.warmup_given = true;
    } else if (flag == "--prime") {
      o.prime = std::max(0, std::atoi(v));
    } else if (flag == "--json") {
      o.json_path = v;
    } else {
      return false;
    }
  }
  if (o.colls.empty()) parse_colls("all", o.colls);
  if (o.osu) {
    // bcast-barrier is OSU's bcast already; the moving roots are not OSU's.
    std::erase(o.colls, Coll::bcast_barrier);
    if (o.colls.empty()) o.colls.push_back(Coll::bcast);
    o.compute_us = 0;
    if (o.bytes.empty())
      for (long b = 8; b <= 1024 * 1024; b *= 2) o.bytes.push_back(b);
  }
  if (o.bytes.empty()) o.bytes = {8, 16, 64 * 1024, 512 * 1024};
  return true;
}

// OSU's counts: 1000 timed calls after 200 warm-up ones up to 8 KiB, 100 after 10 above.
int iterations_for(const Options& o, long bytes) {
  if (!o.osu || o.iterations_given) return o.iterations;
  return bytes <= 8192 ? 1000 : 100;
}
int warmup_for(const Options& o, long bytes) {
  if (!o.osu || o.warmup_given) return o.warmup;
  return bytes <= 8192 ? 200 : 10;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The compute time of one iteration on one rank: 0.5-1.5x the nominal,
// a hash of (rank, iteration), so both sides see the same sequence.
double compute_seconds(double nominal_us, int rank, int iteration) {
  uint32_t h = static_cast<uint32_t>(rank) * 2654435761u ^ static_cast<uint32_t>(iteration) * 40503u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return nominal_us * 1e-6 * (0.5 + (h % 1001) / 1000.0);
}

void busy_wait(double seconds) {
  const double until = now() + seconds;
  while (now() < until) {
  }
}

// Calls go to Veneer (MPI_) or the library (PMPI_).
struct Calls {
  bool veneer;
  int allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) const {
    return veneer ? MPI_Allreduce(s, r, n, t, op, c) : PMPI_Allreduce(s, r, n, t, op, c);
  }
  int reduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) const {
    return veneer ? MPI_Reduce(s, r, n, t, op, root, c) : PMPI_Reduce(s, r, n, t, op, root, c);
  }
  int bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) const {
    return veneer ? MPI_Bcast(b, n, t, root, c) : PMPI_Bcast(b, n, t, root, c);
  }
  int barrier(MPI_Comm c) const { return veneer ? MPI_Barrier(c) : PMPI_Barrier(c); }
  int allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) const {
    return veneer ? MPI_Allgather(s, sn, st, r, rn, rt, c) : PMPI_Allgather(s, sn, st, r, rn, rt, c);
  }
  int alltoall(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) const {
    return veneer ? MPI_Alltoall(s, sn, st, r, rn, rt, c) : PMPI_Alltoall(s, sn, st, r, rn, rt, c);
  }
};

// One shape: the buffers, filling them for an iteration and checking the result.
class Shape {
 public:
  Shape(Coll coll, long bytes, int rank, int size, bool fixed_root)
      : coll_(coll), rank_(rank), size_(size), fixed_root_(fixed_root) {
    reduction_ = coll == Coll::allreduce || coll == Coll::reduce;
    count_ = reduction_ ? static_cast<int>(std::max<long>(1, (bytes + 7) / 8)) : static_cast<int>(bytes);
    const size_t element = reduction_ ? sizeof(double) : 1;
    const size_t per_rank = coll == Coll::allgather || coll == Coll::alltoall ? static_cast<size_t>(size) : 1;
    send_.assign(static_cast<size_t>(count_) * element * per_rank, 0);
    recv_.assign(static_cast<size_t>(count_) * element * per_rank, 0);
    bytes_ = static_cast<long>(count_) * static_cast<long>(element);
  }
  long bytes() const { return bytes_; }

  void fill(int it) {
    switch (coll_) {
      case Coll::allreduce:
      case Coll::reduce: {
        auto* d = reinterpret_cast<double*>(send_.data());
        for (int j = 0; j < count_; ++j) d[j] = (rank_ + 1) * (j % 7 + 1) + it % 5;
        std::fill(recv_.begin(), recv_.end(), 0xee);
        break;
      }
      case Coll::bcast:
      case Coll::bcast_barrier:
        for (int j = 0; j < count_; ++j)
          send_[j] = rank_ == root(it) ? bcast_byte(it, j) : static_cast<unsigned char>(0xee);
        break;
      case Coll::allgather:
        for (int j = 0; j < count_; ++j) send_[j] = block_byte(rank_, 0, j, it);
        std::fill(recv_.begin(), recv_.end(), 0xee);
        break;
      case Coll::alltoall:
        for (int d = 0; d < size_; ++d)
          for (int j = 0; j < count_; ++j) send_[static_cast<size_t>(d) * count_ + j] = block_byte(rank_, d, j, it);
        std::fill(recv_.begin(), recv_.end(), 0xee);
        break;
    }
  }

  void call(const Calls& m, int it) {
    const MPI_Comm w = MPI_COMM_WORLD;
    switch (coll_) {
      case Coll::allreduce: m.allreduce(send_.data(), recv_.data(), count_, MPI_DOUBLE, MPI_SUM, w); break;
      case Coll::reduce: m.reduce(send_.data(), recv_.data(), count_, MPI_DOUBLE, MPI_SUM, root(it), w); break;
      case Coll::bcast_barrier:
        m.barrier(w);
        m.bcast(send_.data(), count_, MPI_BYTE, root(it), w);
        break;
      case Coll::bcast: m.bcast(send_.data(), count_, MPI_BYTE, root(it), w); break;
      case Coll::allgather: m.allgather(send_.data(), count_, MPI_BYTE, recv_.data(), count_, MPI_BYTE, w); break;
      case Coll::alltoall: m.alltoall(send_.data(), count_, MPI_BYTE, recv_.data(), count_, MPI_BYTE, w); break;
    }
  }

  // Wrong elements of this rank's result for iteration `it` (0: all right).
  long check(int it) const {
    long wrong = 0;
    switch (coll_) {
      case Coll::allreduce:
      case Coll::reduce: {
        if (coll_ == Coll::reduce && rank_ != root(it)) return 0;
        const auto* d = reinterpret_cast<const double*>(recv_.data());
        const double ranks_sum = size_ * (size_ + 1) / 2.0;
        for (int j = 0; j < count_; ++j)
          if (d[j] != ranks_sum * (j % 7 + 1) + static_cast<double>(size_) * (it % 5)) ++wrong;
        break;
      }
      case Coll::bcast:
      case Coll::bcast_barrier:
        for (int j = 0; j < count_; ++j) wrong += send_[j] != bcast_byte(it, j);
        break;
      case Coll::allgather:
        for (int s = 0; s < size_; ++s)
          for (int j = 0; j < count_; ++j)
            wrong += recv_[static_cast<size_t>(s) * count_ + j] != block_byte(s, 0, j, it);
        break;
      case Coll::alltoall:
        for (int s = 0; s < size_; ++s)
          for (int j = 0; j < count_; ++j)
            wrong += recv_[static_cast<size_t>(s) * count_ + j] != block_byte(s, rank_, j, it);
        break;
    }
    return wrong;
  }

 private:
  // bcast-barrier keeps rank 0 as its root, as OSU's loop does; the others
  // move, except in OSU's loop.
  int root(int it) const { return coll_ == Coll::bcast_barrier || fixed_root_ ? 0 : it % size_; }
  static unsigned char bcast_byte(int it, int j) { return static_cast<unsigned char>(it * 7 + j * 3 + 1); }
  static unsigned char block_byte(int from, int to, int j, int it) {
    return static_cast<unsigned char>(from * 13 + to * 5 + j + it * 3);
  }

  Coll coll_;
  int rank_, size_;
  bool fixed_root_;
  bool reduction_ = false;
  int count_ = 0;
  long bytes_ = 0;
  std::vector<unsigned char> send_, recv_;
};

struct Side {
  double seconds = 0;  // this rank's compute + calls over the round's iterations (OSU's loop: the calls alone)
  long wrong = 0;
  long calls = 0;
};

// One side's iterations (warm-up first, untimed); the check runs outside the clock.
Side run_side(Shape& shape, const Calls& calls, const Options& o, int rank, int first_iteration, int warmup,
              int iterations) {
  Side s;
  for (int w = 0; w < warmup; ++w) {
    shape.fill(first_iteration + w);
    shape.call(calls, first_iteration + w);
    if (o.osu) calls.barrier(MPI_COMM_WORLD);
    s.wrong += shape.check(first_iteration + w);
  }
  for (int i = 0; i < iterations; ++i) {
    const int it = first_iteration + warmup + i;
    shape.fill(it);
    if (o.osu) {
      // OSU's loop: the call alone on the clock, a barrier after it.
      const double t0 = now();
      shape.call(calls, it);
      s.seconds += now() - t0;
      calls.barrier(MPI_COMM_WORLD);
    } else {
      const double t0 = now();
      busy_wait(compute_seconds(o.compute_us, rank, i));
      shape.call(calls, it);
      s.seconds += now() - t0;
    }
    s.wrong += shape.check(it);
    ++s.calls;
  }
  return s;
}

bool veneer_loaded() {
  // A symbol only libveneer defines: asked of the dynamic linker.
  return dlsym(RTLD_DEFAULT, "_ZN6veneer7kernels22install_device_runtimeEPNS0_13DeviceRuntimeE") != nullptr;
}

// Over all rounds: the first round's Veneer side holds its trials, and they count.
double mean(const std::vector<double>& v) {
  double sum = 0;
  for (const double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

struct Result {
  Coll coll;
  long bytes;
  std::vector<double> veneer_us, library_us, ratios;  // per round
  std::vector<double> veneer_max_us, library_max_us;  // OSU's loop: the slowest rank's, per round
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Options o;
  if (!parse(argc, argv, o)) {
    if (rank == 0)
      std::fprintf(stderr,
                   "usage: veneer-bench-loop [--coll allreduce,reduce,bcast,bcast-barrier,allgather,alltoall|all]\n"
                   "         [--bytes 8,16,64k,512k] [--compute US] [--iterations N] [--rounds R] [--warmup N]\n"
                   "         [--prime N] [--osu] [--json FILE] [--quick]\n");
    MPI_Finalize();
    return 2;
  }
  if (rank == 0 && o.osu) {
    std::printf(
        "loop: %d ranks; Veneer preloaded: %s; OSU's timing loop (a barrier after each call, roots at rank 0),\n"
        "loop: %d rounds; us per call averaged over the calls and the ranks (OSU's Avg), and the slowest\n"
        "loop: rank's average (OSU's Max), library/Veneer\n",
        size, veneer_loaded() ? "yes" : "no (both sides are the library)", o.rounds);
  } else if (rank == 0) {
    std::printf(
        "loop: %d ranks; Veneer preloaded: %s; %d iterations a side a round, %d rounds, %d warm-up calls;\n"
        "loop: compute %.0f us a call (0.5-1.5x, by rank and iteration); us per iteration of the slowest rank\n",
        size, veneer_loaded() ? "yes" : "no (both sides are the library)", o.iterations, o.rounds, o.warmup,
        o.compute_us);
  }
  if (rank == 0) {
    std::printf("%-14s %9s %12s %12s %10s %17s%s\n", "collective", "bytes", "Veneer us", "library us", "lib/Veneer",
                "rounds' range", o.osu ? "  slowest rank" : "");
    std::fflush(stdout);
  }

  std::vector<Result> results;
  long wrong = 0, checked = 0;
  int iteration = 0;  // keeps counting across sides and shapes, so stale data never passes
  for (const Coll coll : o.colls) {
    for (const long bytes : o.bytes) {
      Shape shape(coll, bytes, rank, size, o.osu);
      Result r{coll, shape.bytes(), {}, {}, {}, {}, {}};
      const int warmup = warmup_for(o, shape.bytes()), iterations = iterations_for(o, shape.bytes());
      if (o.prime > 0) {
        // The library's first calls of the shape, on neither side's clock.
        PMPI_Barrier(MPI_COMM_WORLD);
        const Side primed = run_side(shape, Calls{false}, o, rank, iteration, o.prime, 0);
        iteration += o.prime;
        wrong += primed.wrong;
        checked += o.prime;
      }
      for (int round = 0; round < o.rounds; ++round) {
        double us[2] = {0, 0}, max_us[2] = {0, 0};  // [0] Veneer, [1] library
        for (int k = 0; k < 2; ++k) {
          const bool veneer = (round + k) % 2 == 0;
          PMPI_Barrier(MPI_COMM_WORLD);
          const Side s = run_side(shape, Calls{veneer}, o, rank, iteration, warmup, iterations);
          iteration += warmup + iterations;
          // The slowest rank's loop; OSU's loop: the ranks' mean.
          double t = 0;
          PMPI_Allreduce(&s.seconds, &t, 1, MPI_DOUBLE, o.osu ? MPI_SUM : MPI_MAX, MPI_COMM_WORLD);
          if (o.osu) {
            t /= size;
            double slowest = 0;
            PMPI_Allreduce(&s.seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            max_us[veneer ? 0 : 1] = slowest / iterations * 1e6;
          }
          us[veneer ? 0 : 1] = t / iterations * 1e6;
          wrong += s.wrong;
          checked += s.calls + warmup;
        }
        r.veneer_us.push_back(us[0]);
        r.library_us.push_back(us[1]);
        r.ratios.push_back(us[1] / us[0]);
        r.veneer_max_us.push_back(max_us[0]);
        r.library_max_us.push_back(max_us[1]);
      }
      if (rank == 0) {
        const auto [lo, hi] = std::minmax_element(r.ratios.begin(), r.ratios.end());
        std::printf("%-14s %9ld %12.2f %12.2f %10.3f %8.3f-%-8.3f", name_of(coll), r.bytes, mean(r.veneer_us),
                    mean(r.library_us), mean(r.library_us) / mean(r.veneer_us), *lo, *hi);
        if (o.osu) std::printf(" %13.3f", mean(r.library_max_us) / mean(r.veneer_max_us));
        std::printf("\n");
        std::fflush(stdout);
      }
      results.push_back(std::move(r));
    }
  }

  long wrong_all = 0, checked_all = 0;
  PMPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  PMPI_Allreduce(&checked, &checked_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (wrong_all)
      std::printf("loop: %ld wrong elements in the results (every call's result was checked)\n", wrong_all);
    else std::printf("loop: verified %ld calls' results on all ranks\n", checked_all);
    if (!o.json_path.empty()) {
      if (FILE* f = std::fopen(o.json_path.c_str(), "w")) {
        std::fprintf(f,
                     "{\"ranks\":%d,\"veneer_preloaded\":%s,\"pattern\":\"%s\",\"iterations\":%d,\"rounds\":%d,"
                     "\"prime\":%d,\"compute_us\":%g,\"wrong\":%ld,\"results\":[",
                     size, veneer_loaded() ? "true" : "false", o.osu ? "osu" : "loop", o.iterations, o.rounds, o.prime,
                     o.compute_us, wrong_all);
        for (size_t i = 0; i < results.size(); ++i) {
          const Result& r = results[i];
          std::fprintf(f, "%s{\"coll\":\"%s\",\"bytes\":%ld,\"veneer_us\":%.3f,\"library_us\":%.3f,\"ratio\":%.4f",
                       i ? "," : "", name_of(r.coll), r.bytes, mean(r.veneer_us), mean(r.library_us),
                       mean(r.library_us) / mean(r.veneer_us));
          if (o.osu)
            std::fprintf(f, ",\"veneer_max_us\":%.3f,\"library_max_us\":%.3f", mean(r.veneer_max_us),
                         mean(r.library_max_us));
          std::fprintf(f, ",\"ratios\":[");
          for (size_t k = 0; k < r.ratios.size(); ++k) std::fprintf(f, "%s%.4f", k ? "," : "", r.ratios[k]);
          std::fprintf(f, "]}");
        }
        std::fprintf(f, "]}\n");
        std::fclose(f);
      } else {
        std::fprintf(stderr, "loop: cannot write %s\n", o.json_path.c_str());
      }
    }
  }
  MPI_Finalize();
  return wrong_all ? 1 : 0;
}
