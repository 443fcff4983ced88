// SPDX-License-Identifier: BSD-3-Clause
// Alltoallv/Alltoallw and their neighbourhood forms. Every peer's block is
// described once (Path: typed from the user's buffer, packed by Veneer into
// host staging, or staged through the GPU from device memory) and one path
// acts on the descriptions: staged blocks are packed, the library moves every
// block (staged ones as bytes from the staging buffer, the others with the
// user's own type), and staged receive blocks are unpacked. Host blocks are
// packed only where packing pays (alltoall_block_packs in switchboard.h, the
// send rule per block); a call where no block is staged goes to the library
// untouched, at the cost of one scan over the types. The library call made
// is always the collective the user called, so ranks that take over and ranks
// that pass through still match each other.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <memory_resource>
#include <vector>

#include "algorithms/decisions.h"
#include "datatypes/pack.h"
#include "interposer/device.h"
#include "interposer/forward.h"
#include "interposer/noted_comms.h"
#include "interposer/switchboard.h"
#include "support/counters.h"
#include "support/log.h"
#include "support/staging.h"

using namespace veneer;
using datatypes::Layout;

namespace {

// How one peer's block travels.
enum class Path : uint8_t {
  typed,          // the user's type at its place in the user's buffer (nothing of Veneer's)
  host_packed,    // packed by Veneer into host staging, moved as bytes
  device_staged,  // device memory packed on the GPU into pinned (CUDA-aware library: device) staging
  run,            // one contiguous run of a type that is not contiguous: handed over as bytes where it lies
};

// One peer's block of one side, described once. Trivial to build: the
// references a staged block needs are held by its Side.
struct Block {
  Path path = Path::typed;
  bool moves = false;  // count > 0 and a real peer (not a Cartesian MPI_PROC_NULL)
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  uintptr_t address = 0;           // the user's buffer + the block's byte displacement (integers: MPI_BOTTOM)
  int64_t bytes = 0;               // staged: packed bytes
  int64_t offset = 0;              // staged: where in the side's staging buffer
  const Layout* layout = nullptr;  // host_packed: held by Side::layouts
  int carried = -1;                // device_staged: index into Side::carried
  uintptr_t first = 0;             // run: the address of its first byte
  bool staged() const { return path == Path::host_packed || path == Path::device_staged; }
};

// One side (send or receive) of the call.
struct Side {
  explicit Side(std::pmr::memory_resource* m) : blocks(m), layouts(m), carried(m) {}
  std::pmr::vector<Block> blocks;
  std::pmr::vector<std::shared_ptr<const Layout>> layouts;  // of the host_packed blocks
  std::pmr::vector<device::Carried> carried;                // of the device_staged blocks
  bool device = false;  // the buffer is device memory: its moving blocks are staged through the GPU
  int staged = 0;       // blocks packed into the staging buffer
  int runs = 0;         // blocks handed over as bytes where they lie
  bool rewritten() const { return staged + runs > 0; }
  int64_t staged_bytes = 0;
  Staging host;
  kernels::PooledBuffer dev;
  char* staging = nullptr;
  uintptr_t base = 0;  // the buffer the library gets (staging or typed blocks relative to it)
};

bool enabled() { return takes_alltoallv(config()); }

bool is_device_buffer(const void* buf) {
  return buf != MPI_IN_PLACE && kernels::device_memory_possible() && device::is_device(buf);
}

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
    if (PMPI_Cartdim_get(comm, &nd) != MPI_SUCCESS) return false;
    nsend = nrecv = 2 * nd;
    return true;
  }
  if (kind == MPI_GRAPH) {
    int rank = 0, n = 0;
    if (PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS || PMPI_Graph_neighbors_count(comm, rank, &n) != MPI_SUCCESS)
      return false;
    nsend = nrecv = n;
    return true;
  }
  if (kind == MPI_DIST_GRAPH) {
    int weighted = 0;
    return PMPI_Dist_graph_neighbors_count(comm, &nrecv, &nsend, &weighted) == MPI_SUCCESS;
  }
  return false;
}

