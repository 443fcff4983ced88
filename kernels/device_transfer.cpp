// SPDX-License-Identifier: BSD-3-Clause
#include "kernels/device_transfer.h"

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "support/address.h"
#include "support/pool.h"

namespace veneer::kernels {
namespace {

// Pinned and device allocations cost far more than the transfers they serve
// (cudaHostAlloc maps and locks pages: milliseconds for megabytes), so freed
// buffers are kept (support/pool.h), up to a byte limit per kind. A buffer is
// reused only by the runtime and device that made it.
constexpr size_t kGranule = size_t{64} << 10;
constexpr size_t kMaxPooledPerKind = 16;

struct Owner {
  DeviceRuntime* rt = nullptr;
  int device = -1;  // -1 for pinned memory
  bool operator==(const Owner&) const = default;
};
using Pool = BestFitPool<Owner>;

struct Pools {
  Pool pinned{kMaxPooledPerKind, int64_t{256} << 20};
  Pool device{kMaxPooledPerKind, int64_t{256} << 20};
  Pool& of(PooledBuffer::Kind kind) { return kind == PooledBuffer::Kind::pinned ? pinned : device; }
};

Pools& pools() {
  static auto* p = new Pools;  // outlives static destructors
  return *p;
}

void release(PooledBuffer::Kind kind, const Pool::Buffer& b) {
  DeviceRuntime* rt = b.key.rt;
  if (kind == PooledBuffer::Kind::pinned) {
    rt->free_host(b.data);
    return;
  }
  // Device memory is freed on its own device.
  const int current = rt->current_device();
  if (current != b.key.device) (void)rt->set_device(b.key.device);
  rt->free_device(b.data);
  if (current != b.key.device) (void)rt->set_device(current);
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// A resource a transfer needs and did not get (a CUDA runtime has logged
// the cause of the failed acquisition just before).
DeviceStatus unavailable(const char* step) {
  return DeviceStatus::failure(step, 0, "unavailable", "the runtime could not provide it");
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
    if (status_) status_ = f();
  }
  DeviceEvent event() {
    DeviceEvent e = rt_.create_event();
    if (!e && status_) status_ = unavailable("device event");
    events_.push_back(e);
    return e;
  }
  DeviceStatus finish(std::initializer_list<DeviceStream> streams) {
    for (DeviceStream s : streams) {
      if (!s) continue;
      DeviceStatus done = rt_.synchronize(s);
      if (status_ && !done) status_ = done;
    }
    return status_;
  }
  bool ok() const { return status_.ok(); }

 private:
  DeviceRuntime& rt_;
  DeviceStatus status_;
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

// What a staged pipeline works with: the steps, Veneer's two streams, the
// scratch halves, and two events per half (`first` recorded by the stage
// that fills a half, `second` by the stage that empties it).
struct Pipeline {
  Steps& step;
  DeviceStream s0, s1;
  const Halves& h;
  DeviceEvent first[2], second[2];
};

// Both directions: clamp the window to the stream; a contiguous layout is
// one copy-engine move (whatever the method), a one-launch method one
// launch, and the staged method runs `staged` over a Pipeline. Each of
// `copy` and `launch` takes (stream, bytes).
template <class Copy, class Launch, class Staged>
DeviceStatus transfer(DeviceRuntime& rt, const datatypes::Layout& layout, int64_t count, int64_t skip, int64_t bytes,
                      DeviceMethod method, const TransferOptions& options, Copy copy, Launch launch, Staged staged) {
  bytes = std::min(bytes, layout.size * count - skip);
  if (bytes <= 0) return {};
  Steps step(rt);
  DeviceStream s0 = rt.stream(0);
  if (!s0) return unavailable("device stream");
  if (layout.contiguous || method != DeviceMethod::staged) {
    step([&] { return layout.contiguous ? copy(s0, bytes) : launch(s0, bytes); });
    return step.finish({s0});
  }
  DeviceStream s1 = rt.stream(1);
  if (!s1) return unavailable("second device stream");
  Halves h(rt, bytes, options);
  if (!h.scratch.get()) return unavailable("device scratch");
  Pipeline p{step, s0, s1, h, {step.event(), step.event()}, {step.event(), step.event()}};
  staged(p);
  return step.finish({s0, s1});
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
  Pool& pool = pools().of(kind);
  if (auto kept = pool.take({&rt, device_}, want)) {
    data_ = kept->data;
    capacity_ = kept->capacity;
    return;
  }
  data_ = static_cast<char*>(kind == Kind::pinned ? rt.alloc_host(want) : rt.alloc_device(want));
  capacity_ = data_ ? want : 0;
  if (data_) pool.allocated();
}

PooledBuffer::~PooledBuffer() {
  if (!data_) return;
  const Pool::Buffer b{{rt_, device_}, data_, capacity_};
  for (const Pool::Buffer& out : pools().of(kind_).keep(b)) release(kind_, out);
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
  pools().pinned.set_limit(bytes);
  pools().device.set_limit(bytes);
}

PoolStats pool_stats() {
  const PoolUsage pinned = pools().pinned.usage(), device = pools().device.usage();
  return {pinned.pooled_bytes, device.pooled_bytes, pinned.reused + device.reused, pinned.allocated + device.allocated};
}

void release_pools() {
  for (const Pool::Buffer& b : pools().pinned.drain()) release(PooledBuffer::Kind::pinned, b);
  for (const Pool::Buffer& b : pools().device.drain()) release(PooledBuffer::Kind::device, b);
}

DeviceStatus pack_from_device(DeviceRuntime& rt, const DevicePacker& packer, const datatypes::Layout& layout,
                              int64_t count, const void* buf, int64_t skip, int64_t bytes, void* out,
                              DeviceMethod method, const TransferOptions& options) {
  return transfer(
      rt, layout, count, skip, bytes, method, options,
      [&](DeviceStream s, int64_t n) {
        return rt.copy(out, address::at(buf, layout.true_lb + skip), static_cast<size_t>(n), s);
      },
      [&](DeviceStream s, int64_t n) { return rt.pack(packer, count, buf, skip, n, out, s); },
      [&](Pipeline& p) {
        // Chunk k is packed into one half of the scratch on stream 0 while
        // the copy engine moves chunk k-1 out of the other half on stream 1.
        // A half is packed into again only after its copy has left
        // (first: packed, second: copied).
        auto queue_pack = [&](int64_t k) {
          if (k >= 2) p.step([&] { return rt.wait(p.s0, p.second[k & 1]); });
          p.step([&] { return rt.pack(packer, count, buf, skip + p.h.offset(k), p.h.size(k), p.h.of(k), p.s0); });
          p.step([&] { return rt.record(p.first[k & 1], p.s0); });
        };
        // Pack k+1 is queued before copy k: a copy into pageable memory
        // returns only when it is done, and the GPU must already have the
        // next pack to do.
        queue_pack(0);
        for (int64_t k = 0; k < p.h.chunks && p.step.ok(); ++k) {
          if (k + 1 < p.h.chunks) queue_pack(k + 1);
          p.step([&] { return rt.wait(p.s1, p.first[k & 1]); });
          p.step([&] {
            return rt.copy(address::at(out, p.h.offset(k)), p.h.of(k), static_cast<size_t>(p.h.size(k)), p.s1);
          });
          p.step([&] { return rt.record(p.second[k & 1], p.s1); });
        }
      });
}

DeviceStatus unpack_to_device(DeviceRuntime& rt, const DevicePacker& packer, const datatypes::Layout& layout,
                              int64_t count, void* buf, int64_t skip, int64_t bytes, const void* in,
                              DeviceMethod method, const TransferOptions& options) {
  return transfer(
      rt, layout, count, skip, bytes, method, options,
      [&](DeviceStream s, int64_t n) {
        return rt.copy(address::at(buf, layout.true_lb + skip), in, static_cast<size_t>(n), s);
      },
      [&](DeviceStream s, int64_t n) { return rt.unpack(packer, count, buf, skip, n, in, s); },
      [&](Pipeline& p) {
        // The copy engine brings chunk k into one half of the scratch on
        // stream 1 while chunk k-1 is unpacked from the other half on stream
        // 0; a half is refilled only after its unpacking has finished
        // (first: arrived, second: unpacked).
        for (int64_t k = 0; k < p.h.chunks && p.step.ok(); ++k) {
          if (k >= 2) p.step([&] { return rt.wait(p.s1, p.second[k & 1]); });
          p.step([&] {
            return rt.copy(p.h.of(k), address::at(in, p.h.offset(k)), static_cast<size_t>(p.h.size(k)), p.s1);
          });
          p.step([&] { return rt.record(p.first[k & 1], p.s1); });
          p.step([&] { return rt.wait(p.s0, p.first[k & 1]); });
          p.step([&] { return rt.unpack(packer, count, buf, skip + p.h.offset(k), p.h.size(k), p.h.of(k), p.s0); });
          p.step([&] { return rt.record(p.second[k & 1], p.s0); });
        }
      });
}

}  // namespace veneer::kernels
