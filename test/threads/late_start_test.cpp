// SPDX-License-Identifier: BSD-3-Clause
// MPI initialised behind Veneer's back (PMPI_Init_thread, as a PMPI tool
// preloaded before Veneer or a Fortran main does): Veneer starts at the first
// MPI_Type_commit. Here one thread commits while the others are already
// packing (predefined types: Veneer reads its configuration on every call)
// and then commit and pack types of their own. Every MPI_Pack must give the
// library's bytes, and under ThreadSanitizer nothing Veneer sets up when it
// starts may be written while another thread reads it (it was: the start
// re-read the environment into the configuration every call reads).
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "support/config.h"
#include "support/counters.h"

namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 20;

std::vector<unsigned char> library_pack(const void* buf, int count, MPI_Datatype type) {
  int size = 0;
  PMPI_Pack_size(count, type, MPI_COMM_WORLD, &size);
  std::vector<unsigned char> out(static_cast<size_t>(size));
  int pos = 0;
  PMPI_Pack(buf, count, type, out.data(), size, &pos, MPI_COMM_WORLD);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  PMPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::printf("late_start_test: skipped, the library gave no MPI_THREAD_MULTIPLE\n");
    PMPI_Finalize();
    return 0;
  }
  std::atomic<int> wrong{0}, ready{0};
  std::atomic<bool> committed{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([t, &wrong, &ready, &committed] {
      std::vector<double> src(400);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(t * 1000 + static_cast<int>(i));
      auto check_pack = [&](int count, MPI_Datatype type) {
        const auto lib = library_pack(src.data(), count, type);
        std::vector<unsigned char> ours(lib.size());
        int pos = 0;
        if (MPI_Pack(src.data(), count, type, ours.data(), static_cast<int>(ours.size()), &pos, MPI_COMM_WORLD) !=
                MPI_SUCCESS ||
            ours != lib)
          wrong.fetch_add(1);
      };
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      if (t == 0) {
        // Let the others pack first, then start Veneer.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        MPI_Datatype first;
        MPI_Type_vector(50, 1, 2, MPI_DOUBLE, &first);
        MPI_Type_commit(&first);
        committed.store(true);
        check_pack(1, first);
        MPI_Type_free(&first);
      } else {
        for (int i = 0; i < 100000 && !committed.load(std::memory_order_relaxed); ++i) check_pack(8, MPI_DOUBLE);
      }
      for (int r = 0; r < kRounds; ++r) {
        MPI_Datatype type;
        MPI_Type_vector(100, 1, 3 + (t + r) % 2, MPI_DOUBLE, &type);
        MPI_Type_commit(&type);
        check_pack(1, type);
        MPI_Type_free(&type);
      }
    });
  }
  for (auto& th : pool) th.join();
  const bool taken = veneer::counters().get(veneer::Counter::pack_taken) > 0;
  const bool reported = veneer::config().report != 0;
  MPI_Finalize();  // Veneer's: it started, so it also finishes
  if (wrong.load() != 0) {
    std::printf("late_start_test: %d packs differ from the library's\n", wrong.load());
    return 1;
  }
  if (reported && !taken) {
    std::printf("late_start_test: Veneer took no pack over after starting late\n");
    return 1;
  }
  std::printf("late_start_test: ok\n");
  return 0;
}
