// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A pretend GPU for the tests: kernels/device_runtime.h implemented in plain
// C++, so that the transfer pipelines (kernels/device_transfer.h) and, later,
// the interposer's device paths run and are checked on machines without one.
//
// Device memory is host memory the CPU cannot touch: each allocation is a
// memfd mapped twice, once PROT_NONE at the address handed out (a host access
// by MPI or by Veneer's host code faults, as with real device memory) and once
// read-write for the emulator's "GPU". Streams are queues served by worker
// threads, so work really runs later and out of step with the caller; an
// optional random delay before each step exposes missing synchronisation.
// Kernels (pack/unpack) refuse ordinary pageable host memory, as real ones
// cannot reach it: a pipeline that hands a kernel the wrong buffer fails.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/device_runtime.h"

namespace veneer::test {

struct EmulatorOptions {
  // The handed-out view of device memory is readable and writable by the
  // host: emulates a CUDA-aware MPI that may read device buffers itself.
  bool host_accessible = false;
  int device_count = 1;
  // Every queued step first sleeps a random 0..delay_us microseconds.
  int delay_us = 0;
  // make_packer() returns null for every layout (tests of pass-through).
  bool refuse_layouts = false;
};

// What the emulator has done and holds; a snapshot.
struct EmulatorCounters {
  int64_t packs = 0, unpacks = 0;  // kernel launches that ran
  int64_t reductions = 0;          // reduce() steps that ran
  int64_t elements_reduced = 0;
  int64_t copies = 0;            // copy() and copy_2d() steps that ran
  int64_t copies_2d = 0;         // ... of which copy_2d()
  int64_t copies_to_host = 0;    // ... whose destination is host memory (pinned or pageable)
  int64_t copies_from_host = 0;  // ... whose source is host memory
  int64_t bytes_packed = 0, bytes_unpacked = 0, bytes_copied = 0;
  int64_t failed_steps = 0;         // steps that would have faulted or were refused
  int64_t device_allocations = 0;   // outstanding alloc_device / device_alloc
  int64_t pinned_allocations = 0;   // outstanding alloc_host
  int64_t managed_allocations = 0;  // outstanding alloc_managed
  int64_t device_bytes = 0;         // outstanding device bytes (as asked for)
  int64_t events = 0;               // outstanding create_event
  int64_t packers = 0;              // outstanding make_packer results
  int64_t streams = 0;              // streams (and worker threads) made so far
  int64_t launches() const { return packs + unpacks; }
};

class EmulatedRuntime final : public kernels::DeviceRuntime {
 public:
  explicit EmulatedRuntime(EmulatorOptions options = {});
  ~EmulatedRuntime() override;
  EmulatedRuntime(const EmulatedRuntime&) = delete;
  EmulatedRuntime& operator=(const EmulatedRuntime&) = delete;

  // kernels::DeviceRuntime
  const char* name() const override { return "emulator"; }
  kernels::MemoryKind kind(const void* p, int* device) override;
  int current_device() override;
  kernels::DeviceStatus set_device(int device) override;
  std::unique_ptr<kernels::DevicePacker> make_packer(const datatypes::Layout& layout) override;
  void* alloc_host(size_t bytes) override;
  void free_host(void* p) override;
  void* alloc_device(size_t bytes) override;
  void free_device(void* p) override;
  kernels::DeviceStream stream(int which) override;
  kernels::DeviceEvent create_event() override;
  void destroy_event(kernels::DeviceEvent event) override;
  kernels::DeviceStatus record(kernels::DeviceEvent event, kernels::DeviceStream stream) override;
  kernels::DeviceStatus wait(kernels::DeviceStream stream, kernels::DeviceEvent event) override;
  kernels::DeviceStatus synchronize(kernels::DeviceStream stream) override;
  kernels::DeviceStatus pack(const kernels::DevicePacker& packer, int64_t count, const void* buf, int64_t skip,
                             int64_t max_bytes, void* out, kernels::DeviceStream stream) override;
  kernels::DeviceStatus unpack(const kernels::DevicePacker& packer, int64_t count, void* buf, int64_t skip,
                               int64_t max_bytes, const void* in, kernels::DeviceStream stream) override;
  kernels::DeviceStatus copy(void* dst, const void* src, size_t bytes, kernels::DeviceStream stream) override;
  kernels::DeviceStatus copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                                size_t height, kernels::DeviceStream stream) override;
  // kernels::reduce_elements() on the GPU's view, as one step; refuses
  // pageable host memory, another device's memory and misaligned pointers.
  kernels::DeviceStatus reduce(kernels::ReduceOp op, kernels::ReduceType type, void* inout, const void* in,
                               int64_t count, kernels::DeviceStream stream) override;

