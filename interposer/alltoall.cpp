// Alltoallv/Alltoallw and their neighbourhood forms with non-contiguous host
// types (device buffers: device_alltoallv/w below): every block is packed into
// one staging buffer, the library moves bytes, and received blocks are
// unpacked. The library call made is always the same collective the user
// called (only with byte types), so ranks that take over and ranks that pass
// through still match each other.
#include <mpi.h>

#include <climits>
#include <memory>
#include <vector>

#include "datatypes/pack.h"
#include "interposer/device.h"
#include "interposer/forward.h"
#include "interposer/switchboard.h"
#include "support/counters.h"
#include "support/staging.h"

using namespace veneer;
using datatypes::Layout;

namespace {

bool worth_packing(const Layout* l) {
  return l && !l->contiguous && l->size > 0 && l->mean_block() <= config().alltoall_max_block;
}

bool enabled() { return takes_alltoallv(config()); }

// Number of blocks sent and received: group sizes, or the neighbourhood's degrees.
bool peer_counts(MPI_Comm comm, bool neighborhood, int& nsend, int& nrecv) {
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return false;
  if (!neighborhood) {
    int p = 0;
    if (PMPI_Comm_size(comm, &p) != MPI_SUCCESS) return false;
    nsend = nrecv = p;
    return true;
  }
  int kind = MPI_UNDEFINED;
  if (PMPI_Topo_test(comm, &kind) != MPI_SUCCESS) return false;
  if (kind == MPI_CART) {
    int nd = 0;
    PMPI_Cartdim_get(comm, &nd);
    nsend = nrecv = 2 * nd;
    return true;
  }
  if (kind == MPI_GRAPH) {
    int rank = 0, n = 0;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Graph_neighbors_count(comm, rank, &n);
    nsend = nrecv = n;
    return true;
  }
  if (kind == MPI_DIST_GRAPH) {
    int weighted = 0;
    PMPI_Dist_graph_neighbors_count(comm, &nrecv, &nsend, &weighted);
    return true;
  }
  return false;
}

// Blocks exchanged with MPI_PROC_NULL: on a Cartesian topology that is not
// periodic, the border ranks' neighbours in the open directions. The library
// neither sends nor receives them, so Veneer must neither read those send
// blocks nor write those receive blocks. Slot 2d is the neighbour at -1 in
// dimension d, slot 2d+1 the one at +1 (the order of MPI_Cart_shift).
std::vector<char> absent_neighbours(MPI_Comm comm, bool neighborhood, int n) {
  std::vector<char> absent(static_cast<size_t>(n), 0);
  int kind = MPI_UNDEFINED;
  if (!neighborhood || PMPI_Topo_test(comm, &kind) != MPI_SUCCESS || kind != MPI_CART) return absent;
  for (int d = 0; 2 * d + 1 < n; ++d) {
    int below = MPI_PROC_NULL, above = MPI_PROC_NULL;
    if (PMPI_Cart_shift(comm, d, 1, &below, &above) != MPI_SUCCESS) continue;
    absent[static_cast<size_t>(2 * d)] = below == MPI_PROC_NULL;
    absent[static_cast<size_t>(2 * d + 1)] = above == MPI_PROC_NULL;
  }
  return absent;
}

// One side (send or receive) of the exchange rewritten in bytes.
struct Side {
  std::vector<int> counts, displs;  // bytes
  Staging staging;
  int64_t total = 0;
};

// Byte counts and displacements of a side whose blocks are counts[i] of
// `size`-byte instances, packed one after another; false if any would not fit an int.
bool byte_plan(Side& s, int n, const int* counts, int64_t size) {
  s.counts.resize(static_cast<size_t>(n));
  s.displs.resize(static_cast<size_t>(n));
  int64_t off = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t bytes = size * int64_t{counts[i]};
    if (counts[i] < 0 || bytes > INT_MAX || off > INT_MAX) return false;
    s.counts[static_cast<size_t>(i)] = static_cast<int>(bytes);
    s.displs[static_cast<size_t>(i)] = static_cast<int>(off);
    off += bytes;
  }
  s.total = off;
  return off <= INT_MAX;
}

