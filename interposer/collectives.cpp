// Collective entry points: each asks algorithms/ to run the call with one of
// Veneer's algorithms; when it declines (nullopt) the call goes, unchanged, to
// the library. VENEER_COLLECTIVES=0 (or VENEER_DISABLE=1) passes everything through.
#include <mpi.h>

#include <string>

#include "algorithms/collectives.h"
#include "interposer/forward.h"
#include "interposer/switchboard.h"
#include "support/config.h"
#include "support/counters.h"

using namespace veneer;
namespace alg = veneer::algorithms;

namespace veneer {
void collectives_start() { alg::collectives_init(); }
void collectives_stop() { alg::collectives_finalize(); }
std::string collectives_report_text() {
  // Every rank chose the same algorithm for every call, so rank 0's counts speak for all.
  return alg::collectives_report();
}
}  // namespace veneer

namespace {
bool on() {
  const Config& c = config();
  return c.enabled && c.collectives;
}

// Device buffers (a CUDA-aware library's business) go to the library: Veneer's
// algorithms stage through host memory with the CPU.
template <class Run, class Pass>
int route(const void* a, const void* b, Run run, Pass pass) {
  if (on() && cpu_accessible(a, b)) {
    if (auto rc = run()) {
      counters().add(Counter::coll_taken);
      return *rc;
    }
  }
  counters().add(Counter::coll_passed);
  return pass();
}
}  // namespace

extern "C" int MPI_Allreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return route(sbuf, rbuf, [&] { return alg::allreduce(sbuf, rbuf, count, type, op, comm); },
               [&] { return next::Allreduce(sbuf, rbuf, count, type, op, comm); });
}

extern "C" int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  return route(buf, buf, [&] { return alg::bcast(buf, count, type, root, comm); },
               [&] { return next::Bcast(buf, count, type, root, comm); });
}

extern "C" int MPI_Reduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                          MPI_Comm comm) {
  return route(sbuf, rbuf, [&] { return alg::reduce(sbuf, rbuf, count, type, op, root, comm); },
               [&] { return next::Reduce(sbuf, rbuf, count, type, op, root, comm); });
}

extern "C" int MPI_Allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                             MPI_Datatype rtype, MPI_Comm comm) {
  return route(sbuf, rbuf, [&] { return alg::allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm); },
               [&] { return next::Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm); });
}

extern "C" int MPI_Reduce_scatter(const void* sbuf, void* rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op,
                                  MPI_Comm comm) {
  return route(sbuf, rbuf, [&] { return alg::reduce_scatter(sbuf, rbuf, rcounts, type, op, comm); },
               [&] { return next::Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm); });
}

extern "C" int MPI_Reduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type, MPI_Op op,
                                        MPI_Comm comm) {
  return route(sbuf, rbuf, [&] { return alg::reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm); },
               [&] { return next::Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm); });
}

extern "C" int MPI_Alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                            MPI_Datatype rtype, MPI_Comm comm) {
  return route(sbuf, rbuf, [&] { return alg::alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm); },
               [&] { return next::Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm); });
}