  // The tests' side door.
  void* device_alloc(size_t bytes) { return alloc_device(bytes); }
  void device_free(void* p) { free_device(p); }
  // Managed memory on the current device: one ordinary read-write mapping.
  void* alloc_managed(size_t bytes);
  void free_managed(void* p);
  // Synchronous host <-> device/managed/pinned copies through the GPU's view;
  // false if [dev, dev + bytes) is not inside one emulated allocation.
  bool upload(void* dev, const void* host, size_t bytes);
  bool download(void* host, const void* dev, size_t bytes);
  // Devices 0..n-1 (n >= 1); a thread's current device falls back to 0 if it is gone.
  void set_device_count(int n);
  int device_count() const { return device_count_.load(); }
  void set_delay_us(int us) { delay_us_.store(us < 0 ? 0 : us); }
  void set_refuse_layouts(bool refuse) { refuse_layouts_.store(refuse); }
  EmulatorCounters counters() const;

 private:
  enum class Region { device, managed, pinned };
  struct Allocation {
    uintptr_t address = 0;  // what was handed out
    char* view = nullptr;   // the GPU's read-write view of the same pages
    size_t bytes = 0;       // as asked for: the end a range may not cross
    size_t mapped = 0;      // rounded to pages
    Region region = Region::device;
    int device = 0;
  };
  // What a pointer range is, seen from the GPU.
  struct Resolved {
    bool ok = false;
    char* view = nullptr;  // where the GPU touches it
    bool host = false;     // ordinary (pageable) host memory, not an emulated allocation
    bool pinned = false;
    int device = -1;  // device memory's ordinal, else -1
  };
  struct Stream;
  struct Event;
  struct Packer;

  void* map_region(size_t bytes, Region region);
  void unmap_region(void* p, Region region);
  // [p + lo, p + lo + bytes) of one allocation, or pageable host memory that
  // touches no allocation (when host memory is allowed).
  Resolved resolve(uintptr_t p, int64_t lo, int64_t bytes) const;
  Stream* to_stream(kernels::DeviceStream s) const;
  // A failed status (nothing queued) without a stream.
  kernels::DeviceStatus enqueue(Stream* s, std::function<bool()> step);
  void serve(Stream* s);
  kernels::DeviceStatus kernel(bool pack, const kernels::DevicePacker& packer, int64_t count, uintptr_t buf,
                               int64_t skip, int64_t max_bytes, uintptr_t packed, Stream* s);

  const bool host_accessible_;
  std::atomic<int> device_count_;
  std::atomic<int> delay_us_;
  std::atomic<bool> refuse_layouts_;

  mutable std::shared_mutex allocations_mutex_;
  std::map<uintptr_t, Allocation> allocations_;  // by handed-out address

  std::mutex streams_mutex_;
  std::map<std::tuple<std::thread::id, int, int>, std::unique_ptr<Stream>> streams_;
  std::map<std::thread::id, int> current_device_;

  std::mutex events_mutex_;
  std::map<Event*, std::unique_ptr<Event>> events_;

  struct AtomicCounters {
    std::atomic<int64_t> reductions{0}, elements_reduced{0};
    std::atomic<int64_t> packs{0}, unpacks{0}, copies{0}, copies_2d{0}, copies_to_host{0}, copies_from_host{0};
    std::atomic<int64_t> bytes_packed{0}, bytes_unpacked{0}, bytes_copied{0}, failed_steps{0};
    std::atomic<int64_t> device_allocations{0}, pinned_allocations{0}, managed_allocations{0}, device_bytes{0};
    std::atomic<int64_t> events{0}, packers{0}, streams{0};
  };
  std::shared_ptr<AtomicCounters> counters_ = std::make_shared<AtomicCounters>();
};

}  // namespace veneer::test