// Plans a side whose blocks are (count[i] of layout[i] at base + disp[i]);
// false if a byte count or displacement would not fit an int.
bool plan_side(Side& s, int n, const int* counts, const std::vector<const Layout*>& layouts) {
  s.counts.resize(static_cast<size_t>(n));
  s.displs.resize(static_cast<size_t>(n));
  int64_t off = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t bytes = layouts[static_cast<size_t>(i)]->size * int64_t{counts[i]};
    if (counts[i] < 0 || bytes > INT_MAX || off > INT_MAX) return false;
    s.counts[static_cast<size_t>(i)] = static_cast<int>(bytes);
    s.displs[static_cast<size_t>(i)] = static_cast<int>(off);
    off += bytes;
  }
  if (off > config().p2p_max_bytes) return false;
  s.total = off;
  s.staging = Staging(static_cast<size_t>(off > 0 ? off : 1));
  return s.staging.get() != nullptr;
}

void pack_side(const Side& s, int n, const void* buf, const int* counts, const std::vector<int64_t>& byte_displs,
               const std::vector<const Layout*>& layouts, const std::vector<char>& absent) {
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    if (absent[k]) continue;
    datatypes::pack_all(*layouts[k], counts[i], offset_ptr(buf, byte_displs[k]), s.staging.get() + s.displs[k]);
  }
  counters().add(Counter::bytes_packed, static_cast<uint64_t>(s.total));
}

void unpack_side(const Side& s, int n, void* buf, const int* counts, const std::vector<int64_t>& byte_displs,
                 const std::vector<const Layout*>& layouts, const std::vector<char>& absent) {
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    if (absent[k]) continue;
    datatypes::unpack_all(*layouts[k], counts[i], offset_ptr(buf, byte_displs[k]), s.staging.get() + s.displs[k]);
  }
  counters().add(Counter::bytes_unpacked, static_cast<uint64_t>(s.total));
}

using VFn = int (*)(const void*, const int*, const int*, MPI_Datatype, void*, const int*, const int*, MPI_Datatype,
                    MPI_Comm);
template <class Disp>
using WFn = int (*)(const void*, const int*, const Disp*, const MPI_Datatype*, void*, const int*, const Disp*,
                    const MPI_Datatype*, MPI_Comm);

// Alltoallv with a device buffer on either side. Device sides are packed
// block by block on the GPU into one pinned (CUDA-aware library: device)
// buffer and unpacked likewise; a host side is handed over as it is. Returns
// false (the caller passes through) if Veneer cannot carry it.
bool device_alltoallv(VFn fn, bool neighborhood, const void* sendbuf, const int* sendcounts, const int* sdispls,
                      MPI_Datatype sendtype, void* recvbuf, const int* recvcounts, const int* rdispls,
                      MPI_Datatype recvtype, MPI_Comm comm, int* rc) {
  int ns = 0, nr = 0;
  if (!carries_device(config()) || !peer_counts(comm, neighborhood, ns, nr)) return false;
  const bool sdev = device::is_device(sendbuf), rdev = device::is_device(recvbuf);
  device::Carried sc, rc_side;
  if (sdev && !(sc = device::classify(sendbuf, 1, sendtype, true))) return false;
  if (rdev && !(rc_side = device::classify(recvbuf, 1, recvtype, true))) return false;
  if (!sc && !rc_side) return false;
  const bool on_device = device::library_cuda_aware();
  const auto kind = on_device ? kernels::PooledBuffer::Kind::device : kernels::PooledBuffer::Kind::pinned;
  Side s, r;
  kernels::PooledBuffer sstage, rstage;
  if (sc) {
    if (!byte_plan(s, ns, sendcounts, sc.layout->size)) return false;
    sstage = kernels::PooledBuffer(*sc.rt, kind, static_cast<size_t>(s.total));
    if (!sstage.get()) return false;
    const std::vector<char> absent = absent_neighbours(comm, neighborhood, ns);
    for (int i = 0; i < ns; ++i) {
      const auto k = static_cast<size_t>(i);
      if (absent[k]) continue;
      if (!device::pack_into(sc, sendcounts[i], offset_ptr(sendbuf, int64_t{sdispls[i]} * sc.layout->extent),
                             sstage.get() + s.displs[k], on_device))
        return false;
    }
  }
  if (rc_side) {
    if (!byte_plan(r, nr, recvcounts, rc_side.layout->size)) return false;
    rstage = kernels::PooledBuffer(*rc_side.rt, kind, static_cast<size_t>(r.total));
    if (!rstage.get()) return false;
  }
  *rc = fn(sc ? sstage.get() : sendbuf, sc ? s.counts.data() : sendcounts, sc ? s.displs.data() : sdispls,
           sc ? MPI_BYTE : sendtype, rc_side ? rstage.get() : recvbuf, rc_side ? r.counts.data() : recvcounts,
           rc_side ? r.displs.data() : rdispls, rc_side ? MPI_BYTE : recvtype, comm);
  if (*rc == MPI_SUCCESS && rc_side) {
    const std::vector<char> absent = absent_neighbours(comm, neighborhood, nr);
    for (int i = 0; i < nr; ++i) {
      const auto k = static_cast<size_t>(i);
      if (absent[k]) continue;
      if (!device::unpack_from(rc_side, recvcounts[i],
                               offset_ptr(recvbuf, int64_t{rdispls[i]} * rc_side.layout->extent),
                               rstage.get() + r.displs[k], r.counts[k], on_device))
        *rc = MPI_ERR_INTERN;
    }
  }
  counters().add(Counter::alltoall_taken);
  return true;
}

