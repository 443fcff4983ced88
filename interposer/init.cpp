// SPDX-License-Identifier: BSD-3-Clause
// MPI_Init/Init_thread/Finalize hooks and the type-commit hook that makes
// derived types known to the layout cache.
#include <mpi.h>

#include <atomic>
#include <mutex>

#include "algorithms/measured.h"
#include "datatypes/cache.h"
#include "interposer/device.h"
#include "interposer/forward.h"
#include "interposer/init.h"
#include "interposer/report.h"
#include "interposer/requests.h"
#include "interposer/switchboard.h"
#include "support/config.h"
#include "support/log.h"
#include "support/staging.h"

using namespace veneer;

namespace veneer {
void collectives_start();  // defined by the collectives glue
void collectives_stop();
}  // namespace veneer

namespace {
std::once_flag g_start_once;
std::atomic<bool> g_started{false};   // set once start() has finished
std::atomic<bool> g_profiled{false};  // the profile was read (once per MPI_Init, whichever binding called it)

// Sets Veneer up, once; a thread that calls it while another is inside waits
// until it has finished. `from_init`: called from MPI_Init/Init_thread, when
// no other thread can be inside Veneer yet, so the environment is read again
// (the program may have set VENEER_ variables before MPI_Init). Started later
// (MPI initialised behind our back, from MPI_Type_commit) other threads may
// already be packing, sending and reading the configuration: it stays as
// read when the library was loaded.
void start(bool from_init) {
  std::call_once(g_start_once, [from_init] {
    if (from_init) reload_config();
    int rank = 0;
    const bool ranked = PMPI_Comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS;
    set_log_rank(ranked ? rank : 0);
    if (!ranked) log(LogLevel::warn, "MPI_Comm_rank(MPI_COMM_WORLD) failed: log lines say rank 0");
    datatypes::cache_init();
    collectives_start();
    device::start();
    log(LogLevel::info, "Veneer %s loaded (%s)%s", VENEER_VERSION, VENEER_MPI_FLAVOR,
        config().enabled ? "" : ", disabled by VENEER_DISABLE");
    g_started.store(true, std::memory_order_release);
  });
}
// The machine profile: rank 0 reads it and broadcasts it on MPI_COMM_WORLD, so
// only from MPI_Init/Init_thread, which every rank calls (never from start(),
// which a lone MPI_Type_commit may run).
void start_with_profile() {
  start(true);
  if (g_profiled.exchange(true)) return;  // MPICH's Fortran MPI_INIT reaches MPI_Init too
  // Collective choices and the send/receive thresholds both come from it.
  const Config& c = config();
  algorithms::load_profile(MPI_COMM_WORLD, takes_collective(c) || takes_send(c) || takes_alltoallv(c));
}
}  // namespace

extern "C" int MPI_Init(int* argc, char*** argv) {
  next::resolve();
  const int rc = next::Init(argc, argv);
  if (rc == MPI_SUCCESS) start_with_profile();
  return rc;
}

extern "C" int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  next::resolve();
  const int rc = next::Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) start_with_profile();
  return rc;
}

namespace veneer {
void after_init() { start_with_profile(); }

void before_finalize() {
  // Once: MPICH's Fortran MPI_FINALIZE reaches MPI_Finalize after Veneer's Fortran one ran this.
  if (!g_started.exchange(false)) return;
  requests::drain_detached();
  print_report();
  collectives_stop();
  device::stop();
  datatypes::cache_finalize();
  staging_release_all();
}
}  // namespace veneer

extern "C" int MPI_Finalize() {
  before_finalize();
  return next::Finalize();
}

extern "C" int MPI_Type_commit(MPI_Datatype* type) {
  const int rc = next::Type_commit(type);
  if (rc == MPI_SUCCESS && type) {
    if (!g_started.load(std::memory_order_acquire)) {
      // MPI was initialised behind our back (e.g. from Fortran): start now.
      int initialized = 0;
      if (PMPI_Initialized(&initialized) == MPI_SUCCESS && initialized) start(false);
    }
    datatypes::note_committed(*type);
  }
  return rc;
}

extern "C" int MPI_Type_dup(MPI_Datatype type, MPI_Datatype* newtype) {
  const int rc = next::Type_dup(type, newtype);
  // A duplicate of a committed type is committed too (MPI 4.1, 5.1.8).
  if (rc == MPI_SUCCESS && newtype && g_started.load() && datatypes::lookup(type)) datatypes::note_committed(*newtype);
  return rc;
}