// Blocks exchanged with MPI_PROC_NULL: on a Cartesian topology that is not
// periodic, the border ranks' neighbours in the open directions. The library
// neither sends nor receives them, so Veneer must neither read those send
// blocks nor write those receive blocks. Slot 2d is the neighbour at -1 in
// dimension d, slot 2d+1 the one at +1 (the order of MPI_Cart_shift). False
// if the topology could not be read.
bool mark_absent(MPI_Comm comm, bool neighborhood, std::pmr::vector<char>& absent) {
  int kind = MPI_UNDEFINED;
  if (!neighborhood) return true;
  if (PMPI_Topo_test(comm, &kind) != MPI_SUCCESS) return false;
  if (kind != MPI_CART) return true;
  const int n = static_cast<int>(absent.size());
  for (int d = 0; 2 * d + 1 < n; ++d) {
    int below = MPI_PROC_NULL, above = MPI_PROC_NULL;
    if (PMPI_Cart_shift(comm, d, 1, &below, &above) != MPI_SUCCESS) return false;
    const size_t slot = 2 * static_cast<size_t>(d);
    absent[slot] = static_cast<char>(below == MPI_PROC_NULL);
    absent[slot + 1] = static_cast<char>(above == MPI_PROC_NULL);
  }
  return true;
}

// Whether `count` instances of `l` are one contiguous run although the type
// is not contiguous (a subarray of one row, a single cell): the library is
// handed the run as bytes where it lies, no copy (its datatype engine then
// has nothing to do; MPICH's is slow even for one run).
bool one_run_as_bytes(const Layout* l, int count) {
  return l && !l->contiguous && l->size > 0 && count > 0 && l->one_run(count) && l->size * int64_t{count} <= INT_MAX;
}

// The one scan a call that Veneer leaves alone costs: whether any block of a
// side might be staged (a device buffer with something to move, or a host
// block that pays to pack by the borrowed layout of its type).
template <class TypeAt>
bool worth_a_look(int n, const int* counts, bool device_side, bool packers, bool runs, TypeAt type_at) {
  const Config& c = config();
  for (int i = 0; i < n; ++i) {
    if (counts[i] <= 0) continue;
    if (device_side) return true;
    if (!packers) continue;
    const Layout* l = datatypes::peek(type_at(i));
    if (alltoall_block_packs(c, l, counts[i]) || (runs && one_run_as_bytes(l, counts[i]))) return true;
  }
  return false;
}

// The last call shape this thread passed through, so that the same call
// again (a halo exchange makes one every step) is recognised by comparing its
// counts and types instead of looking up every type. Only a pass is
// remembered, so a stale entry could only pass a call the rule would take,
// never the reverse; it is dropped when a type leaves the cache (the epoch)
// or the rule's settings change.
struct PassMemo {
  int form = -1;  // which entry point (and whether in place)
  uint64_t epoch = 0;
  int64_t max_block = 0, min_bytes = 0, max_bytes = 0;
  std::vector<int> counts;          // send counts, then receive counts
  std::vector<MPI_Datatype> types;  // send types, then receive types

  bool holds(int f, const Config& c, uint64_t e) const {
    return form == f && epoch == e && max_block == c.alltoall_max_block && min_bytes == c.alltoall_min_bytes &&
           max_bytes == c.p2p_max_bytes;
  }
};
constinit thread_local PassMemo* t_memo [[gnu::tls_model("initial-exec")]] = nullptr;

PassMemo& pass_memo() {
  if (!t_memo) {
    struct Owner {
      std::unique_ptr<PassMemo> memo = std::make_unique<PassMemo>();
      ~Owner() { t_memo = nullptr; }
    };
    thread_local Owner owner;
    t_memo = owner.memo.get();
  }
  return *t_memo;
}

// One side's counts and types (Alltoallv: one type for every block).
struct Shape {
  int n = 0;
  const int* counts = nullptr;
  const MPI_Datatype* types = nullptr;
  int ntypes = 0;
};

bool same(const PassMemo& m, const Shape& s, const Shape& r) {
  const auto sn = static_cast<size_t>(s.n), rn = static_cast<size_t>(r.n);
  const auto st = static_cast<size_t>(s.ntypes), rt = static_cast<size_t>(r.ntypes);
  if (m.counts.size() != sn + rn || m.types.size() != st + rt) return false;
  // memcmp: vectorised, and a count of 0 compares nothing (the pointers may be null then).
  auto equal = [](const void* a, const void* b, size_t bytes) { return bytes == 0 || std::memcmp(a, b, bytes) == 0; };
  return equal(s.counts, m.counts.data(), sn * sizeof(int)) &&
         equal(r.counts, m.counts.data() + sn, rn * sizeof(int)) &&
         equal(s.types, m.types.data(), st * sizeof(MPI_Datatype)) &&
         equal(r.types, m.types.data() + st, rt * sizeof(MPI_Datatype));
}