// Alltoallw and Neighbor_alltoallw with device memory at either base: every
// block of a device side is packed on the GPU into one pinned (CUDA-aware
// library: device) buffer and sent as bytes; received blocks are unpacked on
// the GPU. A host side is handed over as it is. Returns false (the caller
// passes through) if any block of a device side cannot be carried.
template <class Disp>
bool device_alltoallw(WFn<Disp> fn, bool neighborhood, const void* sendbuf, const int* sendcounts, const Disp* sdispls,
                      const MPI_Datatype* sendtypes, void* recvbuf, const int* recvcounts, const Disp* rdispls,
                      const MPI_Datatype* recvtypes, MPI_Comm comm, int* rc) {
  int ns = 0, nr = 0;
  if (!carries_device(config()) || !peer_counts(comm, neighborhood, ns, nr)) return false;
  kernels::DeviceRuntime* rt = kernels::device_runtime();
  if (!rt) return false;
  const bool sdev = device::is_device(sendbuf), rdev = device::is_device(recvbuf);
  if (!sdev && !rdev) return false;
  const bool on_device = device::library_cuda_aware();
  const auto kind = on_device ? kernels::PooledBuffer::Kind::device : kernels::PooledBuffer::Kind::pinned;
  // One side's blocks, each carried (a block of count 0 moves nothing), and
  // their places in the staging buffer.
  struct DeviceSide {
    std::vector<device::Carried> blocks;
    std::vector<int> counts;
    std::vector<Disp> displs;
    std::vector<MPI_Datatype> bytes_types;
    kernels::PooledBuffer staging;
  };
  auto plan = [&](DeviceSide& d, int n, const void* base, const int* counts, const Disp* displs,
                  const MPI_Datatype* types) {
    d.blocks.resize(static_cast<size_t>(n));
    d.counts.assign(static_cast<size_t>(n), 0);
    d.displs.assign(static_cast<size_t>(n), 0);
    d.bytes_types.assign(static_cast<size_t>(n), MPI_BYTE);
    int64_t off = 0;
    for (int i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(i);
      if (counts[i] < 0) return false;
      if (counts[i] > 0) {
        d.blocks[k] = device::classify(offset_ptr(base, int64_t{displs[i]}), counts[i], types[i], false);
        if (!d.blocks[k]) return false;
      }
      const int64_t bytes = d.blocks[k] ? d.blocks[k].bytes : 0;
      if (bytes > INT_MAX || off > INT_MAX) return false;
      d.counts[k] = static_cast<int>(bytes);
      d.displs[k] = static_cast<Disp>(off);
      off += bytes;
    }
    if (off > INT_MAX) return false;
    d.staging = kernels::PooledBuffer(*rt, kind, static_cast<size_t>(off > 0 ? off : 1));
    return d.staging.get() != nullptr;
  };
  DeviceSide s, r;
  if (sdev && !plan(s, ns, sendbuf, sendcounts, sdispls, sendtypes)) return false;
  if (rdev && !plan(r, nr, recvbuf, recvcounts, rdispls, recvtypes)) return false;
  if (sdev) {
    const std::vector<char> absent = absent_neighbours(comm, neighborhood, ns);
    for (int i = 0; i < ns; ++i) {
      const auto k = static_cast<size_t>(i);
      if (absent[k] || !s.blocks[k]) continue;
      if (!device::pack_into(s.blocks[k], sendcounts[i], offset_ptr(sendbuf, int64_t{sdispls[i]}),
                             s.staging.get() + s.displs[k], on_device))
        return false;
    }
  }
  *rc =
      fn(sdev ? s.staging.get() : sendbuf, sdev ? s.counts.data() : sendcounts, sdev ? s.displs.data() : sdispls,
         sdev ? s.bytes_types.data() : sendtypes, rdev ? r.staging.get() : recvbuf, rdev ? r.counts.data() : recvcounts,
         rdev ? r.displs.data() : rdispls, rdev ? r.bytes_types.data() : recvtypes, comm);
  if (*rc == MPI_SUCCESS && rdev) {
    const std::vector<char> absent = absent_neighbours(comm, neighborhood, nr);
    for (int i = 0; i < nr; ++i) {
      const auto k = static_cast<size_t>(i);
      if (absent[k] || !r.blocks[k]) continue;
      if (!device::unpack_from(r.blocks[k], recvcounts[i], offset_ptr(recvbuf, int64_t{rdispls[i]}),
                               r.staging.get() + r.displs[k], r.counts[k], on_device))
        *rc = MPI_ERR_INTERN;
    }
  }
  counters().add(Counter::alltoall_taken);
  return true;
}

