// SPDX-License-Identifier: BSD-3-Clause
#include "interposer/device.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "datatypes/cache.h"
#include "datatypes/pack.h"
#include "interposer/switchboard.h"
#include "support/counters.h"
#include "support/log.h"

namespace veneer::device {
namespace {

using kernels::DeviceMethod;
using kernels::PooledBuffer;

// -1: not asked yet; 0/1: the library's answer (or VENEER_CUDA_AWARE).
std::atomic<int> g_cuda_aware{-1};

// Asks the library whether it is CUDA-aware: Open MPI's
// MPIX_Query_cuda_support() and MPICH's MPIX_GPU_query_support(CUDA), looked
// up at run time so that either library (and one with neither) links.
int ask_library() {
  using OmpiQuery = int (*)();
  using MpichQuery = int (*)(int, int*);
  if (auto f = reinterpret_cast<OmpiQuery>(dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support"))) return f() ? 1 : 0;
  if (auto f = reinterpret_cast<MpichQuery>(dlsym(RTLD_DEFAULT, "MPIX_GPU_query_support"))) {
    int supported = 0;
    constexpr int kGpuSupportCuda = 0;  // MPIX_GPU_SUPPORT_CUDA
    if (f(kGpuSupportCuda, &supported) == MPI_SUCCESS) return supported ? 1 : 0;
  }
  return 0;
}

// Packers are made once per (layout, device) and dropped when their type is
// freed: the cache holds the layout weakly and finds stale entries by it.
struct PackerKey {
  const datatypes::Layout* layout;
  int device;
  kernels::DeviceRuntime* rt;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 sees the literal 0 a defaulted <=> compares against
  auto operator<=>(const PackerKey&) const = default;
};
struct PackerEntry {
  std::weak_ptr<const datatypes::Layout> layout;
  std::shared_ptr<const kernels::DevicePacker> packer;
};
struct PackerCache {
  std::mutex mutex;
  std::map<PackerKey, PackerEntry> entries;
  size_t sweep_at = 64;
};
PackerCache& packer_cache() {
  static PackerCache* c = new PackerCache;  // outlives static destructors
  return *c;
}

// Makes the buffer's device current for the life of the scope.
class DeviceScope {
 public:
  DeviceScope(kernels::DeviceRuntime& rt, int device) : rt_(rt), previous_(rt.current_device()) {
    ok_ = previous_ == device || device < 0 || rt.set_device(device);
    if (previous_ == device || device < 0) previous_ = -1;  // nothing to restore
  }
  ~DeviceScope() {
    if (previous_ >= 0) rt_.set_device(previous_);
  }
  bool ok() const { return ok_; }

 private:
  kernels::DeviceRuntime& rt_;
  int previous_;
  bool ok_;
};

std::shared_ptr<const kernels::DevicePacker> packer_for(kernels::DeviceRuntime& rt,
                                                        const std::shared_ptr<const datatypes::Layout>& layout,
                                                        int device) {
  PackerCache& c = packer_cache();
  const PackerKey key{layout.get(), device, &rt};
  {
    std::lock_guard lock(c.mutex);
    auto it = c.entries.find(key);
    if (it != c.entries.end() && it->second.layout.lock() == layout) return it->second.packer;
  }
  std::shared_ptr<const kernels::DevicePacker> packer;
  {
    DeviceScope scope(rt, device);
    if (!scope.ok()) return nullptr;
    packer = rt.make_packer(*layout);
  }
  if (!packer) return nullptr;
  std::lock_guard lock(c.mutex);
  c.entries[key] = {layout, packer};
  if (c.entries.size() >= c.sweep_at) {
    // Types freed since the last sweep leave expired entries: drop them.
    std::erase_if(c.entries, [](const auto& e) { return e.second.layout.expired(); });
    c.sweep_at = std::max<size_t>(64, 2 * c.entries.size());
  }
  return packer;
}

// The automatic choice between one-shot and staged for host-side bytes.
DeviceMethod host_method(int64_t bytes) {
  const Config& cfg = config();
  if (cfg.device_method == DeviceChoice::oneshot) return DeviceMethod::oneshot;
  if (cfg.device_method == DeviceChoice::staged) return DeviceMethod::staged;
  return bytes <= cfg.device_oneshot_max ? DeviceMethod::oneshot : DeviceMethod::staged;
}

kernels::TransferOptions options() {
  kernels::TransferOptions o;
  o.chunk = config().device_chunk;
  return o;
}

void count_method(DeviceMethod m) {
  switch (m) {
    case DeviceMethod::oneshot: counters().add(Counter::device_oneshot); break;
    case DeviceMethod::staged: counters().add(Counter::device_staged); break;
    case DeviceMethod::on_device: counters().add(Counter::device_on_device); break;
  }
}

// A failed device step: logged with its cause (the callers turn it into an
// MPI error code or a pass-through), and false.
bool failed(const char* what, int64_t bytes, int device) {
  log(LogLevel::warn, "device step failed: %s (%lld bytes, device %d)", what, static_cast<long long>(bytes), device);
  return false;
}

// The bytes `count` instances of a layout touch, relative to the buffer: [lo, lo + bytes).
struct Span {
  int64_t lo = 0, bytes = 0;
};
Span span_of(const datatypes::Layout& l, int64_t count) {
  const int64_t reach = (count - 1) * l.extent;
  const int64_t lo = l.true_lb + std::min<int64_t>(0, reach);
  const int64_t hi = l.true_lb + l.true_extent + std::max<int64_t>(0, reach);
  return {lo, hi - lo};
}

bool copy_now(kernels::DeviceRuntime& rt, void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0) return true;
  kernels::DeviceStream s = rt.stream(0);
  if (!s) return failed("no stream for a copy", bytes, -1);
  const bool queued = rt.copy(dst, src, static_cast<size_t>(bytes), s);
  const bool done = rt.synchronize(s);
  if (!queued) return failed("the runtime refused a copy", bytes, -1);
  if (!done) return failed("a copy did not complete (stream synchronisation failed)", bytes, -1);
  return true;
}

// For layouts the device packer refuses: the span in pinned host memory, and
// the host packer. `out` is pinned or host memory, or device memory when `on_device`.
bool pack_via_host(const Carried& c, int64_t count, const void* buf, void* out, bool on_device) {
  const Span span = span_of(*c.layout, count);
  const int64_t bytes = c.layout->size * count;
  PooledBuffer mirror(*c.rt, PooledBuffer::Kind::pinned, static_cast<size_t>(span.bytes));
  if (!mirror.get()) return failed("no pinned memory for the host copy of a send buffer", span.bytes, c.device);
  if (!copy_now(*c.rt, mirror.get(), offset_ptr(buf, span.lo), span.bytes)) return false;
  ScopedTimer timer;
  if (on_device) {
    PooledBuffer packed(*c.rt, PooledBuffer::Kind::pinned, static_cast<size_t>(bytes));
    if (!packed.get()) return failed("no pinned memory to pack a send buffer into", bytes, c.device);
    datatypes::pack_all(*c.layout, count, mirror.get() - span.lo, packed.get());
    if (!copy_now(*c.rt, out, packed.get(), bytes)) return false;
  } else {
    datatypes::pack_all(*c.layout, count, mirror.get() - span.lo, out);
  }
  counters().add(Counter::device_via_host);
  counters().add(Counter::bytes_packed, static_cast<uint64_t>(bytes));
  return true;
}

// The span is read first, so that the gaps between the type's bytes are
// written back as they were.
bool unpack_via_host(const Carried& c, int64_t count, void* buf, const void* in, int64_t bytes, bool on_device) {
  const Span span = span_of(*c.layout, count);
  PooledBuffer mirror(*c.rt, PooledBuffer::Kind::pinned, static_cast<size_t>(span.bytes));
  if (!mirror.get()) return failed("no pinned memory for the host copy of a receive buffer", span.bytes, c.device);
  if (!copy_now(*c.rt, mirror.get(), offset_ptr(buf, span.lo), span.bytes)) return false;
  PooledBuffer packed;
  if (on_device) {
    packed = PooledBuffer(*c.rt, PooledBuffer::Kind::pinned, static_cast<size_t>(bytes));
    if (!packed.get()) return failed("no pinned memory for the received bytes", bytes, c.device);
    if (!copy_now(*c.rt, packed.get(), in, bytes)) return false;
    in = packed.get();
  }
  {
    ScopedTimer timer;
    datatypes::unpack(*c.layout, count, mirror.get() - span.lo, 0, bytes, in);
  }
  if (!copy_now(*c.rt, offset_ptr(buf, span.lo), mirror.get(), span.bytes)) return false;
  counters().add(Counter::device_via_host);
  counters().add(Counter::bytes_unpacked, static_cast<uint64_t>(bytes));
  return true;
}

}  // namespace

bool library_cuda_aware() {
  int v = g_cuda_aware.load(std::memory_order_relaxed);
  if (v < 0) {
    v = config().cuda_aware >= 0 ? config().cuda_aware : ask_library();
    g_cuda_aware.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

// A freed type's packers go with it (the sweep above would find them only
// once every thread's type cache front had let go of the layout).
static void forget_packers(const datatypes::Layout* layout) {
  std::vector<std::shared_ptr<const kernels::DevicePacker>> dropped;  // destroyed outside the lock
  PackerCache& c = packer_cache();
  std::lock_guard lock(c.mutex);
  for (auto it = c.entries.begin(); it != c.entries.end();) {
    if (it->first.layout == layout) {
      dropped.push_back(std::move(it->second.packer));
      it = c.entries.erase(it);
    } else {
      ++it;
    }
  }
}

int64_t cached_packers() {
  PackerCache& c = packer_cache();
  std::lock_guard lock(c.mutex);
  return static_cast<int64_t>(c.entries.size());
}

bool is_device(const void* p) { return kernels::buffer_kind(p) == kernels::MemoryKind::device; }

Carried classify(const void* buf, int64_t count, MPI_Datatype type, bool to_library) {
  const Config& cfg = config();
  if (!carries_device(cfg) || count <= 0) return {};
  kernels::DeviceRuntime* rt = kernels::device_runtime();
  if (!rt) return {};
  auto layout = datatypes::lookup(type);
  if (!layout || layout->size <= 0) return {};
  // VENEER_DATATYPES=0: no packer of Veneer's runs; data of a type that is
  // not contiguous goes to the library as it is.
  if (!carries_device(cfg, layout->contiguous)) return {};
  int device = -1;
  if (rt->kind(offset_ptr(buf, layout->true_lb), &device) != kernels::MemoryKind::device) return {};
  if (to_library && layout->contiguous && library_cuda_aware()) return {};
  Carried c;
  c.packer = packer_for(*rt, layout, device);
  if (!c.packer) {
    // A CUDA-aware library reads the buffer itself; any other would fault.
    const bool pass = library_cuda_aware();
    if (logs(LogLevel::debug))
      log(LogLevel::debug, "device buffer of a type the device packer refuses: %s (%s)",
          pass ? "passed through" : "copied through host memory", layout->describe().c_str());
    if (pass) return {};
    c.via_host = true;
  }
  c.rt = rt;
  c.device = device;
  c.bytes = layout->size * count;
  c.layout = std::move(layout);
  return c;
}

bool pack_into(const Carried& c, int64_t count, const void* buf, void* staging, bool on_device) {
  const int64_t bytes = c.layout->size * count;
  if (bytes <= 0) return true;
  DeviceScope scope(*c.rt, c.device);
  if (!scope.ok()) return failed("cannot make the buffer's device current", bytes, c.device);
  if (c.via_host) return pack_via_host(c, count, buf, staging, on_device);
  const DeviceMethod method = on_device ? DeviceMethod::on_device : host_method(bytes);
  ScopedTimer timer;
  if (!kernels::pack_from_device(*c.rt, *c.packer, *c.layout, count, buf, 0, bytes, staging, method, options()))
    return failed(method == DeviceMethod::staged ? "the staged pack pipeline failed" : "the pack kernel failed", bytes,
                  c.device);
  count_method(method);
  counters().add(Counter::bytes_packed, static_cast<uint64_t>(bytes));
  return true;
}

bool unpack_from(const Carried& c, int64_t count, void* buf, const void* staging, int64_t bytes, bool on_device) {
  bytes = std::min(bytes, c.layout->size * count);
  if (bytes <= 0) return true;
  DeviceScope scope(*c.rt, c.device);
  if (!scope.ok()) return failed("cannot make the buffer's device current", bytes, c.device);
  if (c.via_host) return unpack_via_host(c, count, buf, staging, bytes, on_device);
  const DeviceMethod method = on_device ? DeviceMethod::on_device : host_method(bytes);
  ScopedTimer timer;
  if (!kernels::unpack_to_device(*c.rt, *c.packer, *c.layout, count, buf, 0, bytes, staging, method, options()))
    return failed(method == DeviceMethod::staged ? "the staged unpack pipeline failed" : "the unpack kernel failed",
                  bytes, c.device);
  count_method(method);
  counters().add(Counter::bytes_unpacked, static_cast<uint64_t>(bytes));
  return true;
}

bool pack_for_library(const Carried& c, int64_t count, const void* buf, Packed& out) {
  const bool on_device = library_cuda_aware();
  {
    DeviceScope scope(*c.rt, c.device);  // device memory comes from the buffer's device
    if (!scope.ok()) return failed("cannot make the buffer's device current", c.bytes, c.device);
    out.storage = PooledBuffer(*c.rt, on_device ? PooledBuffer::Kind::device : PooledBuffer::Kind::pinned,
                               static_cast<size_t>(c.bytes));
  }
  if (!out.storage.get())
    return failed(on_device ? "no device memory to pack into" : "no pinned memory to pack into", c.bytes, c.device);
  if (!pack_into(c, count, buf, out.storage.get(), on_device)) return false;
  out.data = out.storage.get();
  out.bytes = c.bytes;
  return true;
}

bool landing_for_library(const Carried& c, Packed& out) {
  DeviceScope scope(*c.rt, c.device);
  if (!scope.ok()) return failed("cannot make the buffer's device current", c.bytes, c.device);
  const bool on_device = library_cuda_aware();
  out.storage = PooledBuffer(*c.rt, on_device ? PooledBuffer::Kind::device : PooledBuffer::Kind::pinned,
                             static_cast<size_t>(c.bytes));
  out.data = out.storage.get();
  out.bytes = c.bytes;
  if (!out.data)
    return failed(on_device ? "no device memory to receive into" : "no pinned memory to receive into", c.bytes,
                  c.device);
  return true;
}

bool unpack_from_library(const Carried& c, int64_t count, void* buf, const Packed& landing, int64_t received) {
  return unpack_from(c, count, buf, landing.data, received, landing.storage.kind() == PooledBuffer::Kind::device);
}

// MPI_Pack's packed buffer may be ordinary host memory, which a kernel
// cannot write: the one-shot kernel writes pinned memory and the result is
// copied; the staged pipeline's copy engine reaches pageable memory itself.
bool pack(const Carried& c, int64_t count, const void* user, void* packed) {
  if (c.via_host || is_device(packed)) return pack_into(c, count, user, packed, is_device(packed));
  if (host_method(c.bytes) == DeviceMethod::staged) return pack_into(c, count, user, packed, false);
  PooledBuffer pinned(*c.rt, PooledBuffer::Kind::pinned, static_cast<size_t>(c.bytes));
  if (!pinned.get()) return failed("no pinned memory to pack into", c.bytes, c.device);
  if (!pack_into(c, count, user, pinned.get(), false)) return false;
  std::memcpy(packed, pinned.get(), static_cast<size_t>(c.bytes));
  return true;
}

bool unpack(const Carried& c, int64_t count, void* user, const void* packed) {
  if (c.via_host || is_device(packed)) return unpack_from(c, count, user, packed, c.bytes, is_device(packed));
  if (host_method(c.bytes) == DeviceMethod::staged) return unpack_from(c, count, user, packed, c.bytes, false);
  PooledBuffer pinned(*c.rt, PooledBuffer::Kind::pinned, static_cast<size_t>(c.bytes));
  if (!pinned.get()) return failed("no pinned memory to unpack from", c.bytes, c.device);
  std::memcpy(pinned.get(), packed, static_cast<size_t>(c.bytes));
  return unpack_from(c, count, user, pinned.get(), c.bytes, false);
}

bool copy_bytes(void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0) return true;
  kernels::DeviceRuntime* rt = kernels::device_runtime();
  if (!rt) return false;
  kernels::DeviceStream s = rt->stream(0);
  if (!s) return false;
  const bool queued = rt->copy(dst, src, static_cast<size_t>(bytes), s);
  return rt->synchronize(s) && queued;
}

void start() {
  const int configured = config().cuda_aware;
  g_cuda_aware.store(configured >= 0 ? configured : ask_library(), std::memory_order_relaxed);
  kernels::set_pool_limit(config().pinned_pool);
  datatypes::set_freed_layout_hook(&forget_packers);
  settle_device_byte(config());
}

void stop() {
  datatypes::set_freed_layout_hook(nullptr);
  {
    PackerCache& c = packer_cache();
    std::lock_guard lock(c.mutex);
    c.entries.clear();
  }
  kernels::release_pools();
}

}  // namespace veneer::device