// True if this thread passed the same shape through last time, with nothing changed since.
bool passed_before(int form, const Shape& s, const Shape& r) {
  const PassMemo* m = t_memo;
  return m && m->holds(form, config(), g_cache_epoch.load(std::memory_order_acquire)) && same(*m, s, r);
}

void remember_pass(int form, const Shape& s, const Shape& r, uint64_t epoch) {
  PassMemo& m = pass_memo();
  const Config& c = config();
  m.form = form;
  m.epoch = epoch;
  m.max_block = c.alltoall_max_block;
  m.min_bytes = c.alltoall_min_bytes;
  m.max_bytes = c.p2p_max_bytes;
  m.counts.assign(s.counts, s.counts + s.n);
  m.counts.insert(m.counts.end(), r.counts, r.counts + r.n);
  m.types.assign(s.types, s.types + s.ntypes);
  m.types.insert(m.types.end(), r.types, r.types + r.ntypes);
}

// The description of a side's blocks, from borrowed layouts (no reference
// counts): which host blocks pay to pack, which device blocks are staged.
// `type_at(i)` and `disp_at(i, layout)` give block i's type and byte displacement.
template <class TypeAt, class DispAt>
void describe(Side& s, int n, const void* buf, const int* counts, const std::pmr::vector<char>& absent, bool packers,
              bool runs, TypeAt type_at, DispAt disp_at) {
  const Config& c = config();
  s.blocks.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Block& b = s.blocks[static_cast<size_t>(i)];
    b.count = counts[i];
    b.type = type_at(i);
    b.moves = counts[i] > 0 && !absent[static_cast<size_t>(i)];
    if (!b.moves || (!s.device && !packers)) continue;
    const Layout* l = datatypes::peek(b.type);  // valid until the next lookup: used at once
    b.address = reinterpret_cast<uintptr_t>(buf) + static_cast<uintptr_t>(disp_at(i, l));
    if (s.device) {
      b.path = Path::device_staged;
    } else if (alltoall_block_packs(c, l, b.count)) {
      b.path = Path::host_packed;
    } else if (runs && one_run_as_bytes(l, b.count)) {
      b.path = Path::run;
      b.first = b.address + static_cast<uintptr_t>(l->true_lb);
      b.bytes = l->size * int64_t{b.count};
    }
  }
}

// Whether the CPU may touch a host block (device memory reached through a
// host buffer's displacements is the library's business).
bool host_reachable(const Block& b, const Layout& l) {
  return !kernels::device_memory_possible() ||
         cpu_accessible(offset_ptr(reinterpret_cast<const void*>(b.address), l.true_lb));
}

// Takes the references a staged block needs (the layout, or the device
// packer). `must` (the block is staged because the form cannot mix it with
// staged blocks typed): any block Veneer can carry is staged, else false;
// otherwise a block that does not pay or cannot be carried becomes typed.
bool resolve(Side& s, Block& b, bool must) {
  if (s.device) {
    // Not `must`: a device block the library reads itself (contiguous, CUDA-aware library) stays typed.
    device::Carried carried = device::classify(reinterpret_cast<const void*>(b.address), b.count, b.type, !must);
    if (carried) {
      b.path = Path::device_staged;
      b.bytes = carried.bytes;
      b.carried = static_cast<int>(s.carried.size());
      s.carried.push_back(std::move(carried));
      return true;
    }
  } else {
    auto layout = datatypes::lookup(b.type);
    if (layout && (must ? layout->size > 0 : alltoall_block_packs(config(), layout.get(), b.count)) &&
        host_reachable(b, *layout)) {
      b.path = Path::host_packed;
      b.bytes = layout->size * int64_t{b.count};
      b.layout = layout.get();
      s.layouts.push_back(std::move(layout));
      return true;
    }
  }
  b.path = Path::typed;
  return !must;
}