int alltoallv_common(VFn fn, bool neighborhood, const void* sendbuf, const int* sendcounts, const int* sdispls,
                     MPI_Datatype sendtype, void* recvbuf, const int* recvcounts, const int* rdispls,
                     MPI_Datatype recvtype, MPI_Comm comm) {
  auto pass = [&] {
    counters().add(Counter::alltoall_passed);
    return fn(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
  };
  if (!enabled() || sendbuf == MPI_IN_PLACE || !sendcounts || !recvcounts || !sdispls || !rdispls) return pass();
  if (kernels::device_memory_possible() && (device::is_device(sendbuf) || device::is_device(recvbuf))) {
    int rc = MPI_SUCCESS;
    if (device_alltoallv(fn, neighborhood, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                         recvtype, comm, &rc))
      return rc;
    counters().add(Counter::device_passed);
    return pass();
  }
  // Host data: packed only while the datatype engine is on (VENEER_DATATYPES).
  if (!uses_packers(config())) return pass();
  // Borrowed first (no reference counts): most calls have nothing worth packing.
  if (!worth_packing(datatypes::peek(sendtype)) && !worth_packing(datatypes::peek(recvtype))) return pass();
  auto sl = datatypes::lookup(sendtype);
  auto rl = datatypes::lookup(recvtype);
  const bool pack_send = worth_packing(sl.get()), pack_recv = worth_packing(rl.get());
  int ns = 0, nr = 0;
  if ((!pack_send && !pack_recv) || !peer_counts(comm, neighborhood, ns, nr)) return pass();
  if (!cpu_accessible(sendbuf, recvbuf)) return pass();
  Side s, r;
  std::vector<const Layout*> sls(static_cast<size_t>(ns), sl.get()), rls(static_cast<size_t>(nr), rl.get());
  if ((pack_send && !plan_side(s, ns, sendcounts, sls)) || (pack_recv && !plan_side(r, nr, recvcounts, rls)))
    return pass();
  std::vector<int64_t> sbyte(static_cast<size_t>(ns)), rbyte(static_cast<size_t>(nr));
  if (pack_send) {
    ScopedTimer timer;
    for (int i = 0; i < ns; ++i) sbyte[static_cast<size_t>(i)] = int64_t{sdispls[i]} * sl->extent;
    pack_side(s, ns, sendbuf, sendcounts, sbyte, sls, absent_neighbours(comm, neighborhood, ns));
  }
  for (int i = 0; pack_recv && i < nr; ++i) rbyte[static_cast<size_t>(i)] = int64_t{rdispls[i]} * rl->extent;
  const int rc = fn(pack_send ? s.staging.get() : sendbuf, pack_send ? s.counts.data() : sendcounts,
                    pack_send ? s.displs.data() : sdispls, pack_send ? MPI_BYTE : sendtype,
                    pack_recv ? r.staging.get() : recvbuf, pack_recv ? r.counts.data() : recvcounts,
                    pack_recv ? r.displs.data() : rdispls, pack_recv ? MPI_BYTE : recvtype, comm);
  if (rc == MPI_SUCCESS && pack_recv) {
    ScopedTimer timer;
    unpack_side(r, nr, recvbuf, recvcounts, rbyte, rls, absent_neighbours(comm, neighborhood, nr));
  }
  counters().add(Counter::alltoall_taken);
  return rc;
}

template <class Disp>
int alltoallw_common(WFn<Disp> fn, bool neighborhood, const void* sendbuf, const int* sendcounts, const Disp* sdispls,
                     const MPI_Datatype* sendtypes, void* recvbuf, const int* recvcounts, const Disp* rdispls,
                     const MPI_Datatype* recvtypes, MPI_Comm comm) {
  auto pass = [&] {
    counters().add(Counter::alltoall_passed);
    return fn(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
  };
  int ns = 0, nr = 0;
  if (!enabled() || sendbuf == MPI_IN_PLACE || !sendcounts || !recvcounts || !sdispls || !rdispls || !sendtypes ||
      !recvtypes || !peer_counts(comm, neighborhood, ns, nr))
    return pass();
  if (kernels::device_memory_possible() && (device::is_device(sendbuf) || device::is_device(recvbuf))) {
    int rc = MPI_SUCCESS;
    if (device_alltoallw<Disp>(fn, neighborhood, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                               recvtypes, comm, &rc))
      return rc;
    counters().add(Counter::device_passed);
    return pass();
  }
  if (!uses_packers(config())) return pass();  // host data: as in alltoallv_common
  // Every type must be known; packing pays if any of them is worth packing.
  // A first scan borrows the layouts (no allocation, no reference counts): a
  // halo exchange of large blocks passes through at the cost of this loop.
  bool any_worth = false;
  for (int i = 0; i < ns + nr; ++i) {
    const Layout* l = datatypes::peek(i < ns ? sendtypes[i] : recvtypes[i - ns]);
    if (!l) return pass();
    any_worth = any_worth || worth_packing(l);
  }
  if (!any_worth) return pass();
  std::vector<std::shared_ptr<const Layout>> keep;
  std::vector<const Layout*> sls, rls;
  bool worth = false;
  for (int i = 0; i < ns; ++i) {
    auto l = datatypes::lookup(sendtypes[i]);
    if (!l) return pass();
    worth = worth || worth_packing(l.get());
    sls.push_back(l.get());
    keep.push_back(std::move(l));
  }
  for (int i = 0; i < nr; ++i) {
    auto l = datatypes::lookup(recvtypes[i]);
    if (!l) return pass();
    worth = worth || worth_packing(l.get());
    rls.push_back(l.get());
    keep.push_back(std::move(l));
  }
  if (!worth || !cpu_accessible(sendbuf, recvbuf)) return pass();
  Side s, r;
  if (!plan_side(s, ns, sendcounts, sls) || !plan_side(r, nr, recvcounts, rls)) return pass();
  std::vector<int64_t> sbyte(sdispls, sdispls + ns), rbyte(rdispls, rdispls + nr);
  {
    ScopedTimer timer;
    pack_side(s, ns, sendbuf, sendcounts, sbyte, sls, absent_neighbours(comm, neighborhood, ns));
  }
  std::vector<MPI_Datatype> sbytes(static_cast<size_t>(ns), MPI_BYTE), rbytes(static_cast<size_t>(nr), MPI_BYTE);
  std::vector<Disp> sd(s.displs.begin(), s.displs.end()), rd(r.displs.begin(), r.displs.end());
  const int rc = fn(s.staging.get(), s.counts.data(), sd.data(), sbytes.data(), r.staging.get(), r.counts.data(),
                    rd.data(), rbytes.data(), comm);
  if (rc == MPI_SUCCESS) {
    ScopedTimer timer;
    unpack_side(r, nr, recvbuf, recvcounts, rbyte, rls, absent_neighbours(comm, neighborhood, nr));
  }
  counters().add(Counter::alltoall_taken);
  return rc;
}

}  // namespace

extern "C" int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                             MPI_Comm comm) {
  return alltoallv_common(next::Alltoallv, false, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
}

extern "C" int MPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                      MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                                      MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoallv_common(next::Neighbor_alltoallv, true, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                          rdispls, recvtype, comm);
}

extern "C" int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                             const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const int rdispls[],
                             const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return alltoallw_common<int>(next::Alltoallw, false, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                               rdispls, recvtypes, comm);
}

extern "C" int MPI_Neighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                                      const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                                      const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return alltoallw_common<MPI_Aint>(next::Neighbor_alltoallw, true, sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                                    recvcounts, rdispls, recvtypes, comm);
}
