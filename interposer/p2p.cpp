// SPDX-License-Identifier: BSD-3-Clause
// Sends and receives. Each entry point asks p2p_passes() first (the common
// pass-through, a few instructions without a stack frame); the rest builds
// one Outgoing / Incoming (interposer/p2p.h) per side and acts on it along
// one path, whichever route (pass, host-staged, device-staged) it chose.
// Non-contiguous host data is packed into staging and moved as bytes;
// receives land in staging and are unpacked when they complete. The status
// the user sees is the library's own for the byte transfer, which carries the
// same source, tag, error and byte count, so MPI_Get_count/MPI_Get_elements
// on the user's type answer as for a typed receive. Device buffers
// (interposer/device.h) travel the same way, packed on the GPU into pinned
// host memory (or device memory for a CUDA-aware library).
#include "interposer/p2p.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "datatypes/pack.h"
#include "interposer/device.h"
#include "interposer/forward.h"
#include "interposer/requests.h"
#include "interposer/switchboard.h"
#include "kernels/memory_kind.h"
#include "support/counters.h"
#include "support/log.h"
#include "support/staging.h"

namespace veneer {
namespace {

// Receives that failed for another reason than truncation have no data to unpack.
bool has_data(int rc) {
  if (rc == MPI_SUCCESS) return true;
  int cls = MPI_SUCCESS;
  if (PMPI_Error_class(rc, &cls) != MPI_SUCCESS) return false;
  return cls == MPI_ERR_TRUNCATE;
}

// A device buffer Veneer carries for a send or receive with `peer`, or empty.
device::Carried carried(const void* buf, int count, MPI_Datatype type, int peer) {
  const Config& cfg = config();
  if (!takes_send(cfg) || !carries_device(cfg) || peer == MPI_PROC_NULL || count <= 0 ||
      !kernels::device_memory_possible() || !kernels::device_runtime())
    return {};
  device::Carried c = device::classify(buf, count, type, true);
  if (c && c.bytes > INT_MAX) {
    counters().add(Counter::device_passed);
    return {};  // a byte count the library's int cannot hold
  }
  return c;
}

// Stages the device buffer `c` of a side, `count` instances at `buf`: a send
// is packed (a persistent one, `device_only`, packs at every MPI_Start: only
// its staging now), a receive gets its landing zone. False if that failed.
bool stage_device(Outgoing& out, const device::Carried& c, int count, const void* buf, Routes routes) {
  return routes == Routes::device_only ? device::landing_for_library(c, out.device)
                                       : device::pack_for_library(c, count, buf, out.device);
}
bool stage_device(Incoming& in, const device::Carried& c, int /*count*/, void* /*buf*/, Routes /*routes*/) {
  if (!device::landing_for_library(c, in.device)) return false;
  in.capacity = c.bytes;
  return true;
}

// Fills the host staging of a side (`bytes` bytes): a send is packed into
// it, a receive keeps the layout to unpack with.
void stage_host(Outgoing& out, const std::shared_ptr<const datatypes::Layout>& layout, int count, const void* buf,
                int64_t bytes) {
  ScopedTimer timer;
  datatypes::pack_all(*layout, count, buf, out.host.get());
  counters().add(Counter::bytes_packed, static_cast<uint64_t>(bytes));
}
void stage_host(Incoming& in, std::shared_ptr<const datatypes::Layout> layout, int /*count*/, void* /*buf*/,
                int64_t bytes) {
  in.capacity = bytes;
  in.layout = std::move(layout);
}

// Points a side's library arguments at `bytes` bytes of Veneer's staging.
template <class Side, class Buf>
void hand_over_bytes(Side& side, Route route, Buf* staging, int64_t bytes) {
  side.route = route;
  side.buf = staging;
  side.count = static_cast<int>(bytes);
  side.type = MPI_BYTE;
}

// outgoing() and incoming(): one description, whichever side (a send's
// buffer is const).
template <class Side, class Buf>
Side describe(Buf* buf, int count, MPI_Datatype type, int peer, MPI_Comm comm, Routes routes) {
  constexpr bool send = std::is_const_v<Buf>;
  Side side;
  side.buf = side.user = buf;
  side.count = side.user_count = count;
  side.type = type;
  if (device::Carried c = carried(buf, count, type, peer)) {
    if (!stage_device(side, c, count, buf, routes)) {
      log(LogLevel::warn, "a device %s buffer of %lld bytes could not be staged; handed to the library as it is",
          send ? "send" : "receive", static_cast<long long>(c.bytes));
      side.device = {};
      counters().add(Counter::device_passed);
      return side;
    }
    hand_over_bytes(side, Route::device, side.device.storage.get(), c.bytes);
    side.carried = std::move(c);
    counters().add(send ? Counter::send_taken : Counter::recv_taken);
    return side;
  }
  auto layout =
      routes == Routes::device_only ? nullptr : p2p_layout(buf, count, type, peer, comm, routes == Routes::nonblocking);
  if (layout) {
    const int64_t bytes = layout->size * count;
    side.host = Staging(static_cast<size_t>(bytes));
    if (side.host.get()) {
      hand_over_bytes(side, Route::host, side.host.get(), bytes);
      stage_host(side, std::move(layout), count, buf, bytes);
      counters().add(send ? Counter::send_taken : Counter::recv_taken);
      return side;
    }
    log(LogLevel::debug, "no staging memory for a %lld-byte %s: passed through", static_cast<long long>(bytes),
        send ? "send" : "receive");
  }
  counters().add(send ? Counter::send_passed : Counter::recv_passed);
  return side;
}

}  // namespace

Outgoing outgoing(const void* buf, int count, MPI_Datatype type, int peer, MPI_Comm comm, Routes routes) {
  return describe<Outgoing>(buf, count, type, peer, comm, routes);
}

Incoming incoming(void* buf, int count, MPI_Datatype type, int peer, MPI_Comm comm, Routes routes) {
  return describe<Incoming>(buf, count, type, peer, comm, routes);
}

int repack(Outgoing& out) {
  if (out.route != Route::device) return MPI_SUCCESS;
  const bool on_device = out.device.storage.kind() == kernels::PooledBuffer::Kind::device;
  if (device::pack_into(out.carried, out.user_count, out.user, out.device.storage.get(), on_device)) return MPI_SUCCESS;
  log(LogLevel::error, "packing a %lld-byte device send buffer for MPI_Start failed (see the device messages above)",
      static_cast<long long>(out.carried.bytes));
  return MPI_ERR_INTERN;
}

int finish(Incoming& in, const MPI_Status& st, int rc) {
  if (in.route == Route::pass || in.unpacked) return rc;
  in.unpacked = true;
  if (!has_data(rc)) return rc;
  MPI_Count received = 0;
  if (PMPI_Get_elements_x(&st, MPI_BYTE, &received) != MPI_SUCCESS || received == MPI_UNDEFINED || received <= 0)
    return rc;
  if (in.route == Route::host) {
    ScopedTimer timer;
    const int64_t n = std::min<int64_t>(received, in.capacity);
    datatypes::unpack(*in.layout, in.user_count, in.user, 0, n, in.host.get());
    counters().add(Counter::bytes_unpacked, static_cast<uint64_t>(n));
    return rc;
  }
  if (device::unpack_from_library(in.carried, in.user_count, in.user, in.device, received)) return rc;
  log(LogLevel::error, "unpacking %lld received bytes into device memory failed (see the device messages above)",
      static_cast<long long>(received));
  return MPI_ERR_INTERN;
}

namespace {
// Fewer elements than this of a type of `size` bytes make fewer than `bytes`
// (at most kAlwaysPasses).
int32_t count_below(int64_t bytes, int64_t size) {
  if (bytes <= 0) return 0;
  const int64_t n = bytes / size + (bytes % size != 0 ? 1 : 0);
  return static_cast<int32_t>(std::min<int64_t>(n, datatypes::detail::kAlwaysPasses));
}
}  // namespace

int32_t size_passes_below(int64_t size, bool nonblocking) {
  const Config& c = config();
  if (!takes_send(c) || !uses_packers(c) || size <= 0) return datatypes::detail::kAlwaysPasses;
  return count_below(nonblocking ? c.p2p_nonblocking_min_bytes : c.p2p_min_bytes, size);
}

int32_t type_passes_below(const datatypes::Layout* layout, bool nonblocking) {
  const Config& c = config();
  if (!layout || layout->contiguous || layout->size <= 0 ||
      layout->mean_block() > (nonblocking ? c.p2p_nonblocking_max_block : c.p2p_max_block))
    return datatypes::detail::kAlwaysPasses;
  return size_passes_below(layout->size, nonblocking);  // the switches, and the smallest message taken over
}

void fill_pass_rule(const datatypes::Layout* layout, datatypes::detail::Front& entry) {
  const Config& c = config();
  // Device memory possible (the device byte down): every call is asked in
  // full; else host data by the type's rule.
  const bool device =
      takes_send(c) && carries_device(c) && kernels::detail::g_quiet.load(std::memory_order_acquire) == 0;
  entry.pass_below[0] = device ? 0 : type_passes_below(layout, false);
  entry.pass_below[1] = device ? 0 : type_passes_below(layout, true);
  entry.noted = c.report != 0 ? 1 : 0;
}

namespace {
bool passes_uncounted() { return config().report == 0; }

struct PassRuleAtLoad {
  PassRuleAtLoad() {
    datatypes::set_pass_rule(fill_pass_rule);
    datatypes::set_settle_rule(type_passes_below, size_passes_below, passes_uncounted);
  }
} pass_rule_at_load;
}  // namespace

}  // namespace veneer

