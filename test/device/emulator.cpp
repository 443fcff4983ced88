// SPDX-License-Identifier: BSD-3-Clause
#include "test/device/emulator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "datatypes/pack.h"
#include "support/address.h"

namespace veneer::test {

using kernels::MemoryKind;

// One queue of work, served in order by its own thread, as a CUDA stream is
// by the GPU. Sequence numbers count steps: `queued` handed in, `done` run.
struct EmulatedRuntime::Stream {
  int device = 0;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<bool()>> queue;
  uint64_t queued = 0, done = 0;
  // Steps that failed since the last synchronize(): what it reports, and what
  // a wait() for an event recorded after them passes on.
  std::vector<uint64_t> failed;
  bool stop = false;
  std::mt19937_64 rng;
  std::thread worker;
};

// The work queued on `stream` up to `seq` when the event was last recorded.
struct EmulatedRuntime::Event {
  std::mutex mutex;
  Stream* stream = nullptr;
  uint64_t seq = 0;
};

struct EmulatedRuntime::Packer final : kernels::DevicePacker {
  Packer(const datatypes::Layout& l, int d, std::shared_ptr<AtomicCounters> c)
      : layout(std::make_shared<const datatypes::Layout>(l)), device_(d), counters(std::move(c)) {
    counters->packers.fetch_add(1);
  }
  ~Packer() override { counters->packers.fetch_sub(1); }
  int device() const override { return device_; }
  // Shared with queued steps: a packer dropped before its work ran must not
  // pull the layout from under the "GPU".
  std::shared_ptr<const datatypes::Layout> layout;
  int device_;
  std::shared_ptr<AtomicCounters> counters;
};

namespace {

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t round_to_pages(size_t bytes) {
  const size_t page = page_size();
  return std::max<size_t>(1, (bytes + page - 1) / page) * page;
}

// The byte range [lo, hi) relative to `buf` that `count` instances of `l` touch.
std::pair<int64_t, int64_t> touched_span(const datatypes::Layout& l, int64_t count) {
  if (count <= 0 || l.size == 0) return {0, 0};
  const int64_t reach = (count - 1) * l.extent;
  return {l.true_lb + std::min<int64_t>(0, reach), l.true_lb + l.true_extent + std::max<int64_t>(0, reach)};
}

}  // namespace

EmulatedRuntime::EmulatedRuntime(EmulatorOptions options)
    : host_accessible_(options.host_accessible),
      device_count_(std::max(1, options.device_count)),
      delay_us_(std::max(0, options.delay_us)),
      refuse_layouts_(options.refuse_layouts) {}

EmulatedRuntime::~EmulatedRuntime() {
  // Every stream drains what it was given before its thread ends; all are
  // told first, as a step on one may wait for another.
  for (auto& [key, s] : streams_) {
    std::lock_guard lock(s->mutex);
    s->stop = true;
    s->changed.notify_all();
  }
  for (auto& [key, s] : streams_) s->worker.join();
  for (auto& [address, a] : allocations_) {
    if (a.view != reinterpret_cast<char*>(a.address)) munmap(a.view, a.mapped);
    munmap(reinterpret_cast<void*>(a.address), a.mapped);
  }
}

// ---- memory ----

void* EmulatedRuntime::map_region(size_t bytes, Region region) {
  Allocation a;
  a.bytes = bytes;
  a.mapped = round_to_pages(bytes);
  a.region = region;
  a.device = region == Region::pinned ? -1 : current_device();
  if (region == Region::device) {
    // Two views of the same pages: the address handed out, which the host
    // cannot touch, and the GPU's own.
    const int fd = memfd_create("veneer-emulated-device", MFD_CLOEXEC);
    if (fd < 0) return nullptr;
    if (ftruncate(fd, static_cast<off_t>(a.mapped)) != 0) {
      close(fd);
      return nullptr;
    }
    void* handed = mmap(nullptr, a.mapped, host_accessible_ ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_SHARED, fd, 0);
    void* view = mmap(nullptr, a.mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);  // the mappings keep the pages
    if (handed == MAP_FAILED || view == MAP_FAILED) {
      if (handed != MAP_FAILED) munmap(handed, a.mapped);
      if (view != MAP_FAILED) munmap(view, a.mapped);
      return nullptr;
    }
    a.address = reinterpret_cast<uintptr_t>(handed);
    a.view = static_cast<char*>(view);
  } else {
    void* p = mmap(nullptr, a.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    a.address = reinterpret_cast<uintptr_t>(p);
    a.view = static_cast<char*>(p);
  }
  {
    std::unique_lock lock(allocations_mutex_);
    allocations_[a.address] = a;
  }
  switch (region) {
    case Region::device:
      counters_->device_allocations.fetch_add(1);
      counters_->device_bytes.fetch_add(static_cast<int64_t>(bytes));
      break;
    case Region::managed: counters_->managed_allocations.fetch_add(1); break;
    case Region::pinned: counters_->pinned_allocations.fetch_add(1); break;
  }
  return reinterpret_cast<void*>(a.address);
}

void EmulatedRuntime::unmap_region(void* p, Region region) {
  if (!p) return;
  Allocation a;
  {
    // Exclusive: no queued step is touching these pages while they go.
    std::unique_lock lock(allocations_mutex_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(p));
    // Freeing what is not the start of an allocation of this kind is the
    // caller's bug; like cudaFree, refuse it and keep going.
    if (it == allocations_.end() || it->second.region != region) return;
    a = it->second;
    allocations_.erase(it);
    if (a.view != reinterpret_cast<char*>(a.address)) munmap(a.view, a.mapped);
    munmap(p, a.mapped);
  }
  switch (region) {
    case Region::device:
      counters_->device_allocations.fetch_sub(1);
      counters_->device_bytes.fetch_sub(static_cast<int64_t>(a.bytes));
      break;
    case Region::managed: counters_->managed_allocations.fetch_sub(1); break;
    case Region::pinned: counters_->pinned_allocations.fetch_sub(1); break;
  }
}

void* EmulatedRuntime::alloc_host(size_t bytes) { return map_region(bytes, Region::pinned); }
void EmulatedRuntime::free_host(void* p) { unmap_region(p, Region::pinned); }
void* EmulatedRuntime::alloc_device(size_t bytes) { return map_region(bytes, Region::device); }
void EmulatedRuntime::free_device(void* p) { unmap_region(p, Region::device); }
void* EmulatedRuntime::alloc_managed(size_t bytes) { return map_region(bytes, Region::managed); }
void EmulatedRuntime::free_managed(void* p) { unmap_region(p, Region::managed); }

// Callers hold allocations_mutex_ (shared at least).
EmulatedRuntime::Resolved EmulatedRuntime::resolve(uintptr_t p, int64_t lo, int64_t bytes) const {
  Resolved r;
  if (bytes < 0) return r;
  const uintptr_t start = p + static_cast<uintptr_t>(lo);  // wraps like the address arithmetic it stands for
  const uintptr_t end = start + static_cast<uintptr_t>(bytes);
  if (end < start) return r;
  auto next = allocations_.upper_bound(start);
  if (next != allocations_.begin()) {
    const Allocation& a = std::prev(next)->second;
    if (start < a.address + a.mapped) {
      // Inside an allocation: the whole range must be, up to the size asked for.
      if (end > a.address + a.bytes) return r;
      r.ok = true;
      r.view = a.view + (start - a.address);
      r.pinned = a.region == Region::pinned;
      r.device = a.region == Region::device ? a.device : -1;
      return r;
    }
  }
  // Pageable host memory, unless the range runs into an allocation.
  if (next != allocations_.end() && next->first < end) return r;
  r.ok = true;
  r.host = true;
  r.view = reinterpret_cast<char*>(start);
  return r;
}

MemoryKind EmulatedRuntime::kind(const void* p, int* device) {
  if (device) *device = -1;
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::shared_lock lock(allocations_mutex_);
  auto next = allocations_.upper_bound(at);
  if (next == allocations_.begin()) return MemoryKind::host;
  const Allocation& a = std::prev(next)->second;
  if (at >= a.address + a.mapped) return MemoryKind::host;
  switch (a.region) {
    case Region::device:
      if (device) *device = a.device;
      return MemoryKind::device;
    case Region::managed:
      if (device) *device = a.device;
      return MemoryKind::managed;
    case Region::pinned: return MemoryKind::host;
  }
  return MemoryKind::unknown;
}

bool EmulatedRuntime::upload(void* dev, const void* host, size_t bytes) {
  std::shared_lock lock(allocations_mutex_);
  const Resolved r = resolve(reinterpret_cast<uintptr_t>(dev), 0, static_cast<int64_t>(bytes));
  if (!r.ok || r.host) return false;
  if (bytes) std::memcpy(r.view, host, bytes);
  return true;
}

bool EmulatedRuntime::download(void* host, const void* dev, size_t bytes) {
  std::shared_lock lock(allocations_mutex_);
  const Resolved r = resolve(reinterpret_cast<uintptr_t>(dev), 0, static_cast<int64_t>(bytes));
  if (!r.ok || r.host) return false;
  if (bytes) std::memcpy(host, r.view, bytes);
  return true;
}

namespace {
// A step the emulated GPU refuses at once (invalid arguments, as CUDA would).
kernels::DeviceStatus refused(const char* step) {
  return kernels::DeviceStatus::failure(step, -1, "emulatorRefused", "invalid argument for the emulated GPU");
}
}  // namespace

// ---- devices ----

int EmulatedRuntime::current_device() {
  std::lock_guard lock(streams_mutex_);
  auto it = current_device_.find(std::this_thread::get_id());
  if (it == current_device_.end() || it->second >= device_count_.load()) return 0;
  return it->second;
}

kernels::DeviceStatus EmulatedRuntime::set_device(int device) {
  if (device < 0 || device >= device_count_.load()) return refused("set_device");
  std::lock_guard lock(streams_mutex_);
  current_device_[std::this_thread::get_id()] = device;
  return {};
}

void EmulatedRuntime::set_device_count(int n) { device_count_.store(std::max(1, n)); }

std::unique_ptr<kernels::DevicePacker> EmulatedRuntime::make_packer(const datatypes::Layout& layout) {
  if (refuse_layouts_.load()) return nullptr;
  return std::make_unique<Packer>(layout, current_device(), counters_);
}

// ---- streams and events ----

kernels::DeviceStream EmulatedRuntime::stream(int which) {
  if (which != 0 && which != 1) return nullptr;
  const int device = current_device();
  std::lock_guard lock(streams_mutex_);
  auto& slot = streams_[{std::this_thread::get_id(), device, which}];
  if (!slot) {
    slot = std::make_unique<Stream>();
    slot->device = device;
    slot->rng.seed(static_cast<uint64_t>(counters_->streams.fetch_add(1)) * 7919 + 17);
    Stream* s = slot.get();
    slot->worker = std::thread([this, s] { serve(s); });
  }
  return slot.get();
}

EmulatedRuntime::Stream* EmulatedRuntime::to_stream(kernels::DeviceStream handle) const {
  // Handles are only ever made by stream(); a null one is the caller's error.
  return static_cast<Stream*>(handle);
}

void EmulatedRuntime::serve(Stream* s) {
  std::unique_lock lock(s->mutex);
  for (;;) {
    s->changed.wait(lock, [s] { return s->stop || !s->queue.empty(); });
    if (s->queue.empty()) return;  // stopped and drained
    std::function<bool()> step = std::move(s->queue.front());
    s->queue.pop_front();
    const int delay = delay_us_.load();
    const int64_t sleep_us = delay > 0 ? std::uniform_int_distribution<int64_t>(0, delay)(s->rng) : 0;
    lock.unlock();
    if (sleep_us) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    const bool ok = step();
    if (!ok) counters_->failed_steps.fetch_add(1);
    lock.lock();
    ++s->done;
    if (!ok) s->failed.push_back(s->done);
    s->changed.notify_all();
  }
}

kernels::DeviceStatus EmulatedRuntime::enqueue(Stream* s, std::function<bool()> step) {
  if (!s) return refused("enqueue (no stream)");
  std::lock_guard lock(s->mutex);
  s->queue.push_back(std::move(step));
  ++s->queued;
  s->changed.notify_all();
  return {};
}

kernels::DeviceEvent EmulatedRuntime::create_event() {
  auto e = std::make_unique<Event>();
  Event* handle = e.get();
  std::lock_guard lock(events_mutex_);
  events_[handle] = std::move(e);
  counters_->events.fetch_add(1);
  return handle;
}

void EmulatedRuntime::destroy_event(kernels::DeviceEvent event) {
  std::lock_guard lock(events_mutex_);
  if (events_.erase(static_cast<Event*>(event))) counters_->events.fetch_sub(1);
}

kernels::DeviceStatus EmulatedRuntime::record(kernels::DeviceEvent event, kernels::DeviceStream stream) {
  Stream* s = to_stream(stream);
  auto* e = static_cast<Event*>(event);
  if (!s || !e) return refused("record");
  uint64_t seq = 0;
  {
    std::lock_guard lock(s->mutex);
    seq = s->queued;
  }
  std::lock_guard lock(e->mutex);
  e->stream = s;
  e->seq = seq;
  return {};
}

kernels::DeviceStatus EmulatedRuntime::wait(kernels::DeviceStream stream, kernels::DeviceEvent event) {
  Stream* s = to_stream(stream);
  auto* e = static_cast<Event*>(event);
  if (!s || !e) return refused("wait");
  Stream* target = nullptr;
  uint64_t seq = 0;
  {
    // The record as it is now: a later record does not change this wait.
    std::lock_guard lock(e->mutex);
    target = e->stream;
    seq = e->seq;
  }
  if (!target) return {};  // never recorded: nothing to wait for
  return enqueue(s, [target, seq] {
    std::unique_lock lock(target->mutex);
    target->changed.wait(lock, [&] { return target->done >= seq; });
    // A fault in the work waited for spoils what depends on it.
    return std::none_of(target->failed.begin(), target->failed.end(), [&](uint64_t f) { return f <= seq; });
  });
}

kernels::DeviceStatus EmulatedRuntime::synchronize(kernels::DeviceStream stream) {
  Stream* s = to_stream(stream);
  if (!s) return refused("synchronize");
  std::unique_lock lock(s->mutex);
  s->changed.wait(lock, [s] { return s->done == s->queued; });
  const bool ok = s->failed.empty();
  s->failed.clear();
  if (!ok)
    return kernels::DeviceStatus::failure("synchronize", -1, "emulatorFault", "a queued step faulted or was refused");
  return {};
}

// ---- work ----

kernels::DeviceStatus EmulatedRuntime::kernel(bool pack, const kernels::DevicePacker& packer, int64_t count,
                                              uintptr_t buf, int64_t skip, int64_t max_bytes, uintptr_t packed,
                                              Stream* s) {
  const auto* p = dynamic_cast<const Packer*>(&packer);
  if (!s || !p || count < 0 || skip < 0 || max_bytes < 0) return refused(pack ? "pack" : "unpack");
  std::shared_ptr<const datatypes::Layout> layout = p->layout;
  const int packer_device = p->device();
  return enqueue(s, [this, pack, layout, packer_device, count, buf, skip, max_bytes, packed, s] {
    // A kernel runs on its stream's device, with that device's plan.
    if (packer_device != s->device) return false;
    const datatypes::Layout& l = *layout;
    const int64_t total = l.size * count;
    const int64_t n = std::clamp<int64_t>(total - skip, 0, max_bytes);
    const auto [lo, hi] = touched_span(l, count);
    std::shared_lock lock(allocations_mutex_);
    const Resolved user = resolve(buf, lo, hi - lo);
    const Resolved stream_bytes = resolve(packed, 0, n);
    // A kernel reaches device memory of its own device, managed and mapped
    // pinned memory; pageable host memory would fault.
    auto reachable = [&](const Resolved& r, int64_t bytes) {
      if (bytes == 0) return true;
      return r.ok && !r.host && (r.device < 0 || r.device == s->device);
    };
    if (!reachable(user, hi - lo) || !reachable(stream_bytes, n)) return false;
    if (n == 0) {
      (pack ? counters_->packs : counters_->unpacks).fetch_add(1);
      return true;
    }
    // The layout's offsets are relative to `buf`: the same base, in the GPU's view.
    void* base = address::at(static_cast<void*>(user.view), -lo);
    const int64_t moved = pack ? datatypes::pack(l, count, base, skip, max_bytes, stream_bytes.view)
                               : datatypes::unpack(l, count, base, skip, max_bytes, stream_bytes.view);
    (pack ? counters_->packs : counters_->unpacks).fetch_add(1);
    (pack ? counters_->bytes_packed : counters_->bytes_unpacked).fetch_add(moved);
    return moved == n;
  });
}

kernels::DeviceStatus EmulatedRuntime::pack(const kernels::DevicePacker& packer, int64_t count, const void* buf,
                                            int64_t skip, int64_t max_bytes, void* out, kernels::DeviceStream stream) {
  return kernel(true, packer, count, reinterpret_cast<uintptr_t>(buf), skip, max_bytes,
                reinterpret_cast<uintptr_t>(out), to_stream(stream));
}

kernels::DeviceStatus EmulatedRuntime::unpack(const kernels::DevicePacker& packer, int64_t count, void* buf,
                                              int64_t skip, int64_t max_bytes, const void* in,
                                              kernels::DeviceStream stream) {
  return kernel(false, packer, count, reinterpret_cast<uintptr_t>(buf), skip, max_bytes,
                reinterpret_cast<uintptr_t>(in), to_stream(stream));
}

kernels::DeviceStatus EmulatedRuntime::copy(void* dst, const void* src, size_t bytes, kernels::DeviceStream stream) {
  const uintptr_t to = reinterpret_cast<uintptr_t>(dst), from = reinterpret_cast<uintptr_t>(src);
  return enqueue(to_stream(stream), [this, to, from, bytes] {
    std::shared_lock lock(allocations_mutex_);
    const Resolved d = resolve(to, 0, static_cast<int64_t>(bytes));
    const Resolved s = resolve(from, 0, static_cast<int64_t>(bytes));
    if (bytes > 0 && (!d.ok || !s.ok)) return false;
    if (bytes > 0) std::memcpy(d.view, s.view, bytes);
    counters_->copies.fetch_add(1);
    if (d.host || d.pinned) counters_->copies_to_host.fetch_add(1);
    if (s.host || s.pinned) counters_->copies_from_host.fetch_add(1);
    counters_->bytes_copied.fetch_add(static_cast<int64_t>(bytes));
    return true;
  });
}

// One step, like cudaMemcpy2DAsync: each side's rows must lie in one
// allocation (or in pageable host memory).
kernels::DeviceStatus EmulatedRuntime::copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                                               size_t width, size_t height, kernels::DeviceStream stream) {
  const uintptr_t to = reinterpret_cast<uintptr_t>(dst), from = reinterpret_cast<uintptr_t>(src);
  if (height > 0 && (width > dst_pitch || width > src_pitch)) return refused("copy_2d");
  return enqueue(to_stream(stream), [this, to, from, dst_pitch, src_pitch, width, height] {
    if (width == 0 || height == 0) return true;
    std::shared_lock lock(allocations_mutex_);
    const auto span = [&](size_t pitch) { return static_cast<int64_t>(pitch * (height - 1) + width); };
    const Resolved d = resolve(to, 0, span(dst_pitch));
    const Resolved s = resolve(from, 0, span(src_pitch));
    if (!d.ok || !s.ok) return false;
    for (size_t row = 0; row < height; ++row) std::memcpy(d.view + row * dst_pitch, s.view + row * src_pitch, width);
    counters_->copies.fetch_add(1);
    counters_->copies_2d.fetch_add(1);
    if (d.host || d.pinned) counters_->copies_to_host.fetch_add(1);
    if (s.host || s.pinned) counters_->copies_from_host.fetch_add(1);
    counters_->bytes_copied.fetch_add(static_cast<int64_t>(width * height));
    return true;
  });
}

kernels::DeviceStatus EmulatedRuntime::reduce(kernels::ReduceOp op, kernels::ReduceType type, void* inout,
                                              const void* in, int64_t count, kernels::DeviceStream stream) {
  const size_t size = kernels::reduce_type_size(type);
  const uintptr_t io = reinterpret_cast<uintptr_t>(inout), src = reinterpret_cast<uintptr_t>(in);
  // Refused at launch, as the CUDA launcher refuses them: nothing is queued.
  if (count < 0 || size == 0 || !kernels::reduce_supported(op, type) || io % size != 0 || src % size != 0)
    return refused("reduce");
  Stream* s = to_stream(stream);
  return enqueue(s, [this, op, type, io, src, count, size, s] {
    const int64_t bytes = count * static_cast<int64_t>(size);
    std::shared_lock lock(allocations_mutex_);
    const Resolved d = resolve(io, 0, bytes);
    const Resolved r = resolve(src, 0, bytes);
    // Like pack(): a kernel reaches its own device's memory, managed and
    // mapped pinned memory; pageable host memory would fault.
    auto reachable = [&](const Resolved& x) { return x.ok && !x.host && (x.device < 0 || x.device == s->device); };
    if (bytes > 0 && (!reachable(d) || !reachable(r))) return false;
    if (bytes > 0 && !kernels::reduce_elements(op, type, d.view, r.view, count)) return false;
    counters_->reductions.fetch_add(1);
    counters_->elements_reduced.fetch_add(count);
    return true;
  });
}

EmulatorCounters EmulatedRuntime::counters() const {
  const AtomicCounters& c = *counters_;
  EmulatorCounters r;
  r.packs = c.packs.load();
  r.reductions = c.reductions.load();
  r.elements_reduced = c.elements_reduced.load();
  r.unpacks = c.unpacks.load();
  r.copies = c.copies.load();
  r.copies_2d = c.copies_2d.load();
  r.copies_to_host = c.copies_to_host.load();
  r.copies_from_host = c.copies_from_host.load();
  r.bytes_packed = c.bytes_packed.load();
  r.bytes_unpacked = c.bytes_unpacked.load();
  r.bytes_copied = c.bytes_copied.load();
  r.failed_steps = c.failed_steps.load();
  r.device_allocations = c.device_allocations.load();
  r.pinned_allocations = c.pinned_allocations.load();
  r.managed_allocations = c.managed_allocations.load();
  r.device_bytes = c.device_bytes.load();
  r.events = c.events.load();
  r.packers = c.packers.load();
  r.streams = c.streams.load();
  return r;
}

}  // namespace veneer::test
