// SPDX-License-Identifier: BSD-3-Clause
// veneer-bench-overhead: what Veneer adds to calls it passes through.
//
// Linked with libveneer, so MPI_X runs through Veneer while PMPI_X reaches
// the library underneath. Each case is timed both ways in interleaved batches
// within one run (the same buffers, the same partner), and the medians give
// nanoseconds per call and Veneer's overhead. The calls are ones Veneer hands
// to the library (contiguous sends, a 4-byte allreduce the selector leaves to
// the library) and MPI_Pack/Unpack of one contiguous run, which Veneer copies
// itself with one memcpy (a negative overhead is Veneer being faster).
//
//   mpirun -np 2 build/bench/veneer-bench-overhead [--repetitions R] [--seconds S] [--json FILE]
//
// With one rank, the cases that need a partner are skipped.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

struct Options {
  int repetitions = 15;
  double batch_seconds = 0.004;
  std::string json_path;
};

bool parse(int argc, char** argv, Options& o) {
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    const char* v = a + 1 < argc ? argv[a + 1] : nullptr;
    if (flag == "--repetitions" && v) {
      o.repetitions = std::max(1, std::atoi(v));
      ++a;
    } else if (flag == "--seconds" && v) {
      o.batch_seconds = std::max(1e-4, std::atof(v));
      ++a;
    } else if (flag == "--json" && v) {
      o.json_path = v;
      ++a;
    } else if (flag == "--quick") {
      o.repetitions = 3;
      o.batch_seconds = 0.0005;
    } else {
      return false;
    }
  }
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// One case: the same operation through Veneer (veneer = true) or the library.
struct Case {
  std::string name;
  bool pairwise = false;                 // needs rank 1 as partner
  std::function<void(bool veneer)> run;  // one call (rank 0's side)
  std::function<void()> partner;         // rank 1's side of one call (library calls only)
};

int g_rank = 0, g_size = 1;

// Calls per batch so that a batch lasts about `seconds` (decided on rank 0, shared).
long calibrate(const Case& c, double seconds) {
  long calls = 1;
  for (;;) {
    double elapsed = 0;
    PMPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now();
    for (long i = 0; i < calls; ++i) g_rank == 0 ? c.run(false) : c.partner();
    elapsed = now() - t0;
    int more = elapsed < seconds && calls < (1L << 30) ? 1 : 0;
    PMPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!more) break;
    calls *= 2;
  }
  PMPI_Bcast(&calls, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  return calls;
}

struct Result {
  double library_ns = 0, veneer_ns = 0;
};