using namespace veneer;

namespace {

using SendFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm);

// Keeps a side Veneer staged in the request table until `request` completes
// (is freed, for a persistent one).
void keep(MPI_Request request, Outgoing&& out, bool persistent) {
  Pending pending;
  pending.out = std::move(out);
  pending.persistent = persistent;
  requests::track(request, std::move(pending));
}
void keep(MPI_Request request, Incoming&& in, bool persistent) {
  Pending pending;
  pending.is_recv = true;
  pending.in = std::move(in);
  pending.persistent = persistent;
  requests::track(request, std::move(pending));
}

// A blocking receive into `in`'s buffer: `call(status)` makes it with the
// status it is given (the user's, or one of Veneer's when they ignore it:
// the unpack needs the byte count), then the bytes are unpacked.
template <class Call>
int receive(Incoming& in, MPI_Status* status, Call call) {
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = call(st);
  return finish(in, *st, rc);
}

int blocking_send(SendFn fn, const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (p2p_passes(count, type, dest, false, Counter::send_passed)) return fn(buf, count, type, dest, tag, comm);
  const Outgoing out = outgoing(buf, count, type, dest, comm);
  return fn(out.buf, out.count, out.type, dest, tag, comm);
}

// The description of one side, by the constness of its buffer.
Outgoing side_of(const void* buf, int count, MPI_Datatype type, int peer, MPI_Comm comm, Routes routes) {
  return outgoing(buf, count, type, peer, comm, routes);
}
Incoming side_of(void* buf, int count, MPI_Datatype type, int peer, MPI_Comm comm, Routes routes) {
  return incoming(buf, count, type, peer, comm, routes);
}

