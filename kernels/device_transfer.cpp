#include "kernels/device_transfer.h"

#include <algorithm>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <vector>

namespace veneer::kernels {
namespace {

// Pinned and device allocations cost far more than the transfers they serve
// (cudaHostAlloc maps and locks pages: milliseconds for megabytes), so freed
// buffers are kept, up to a byte limit per kind.
constexpr size_t kGranule = size_t{64} << 10;
constexpr size_t kMaxPooled = 32;

struct Entry {
  DeviceRuntime* rt;
  PooledBuffer::Kind kind;
  int device;
  char* data;
  size_t capacity;
};

struct Pools {
  std::mutex mutex;
  std::vector<Entry> free;
  int64_t limit = int64_t{256} << 20;
  int64_t pinned_bytes = 0, device_bytes = 0, reused = 0, allocated = 0;
  int64_t& bytes(PooledBuffer::Kind kind) { return kind == PooledBuffer::Kind::pinned ? pinned_bytes : device_bytes; }
};

Pools& pools() {
  static Pools* p = new Pools;  // outlives static destructors
  return *p;
}

void release(DeviceRuntime* rt, PooledBuffer::Kind kind, int device, char* data) {
  if (kind == PooledBuffer::Kind::pinned) {
    rt->free_host(data);
    return;
  }
  // Device memory is freed on its own device.
  const int current = rt->current_device();
  if (current != device) rt->set_device(device);
  rt->free_device(data);
  if (current != device) rt->set_device(current);
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The byte address `offset` bytes past `p` (offsets of a layout may be negative).
// In integers: `p` may be MPI_BOTTOM (null) with absolute offsets.
const void* at(const void* p, int64_t offset) {
  return reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(offset));
}
void* at(void* p, int64_t offset) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(offset));
}

// Runs the steps of a transfer; on the first failure the rest are skipped,
// and the streams are always synchronised before returning, so no work still
// queued can touch a buffer the caller is about to free.
class Steps {
 public:
  explicit Steps(DeviceRuntime& rt) : rt_(rt) {}
  ~Steps() {
    for (DeviceEvent e : events_)
      if (e) rt_.destroy_event(e);
  }
  template <class F>
  void operator()(F&& f) {
    if (ok_ && !f()) ok_ = false;
  }
  DeviceEvent event() {
    DeviceEvent e = rt_.create_event();
    if (!e) ok_ = false;
    events_.push_back(e);
    return e;
  }
  bool finish(std::initializer_list<DeviceStream> streams) {
    for (DeviceStream s : streams)
      if (s && !rt_.synchronize(s)) ok_ = false;
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  DeviceRuntime& rt_;
  bool ok_ = true;
  std::vector<DeviceEvent> events_;
};

// The double-buffered device scratch of a staged transfer: chunk k of the
// message lives in half k % 2 (one half if one chunk holds everything), each
// half 256-byte aligned.
struct Halves {
  Halves(DeviceRuntime& rt, int64_t bytes, const TransferOptions& options)
      : bytes(bytes),
        chunk(std::min<int64_t>(bytes, std::max<int64_t>(1, options.chunk))),
        chunks((bytes + chunk - 1) / chunk),
        half(static_cast<int64_t>(round_up(static_cast<size_t>(chunk), 256))),
        scratch(rt, PooledBuffer::Kind::device, static_cast<size_t>(chunks > 1 ? 2 * half : half)) {}
  char* of(int64_t k) const { return scratch.get() + (k & 1) * half; }
  int64_t offset(int64_t k) const { return k * chunk; }
  int64_t size(int64_t k) const { return std::min(chunk, bytes - k * chunk); }