Result measure(const Case& c, const Options& o) {
  for (int w = 0; w < 1000; ++w) g_rank == 0 ? c.run(w % 2) : c.partner();  // warm both paths
  const long calls = calibrate(c, o.batch_seconds);
  std::vector<double> lib, ven;
  for (int r = 0; r < o.repetitions; ++r) {
    for (int k = 0; k < 2; ++k) {
      const bool veneer = (r + k) % 2 == 1;  // alternate which goes first
      PMPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now();
      for (long i = 0; i < calls; ++i) g_rank == 0 ? c.run(veneer) : c.partner();
      const double ns = (now() - t0) / static_cast<double>(calls) * 1e9;
      (veneer ? ven : lib).push_back(ns);
    }
  }
  return {median(lib), median(ven)};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  PMPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g_size);
  Options o;
  if (!parse(argc, argv, o)) {
    if (g_rank == 0)
      std::fprintf(stderr, "usage: veneer-bench-overhead [--quick] [--repetitions R] [--seconds S] [--json FILE]\n");
    MPI_Finalize();
    return 2;
  }
  const bool pairs = g_size >= 2;

  // Buffers and types: a 16 KiB plane of doubles whose faces are one contiguous run.
  std::vector<double> grid(32 * 32 * 4, 1.0);
  std::vector<char> packed(64 * 1024);
  MPI_Datatype face_2k = MPI_DATATYPE_NULL, edge_80 = MPI_DATATYPE_NULL;
  {
    const int sizes[3] = {4, 32, 32}, sub[3] = {1, 8, 32}, start[3] = {1, 8, 0};  // 8 full rows: one 2 KiB run
    MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, MPI_DOUBLE, &face_2k);
    MPI_Type_commit(&face_2k);
    const int esub[3] = {1, 1, 10}, estart[3] = {2, 3, 4};  // one row of 10 doubles: an 80-byte edge
    MPI_Type_create_subarray(3, sizes, esub, estart, MPI_ORDER_C, MPI_DOUBLE, &edge_80);
    MPI_Type_commit(&edge_80);
  }
  int one = 1, sum = 0;
  char small[8] = {0};
  const int peer = g_rank == 0 ? 1 : 0;

  std::vector<Case> cases;
  cases.push_back({"send to MPI_PROC_NULL", false,
                   [&](bool v) { (v ? MPI_Send : PMPI_Send)(small, 8, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD); },
                   [] {}});
  cases.push_back({"isend+wait MPI_PROC_NULL", false,
                   [&](bool v) {
                     MPI_Request r;
                     (v ? MPI_Isend : PMPI_Isend)(small, 8, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r);
                     (v ? MPI_Wait : PMPI_Wait)(&r, MPI_STATUS_IGNORE);
                   },
                   [] {}});
  cases.push_back({"pack 16 doubles", false,
                   [&](bool v) {
                     int pos = 0;
                     (v ? MPI_Pack : PMPI_Pack)(grid.data(), 16, MPI_DOUBLE, packed.data(),
                                                static_cast<int>(packed.size()), &pos, MPI_COMM_WORLD);
                   },
                   [] {}});
  cases.push_back({"pack 80 B edge (one run)", false,
                   [&](bool v) {
                     int pos = 0;
                     (v ? MPI_Pack : PMPI_Pack)(grid.data(), 1, edge_80, packed.data(), static_cast<int>(packed.size()),
                                                &pos, MPI_COMM_WORLD);
                   },
                   [] {}});
  cases.push_back({"pack 2 KiB face (one run)", false,
                   [&](bool v) {
                     int pos = 0;
                     (v ? MPI_Pack : PMPI_Pack)(grid.data(), 1, face_2k, packed.data(), static_cast<int>(packed.size()),
                                                &pos, MPI_COMM_WORLD);
                   },
                   [] {}});
  cases.push_back({"unpack 2 KiB face (one run)", false,
                   [&](bool v) {
                     int pos = 0;
                     (v ? MPI_Unpack : PMPI_Unpack)(packed.data(), static_cast<int>(packed.size()), &pos, grid.data(),
                                                    1, face_2k, MPI_COMM_WORLD);
                   },
                   [] {}});
  // A halo code's small strided message (24 doubles 256 B apart: 192 B, below
  // the smallest message taken over), sent to itself: the pass-through of a
  // derived type, three calls (Irecv, Isend, Waitall).
  MPI_Datatype column = MPI_DATATYPE_NULL;
  MPI_Type_vector(24, 1, 32, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);
  std::vector<double> column_in(size_t{24} * 32), column_out(size_t{24} * 32, 2.0);
  cases.push_back({"irecv+isend+waitall self, 192 B strided", false,
                   [&](bool v) {
                     MPI_Request r[2];
                     (v ? MPI_Irecv : PMPI_Irecv)(column_in.data(), 1, column, g_rank, 2, MPI_COMM_WORLD, &r[0]);
                     (v ? MPI_Isend : PMPI_Isend)(column_out.data(), 1, column, g_rank, 2, MPI_COMM_WORLD, &r[1]);
                     (v ? MPI_Waitall : PMPI_Waitall)(2, r, MPI_STATUSES_IGNORE);
                   },
                   [] {}});
  // The same column exchanged with itself by one MPI_Sendrecv (a halo code
  // that shifts along each dimension), and with no partner on either side.
  cases.push_back({"sendrecv self, 192 B strided", false,
                   [&](bool v) {
                     (v ? MPI_Sendrecv : PMPI_Sendrecv)(column_out.data(), 1, column, g_rank, 3, column_in.data(), 1,
                                                        column, g_rank, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                   },
                   [] {}});
  cases.push_back({"sendrecv MPI_PROC_NULL", false,
                   [&](bool v) {
                     (v ? MPI_Sendrecv : PMPI_Sendrecv)(small, 8, MPI_BYTE, MPI_PROC_NULL, 4, column_in.data(), 8,
                                                        MPI_BYTE, MPI_PROC_NULL, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                   },
                   [] {}});
  // A type made, committed and freed around each use (codes that build a
  // type per message): Veneer watches the commit and the free.
  cases.push_back({"type vector+commit+free", false,
                   [&](bool v) {
                     MPI_Datatype t = MPI_DATATYPE_NULL;
                     MPI_Type_vector(24, 1, 32, MPI_DOUBLE, &t);
                     (v ? MPI_Type_commit : PMPI_Type_commit)(&t);
                     (v ? MPI_Type_free : PMPI_Type_free)(&t);
                   },
                   [] {}});
  std::vector<char> big(1 << 20, 1), big_packed(1 << 20);
  cases.push_back({"pack 1 MiB bytes", false,
                   [&](bool v) {
                     int pos = 0;
                     (v ? MPI_Pack : PMPI_Pack)(big.data(), 1 << 20, MPI_BYTE, big_packed.data(), 1 << 20, &pos,
                                                MPI_COMM_WORLD);
                   },
                   [] {}});
  if (pairs) {
    // Rank 0 sends (through Veneer or not) and receives the reply from the
    // library; rank 1 answers with the library: the difference is one call.
    auto echo = [&] {
      if (g_rank == 1) {
        PMPI_Recv(small, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        PMPI_Send(small, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
      }
    };
    cases.push_back({"send 8 B (ping-pong)", true,
                     [&](bool v) {
                       (v ? MPI_Send : PMPI_Send)(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                       PMPI_Recv(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                     },
                     echo});
    cases.push_back({"isend+wait 8 B (ping-pong)", true,
                     [&](bool v) {
                       MPI_Request r;
                       (v ? MPI_Isend : PMPI_Isend)(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &r);
                       (v ? MPI_Wait : PMPI_Wait)(&r, MPI_STATUS_IGNORE);
                       PMPI_Recv(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                     },
                     echo});
    cases.push_back({"recv 8 B (ping-pong)", true,
                     [&](bool v) {
                       PMPI_Send(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                       (v ? MPI_Recv : PMPI_Recv)(small, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                     },
                     echo});
  }
  // Collective: every rank calls the same variant; the ranks beyond the pair join too.
  std::vector<Case> collective;
  collective.push_back(
      {"allreduce 4 B", false,
       [&](bool v) { (v ? MPI_Allreduce : PMPI_Allreduce)(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); }, [] {}});
  // The patterns applications add: in place, a root that rotates over the
  // ranks (panel broadcasts, pivots), a rooted reduction. Every rank keeps
  // the same call counter, so all agree on each call's root.
  long turn = 0;
  MPI_Datatype two_ints = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(2, MPI_INT, &two_ints);
  MPI_Type_commit(&two_ints);
  collective.push_back({"allreduce 4 B in place", false,
                        [&](bool v) {
                          sum = one;
                          (v ? MPI_Allreduce : PMPI_Allreduce)(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
                        },
                        [] {}});
  // A user-defined op (a sum of ints here), as codes that reduce their own types or combine results their own way make.
  MPI_Op int_sum = MPI_OP_NULL;
  MPI_Op_create(
      [](void* in, void* inout, int* n, MPI_Datatype*) {
        for (int i = 0; i < *n; ++i) static_cast<int*>(inout)[i] += static_cast<const int*>(in)[i];
      },
      1, &int_sum);
  collective.push_back(
      {"allreduce 4 B user op", false,
       [&](bool v) { (v ? MPI_Allreduce : PMPI_Allreduce)(&one, &sum, 1, MPI_INT, int_sum, MPI_COMM_WORLD); }, [] {}});
  collective.push_back({"bcast 8 B root 0", false,
                        [&](bool v) { (v ? MPI_Bcast : PMPI_Bcast)(small, 8, MPI_BYTE, 0, MPI_COMM_WORLD); }, [] {}});
  collective.push_back({"bcast 8 B rotating root", false,
                        [&](bool v) {
                          const int root = static_cast<int>(turn++ % g_size);
                          (v ? MPI_Bcast : PMPI_Bcast)(small, 8, MPI_BYTE, root, MPI_COMM_WORLD);
                        },
                        [] {}});
  collective.push_back(
      {"reduce 4 B root 0", false,
       [&](bool v) { (v ? MPI_Reduce : PMPI_Reduce)(&one, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD); }, [] {}});
  collective.push_back({"bcast 8 B derived type", false,
                        [&](bool v) { (v ? MPI_Bcast : PMPI_Bcast)(small, 1, two_ints, 0, MPI_COMM_WORLD); }, [] {}});
  collective.push_back({"reduce 4 B rotating root", false,
                        [&](bool v) {
                          const int root = static_cast<int>(turn++ % g_size);
                          (v ? MPI_Reduce : PMPI_Reduce)(&one, &sum, 1, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
                        },
                        [] {}});
  // An all-to-all of 4 doubles per peer (a transpose's or a particle code's
  // small exchange), contiguous: the library's whatever its counts.
  std::vector<double> a2a_out(size_t{4} * static_cast<size_t>(g_size), 1.0), a2a_in(a2a_out.size());
  std::vector<int> a2a_counts(static_cast<size_t>(g_size), 4), a2a_displs(static_cast<size_t>(g_size));
  for (int i = 0; i < g_size; ++i) a2a_displs[static_cast<size_t>(i)] = 4 * i;
  collective.push_back({"alltoallv 4 doubles a peer", false,
                        [&](bool v) {
                          (v ? MPI_Alltoallv : PMPI_Alltoallv)(a2a_out.data(), a2a_counts.data(), a2a_displs.data(),
                                                               MPI_DOUBLE, a2a_in.data(), a2a_counts.data(),
                                                               a2a_displs.data(), MPI_DOUBLE, MPI_COMM_WORLD);
                        },
                        [] {}});
  // Alltoallw with a type per peer (here MPI_DOUBLE for all of them, byte displacements).
  std::vector<int> a2a_bytes(static_cast<size_t>(g_size));
  std::vector<MPI_Datatype> a2a_types(static_cast<size_t>(g_size), MPI_DOUBLE);
  for (int i = 0; i < g_size; ++i) a2a_bytes[static_cast<size_t>(i)] = 32 * i;
  collective.push_back({"alltoallw 4 doubles a peer", false,
                        [&](bool v) {
                          (v ? MPI_Alltoallw : PMPI_Alltoallw)(a2a_out.data(), a2a_counts.data(), a2a_bytes.data(),
                                                               a2a_types.data(), a2a_in.data(), a2a_counts.data(),
                                                               a2a_bytes.data(), a2a_types.data(), MPI_COMM_WORLD);
                        },
                        [] {}});
  // Reduce_scatter with a count per rank (a sparse solver's or an FFT's
  // reduction of partial sums), and its block form.
  collective.push_back({"reduce_scatter 4 doubles a rank", false,
                        [&](bool v) {
                          (v ? MPI_Reduce_scatter : PMPI_Reduce_scatter)(
                              a2a_out.data(), a2a_in.data(), a2a_counts.data(), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                        },
                        [] {}});
  collective.push_back({"reduce_scatter_block 4 doubles", false,
                        [&](bool v) {
                          (v ? MPI_Reduce_scatter_block : PMPI_Reduce_scatter_block)(
                              a2a_out.data(), a2a_in.data(), 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                        },
                        [] {}});
  // An allreduce whose count changes from call to call over 400 values
  // (a code reducing a varying number of elements, 8 B-3.2 KB): each count
  // is a shape of its own, decided once while the thread has room for it.
  std::vector<double> varying_in(400, 1.0), varying_out(400);
  uint64_t varying_turn = 0;
  collective.push_back({"allreduce, 400 counts in turn", false,
                        [&](bool v) {
                          const int count = 1 + static_cast<int>(varying_turn++ * 7919 % 400);
                          (v ? MPI_Allreduce : PMPI_Allreduce)(varying_in.data(), varying_out.data(), count, MPI_DOUBLE,
                                                               MPI_SUM, MPI_COMM_WORLD);
                        },
                        [] {}});
  // A broadcast whose size shrinks call after call and seldom comes back (a
  // panel factorisation's broadcasts: 8 B-32 KiB over 4,096 counts, more
  // shapes than a thread's table of decisions holds).
  std::vector<double> shrinking(4096, 1.0);
  uint64_t shrinking_turn = 0;
  collective.push_back({"bcast, 4,096 counts shrinking", false,
                        [&](bool v) {
                          const int count = 4096 - static_cast<int>(shrinking_turn++ % 4096);
                          (v ? MPI_Bcast : PMPI_Bcast)(shrinking.data(), count, MPI_DOUBLE, 0, MPI_COMM_WORLD);
                        },
                        [] {}});
  // A communicator made, used once and freed (codes that duplicate or split
  // one per solve or per file): its first collective goes to the library
  // undecided. The duplicate and the free are the library's either way.
  collective.push_back({"comm dup + allreduce 4 B + free", false,
                        [&](bool v) {
                          MPI_Comm fresh = MPI_COMM_NULL;
                          MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
                          (v ? MPI_Allreduce : PMPI_Allreduce)(&one, &sum, 1, MPI_INT, MPI_SUM, fresh);
                          MPI_Comm_free(&fresh);
                        },
                        [] {}});
  // Last: where a decision above depends on whether a barrier came before
  // the call, Veneer's MPI_Barrier notes each barrier on the communicator;
  // and OSU's timing loop, a barrier after every call (both through the
  // same side's entry points).
  collective.push_back({"barrier", false, [&](bool v) { (v ? MPI_Barrier : PMPI_Barrier)(MPI_COMM_WORLD); }, [] {}});
  collective.push_back({"bcast 8 B root 0 + barrier", false,
                        [&](bool v) {
                          (v ? MPI_Bcast : PMPI_Bcast)(small, 8, MPI_BYTE, 0, MPI_COMM_WORLD);
                          (v ? MPI_Barrier : PMPI_Barrier)(MPI_COMM_WORLD);
                        },
                        [] {}});
  collective.push_back({"reduce 4 B root 0 + barrier", false,
                        [&](bool v) {
                          (v ? MPI_Reduce : PMPI_Reduce)(&one, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
                          (v ? MPI_Barrier : PMPI_Barrier)(MPI_COMM_WORLD);
                        },
                        [] {}});

  if (g_rank == 0)
    std::printf(
        "# veneer-bench-overhead: %d rank%s; medians of %d interleaved batches of ~%.1f ms\n"
        "%-40s %12s %12s %12s %10s\n",
        g_size, g_size == 1 ? "" : "s", o.repetitions, o.batch_seconds * 1e3, "call", "library ns", "veneer ns",
        "overhead ns", "lib/ven");
  FILE* json = nullptr;
  if (g_rank == 0 && !o.json_path.empty()) json = std::fopen(o.json_path.c_str(), "a");
  auto report = [&](const std::string& name, const Result& r) {
    if (g_rank != 0) return;
    std::printf("%-40s %12.1f %12.1f %12.1f %10.3f\n", name.c_str(), r.library_ns, r.veneer_ns,
                r.veneer_ns - r.library_ns, r.library_ns / r.veneer_ns);
    if (json)
      std::fprintf(json,
                   "{\"bench\":\"overhead\",\"call\":\"%s\",\"ranks\":%d,\"library_ns\":%.2f,\"veneer_ns\":%.2f}\n",
                   name.c_str(), g_size, r.library_ns, r.veneer_ns);
  };
  for (const Case& c : cases) {
    if (c.pairwise && g_rank > 1) {
      // Ranks beyond the pair sit out, but follow the barriers and broadcasts.
      Case idle = c;
      idle.partner = [] {};
      measure(idle, o);
      continue;
    }
    if (!c.pairwise && g_rank != 0) {
      Case idle = c;
      idle.partner = [] {};
      measure(idle, o);
      continue;
    }
    report(c.name, measure(c, o));
  }
  for (const Case& c : collective) {
    // Every rank runs the same variant in the same batch; the slowest rank's time counts.
    for (int w = 0; w < 200; ++w) c.run(w % 2);
    long calls = 1;
    for (;;) {
      PMPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now();
      for (long i = 0; i < calls; ++i) c.run(false);
      int more = now() - t0 < o.batch_seconds && calls < (1L << 30) ? 1 : 0;
      PMPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
      if (!more) break;
      calls *= 2;
    }
    std::vector<double> lib, ven;
    for (int rep = 0; rep < o.repetitions; ++rep)
      for (int k = 0; k < 2; ++k) {
        const bool v = (rep + k) % 2 == 1;
        PMPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now();
        for (long i = 0; i < calls; ++i) c.run(v);
        double ns = (now() - t0) / static_cast<double>(calls) * 1e9, slowest = 0;
        PMPI_Allreduce(&ns, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        (v ? ven : lib).push_back(slowest);
      }
    report(c.name, {median(lib), median(ven)});
  }
  if (json) std::fclose(json);
  MPI_Type_free(&face_2k);
  MPI_Type_free(&edge_80);
  MPI_Type_free(&column);
  MPI_Type_free(&two_ints);
  MPI_Op_free(&int_sum);
  MPI_Finalize();
  return 0;
}
