// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Timing collective algorithms side by side, shared by veneer-bench-coll and
// veneer-calibrate: a workload per (collective, size), a check of every
// algorithm's result against the library's, and interleaved timed batches.
// Every function here is collective over the hierarchy's communicator
// (h.parent: MPI_COMM_WORLD, or a part of it the calibration times) and
// returns the same method lists on every rank of it.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/collectives.h"
#include "topology/hierarchy.h"
#include "topology/machine.h"

namespace veneer::bench {

namespace alg = veneer::algorithms;
using alg::Collective;

inline int64_t parse_bytes(const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end && (*end == 'k' || *end == 'K')) v *= 1024;
  if (end && (*end == 'm' || *end == 'M')) v *= 1024 * 1024;
  return static_cast<int64_t>(v);
}

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline bool is_reduction(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter ||
         c == Collective::reduce_scatter_block;
}

// One call of collective c moving about `target` bytes (as the tuning rules
// count them), on buffers owned here. Reductions sum doubles; the others move bytes.
struct Workload {
  Collective collective;
  int p = 1, rank = 0;
  int64_t bytes = 0;  // as actually moved, in the tuning rules' terms
  std::vector<double> send, recv;
  std::vector<int> rcounts;
  alg::Call call;

  Workload(Collective c, int64_t target, int size, int me) : collective(c), p(size), rank(me) {
    call.collective = c;
    const int64_t elements = std::max<int64_t>(1, target / 8);
    if (is_reduction(c)) {
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
      for (size_t i = 0; i < send.size(); ++i)
        send[i] = static_cast<double>((i * 7 + static_cast<size_t>(rank) * 3) % 17);
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

inline bool run_once(const std::string& method, Workload& w, const topology::Hierarchy& h) {
  auto rc = alg::run_with(method, w.call, h);
  return rc && *rc == MPI_SUCCESS;
}

// "library" and every algorithm of the collective that is eligible here and
// gives the library's result on every rank (checked once each). `wrong`
// collects those that ran but gave another result.
inline std::vector<std::string> checked_methods(Workload& w, const topology::Hierarchy& h,
                                                std::vector<std::string>* wrong = nullptr) {
  const Collective c = w.collective;
  const std::vector<double> original = w.recv;
  std::vector<double> expected = original;
  w.call.rbuf = expected.data();
  run_once("library", w, h);
  std::vector<std::string> runnable{"library"};
  for (const auto* a : alg::algorithms_for(c)) {
    const std::string method(a->name);
    std::vector<double> got = original;
    w.call.rbuf = got.data();
    auto rc = alg::run_with(method, w.call, h);
    if (!rc) continue;  // not eligible here (same answer on every rank)
    // Reduce: only the root's result counts; reduce_scatter: only this rank's block.
    size_t compare = got.size();
    if (c == Collective::reduce_scatter || c == Collective::reduce_scatter_block)
      compare = static_cast<size_t>(w.call.count);
    const bool ok = *rc == MPI_SUCCESS &&
                    (c == Collective::reduce && h.rank != 0
                         ? true
                         : std::equal(got.begin(), got.begin() + static_cast<long>(compare), expected.begin()));
    int all_ok = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, h.parent);
    if (all_ok) runnable.push_back(method);
    else if (wrong) wrong->push_back(method);
  }
  w.call.rbuf = w.recv.data();
  return runnable;
}

// Calls per timed batch so that one batch lasts about `batch_seconds` with the
// library, from the steady rate of back-to-back calls (1, 4, 16, ... calls
// until a quarter of a batch has passed; the slowest rank decides, so all
// ranks agree). A single call would mislead: a scheduling hiccup in it makes
// every batch one call long, and one call after a barrier is not the
// pipelined loop the batches time.
inline int batch_iterations(Workload& w, const topology::Hierarchy& h, double batch_seconds, int most = 20000) {
  run_once("library", w, h);  // warm
  int calls = 1;
  for (;;) {
    MPI_Barrier(h.parent);
    const double t0 = now();
    for (int i = 0; i < calls; ++i) run_once("library", w, h);
    double elapsed = now() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, h.parent);
    if (elapsed >= batch_seconds / 4 || calls >= most) {
      const double per_call = std::max(elapsed / calls, 1e-7);
      int iterations = static_cast<int>(std::clamp(batch_seconds / per_call, 1.0, static_cast<double>(most)));
      MPI_Bcast(&iterations, 1, MPI_INT, 0, h.parent);
      return iterations;
    }
    calls = static_cast<int>(std::min<int64_t>(int64_t{calls} * 4, most));
  }
}

// Whether every rank runs pinned (bound to fewer hardware threads than the
// machine has; a rank whose binding hwloc cannot tell counts as pinned).
// Collective over MPI_COMM_WORLD.
inline bool all_ranks_pinned() {
  const topology::Machine& m = topology::machine();
  int pinned = m.bound_pus == 0 || m.bound_pus < m.pus ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &pinned, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return pinned != 0;
}

// A warning for rank 0 to print when oversubscribed ranks are not pinned
// (`pinned`: all_ranks_pinned()):
// the operating system then pairs them on the cores differently at every
// launch, and the library's own collectives run up to 1.5x apart from one
// launch to the next (a 4-rank 16 B allgather on 2 cores: 3.5 or 5.2 us), so
// times taken in one launch do not carry over to another. Empty otherwise.
inline std::string placement_warning(bool oversubscribed, bool pinned) {
  if (pinned || !oversubscribed) return {};
  return "more ranks than cores and the ranks are not pinned: their times change from launch to launch "
         "(pin them, e.g. mpirun --bind-to core:overload-allowed; srun pins by default)";
}

// The order in which `n` methods run their batches in round `round`: a
// shuffle seeded by the round, so the same on every rank. Whatever one batch
// leaves behind for the next (the heap, the scheduler's placement of
// oversubscribed ranks, a token bucket) then falls on every method alike; a
// fixed rotation made one method always follow the same other one, and a
// 1 MiB reduce_scatter_block timed 1.7x apart under two names for the same
// algorithm.
inline std::vector<size_t> batch_order(size_t n, int round) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937 shuffle(0x5eed0000u + static_cast<unsigned>(round));
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[shuffle() % i]);  // same on every library
  return order;
}

