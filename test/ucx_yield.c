// SPDX-License-Identifier: BSD-3-Clause
/* A test-only helper preloaded into MPICH ranks by run_mpi.sh.
 *
 * Debian's MPICH (ch4:ucx) busy-polls UCX while it waits, and has no setting
 * that makes an idle rank give up the core. With more ranks than cores, as in
 * CI, a rank that waits for a message then spins for its whole time slice
 * while the sender is descheduled: an 8-byte allreduce on 8 ranks took 26 ms
 * on a 2-core machine. This wraps ucp_worker_progress, which MPICH calls on
 * every poll, and yields the core after a run of polls that found nothing to
 * do, the way Open MPI's mpi_yield_when_idle does (0.05 ms for the same
 * allreduce). It changes when ranks run, never what they compute; it is never
 * used for timings. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>

typedef unsigned (*progress_fn)(void*);

unsigned ucp_worker_progress(void* worker) {
  static progress_fn real;
  static __thread unsigned idle_polls;
  if (!real) real = (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
  if (!real) return 0;
  unsigned events = real(worker);
  if (events) {
    idle_polls = 0;
  } else if (++idle_polls >= 64) {
    idle_polls = 0;
    sched_yield();
  }
  return events;
}