  const int64_t bytes, chunk, chunks, half;
  PooledBuffer scratch;
};

// What both directions do before the staged pipeline: clamp the window, and
// finish at once a contiguous layout (one copy-engine move, whatever the
// method) or a one-launch method. Returns nullopt when the staged pipeline
// is still to run.
template <class Copy, class Launch>
std::optional<bool> direct(Steps& step, DeviceStream s0, const datatypes::Layout& layout, DeviceMethod method,
                           Copy copy, Launch launch) {
  if (layout.contiguous) {
    step(copy);
    return step.finish({s0});
  }
  if (method != DeviceMethod::staged) {
    step(launch);
    return step.finish({s0});
  }
  return std::nullopt;
}

}  // namespace

const char* to_string(DeviceMethod method) {
  switch (method) {
    case DeviceMethod::oneshot: return "oneshot";
    case DeviceMethod::staged: return "staged";
    case DeviceMethod::on_device: return "on-device";
  }
  return "unknown";
}

PooledBuffer::PooledBuffer(DeviceRuntime& rt, Kind kind, size_t bytes) : rt_(&rt), kind_(kind) {
  if (kind == Kind::none) return;
  device_ = kind == Kind::device ? rt.current_device() : -1;
  const size_t want = round_up(std::max<size_t>(bytes, 1), kGranule);
  Pools& p = pools();
  {
    std::lock_guard lock(p.mutex);
    // The smallest pooled buffer that fits without wasting more than half of it.
    size_t best = p.free.size();
    for (size_t i = 0; i < p.free.size(); ++i) {
      const Entry& e = p.free[i];
      if (e.rt != &rt || e.kind != kind || e.device != device_ || e.capacity < want || e.capacity / 2 > want) continue;
      if (best == p.free.size() || e.capacity < p.free[best].capacity) best = i;
    }
    if (best != p.free.size()) {
      data_ = p.free[best].data;
      capacity_ = p.free[best].capacity;
      p.free[best] = p.free.back();
      p.free.pop_back();
      p.bytes(kind) -= static_cast<int64_t>(capacity_);
      ++p.reused;
      return;
    }
  }
  data_ = static_cast<char*>(kind == Kind::pinned ? rt.alloc_host(want) : rt.alloc_device(want));
  capacity_ = data_ ? want : 0;
  if (data_) {
    std::lock_guard lock(p.mutex);
    ++p.allocated;
  }
}

PooledBuffer::~PooledBuffer() {
  if (!data_) return;
  Pools& p = pools();
  {
    std::lock_guard lock(p.mutex);
    if (p.free.size() < kMaxPooled && p.bytes(kind_) + static_cast<int64_t>(capacity_) <= p.limit) {
      p.free.push_back({rt_, kind_, device_, data_, capacity_});
      p.bytes(kind_) += static_cast<int64_t>(capacity_);
      return;
    }
  }
  release(rt_, kind_, device_, data_);
}