// How the calls of a batch come. Back to back with root 0 is how a benchmark
// loop calls; applications also move the root on every call (panel
// broadcasts, pivots) and call once between computations, which a barrier
// before each call stands for: ranks arrive together, nothing of the
// previous call is still in flight. Such a batch is timed whole, barriers
// included: what a choice leaves the next barrier to wait for (ranks set
// free at different times) is part of its cost. Timed by the calls alone,
// MPICH's 128 B allreduce on 3 ranks had two_level at 9.8 us a call against
// the library's 11.4 on the slowest rank, and a loop of barrier and call
// took 18.2-19.3 us with two_level against 13.6-13.8 with the library.
struct Pattern {
  bool rotate_root = false;
  bool barrier_between = false;
};

// Calls a batch of `pattern` runs on `ranks` ranks: `iterations`, or where
// the root rotates, whole turns of the root over the ranks (`iterations`
// rounded up). A batch of large calls, one to three calls long, timed
// roots 0-2 alone, and where the root's place decides what crosses between
// nodes that is not what a moving root costs: on 2 hosts of 2 ranks (1
// Gbit/s links) every reduce of 1 MiB took 8.8 ms from root 0, so the
// profile had binomial, reduce_scatter_gather and two_level level, and
// with the root rotating they ran at 13.6, 13.0 and 8.5 ms a call.
inline int batch_calls(const Pattern& pattern, int iterations, int ranks) {
  if (!pattern.rotate_root || ranks < 1) return iterations;
  return (std::max(iterations, 1) + ranks - 1) / ranks * ranks;
}