// Nonblocking sends (a const buffer) and receives, and (`routes`
// device_only) the persistent ones: the staging lives in the request table
// until the request completes (is freed).
template <class Buf, class Fn>
int nonblocking(Fn fn, Buf* buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm, MPI_Request* request,
                Routes routes = Routes::nonblocking) {
  constexpr Counter passed = std::is_const_v<Buf> ? Counter::send_passed : Counter::recv_passed;
  if (p2p_passes(count, type, peer, routes == Routes::nonblocking, passed))
    return fn(buf, count, type, peer, tag, comm, request);
  if (!request) {
    counters().add(passed);
    return fn(buf, count, type, peer, tag, comm, request);
  }
  auto side = side_of(buf, count, type, peer, comm, routes);
  const int rc = fn(side.buf, side.count, side.type, peer, tag, comm, request);
  if (rc == MPI_SUCCESS && side.route != Route::pass) keep(*request, std::move(side), routes == Routes::device_only);
  return rc;
}

// Out of line with the entry point's own arguments, so the entry point jumps here without a frame.
// Each asks the whole of p2p_passes (counting, no partner, nothing to move).
[[gnu::noinline]] int send_slow(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (p2p_passes(count, type, dest, false, Counter::send_passed)) return next::Send(buf, count, type, dest, tag, comm);
  const Outgoing out = outgoing(buf, count, type, dest, comm);
  return next::Send(out.buf, out.count, out.type, dest, tag, comm);
}
[[gnu::noinline]] int isend_slow(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                 MPI_Request* request) {
  return nonblocking(next::Isend, buf, count, type, dest, tag, comm, request);
}

[[gnu::noinline]] int recv_slow(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                MPI_Status* status) {
  if (p2p_passes(count, type, source, false, Counter::recv_passed))
    return next::Recv(buf, count, type, source, tag, comm, status);
  Incoming in = incoming(buf, count, type, source, comm);
  if (in.route == Route::pass) return next::Recv(buf, count, type, source, tag, comm, status);
  return receive(in, status,
                 [&](MPI_Status* st) { return next::Recv(in.buf, in.count, in.type, source, tag, comm, st); });
}

[[gnu::noinline]] int irecv_slow(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                 MPI_Request* request) {
  return nonblocking(next::Irecv, buf, count, type, source, tag, comm, request);
}