// First (`all` false): resolves the blocks the scan chose to stage. Then, if
// the form needs it (`all`: one type per side, or typed blocks and runs out
// of reach of int displacements), stages every other moving block too; false
// if one cannot be.
bool resolve_side(Side& s, bool all) {
  s.staged = s.runs = 0;
  for (Block& b : s.blocks) {
    if (b.moves && (all ? !b.staged() : b.staged()) && !resolve(s, b, all)) return false;
    s.staged += b.staged();
    s.runs += b.path == Path::run;
  }
  return true;
}

// Places the staged blocks one after another and allocates the staging
// buffer. False if a byte count, an offset or the total would not fit an int
// or VENEER_P2P_MAX_BYTES, or the buffer could not be had.
bool allocate(Side& s) {
  int64_t off = 0;
  kernels::DeviceRuntime* rt = nullptr;
  for (Block& b : s.blocks) {
    if (!b.staged()) continue;
    if (b.bytes > INT_MAX || off > INT_MAX) return false;
    b.offset = off;
    off += b.bytes;
    if (b.path == Path::device_staged) rt = s.carried[static_cast<size_t>(b.carried)].rt;
  }
  if (off > INT_MAX || off > config().p2p_max_bytes) return false;
  s.staged_bytes = off;
  if (rt) {
    const auto kind =
        device::library_cuda_aware() ? kernels::PooledBuffer::Kind::device : kernels::PooledBuffer::Kind::pinned;
    s.dev = kernels::PooledBuffer(*rt, kind, static_cast<size_t>(off > 0 ? off : 1));
    s.staging = s.dev.get();
  } else {
    s.host = Staging(static_cast<size_t>(off > 0 ? off : 1));
    s.staging = s.host.get();
  }
  return s.staging != nullptr;
}

// The buffer address the library gets for a side with staged blocks: the
// lowest of the staging buffer and the typed blocks, so that every
// displacement is non-negative. `fits` (int displacements): false if some
// displacement from it would not fit an int.
bool choose_base(Side& s, bool int_displacements) {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  if (s.staging) {
    lo = reinterpret_cast<uintptr_t>(s.staging);
    hi = lo + static_cast<uintptr_t>(s.staged_bytes);
  }
  for (const Block& b : s.blocks) {
    if (!b.moves || b.staged()) continue;
    const uintptr_t at = b.path == Path::run ? b.first : b.address;
    lo = std::min(lo, at);
    hi = std::max(hi, at);
  }
  s.base = lo;
  return !int_displacements || hi - lo <= static_cast<uintptr_t>(INT_MAX);
}

// Packs the side's staged blocks into its staging buffer; false if a device step failed.
bool pack_side(const Side& s) {
  ScopedTimer timer;
  const bool on_device = device::library_cuda_aware();
  // Every block packed, or false at the first device step that failed.
  return std::ranges::all_of(s.blocks, [&](const Block& b) {
    const void* at = reinterpret_cast<const void*>(b.address);
    if (b.path == Path::host_packed) {
      datatypes::pack_all(*b.layout, b.count, at, s.staging + b.offset);
      counters().add(Counter::bytes_packed, static_cast<uint64_t>(b.bytes));
    } else if (b.path == Path::device_staged) {
      return device::pack_into(s.carried[static_cast<size_t>(b.carried)], b.count, at, s.staging + b.offset, on_device);
    }
    return true;
  });
}

// Unpacks the side's staged blocks; MPI_ERR_INTERN if a device step failed.
int unpack_side(const Side& s) {
  ScopedTimer timer;
  const bool on_device = device::library_cuda_aware();
  int rc = MPI_SUCCESS;
  for (const Block& b : s.blocks) {
    void* at = reinterpret_cast<void*>(b.address);
    if (b.path == Path::host_packed) {
      datatypes::unpack_all(*b.layout, b.count, at, s.staging + b.offset);
      counters().add(Counter::bytes_unpacked, static_cast<uint64_t>(b.bytes));
    } else if (b.path == Path::device_staged && !device::unpack_from(s.carried[static_cast<size_t>(b.carried)], b.count,
                                                                     at, s.staging + b.offset, b.bytes, on_device)) {
      log(LogLevel::warn, "alltoallv/w: unpacking a received block into device memory failed");
      rc = MPI_ERR_INTERN;
    }
  }
  return rc;
}