// This rank's seconds per call, [method][repetition]: `repetitions` rounds in
// which every method runs one batch of batch_calls() calls (after one
// warm-up call), in batch_order(); a barrier before each batch.
inline std::vector<std::vector<double>> time_methods(const std::vector<std::string>& methods, Workload& w,
                                                     const topology::Hierarchy& h, int iterations, int repetitions,
                                                     Pattern pattern = {}) {
  iterations = batch_calls(pattern, iterations, h.size);
  std::vector<std::vector<double>> samples(methods.size());
  for (int r = 0; r < repetitions; ++r) {
    for (const size_t m : batch_order(methods.size(), r)) {
      run_once(methods[m], w, h);  // warm
      MPI_Barrier(h.parent);
      const double start = now();
      for (int i = 0; i < iterations; ++i) {
        if (pattern.rotate_root) w.call.root = i % h.size;  // every rank counts the same calls
        if (pattern.barrier_between) MPI_Barrier(h.parent);
        run_once(methods[m], w, h);
      }
      w.call.root = 0;
      samples[m].push_back((now() - start) / iterations);
    }
  }
  return samples;
}

inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Half the inter-quartile range relative to the median (0 for fewer than 3 samples).
inline double relative_half_iqr(std::vector<double> v) {
  if (v.size() < 3) return 0;
  std::sort(v.begin(), v.end());
  auto quantile = [&](double q) {
    const double at = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(at);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (at - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  const double med = quantile(0.5);
  return med > 0 ? 0.5 * (quantile(0.75) - quantile(0.25)) / med : 0;
}

// How far the median of these samples may be off, relative to it: the
// standard error of a median (1.2533 sigma / sqrt(n)) with sigma estimated
// robustly from the inter-quartile range (sigma = IQR / 1.349), i.e.
// 1.858 x half the IQR / sqrt(n). 0 for fewer than 3 samples.
inline double relative_median_error(const std::vector<double>& v) {
  if (v.size() < 3) return 0;
  return 1.858 * relative_half_iqr(v) / std::sqrt(static_cast<double>(v.size()));
}

// Per method, the slowest rank's time in each repetition (this rank's
// samples[method][repetition], the maximum over `comm`), then the
// median over the repetitions and its spread (relative_median_error). Every
// rank gets the same values. Through PMPI, so that the model check (linked
// with libveneer) times only the library's reduction here.
struct SlowestRank {
  std::vector<double> medians, spreads;
};
// `op` MPI_SUM: the ranks' mean instead (mean_over_ranks).
inline SlowestRank slowest_rank(const std::vector<std::vector<double>>& samples, MPI_Comm comm = MPI_COMM_WORLD,
                                MPI_Op op = MPI_MAX) {
  std::vector<double> flat;
  for (const auto& s : samples) flat.insert(flat.end(), s.begin(), s.end());
  PMPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(flat.size()), MPI_DOUBLE, op, comm);
  int ranks = 1;
  if (op == MPI_SUM) PMPI_Comm_size(comm, &ranks);
  for (double& x : flat) x /= ranks;
  SlowestRank out;
  size_t at = 0;
  for (const auto& s : samples) {
    const std::vector<double> slowest(flat.begin() + static_cast<std::ptrdiff_t>(at),
                                      flat.begin() + static_cast<std::ptrdiff_t>(at + s.size()));
    at += s.size();
    out.medians.push_back(median_of(slowest));
    out.spreads.push_back(relative_median_error(slowest));
  }
  return out;
}

// The same over the ranks' mean in each repetition (what OSU's benchmarks
// report: each rank's average, averaged over the ranks).
inline SlowestRank mean_over_ranks(const std::vector<std::vector<double>>& samples, MPI_Comm comm = MPI_COMM_WORLD) {
  return slowest_rank(samples, comm, MPI_SUM);
}

}  // namespace veneer::bench