PooledBuffer& PooledBuffer::operator=(PooledBuffer&& other) noexcept {
  if (this != &other) {
    this->~PooledBuffer();
    rt_ = other.rt_;
    kind_ = other.kind_;
    device_ = other.device_;
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void set_pool_limit(int64_t bytes) {
  Pools& p = pools();
  std::lock_guard lock(p.mutex);
  p.limit = std::max<int64_t>(0, bytes);
}

PoolStats pool_stats() {
  Pools& p = pools();
  std::lock_guard lock(p.mutex);
  return {p.pinned_bytes, p.device_bytes, p.reused, p.allocated};
}

void release_pools() {
  std::vector<Entry> taken;
  {
    Pools& p = pools();
    std::lock_guard lock(p.mutex);
    taken.swap(p.free);
    p.pinned_bytes = p.device_bytes = 0;
  }
  for (const Entry& e : taken) release(e.rt, e.kind, e.device, e.data);
}

bool pack_from_device(DeviceRuntime& rt, const DevicePacker& packer, const datatypes::Layout& layout, int64_t count,
                      const void* buf, int64_t skip, int64_t bytes, void* out, DeviceMethod method,
                      const TransferOptions& options) {
  bytes = std::min(bytes, layout.size * count - skip);
  if (bytes <= 0) return true;
  Steps step(rt);
  DeviceStream s0 = rt.stream(0);
  if (!s0) return false;
  if (auto done = direct(
          step, s0, layout, method,
          [&] { return rt.copy(out, at(buf, layout.true_lb + skip), static_cast<size_t>(bytes), s0); },
          [&] { return rt.pack(packer, count, buf, skip, bytes, out, s0); }))
    return *done;
  // Staged: chunk k is packed into one half of a device scratch buffer on
  // stream 0 while the copy engine moves chunk k-1 out of the other half on
  // stream 1. A half is packed into again only after its copy has left.
  DeviceStream s1 = rt.stream(1);
  Halves h(rt, bytes, options);
  if (!s1 || !h.scratch.get()) return false;
  DeviceEvent packed[2] = {step.event(), step.event()};
  DeviceEvent copied[2] = {step.event(), step.event()};
  auto queue_pack = [&](int64_t k) {
    if (k >= 2) step([&] { return rt.wait(s0, copied[k & 1]); });
    step([&] { return rt.pack(packer, count, buf, skip + h.offset(k), h.size(k), h.of(k), s0); });
    step([&] { return rt.record(packed[k & 1], s0); });
  };
  // Pack k+1 is queued before copy k: a copy into pageable memory returns
  // only when it is done, and the GPU must already have the next pack to do.
  queue_pack(0);
  for (int64_t k = 0; k < h.chunks && step.ok(); ++k) {
    if (k + 1 < h.chunks) queue_pack(k + 1);
    step([&] { return rt.wait(s1, packed[k & 1]); });
    step([&] { return rt.copy(at(out, h.offset(k)), h.of(k), static_cast<size_t>(h.size(k)), s1); });
    step([&] { return rt.record(copied[k & 1], s1); });
  }
  return step.finish({s0, s1});
}

bool unpack_to_device(DeviceRuntime& rt, const DevicePacker& packer, const datatypes::Layout& layout, int64_t count,
                      void* buf, int64_t skip, int64_t bytes, const void* in, DeviceMethod method,
                      const TransferOptions& options) {
  bytes = std::min(bytes, layout.size * count - skip);
  if (bytes <= 0) return true;
  Steps step(rt);
  DeviceStream s0 = rt.stream(0);
  if (!s0) return false;
  if (auto done = direct(
          step, s0, layout, method,
          [&] { return rt.copy(at(buf, layout.true_lb + skip), in, static_cast<size_t>(bytes), s0); },
          [&] { return rt.unpack(packer, count, buf, skip, bytes, in, s0); }))
    return *done;
  // Staged: the copy engine brings chunk k into one half of the scratch on
  // stream 1 while chunk k-1 is unpacked from the other half on stream 0; a
  // half is refilled only after its unpacking has finished.
  DeviceStream s1 = rt.stream(1);
  Halves h(rt, bytes, options);
  if (!s1 || !h.scratch.get()) return false;
  DeviceEvent arrived[2] = {step.event(), step.event()};
  DeviceEvent unpacked[2] = {step.event(), step.event()};
  for (int64_t k = 0; k < h.chunks && step.ok(); ++k) {
    if (k >= 2) step([&] { return rt.wait(s1, unpacked[k & 1]); });
    step([&] { return rt.copy(h.of(k), at(in, h.offset(k)), static_cast<size_t>(h.size(k)), s1); });
    step([&] { return rt.record(arrived[k & 1], s1); });
    step([&] { return rt.wait(s0, arrived[k & 1]); });
    step([&] { return rt.unpack(packer, count, buf, skip + h.offset(k), h.size(k), h.of(k), s0); });
    step([&] { return rt.record(unpacked[k & 1], s0); });
  }
  return step.finish({s0, s1});
}

}  // namespace veneer::kernels