void count_blocks(const Side& s) {
  int typed = 0;
  for (const Block& b : s.blocks) typed += b.moves && b.path == Path::typed;
  counters().add(Counter::alltoall_blocks_staged, static_cast<uint64_t>(s.staged));
  counters().add(Counter::alltoall_blocks_runs, static_cast<uint64_t>(s.runs));
  counters().add(Counter::alltoall_blocks_typed, static_cast<uint64_t>(typed));
}

// What both forms learn about a call before describing its blocks.
struct Call {
  bool in_place = false;
  bool sdev = false, rdev = false;  // the buffers are device memory
  bool packers = false;             // Veneer may pack host blocks (uses_packers)
  int ns = 0, nr = 0;               // blocks sent and received
  bool device() const { return sdev || rdev; }
};

// The checks both forms make first; false: the call goes to the library untouched.
bool screen(Call& c, const void* sendbuf, const void* recvbuf, MPI_Comm comm, bool neighborhood) {
  c.sdev = is_device_buffer(sendbuf);
  c.rdev = is_device_buffer(recvbuf);
  c.packers = uses_packers(config());
  if (c.device() && !carries_device(config())) {
    counters().add(Counter::device_passed);
    return false;
  }
  if (!c.device() && !c.packers) return false;
  return peer_counts(comm, neighborhood, c.ns, c.nr);
}

// A host call this thread passed before with the same shape, or one with no
// block worth a look (then remembered): true to pass it untouched. `form`
// tells the entry points (and in place) apart.
template <class SendTypeAt, class RecvTypeAt>
bool host_call_passes(const Call& c, int form, const Shape& ss, const Shape& rs, SendTypeAt stype, RecvTypeAt rtype) {
  if (c.device()) return false;
  if (passed_before(form, ss, rs)) return true;
  const uint64_t epoch = g_cache_epoch.load(std::memory_order_acquire);
  // Runs alone do not make a call worth taking (Open MPI handles them as
  // fast as bytes: +0.3% instructions taken over); they ride along.
  if ((!c.in_place && worth_a_look(c.ns, ss.counts, false, c.packers, false, stype)) ||
      worth_a_look(c.nr, rs.counts, false, c.packers, false, rtype))
    return false;
  remember_pass(form, ss, rs, epoch);
  return true;
}

// Room for the descriptions of a few dozen peers without touching the heap.
constexpr size_t kArena = 16384;

// The two sides of a call, described in an arena on the caller's stack.
struct Sides {
  std::array<std::byte, kArena> arena;
  std::pmr::monotonic_buffer_resource memory{arena.data(), arena.size()};
  std::pmr::vector<char> sabsent{&memory}, rabsent{&memory};  // blocks exchanged with MPI_PROC_NULL
  Side s{&memory}, r{&memory};
};

// Marks the absent blocks and which side is device memory; false if the topology could not be read.
bool prepare(Sides& sides, const Call& c, MPI_Comm comm, bool neighborhood) {
  sides.sabsent.assign(static_cast<size_t>(c.ns), 0);
  sides.rabsent.assign(static_cast<size_t>(c.nr), 0);
  sides.s.device = c.sdev;
  sides.r.device = c.rdev;
  return mark_absent(comm, neighborhood, sides.sabsent) && mark_absent(comm, neighborhood, sides.rabsent);
}

// Packs what the call sends from staging (in place, the receive blocks hold
// it); false if a device step failed.
bool pack_sides(const Sides& sides, bool in_place) {
  return (!sides.s.staged || pack_side(sides.s)) && (!in_place || !sides.r.staged || pack_side(sides.r));
}

// A call given back to the library after it was described (nothing sent yet).
void declined(const Call& c) {
  if (c.device()) counters().add(Counter::device_passed);
}

// After the library's call `rc`: unpacks the staged receive blocks and counts the call.
int completed(int rc, const Sides& sides) {
  if (rc == MPI_SUCCESS && sides.r.staged) rc = unpack_side(sides.r);
  counters().add(Counter::alltoall_taken);
  count_blocks(sides.s);
  count_blocks(sides.r);
  return rc;
}

using VFn = int (*)(const void*, const int*, const int*, MPI_Datatype, void*, const int*, const int*, MPI_Datatype,
                    MPI_Comm);