// Past p2p_leanly_passes: the pass-through by the type's front entry
// (p2p_plainly_passes), else `slow`, which asks p2p_passes in full.
template <bool nonblocking, class Library, class Slow, class Buf, class... Rest>
[[gnu::noinline]] int by_type(const Library& library, Slow slow, Buf* buf, int count, MPI_Datatype type, int peer,
                              int tag, MPI_Comm comm, Rest... rest) {
  if (p2p_plainly_passes(count, type, nonblocking)) [[likely]]
    return library(buf, count, type, peer, tag, comm, rest...);
  return slow(buf, count, type, peer, tag, comm, rest...);
}

// The entry points of MPI_Send, Isend, Recv and Irecv: when no committed
// type would be taken over at this count (p2p_leanly_passes), straight to the
// library in a few instructions without a stack frame; else the type's way,
// out of line (by_type).
template <bool nonblocking, class Library, class Slow, class Buf, class... Rest>
[[gnu::always_inline]] inline int quick(const Library& library, Slow slow, Buf* buf, int count, MPI_Datatype type,
                                        int peer, int tag, MPI_Comm comm, Rest... rest) {
  if (p2p_leanly_passes(count, nonblocking)) [[likely]]
    return library(buf, count, type, peer, tag, comm, rest...);
  return by_type<nonblocking>(library, slow, buf, count, type, peer, tag, comm, rest...);
}

// Sendrecv(_replace) with a side Veneer staged: always a Sendrecv.
int sendrecv_staged(const Outgoing& out, int dest, int sendtag, Incoming& in, int source, int recvtag, MPI_Comm comm,
                    MPI_Status* status) {
  return receive(in, status, [&](MPI_Status* st) {
    return next::Sendrecv(out.buf, out.count, out.type, dest, sendtag, in.buf, in.count, in.type, source, recvtag, comm,
                          st);
  });
}

}  // namespace

extern "C" int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return quick<false>(next::Send, send_slow, buf, count, type, dest, tag, comm);
}
// The other blocking sends: the same quick path, then blocking_send.
#define VENEER_BLOCKING_SEND(Name)                                                                             \
  extern "C" int MPI_##Name(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) { \
    return quick<false>(                                                                                       \
        next::Name,                                                                                            \
        [](const void* b, int n, MPI_Datatype t, int d, int g, MPI_Comm c) {                                   \
          return blocking_send(next::Name, b, n, t, d, g, c);                                                  \
        },                                                                                                     \
        buf, count, type, dest, tag, comm);                                                                    \
  }
VENEER_BLOCKING_SEND(Ssend)
VENEER_BLOCKING_SEND(Rsend)
VENEER_BLOCKING_SEND(Bsend)
#undef VENEER_BLOCKING_SEND
extern "C" int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                         MPI_Request* request) {
  return quick<true>(next::Isend, isend_slow, buf, count, type, dest, tag, comm, request);
}
// The other nonblocking sends: the same quick path, then nonblocking().
#define VENEER_NONBLOCKING_QUICK_SEND(Name)                                                                  \
  extern "C" int MPI_##Name(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, \
                            MPI_Request* request) {                                                          \
    return quick<true>(                                                                                      \
        next::Name,                                                                                          \
        [](const void* b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request* r) {                 \
          return nonblocking(next::Name, b, n, t, d, g, c, r);                                               \
        },                                                                                                   \
        buf, count, type, dest, tag, comm, request);                                                         \
  }
VENEER_NONBLOCKING_QUICK_SEND(Issend)
VENEER_NONBLOCKING_QUICK_SEND(Ibsend)
VENEER_NONBLOCKING_QUICK_SEND(Irsend)
#undef VENEER_NONBLOCKING_QUICK_SEND
// The persistent ones (below): one body each.
#define VENEER_NONBLOCKING_SEND(Name, routes)                                                                \
  extern "C" int MPI_##Name(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, \
                            MPI_Request* request) {                                                          \
    return nonblocking(next::Name, buf, count, type, dest, tag, comm, request, routes);                      \
  }

extern "C" int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                        MPI_Status* status) {
  return quick<false>(next::Recv, recv_slow, buf, count, type, source, tag, comm, status);
}

extern "C" int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                         MPI_Request* request) {
  return quick<true>(next::Irecv, irecv_slow, buf, count, type, source, tag, comm, request);
}

