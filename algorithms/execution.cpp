// SPDX-License-Identifier: BSD-3-Clause
// Execution: an algorithm's arguments from a call (reductions as they are;
// the others as bytes, packed around the algorithm by Veneer's packer), and
// the library's own collective for calls Veneer passes on.
#include "algorithms/execution.h"

#include <optional>

#include "algorithms/buffers.h"
#include "algorithms/primitives.h"

namespace veneer::algorithms {

std::optional<Reduction> reduction_of(const Args& a) {
  auto t = ElementType::of(a.type);
  if (!t) return std::nullopt;
  Reduction r;
  r.type = std::move(*t);
  r.op = a.op;
  int commutative = 1;
  if (PMPI_Op_commutative(a.op, &commutative) != MPI_SUCCESS) return std::nullopt;
  r.commutative = commutative != 0;
  return r;
}

namespace {

// The private communicators `a` runs on, made here on first use: every rank
// of the call gets here at the same point, before any of a's messages. Only
// now, with an algorithm of Veneer's chosen, does the job get a communicator
// it did not ask for (topology/hierarchy.h). (Leaders and lanes are made by
// the algorithms that use them, on every rank, first thing.)
bool communicators_ready(const Algorithm& a, const Hierarchy& h) {
  if (h.comm() == MPI_COMM_NULL) return false;
  return !a.hierarchical || h.node_comm() != MPI_COMM_NULL;
}

int run_bcast(const Algorithm& a, const Call& c, const Hierarchy& h) {
  const bool root = h.rank == c.root;
  ByteView view;
  VENEER_TRY(root ? view.read(c.rbuf, c.count, c.type) : view.write(c.rbuf, c.count, c.type));
  Args args;
  args.root = c.root;
  args.rbuf = view.data();
  args.count = static_cast<int>(view.size());
  args.type = MPI_BYTE;
  VENEER_TRY(a.run(args, h));
  return root ? MPI_SUCCESS : view.finish();
}

int run_gather_or_exchange(const Algorithm& a, const Call& c, const Hierarchy& h) {
  const bool in_place = c.sbuf == MPI_IN_PLACE;
  const bool alltoall = c.collective == Collective::alltoall;
  ByteView out;
  VENEER_TRY(out.write(c.rbuf, c.count * h.size, c.type, in_place && alltoall));
  if (in_place && !alltoall) VENEER_TRY(out.load(static_cast<int64_t>(c.count) * h.rank, c.count));
  ByteView in;
  if (!in_place) VENEER_TRY(in.read(c.sbuf, alltoall ? c.scount * h.size : c.scount, c.stype));
  Args args;
  args.sbuf = in_place ? MPI_IN_PLACE : static_cast<const void*>(in.data());
  args.rbuf = out.data();
  args.count = static_cast<int>(out.size() / h.size);
  args.type = MPI_BYTE;
  VENEER_TRY(a.run(args, h));
  return out.finish();
}

}  // namespace

int execute(const Algorithm& a, const Call& c, const Hierarchy& h) {
  // Should the library fail to make them, it is asked to do the call itself.
  if (!communicators_ready(a, h)) return run_library(c, h.parent);
  switch (c.collective) {
    case Collective::allreduce:
    case Collective::reduce:
    case Collective::reduce_scatter:
    case Collective::reduce_scatter_block: {
      Args args;
      args.sbuf = c.sbuf;
      args.rbuf = c.rbuf;
      args.count = c.count;
      args.type = c.type;
      args.rcounts = c.collective == Collective::reduce_scatter ? c.rcounts : nullptr;
      args.op = c.op;
      args.root = c.root;
      return a.run(args, h);
    }
    case Collective::bcast: return run_bcast(a, c, h);
    case Collective::allgather:
    case Collective::alltoall: return run_gather_or_exchange(a, c, h);
  }
  return MPI_ERR_INTERN;
}

int run_library(const Call& c, MPI_Comm comm) {
  switch (c.collective) {
    case Collective::allreduce: return PMPI_Allreduce(c.sbuf, c.rbuf, c.count, c.type, c.op, comm);
    case Collective::bcast: return PMPI_Bcast(c.rbuf, c.count, c.type, c.root, comm);
    case Collective::reduce: return PMPI_Reduce(c.sbuf, c.rbuf, c.count, c.type, c.op, c.root, comm);
    case Collective::allgather: return PMPI_Allgather(c.sbuf, c.scount, c.stype, c.rbuf, c.count, c.type, comm);
    case Collective::reduce_scatter: return PMPI_Reduce_scatter(c.sbuf, c.rbuf, c.rcounts, c.type, c.op, comm);
    case Collective::reduce_scatter_block:
      return PMPI_Reduce_scatter_block(c.sbuf, c.rbuf, c.count, c.type, c.op, comm);
    case Collective::alltoall: return PMPI_Alltoall(c.sbuf, c.scount, c.stype, c.rbuf, c.count, c.type, comm);
  }
  return MPI_ERR_INTERN;
}

}  // namespace veneer::algorithms