template <class Disp>
using WFn = int (*)(const void*, const int*, const Disp*, const MPI_Datatype*, void*, const int*, const Disp*,
                    const MPI_Datatype*, MPI_Comm);

// Alltoallv and Neighbor_alltoallv: one type per side, so a side is either
// wholly typed (the user's arguments) or wholly staged (bytes).
// Whether Veneer never packs a block of host data of `type` for Alltoallv/w
// (contiguous, undescribed, or a mean block above VENEER_ALLTOALL_MAX_BLOCK),
// whatever its count.
bool never_packed(const Config& c, MPI_Datatype type) {
  const Layout* l = datatypes::peek(type);  // borrowed: used at once
  return !l || l->contiguous || l->size <= 0 || l->mean_block() > c.alltoall_max_block;
}

[[gnu::noinline]] int alltoallv_full(VFn fn, bool neighborhood, const void* sendbuf, const int* sendcounts,
                                     const int* sdispls, MPI_Datatype sendtype, void* recvbuf, const int* recvcounts,
                                     const int* rdispls, MPI_Datatype recvtype, MPI_Comm comm) {
  auto pass = [&] {
    counters().add(Counter::alltoall_passed);
    return fn(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
  };
  const bool in_place = sendbuf == MPI_IN_PLACE;
  Call c{.in_place = in_place};
  if (!enabled() || !recvcounts || !rdispls || (!in_place && (!sendcounts || !sdispls)) || (in_place && neighborhood) ||
      !screen(c, sendbuf, recvbuf, comm, neighborhood))
    return pass();
  auto stype = [&](int) { return sendtype; };
  auto rtype = [&](int) { return recvtype; };
  const Shape ss{in_place ? 0 : c.ns, sendcounts, &sendtype, in_place ? 0 : 1}, rs{c.nr, recvcounts, &recvtype, 1};
  if (host_call_passes(c, (neighborhood ? 2 : 0) + (in_place ? 1 : 0), ss, rs, stype, rtype)) return pass();

  Sides sides;
  if (!prepare(sides, c, comm, neighborhood)) return pass();
  Side &s = sides.s, &r = sides.r;
  auto disp = [](const int* displs) {
    return [displs](int i, const Layout* l) { return int64_t{displs[i]} * (l ? l->extent : 0); };
  };
  // One type per side: no runs (a run's bytes could not be told apart from the other blocks').
  if (!in_place) describe(s, c.ns, sendbuf, sendcounts, sides.sabsent, c.packers, false, stype, disp(sdispls));
  describe(r, c.nr, recvbuf, recvcounts, sides.rabsent, c.packers, false, rtype, disp(rdispls));
  // A side with any block worth staging stages every moving block (one type).
  auto plan = [](Side& side) {
    if (!resolve_side(side, false)) return false;
    return side.staged == 0 || (resolve_side(side, true) && allocate(side));
  };
  if (!plan(s) || !plan(r) || s.staged + r.staged == 0) {
    declined(c);
    return pass();
  }
  // The staged sides in bytes.
  std::pmr::vector<int> scounts(&sides.memory), sdisp(&sides.memory), rcounts(&sides.memory), rdisp(&sides.memory);
  auto bytes_of = [](const Side& side, std::pmr::vector<int>& counts, std::pmr::vector<int>& displs) {
    for (const Block& b : side.blocks) {
      counts.push_back(b.path == Path::typed ? 0 : static_cast<int>(b.bytes));
      displs.push_back(static_cast<int>(b.offset));
    }
  };
  if (s.staged) bytes_of(s, scounts, sdisp);
  if (r.staged) bytes_of(r, rcounts, rdisp);
  if (!pack_sides(sides, in_place)) {
    declined(c);
    return pass();
  }
  const int rc = fn(in_place ? MPI_IN_PLACE : (s.staged ? s.staging : sendbuf), s.staged ? scounts.data() : sendcounts,
                    s.staged ? sdisp.data() : sdispls, s.staged ? MPI_BYTE : sendtype, r.staged ? r.staging : recvbuf,
                    r.staged ? rcounts.data() : recvcounts, r.staged ? rdisp.data() : rdispls,
                    r.staged ? MPI_BYTE : recvtype, comm);
  return completed(rc, sides);
}

// Alltoallv and Neighbor_alltoallv: one type a side. When neither is ever
// packed and no device memory can be here (nor a report counts the call),
// the call is the library's whatever its counts, without asking the
// communicator or comparing the counts with the last call's: that cost 24 ns
// over a 14 ns Alltoallv at 1 rank (Open MPI). Else in full, out of line.
int alltoallv_common(VFn fn, bool neighborhood, const void* sendbuf, const int* sendcounts, const int* sdispls,
                     MPI_Datatype sendtype, void* recvbuf, const int* recvcounts, const int* rdispls,
                     MPI_Datatype recvtype, MPI_Comm comm) {
  const Config& c = config();
  if (c.report == 0 && !(carries_device(c) && device_byte_down(c)) &&
      (sendbuf == MPI_IN_PLACE || never_packed(c, sendtype)) && never_packed(c, recvtype)) [[likely]]
    return fn(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
  return alltoallv_full(fn, neighborhood, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                        recvtype, comm);
}

// The library's arguments for a side of Alltoallw with staged blocks or runs.
template <class Disp>
struct WArgs {
  explicit WArgs(std::pmr::memory_resource* m) : counts(m), displs(m), types(m) {}
  std::pmr::vector<int> counts;
  std::pmr::vector<Disp> displs;
  std::pmr::vector<MPI_Datatype> types;

  // From the user's `counts` and `types`: staged blocks and runs as bytes,
  // every moving block at its displacement from the side's base.
  void build(const Side& side, const int* user_counts, const MPI_Datatype* user_types) {
    const size_t n = side.blocks.size();
    counts.assign(user_counts, user_counts + n);
    types.assign(user_types, user_types + n);
    displs.assign(n, 0);
    const uintptr_t staging = reinterpret_cast<uintptr_t>(side.staging);
    for (size_t i = 0; i < n; ++i) {
      const Block& b = side.blocks[i];
      if (b.path != Path::typed) {
        counts[i] = static_cast<int>(b.bytes);
        types[i] = MPI_BYTE;
        displs[i] = static_cast<Disp>((b.staged() ? staging + static_cast<uintptr_t>(b.offset) : b.first) - side.base);
      } else if (b.moves) {
        displs[i] = static_cast<Disp>(b.address - side.base);
      }
    }
  }
};

// Alltoallw's plan for a side: resolves the chosen blocks; with typed blocks
// beyond an int's reach of the staging buffer (`int_displacements`), stages
// them all. False if the side cannot be carried.
bool plan_w(Side& side, bool int_displacements) {
  if (!resolve_side(side, false)) return false;
  if (!side.rewritten()) return true;
  if (side.staged && !allocate(side)) return false;
  if (choose_base(side, int_displacements)) return true;
  side.host = Staging();
  side.dev = kernels::PooledBuffer();
  return resolve_side(side, true) && allocate(side) && choose_base(side, int_displacements);
}

// Alltoallw and Neighbor_alltoallw: a type per block, so staged and typed
// blocks mix on one side (typed ones at their displacement from the chosen
// buffer address). With int displacements (Alltoallw) a typed block out of
// their reach from the staging buffer makes the whole side staged.
template <class Disp>
[[gnu::noinline]] int alltoallw_full(WFn<Disp> fn, bool neighborhood, const void* sendbuf, const int* sendcounts,
                                     const Disp* sdispls, const MPI_Datatype* sendtypes, void* recvbuf,
                                     const int* recvcounts, const Disp* rdispls, const MPI_Datatype* recvtypes,
                                     MPI_Comm comm) {
  auto pass = [&] {
    counters().add(Counter::alltoall_passed);
    return fn(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
  };
  const bool in_place = sendbuf == MPI_IN_PLACE;
  Call c{.in_place = in_place};
  if (!enabled() || !recvcounts || !rdispls || !recvtypes || (!in_place && (!sendcounts || !sdispls || !sendtypes)) ||
      (in_place && neighborhood) || !screen(c, sendbuf, recvbuf, comm, neighborhood))
    return pass();
  auto stype = [&](int i) { return sendtypes[i]; };
  auto rtype = [&](int i) { return recvtypes[i]; };
  const Shape ss{in_place ? 0 : c.ns, sendcounts, sendtypes, in_place ? 0 : c.ns},
      rs{c.nr, recvcounts, recvtypes, c.nr};
  if (host_call_passes(c, (neighborhood ? 6 : 4) + (in_place ? 1 : 0), ss, rs, stype, rtype)) {
    // Its peer counts for the quick check (alltoallw_common), once the
    // communicator is watched (its free forgets them).
    const CommFact fact = neighborhood ? CommFact::neighbours : CommFact::peers;
    if (int ns = 0, nr = 0; !noted(comm, fact, ns, nr) && algorithms::watch_communicator(comm))
      note(comm, fact, c.ns, c.nr);
    return pass();
  }

  Sides sides;
  if (!prepare(sides, c, comm, neighborhood)) return pass();
  Side &s = sides.s, &r = sides.r;
  auto disp = [](const Disp* displs) { return [displs](int i, const Layout*) { return int64_t{displs[i]}; }; };
  if (!in_place) describe(s, c.ns, sendbuf, sendcounts, sides.sabsent, c.packers, true, stype, disp(sdispls));
  describe(r, c.nr, recvbuf, recvcounts, sides.rabsent, c.packers, true, rtype, disp(rdispls));
  constexpr bool int_displacements = sizeof(Disp) < sizeof(int64_t);
  if (!plan_w(s, int_displacements) || !plan_w(r, int_displacements) || (!s.rewritten() && !r.rewritten())) {
    declined(c);
    return pass();
  }
  WArgs<Disp> sa(&sides.memory), ra(&sides.memory);
  if (s.rewritten()) sa.build(s, sendcounts, sendtypes);
  if (r.rewritten()) ra.build(r, recvcounts, recvtypes);
  if (!pack_sides(sides, in_place)) {
    declined(c);
    return pass();
  }
  const bool sw = s.rewritten(), rw = r.rewritten();
  const void* sbuf = in_place ? MPI_IN_PLACE : (sw ? reinterpret_cast<const void*>(s.base) : sendbuf);
  void* rbuf = rw ? reinterpret_cast<void*>(r.base) : recvbuf;
  const int rc = fn(sbuf, sw ? sa.counts.data() : sendcounts, sw ? sa.displs.data() : sdispls,
                    sw ? sa.types.data() : sendtypes, rbuf, rw ? ra.counts.data() : recvcounts,
                    rw ? ra.displs.data() : rdispls, rw ? ra.types.data() : recvtypes, comm);
  return completed(rc, sides);
}

// Whether no block of types[0..n) is ever packed (never_packed), asking
// once for each run of equal types (Alltoallw's types are mostly one).
bool blocks_never_packed(const Config& c, const MPI_Datatype* types, int n) {
  MPI_Datatype last = MPI_DATATYPE_NULL;
  for (int i = 0; i < n; ++i) {
    if (types[i] == last) continue;
    last = types[i];
    if (!never_packed(c, last)) return false;
  }
  return true;
}

// Alltoallw and Neighbor_alltoallw: when the communicator's peer counts are
// noted (interposer/noted_comms.h), no type of either side is ever packed,
// no device memory can be here and no report counts the call, the call is
// the library's, as in the full path, without asking the communicator or
// comparing the arrays with the last call's: that cost 26-52 ns over a
// 17-35 ns Alltoallw at 1 rank (Open MPI). Else in full, out of line.
template <class Disp>
int alltoallw_common(WFn<Disp> fn, bool neighborhood, const void* sendbuf, const int* sendcounts, const Disp* sdispls,
                     const MPI_Datatype* sendtypes, void* recvbuf, const int* recvcounts, const Disp* rdispls,
                     const MPI_Datatype* recvtypes, MPI_Comm comm) {
  const Config& c = config();
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (int ns = 0, nr = 0; c.report == 0 && !(carries_device(c) && device_byte_down(c)) && recvtypes &&
                          (in_place ? !neighborhood : sendtypes != nullptr) &&
                          noted(comm, neighborhood ? CommFact::neighbours : CommFact::peers, ns, nr) &&
                          (in_place || blocks_never_packed(c, sendtypes, ns)) && blocks_never_packed(c, recvtypes, nr))
      [[likely]]
    return fn(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
  return alltoallw_full<Disp>(fn, neighborhood, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                              recvtypes, comm);
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