// Matched receives (after MPI_Mprobe/MPI_Improbe): the message is already
// matched, so only the buffer is Veneer's. A device buffer lands in pinned
// (CUDA-aware library: device) memory and is unpacked from there; everything
// else, host buffers of any type included, goes to the library.
extern "C" int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  if (!message || *message == MPI_MESSAGE_NO_PROC) {
    counters().add(Counter::recv_passed);
    return next::Mrecv(buf, count, type, message, status);
  }
  Incoming in = incoming(buf, count, type, 0, MPI_COMM_NULL, Routes::device_only);
  if (in.route == Route::pass) return next::Mrecv(buf, count, type, message, status);
  return receive(in, status, [&](MPI_Status* st) { return next::Mrecv(in.buf, in.count, in.type, message, st); });
}

extern "C" int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Request* request) {
  if (!request || !message || *message == MPI_MESSAGE_NO_PROC) {
    counters().add(Counter::recv_passed);
    return next::Imrecv(buf, count, type, message, request);
  }
  Incoming in = incoming(buf, count, type, 0, MPI_COMM_NULL, Routes::device_only);
  const int rc = next::Imrecv(in.buf, in.count, in.type, message, request);
  if (rc == MPI_SUCCESS && in.route != Route::pass) keep(*request, std::move(in), false);
  return rc;
}

namespace {
// Sendrecv past its quick path: each side on its own route.
[[gnu::noinline]] int sendrecv_slow(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                                    void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                                    MPI_Comm comm, MPI_Status* status) {
  settle_device_byte(config());  // with no partner on either side, nothing else would ask
  const Outgoing out = outgoing(sendbuf, sendcount, sendtype, dest, comm);
  Incoming in = incoming(recvbuf, recvcount, recvtype, source, comm);
  if (in.route == Route::pass)
    return next::Sendrecv(out.buf, out.count, out.type, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, status);
  return sendrecv_staged(out, dest, sendtag, in, source, recvtag, comm, status);
}
// Past p2p_leanly_passes: both sides by their types' front entries, else in full.
[[gnu::noinline]] int sendrecv_by_type(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                                       void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                                       MPI_Comm comm, MPI_Status* status) {
  if (p2p_plainly_passes(sendcount, sendtype, false) && p2p_plainly_passes(recvcount, recvtype, false)) [[likely]]
    return next::Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, status);
  return sendrecv_slow(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm,
                       status);
}

// Sendrecv_replace past its quick path: a side Veneer stages has its own
// buffer (the packed send is a copy; the receive lands apart and is
// unpacked after), so the pair becomes a Sendrecv; only when both pass does
// the library see the replace.
[[gnu::noinline]] int sendrecv_replace_slow(void* buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                                            int recvtag, MPI_Comm comm, MPI_Status* status) {
  settle_device_byte(config());
  const Outgoing out = outgoing(buf, count, type, dest, comm);
  Incoming in = incoming(buf, count, type, source, comm);
  if (out.route == Route::pass && in.route == Route::pass)
    return next::Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  return sendrecv_staged(out, dest, sendtag, in, source, recvtag, comm, status);
}
[[gnu::noinline]] int sendrecv_replace_by_type(void* buf, int count, MPI_Datatype type, int dest, int sendtag,
                                               int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  if (p2p_plainly_passes(count, type, false)) [[likely]]
    return next::Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  return sendrecv_replace_slow(buf, count, type, dest, sendtag, source, recvtag, comm, status);
}
}  // namespace

// Sendrecv and Sendrecv_replace: the quick path of the blocking sends for
// both sides (a passed Sendrecv through the full rules of each side cost 40
// ns over the library at 1 rank, Open MPI), else each side on its own route.
extern "C" int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                            MPI_Status* status) {
  if (p2p_leanly_passes(std::max(sendcount, recvcount), false)) [[likely]]
    return next::Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, status);
  return sendrecv_by_type(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, status);
}
extern "C" int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                                    int recvtag, MPI_Comm comm, MPI_Status* status) {
  if (p2p_leanly_passes(count, false)) [[likely]]
    return next::Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  return sendrecv_replace_by_type(buf, count, type, dest, sendtag, source, recvtag, comm, status);
}

// Persistent sends and receives: a device buffer gets its staging once, the
// library a persistent request on it; MPI_Start packs into it again
// (interposer/persistent.cpp), completion unpacks and leaves the request
// inactive. Host buffers of any type pass through.
VENEER_NONBLOCKING_SEND(Send_init, Routes::device_only)
VENEER_NONBLOCKING_SEND(Ssend_init, Routes::device_only)
VENEER_NONBLOCKING_SEND(Bsend_init, Routes::device_only)
VENEER_NONBLOCKING_SEND(Rsend_init, Routes::device_only)
#undef VENEER_NONBLOCKING_SEND
extern "C" int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                             MPI_Request* request) {
  return nonblocking(next::Recv_init, buf, count, type, source, tag, comm, request, Routes::device_only);
}
