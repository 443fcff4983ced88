// SPDX-License-Identifier: BSD-3-Clause
// The device emulator (test/device/emulator.h) and the transfer pipelines of
// kernels/device_transfer.h running on it: every method, chunk sizes from one
// byte (many chunks: the double buffering) to a megabyte, windows, random and
// DDTBench layouts, random delays before every queued step. Each result is
// checked against datatypes::pack / unpack on a host copy of the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "datatypes/pack.h"
#include "kernels/device_transfer.h"
#include "test/device/emulator.h"
#include "test/kernels/test_layouts.h"

namespace vk = veneer::kernels;
namespace vd = veneer::datatypes;
using veneer::test::EmulatedRuntime;
using veneer::test::EmulatorOptions;
using veneer::test::Layout;
using vk::DeviceMethod;
using vk::MemoryKind;

namespace {

constexpr int64_t kMargin = 64;  // guard bytes around every buffer, checked untouched
constexpr unsigned char kGuard = 0xA5;

std::vector<unsigned char> random_bytes(std::mt19937_64& rng, int64_t n) {
  std::vector<unsigned char> v(static_cast<size_t>(n));
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

// `l` with its displacements moved by `by` bytes: a layout at MPI_BOTTOM
// whose absolute addresses point into a buffer at `by`.
Layout rebased(Layout l, int64_t by) {
  l.root.offset += by;
  l.lb += by;
  l.true_lb += by;
  return l;
}

// Where the packed stream goes (or comes from) for each method: mapped pinned
// memory, pageable host memory, device memory. Guard bytes on both sides.
class StreamBuffer {
 public:
  StreamBuffer(EmulatedRuntime& rt, DeviceMethod method, int64_t n) : rt_(rt), method_(method), n_(n) {
    const size_t total = static_cast<size_t>(n + 2 * kMargin);
    std::vector<unsigned char> guard(total, kGuard);
    switch (method) {
      case DeviceMethod::oneshot:
        raw_ = static_cast<char*>(rt.alloc_host(total));
        if (raw_) std::memcpy(raw_, guard.data(), total);
        break;
      case DeviceMethod::staged:
        pageable_ = guard;
        raw_ = reinterpret_cast<char*>(pageable_.data());
        break;
      case DeviceMethod::on_device:
        raw_ = static_cast<char*>(rt.device_alloc(total));
        if (raw_) rt.upload(raw_, guard.data(), total);
        break;
    }
  }
  ~StreamBuffer() {
    if (method_ == DeviceMethod::oneshot) rt_.free_host(raw_);
    if (method_ == DeviceMethod::on_device) rt_.device_free(raw_);
  }
  bool ok() const { return raw_ != nullptr; }
  char* data() { return raw_ + kMargin; }
  void fill(const std::vector<unsigned char>& bytes) {
    if (bytes.empty()) return;
    if (method_ == DeviceMethod::on_device) rt_.upload(data(), bytes.data(), bytes.size());
    else std::memcpy(data(), bytes.data(), bytes.size());
  }
  // All of it, guards included.
  std::vector<unsigned char> contents() {
    std::vector<unsigned char> v(static_cast<size_t>(n_ + 2 * kMargin));
    if (method_ == DeviceMethod::on_device) rt_.download(v.data(), raw_, v.size());
    else std::memcpy(v.data(), raw_, v.size());
    return v;
  }

 private:
  EmulatedRuntime& rt_;
  DeviceMethod method_;
  int64_t n_;
  char* raw_ = nullptr;
  std::vector<unsigned char> pageable_;
};

struct Transfer {
  int64_t count = 1;
  int64_t skip = 0;
  int64_t bytes = 0;  // may run past the end of the stream
  DeviceMethod method = DeviceMethod::oneshot;
  int64_t chunk = int64_t{1} << 20;
  bool absolute = false;  // pass the layout at MPI_BOTTOM with absolute addresses
};

// Packs and unpacks `t` over the emulator and checks every byte against the
// host packer: the packed stream, and the whole user buffer after unpacking
// (gaps and guards untouched).
void check_transfer(EmulatedRuntime& rt, const Layout& l, const Transfer& t, std::mt19937_64& rng) {
  const veneer::test::Span span = veneer::test::span_of(l, t.count);
  const int64_t span_bytes = std::max<int64_t>(span.bytes(), 0);
  const int64_t total = std::max<int64_t>(0, l.size * t.count - t.skip);
  const int64_t n = std::min(t.bytes, total);

  // The user buffer: span plus guards, the same bytes on the host and the device.
  const std::vector<unsigned char> original = random_bytes(rng, span_bytes + 2 * kMargin);
  char* dev = static_cast<char*>(rt.device_alloc(original.size()));
  ASSERT_NE(dev, nullptr);
  ASSERT_TRUE(rt.upload(dev, original.data(), original.size()));
  // buf such that buf + span.lo is the first byte after the front guard.
  const uintptr_t dev_buf = reinterpret_cast<uintptr_t>(dev) + kMargin - static_cast<uintptr_t>(span.lo);
  std::vector<unsigned char> host = original;
  char* host_buf = reinterpret_cast<char*>(host.data()) + kMargin - span.lo;

  Layout dl = l;
  const void* dev_arg = reinterpret_cast<const void*>(dev_buf);
  if (t.absolute) {
    dl = rebased(l, static_cast<int64_t>(dev_buf));
    dev_arg = nullptr;
  }
  std::unique_ptr<vk::DevicePacker> packer = rt.make_packer(dl);
  ASSERT_NE(packer, nullptr);
  const vk::TransferOptions options{.chunk = t.chunk};

  // Pack.
  std::vector<unsigned char> expected(static_cast<size_t>(std::max<int64_t>(n, 0)));
  const int64_t packed = n > 0 ? vd::pack(l, t.count, host_buf, t.skip, n, expected.data()) : 0;
  ASSERT_EQ(packed, std::max<int64_t>(n, 0));
  {
    StreamBuffer out(rt, t.method, std::max<int64_t>(n, 0));
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE(
        vk::pack_from_device(rt, *packer, dl, t.count, dev_arg, t.skip, t.bytes, out.data(), t.method, options));
    const std::vector<unsigned char> got = out.contents();
    for (int64_t i = 0; i < kMargin; ++i) {
      ASSERT_EQ(got[static_cast<size_t>(i)], kGuard) << "pack wrote before the output, byte " << i;
      ASSERT_EQ(got[static_cast<size_t>(kMargin + packed + i)], kGuard) << "pack wrote past the output, byte " << i;
    }
    ASSERT_TRUE(std::equal(expected.begin(), expected.end(), got.begin() + kMargin))
        << "packed bytes differ; first at "
        << std::mismatch(expected.begin(), expected.end(), got.begin() + kMargin).first - expected.begin();
  }

  // Unpack fresh stream bytes into the same instances.
  const std::vector<unsigned char> incoming = random_bytes(rng, std::max<int64_t>(n, 0));
  if (n > 0) vd::unpack(l, t.count, host_buf, t.skip, n, incoming.data());
  {
    StreamBuffer in(rt, t.method, std::max<int64_t>(n, 0));
    ASSERT_TRUE(in.ok());
    in.fill(incoming);
    ASSERT_TRUE(vk::unpack_to_device(rt, *packer, dl, t.count, const_cast<void*>(dev_arg), t.skip, t.bytes, in.data(),
                                     t.method, options));
  }
  std::vector<unsigned char> got(original.size());
  ASSERT_TRUE(rt.download(got.data(), dev, got.size()));
  rt.device_free(dev);
  if (got != host) {
    const auto at = std::mismatch(host.begin(), host.end(), got.begin()).first - host.begin();
    FAIL() << "unpacked buffer differs at byte " << at - kMargin << " of the span (" << span_bytes << " bytes)";
  }
}

std::string describe(const Layout& l, const Transfer& t) {
  return l.describe() + " | count " + std::to_string(t.count) + " skip " + std::to_string(t.skip) + " bytes " +
         std::to_string(t.bytes) + " method " + vk::to_string(t.method) + " chunk " + std::to_string(t.chunk) +
         (t.absolute ? " at MPI_BOTTOM" : "");
}

// Every test gets a fresh emulator; the pools are emptied before it goes and
// nothing may be left outstanding.
class DeviceTransfer : public ::testing::Test {
 protected:
  void TearDown() override {
    vk::release_pools();
    const veneer::test::EmulatorCounters c = rt.counters();
    EXPECT_EQ(c.device_allocations, 0);
    EXPECT_EQ(c.device_bytes, 0);
    EXPECT_EQ(c.pinned_allocations, 0);
    EXPECT_EQ(c.managed_allocations, 0);
    EXPECT_EQ(c.events, 0);
    EXPECT_EQ(c.packers, 0);
  }
  EmulatedRuntime rt;
};

const DeviceMethod kMethods[] = {DeviceMethod::oneshot, DeviceMethod::staged, DeviceMethod::on_device};

// ---- the emulator ----

TEST(EmulatorDeathTest, HostAccessToDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EmulatedRuntime rt;
  char* dev = static_cast<char*>(rt.device_alloc(100));
  ASSERT_NE(dev, nullptr);
  EXPECT_DEATH(
      {
        volatile char c = *static_cast<volatile char*>(dev + 10);
        (void)c;
      },
      "");
  EXPECT_DEATH(*static_cast<volatile char*>(dev) = 1, "");
  EXPECT_DEATH(std::memset(dev, 0, 100), "");
  rt.device_free(dev);
}

TEST(Emulator, HostAccessibleDeviceMemorySharesThePages) {
  EmulatedRuntime rt(EmulatorOptions{.host_accessible = true});
  char* dev = static_cast<char*>(rt.device_alloc(64));
  std::memcpy(dev, "through the handed-out view", 28);
  char back[28] = {};
  ASSERT_TRUE(rt.download(back, dev, sizeof back));
  EXPECT_STREQ(back, "through the handed-out view");
  ASSERT_TRUE(rt.upload(dev + 8, "GPU", 3));
  EXPECT_EQ(std::string(dev, 11), std::string("through GPU"));
  EXPECT_EQ(rt.kind(dev, nullptr), MemoryKind::device);
  rt.device_free(dev);
}

TEST(Emulator, KindOfEveryAllocation) {
  EmulatedRuntime rt;
  rt.set_device_count(3);
  int device = 42;
  char* d0 = static_cast<char*>(rt.device_alloc(5000));
  EXPECT_EQ(rt.kind(d0, &device), MemoryKind::device);
  EXPECT_EQ(device, 0);
  EXPECT_EQ(rt.kind(d0 + 4999, &device), MemoryKind::device);  // anywhere inside
  ASSERT_TRUE(rt.set_device(2));
  EXPECT_EQ(rt.current_device(), 2);
  EXPECT_FALSE(rt.set_device(3));
  EXPECT_FALSE(rt.set_device(-1));
  EXPECT_EQ(rt.current_device(), 2);
  char* d2 = static_cast<char*>(rt.device_alloc(10));
  EXPECT_EQ(rt.kind(d2 + 3, &device), MemoryKind::device);
  EXPECT_EQ(device, 2);
  char* m = static_cast<char*>(rt.alloc_managed(100));
  EXPECT_EQ(rt.kind(m, &device), MemoryKind::managed);
  EXPECT_EQ(device, 2);
  m[99] = 7;  // managed memory is the host's too
  char* pinned = static_cast<char*>(rt.alloc_host(100));
  EXPECT_EQ(rt.kind(pinned, &device), MemoryKind::host);
  EXPECT_EQ(device, -1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pinned) % 4096, 0u);
  pinned[99] = 7;
  std::vector<char> pageable(100);
  EXPECT_EQ(rt.kind(pageable.data(), &device), MemoryKind::host);
  EXPECT_EQ(device, -1);
  // Another thread starts on device 0.
  std::thread([&] { EXPECT_EQ(rt.current_device(), 0); }).join();

  const veneer::test::EmulatorCounters c = rt.counters();
  EXPECT_EQ(c.device_allocations, 2);
  EXPECT_EQ(c.device_bytes, 5010);
  EXPECT_EQ(c.managed_allocations, 1);
  EXPECT_EQ(c.pinned_allocations, 1);
  rt.device_free(d0);
  rt.device_free(d2);
  rt.free_managed(m);
  rt.free_host(pinned);
  EXPECT_EQ(rt.kind(d2, &device), MemoryKind::host);
  const veneer::test::EmulatorCounters after = rt.counters();
  EXPECT_EQ(after.device_allocations + after.managed_allocations + after.pinned_allocations + after.device_bytes, 0);
}

TEST(Emulator, RangesMayNotCrossAnAllocationsEnd) {
  EmulatedRuntime rt;
  char* dev = static_cast<char*>(rt.device_alloc(100));
  std::vector<char> host(200, 1);
  EXPECT_TRUE(rt.upload(dev, host.data(), 100));
  EXPECT_FALSE(rt.upload(dev, host.data(), 101));  // past the size asked for, though inside the page
  EXPECT_FALSE(rt.download(host.data(), dev + 50, 51));
  EXPECT_FALSE(rt.upload(host.data(), host.data(), 10));  // not an emulated allocation
  vk::DeviceStream s = rt.stream(0);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(rt.copy(dev + 90, host.data(), 10, s));
  EXPECT_TRUE(rt.synchronize(s));
  ASSERT_TRUE(rt.copy(dev + 90, host.data(), 11, s));
  EXPECT_FALSE(rt.synchronize(s));  // the failure is reported once
  EXPECT_TRUE(rt.synchronize(s));
  EXPECT_EQ(rt.counters().failed_steps, 1);
  rt.device_free(dev);
}

// copy_2d (cudaMemcpy2DAsync): rows between pitches, device to host and back,
// one step each; rows that would leave the allocation fail the step.
TEST(Emulator, Copy2dMovesRowsBetweenPitches) {
  EmulatedRuntime rt;
  constexpr size_t kPitch = 48, kRows = 5, kWidth = 20, kPacked = 24;
  char* dev = static_cast<char*>(rt.device_alloc(kPitch * kRows));
  std::vector<char> image(kPitch * kRows);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<char>(i * 7 + 3);
  ASSERT_TRUE(rt.upload(dev, image.data(), image.size()));
  vk::DeviceStream s = rt.stream(1);
  ASSERT_NE(s, nullptr);
  const veneer::test::EmulatorCounters before = rt.counters();
  // Rows of 20 bytes starting at byte 4 of each 48-byte row, into 24-byte slots.
  std::vector<char> packed(kPacked * kRows, 0);
  ASSERT_TRUE(rt.copy_2d(packed.data(), kPacked, dev + 4, kPitch, kWidth, kRows, s));
  ASSERT_TRUE(rt.synchronize(s));
  for (size_t r = 0; r < kRows; ++r)
    for (size_t b = 0; b < kPacked; ++b)
      EXPECT_EQ(packed[r * kPacked + b], b < kWidth ? image[r * kPitch + 4 + b] : 0) << r << " " << b;
  // Back into another place of every row; the rest of the rows stay.
  for (char& c : packed) c = static_cast<char>(~c);
  ASSERT_TRUE(rt.copy_2d(dev + 28, kPitch, packed.data(), kPacked, kWidth, kRows, s));
  ASSERT_TRUE(rt.synchronize(s));
  const veneer::test::EmulatorCounters k = rt.counters();
  EXPECT_EQ(k.copies_2d - before.copies_2d, 2);
  EXPECT_EQ(k.copies_to_host - before.copies_to_host, 1);
  EXPECT_EQ(k.copies_from_host - before.copies_from_host, 1);
  EXPECT_EQ(k.bytes_copied - before.bytes_copied, 2 * static_cast<int64_t>(kWidth * kRows));
  std::vector<char> back(image.size());
  ASSERT_TRUE(rt.download(back.data(), dev, back.size()));
  for (size_t r = 0; r < kRows; ++r)
    for (size_t b = 0; b < kPitch; ++b)
      EXPECT_EQ(back[r * kPitch + b], b >= 28 ? packed[r * kPacked + b - 28] : image[r * kPitch + b]) << r << " " << b;
  // The last row would end 1 byte past the allocation; a width above a pitch is refused at once.
  ASSERT_TRUE(rt.copy_2d(packed.data(), kPacked, dev + 29, kPitch, kWidth, kRows, s));
  EXPECT_FALSE(rt.synchronize(s));
  EXPECT_FALSE(rt.copy_2d(packed.data(), 10, dev, kPitch, kWidth, kRows, s));
  EXPECT_EQ(rt.counters().failed_steps - before.failed_steps, 1);
  rt.device_free(dev);
}

TEST(Emulator, KernelsRefusePageableHostMemory) {
  EmulatedRuntime rt;
  const Layout l = veneer::test::make_layout(veneer::test::leaf(0, {{4, 16}}, 8));
  char* dev = static_cast<char*>(rt.device_alloc(64));
  std::unique_ptr<vk::DevicePacker> packer = rt.make_packer(l);
  ASSERT_NE(packer, nullptr);
  vk::DeviceStream s = rt.stream(0);
  std::vector<char> pageable(32);
  ASSERT_TRUE(rt.pack(*packer, 1, dev, 0, 32, pageable.data(), s));
  EXPECT_FALSE(rt.synchronize(s));
  char* pinned = static_cast<char*>(rt.alloc_host(32));
  ASSERT_TRUE(rt.pack(*packer, 1, dev, 0, 32, pinned, s));
  EXPECT_TRUE(rt.synchronize(s));
  // The user buffer must be device memory too, all of it inside one allocation.
  ASSERT_TRUE(rt.unpack(*packer, 1, pageable.data(), 0, 32, pinned, s));
  EXPECT_FALSE(rt.synchronize(s));
  ASSERT_TRUE(rt.pack(*packer, 1, dev + 16, 0, 32, pinned, s));  // the last block runs 8 bytes past the end
  EXPECT_FALSE(rt.synchronize(s));
  // Copies may use pageable memory.
  ASSERT_TRUE(rt.copy(pageable.data(), pinned, 32, s));
  EXPECT_TRUE(rt.synchronize(s));
  // Managed memory is the GPU's as well as the host's.
  char* managed = static_cast<char*>(rt.alloc_managed(64));
  for (int i = 0; i < 64; ++i) managed[i] = static_cast<char>(i);
  ASSERT_TRUE(rt.pack(*packer, 1, managed, 0, 32, pinned, s));
  EXPECT_TRUE(rt.synchronize(s));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(pinned[i], static_cast<char>(i / 8 * 16 + i % 8)) << i;
  const veneer::test::EmulatorCounters c = rt.counters();
  EXPECT_EQ(c.failed_steps, 3);
  EXPECT_EQ(c.packs, 2);  // only the ones that ran
  EXPECT_EQ(c.copies, 1);
  rt.free_managed(managed);
  rt.free_host(pinned);
  rt.device_free(dev);
}

TEST(Emulator, KernelsRunOnTheirPackersDevice) {
  EmulatedRuntime rt(EmulatorOptions{.device_count = 2});
  const Layout l = veneer::test::make_layout(veneer::test::leaf(0, {{4, 16}}, 8));
  std::unique_ptr<vk::DevicePacker> on0 = rt.make_packer(l);
  EXPECT_EQ(on0->device(), 0);
  char* dev0 = static_cast<char*>(rt.device_alloc(64));
  char* pinned = static_cast<char*>(rt.alloc_host(32));
  ASSERT_TRUE(rt.set_device(1));
  vk::DeviceStream s1 = rt.stream(0);
  ASSERT_TRUE(rt.pack(*on0, 1, dev0, 0, 32, pinned, s1));
  EXPECT_FALSE(rt.synchronize(s1));  // a device-0 plan on device 1
  std::unique_ptr<vk::DevicePacker> on1 = rt.make_packer(l);
  ASSERT_TRUE(rt.pack(*on1, 1, dev0, 0, 32, pinned, s1));
  EXPECT_FALSE(rt.synchronize(s1));  // device 0's memory from a kernel on device 1
  ASSERT_TRUE(rt.set_device(0));
  vk::DeviceStream s0 = rt.stream(0);
  EXPECT_NE(s0, s1);
  ASSERT_TRUE(rt.pack(*on0, 1, dev0, 0, 32, pinned, s0));
  EXPECT_TRUE(rt.synchronize(s0));
  rt.free_host(pinned);
  rt.device_free(dev0);
}

TEST(Emulator, RefusedLayoutsGiveNoPacker) {
  EmulatedRuntime rt(EmulatorOptions{.refuse_layouts = true});
  EXPECT_EQ(rt.make_packer(veneer::test::make_layout(veneer::test::leaf(0, {{4, 16}}, 8))), nullptr);
  rt.set_refuse_layouts(false);
  EXPECT_NE(rt.make_packer(veneer::test::make_layout(veneer::test::leaf(0, {{4, 16}}, 8))), nullptr);
}

// Two streams hand one device buffer back and forth with events, as the
// staged pipeline does, under random delays: stream 0 fills it, stream 1
// drains it; each waits for the other. Any missing order shows as wrong data.
TEST(Emulator, EventsOrderWorkAcrossStreams) {
  EmulatedRuntime rt(EmulatorOptions{.delay_us = 40});
  constexpr int kRounds = 150;
  constexpr size_t kBytes = 256;
  char* dev = static_cast<char*>(rt.device_alloc(kBytes));
  std::vector<std::vector<unsigned char>> in(kRounds), out(kRounds, std::vector<unsigned char>(kBytes));
  std::mt19937_64 rng(7);
  for (auto& v : in) v = random_bytes(rng, kBytes);
  vk::DeviceStream s0 = rt.stream(0), s1 = rt.stream(1);
  ASSERT_NE(s0, s1);
  vk::DeviceEvent filled = rt.create_event(), drained = rt.create_event();
  // Waiting for an event never recorded waits for nothing.
  ASSERT_TRUE(rt.wait(s0, drained));
  for (int r = 0; r < kRounds; ++r) {
    // Half the bytes at a time, so a round is several steps.
    ASSERT_TRUE(rt.copy(dev, in[r].data(), kBytes / 2, s0));
    ASSERT_TRUE(rt.copy(dev + kBytes / 2, in[r].data() + kBytes / 2, kBytes / 2, s0));
    ASSERT_TRUE(rt.record(filled, s0));
    ASSERT_TRUE(rt.wait(s1, filled));
    ASSERT_TRUE(rt.copy(out[r].data(), dev, kBytes, s1));
    ASSERT_TRUE(rt.record(drained, s1));
    ASSERT_TRUE(rt.wait(s0, drained));
  }
  EXPECT_TRUE(rt.synchronize(s0));
  EXPECT_TRUE(rt.synchronize(s1));
  for (int r = 0; r < kRounds; ++r) EXPECT_EQ(out[r], in[r]) << "round " << r;
  rt.destroy_event(filled);
  rt.destroy_event(drained);
  rt.device_free(dev);
  EXPECT_EQ(rt.counters().events, 0);
}

TEST(Emulator, AFailureIsPassedOnThroughAWait) {
  EmulatedRuntime rt;
  vk::DeviceStream s0 = rt.stream(0), s1 = rt.stream(1);
  vk::DeviceEvent e = rt.create_event();
  char* dev = static_cast<char*>(rt.device_alloc(8));
  char host[16] = {};
  ASSERT_TRUE(rt.copy(dev, host, 16, s0));  // faults
  ASSERT_TRUE(rt.record(e, s0));
  ASSERT_TRUE(rt.wait(s1, e));
  ASSERT_TRUE(rt.copy(host, dev, 8, s1));
  EXPECT_FALSE(rt.synchronize(s1));
  EXPECT_FALSE(rt.synchronize(s0));
  rt.destroy_event(e);
  rt.device_free(dev);
}

// ---- the pipelines ----

TEST_F(DeviceTransfer, PoolsReuseAndRelease) {
  vk::release_pools();
  const vk::PoolStats before = vk::pool_stats();
  char* first = nullptr;
  {
    vk::PooledBuffer a(rt, vk::PooledBuffer::Kind::device, 1000);
    ASSERT_NE(a.get(), nullptr);
    EXPECT_GE(a.capacity(), 1000u);
    EXPECT_EQ(rt.kind(a.get(), nullptr), MemoryKind::device);
    first = a.get();
  }
  EXPECT_EQ(rt.counters().device_allocations, 1);  // kept in the pool
  {
    vk::PooledBuffer b(rt, vk::PooledBuffer::Kind::device, 2000);
    EXPECT_EQ(b.get(), first);
    EXPECT_EQ(rt.counters().device_allocations, 1);
    vk::PooledBuffer c(rt, vk::PooledBuffer::Kind::device, 10);  // the pooled one is taken: a new one
    EXPECT_NE(c.get(), first);
    EXPECT_EQ(rt.counters().device_allocations, 2);
    vk::PooledBuffer p(rt, vk::PooledBuffer::Kind::pinned, 0);
    ASSERT_NE(p.get(), nullptr);
    EXPECT_EQ(rt.kind(p.get(), nullptr), MemoryKind::host);
    p.get()[0] = 1;  // pinned memory is the host's
    EXPECT_EQ(rt.counters().pinned_allocations, 1);
  }
  const vk::PoolStats mid = vk::pool_stats();
  EXPECT_EQ(mid.reused - before.reused, 1);
  EXPECT_GT(mid.device_bytes, 0);
  EXPECT_GT(mid.pinned_bytes, 0);
  // A device-1 buffer is not one of device 0's.
  rt.set_device_count(2);
  ASSERT_TRUE(rt.set_device(1));
  {
    vk::PooledBuffer d1(rt, vk::PooledBuffer::Kind::device, 100);
    int device = -1;
    EXPECT_EQ(rt.kind(d1.get(), &device), MemoryKind::device);
    EXPECT_EQ(device, 1);
    EXPECT_EQ(rt.counters().device_allocations, 3);
  }
  ASSERT_TRUE(rt.set_device(0));
  vk::release_pools();
  EXPECT_EQ(rt.counters().device_allocations, 0);
  EXPECT_EQ(rt.counters().pinned_allocations, 0);
  EXPECT_EQ(vk::pool_stats().device_bytes, 0);
  // With no room in the pool, buffers go back at once.
  vk::set_pool_limit(0);
  { vk::PooledBuffer a(rt, vk::PooledBuffer::Kind::device, 1000); }
  EXPECT_EQ(rt.counters().device_allocations, 0);
  vk::set_pool_limit(int64_t{256} << 20);
}

// Each method does what it says: one kernel into pinned memory, chunks of
// kernel + copy-engine transfer, one kernel into device memory, and a plain
// copy for a contiguous layout.
TEST_F(DeviceTransfer, EachMethodUsesItsSteps) {
  std::mt19937_64 rng(1);
  const Layout strided = veneer::test::make_layout(veneer::test::leaf(8, {{100, 40}}, 24));  // 2400 bytes
  auto run = [&](const Layout& l, DeviceMethod m, int64_t chunk) {
    const veneer::test::EmulatorCounters before = rt.counters();
    check_transfer(rt, l, {.count = 1, .skip = 0, .bytes = 1 << 30, .method = m, .chunk = chunk}, rng);
    const veneer::test::EmulatorCounters after = rt.counters();
    veneer::test::EmulatorCounters d;
    d.packs = after.packs - before.packs;
    d.unpacks = after.unpacks - before.unpacks;
    d.copies = after.copies - before.copies;
    d.copies_to_host = after.copies_to_host - before.copies_to_host;
    d.copies_from_host = after.copies_from_host - before.copies_from_host;
    EXPECT_EQ(after.failed_steps, 0);
    return d;
  };
  auto oneshot = run(strided, DeviceMethod::oneshot, 1 << 20);
  EXPECT_EQ(oneshot.packs, 1);
  EXPECT_EQ(oneshot.unpacks, 1);
  EXPECT_EQ(oneshot.copies, 0);
  auto staged = run(strided, DeviceMethod::staged, 1000);  // 3 chunks each way
  EXPECT_EQ(staged.packs, 3);
  EXPECT_EQ(staged.unpacks, 3);
  EXPECT_EQ(staged.copies, 6);
  EXPECT_EQ(staged.copies_to_host, 3);
  EXPECT_EQ(staged.copies_from_host, 3);
  auto on_device = run(strided, DeviceMethod::on_device, 1 << 20);
  EXPECT_EQ(on_device.packs, 1);
  EXPECT_EQ(on_device.unpacks, 1);
  EXPECT_EQ(on_device.copies, 0);
  const Layout contiguous = veneer::test::make_layout(veneer::test::leaf(16, {}, 4000));
  ASSERT_TRUE(contiguous.contiguous);
  for (DeviceMethod m : kMethods) {
    auto c = run(contiguous, m, 1000);
    EXPECT_EQ(c.launches(), 0) << vk::to_string(m);
    EXPECT_EQ(c.copies, 2) << vk::to_string(m);
  }
}

// Absolute addresses with a null buffer (MPI_BOTTOM), the contiguous case
// included: the pipelines' address arithmetic must not depend on `buf`.
TEST_F(DeviceTransfer, ContiguousAndStridedAtMpiBottom) {
  std::mt19937_64 rng(5);
  const Layout contiguous = veneer::test::make_layout(veneer::test::leaf(24, {}, 3000));
  const Layout strided = veneer::test::make_layout(veneer::test::leaf(-40, {{30, 48}}, 40));
  for (const Layout* l : {&contiguous, &strided})
    for (DeviceMethod m : kMethods) {
      const Transfer t{.count = 2, .skip = 5, .bytes = 5000, .method = m, .chunk = 999, .absolute = true};
      SCOPED_TRACE(describe(*l, t));
      check_transfer(rt, *l, t, rng);
    }
}

// A pipeline that hands a kernel pageable memory fails instead of "working".
TEST_F(DeviceTransfer, OneshotIntoPageableMemoryFails) {
  const Layout l = veneer::test::make_layout(veneer::test::leaf(0, {{10, 32}}, 16));
  char* dev = static_cast<char*>(rt.device_alloc(320));
  std::unique_ptr<vk::DevicePacker> packer = rt.make_packer(l);
  std::vector<char> pageable(160);
  EXPECT_FALSE(vk::pack_from_device(rt, *packer, l, 1, dev, 0, 160, pageable.data(), DeviceMethod::oneshot));
  EXPECT_FALSE(vk::unpack_to_device(rt, *packer, l, 1, dev, 0, 160, pageable.data(), DeviceMethod::oneshot));
  EXPECT_EQ(rt.counters().failed_steps, 2);
  rt.device_free(dev);
}

// A failed transfer says which step failed, and the failure is logged with
// its cause where it happened (kernels/device_status.h), before the caller
// turns it into an MPI error.
TEST_F(DeviceTransfer, AFailureCarriesAndLogsItsCause) {
  const Layout l = veneer::test::make_layout(veneer::test::leaf(0, {{10, 32}}, 16));
  char* dev = static_cast<char*>(rt.device_alloc(320));
  std::unique_ptr<vk::DevicePacker> packer = rt.make_packer(l);
  std::vector<char> pageable(160);
  testing::internal::CaptureStderr();
  const vk::DeviceStatus status =
      vk::pack_from_device(rt, *packer, l, 1, dev, 0, 160, pageable.data(), DeviceMethod::oneshot);
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(status.ok());
  EXPECT_STREQ(status.step(), "synchronize");  // the kernel faulted on the stream
  EXPECT_STREQ(status.name(), "emulatorFault");
  EXPECT_NE(logged.find("device: synchronize failed: emulatorFault"), std::string::npos) << logged;
  const vk::DeviceStatus fine =
      vk::pack_from_device(rt, *packer, l, 1, dev, 0, 0, pageable.data(), DeviceMethod::oneshot);
  EXPECT_TRUE(fine.ok());  // nothing to move
  EXPECT_STREQ(fine.name(), "success");
  rt.device_free(dev);
}

TEST_F(DeviceTransfer, ChunkSizesAndWindows) {
  std::mt19937_64 rng(99);
  // Mixed blocks with a negative stride, 3 instances: 3 * 40 * 29 bytes.
  const Layout l = veneer::test::make_layout(
      veneer::test::sequence(1000, {{40, -24}}, {veneer::test::leaf(0, {}, 5), veneer::test::leaf(9, {}, 24)}), 1100);
  const int64_t total = l.size * 3;
  const int64_t chunks[] = {1, 2, 3, 255, 256, 4096, int64_t{1} << 20};
  const std::pair<int64_t, int64_t> windows[] = {{0, total}, {0, 1 << 30}, {1, total - 2}, {total - 1, 10},
                                                 {513, 700}, {29, 29},     {total, 5},     {0, 0}};
  for (int delayed = 0; delayed < 2; ++delayed) {
    rt.set_delay_us(delayed ? 20 : 0);
    for (DeviceMethod m : kMethods)
      for (int64_t chunk : chunks)
        for (auto [skip, bytes] : windows) {
          if (delayed && (chunk < 4 || m != DeviceMethod::staged)) continue;  // keep the delayed pass short
          const Transfer t{.count = 3, .skip = skip, .bytes = bytes, .method = m, .chunk = chunk};
          SCOPED_TRACE(describe(l, t));
          check_transfer(rt, l, t, rng);
          if (HasFatalFailure()) return;
        }
  }
}

// A few hundred seeded random layouts, each with every method, a random
// window and chunk; every tenth under random delays.
TEST_F(DeviceTransfer, RandomLayouts) {
  const uint64_t seed = 20240501;
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int checked = 0;
  for (int iter = 0; iter < 400 && checked < 300; ++iter) {
    veneer::test::Node raw = veneer::test::random_node(rng, 0, rng() % 4 == 0 ? 16 : 0);
    const Layout probe = veneer::test::make_layout(raw);
    if (probe.size == 0 || probe.size > (16 << 10)) continue;
    const Layout l = veneer::test::make_layout(raw, uniform(1, 2 * probe.true_extent));
    const int64_t count = uniform(1, 3);
    const int64_t total = l.size * count;
    rt.set_delay_us(iter % 10 == 0 ? 15 : 0);
    for (DeviceMethod m : kMethods) {
      Transfer t{.count = count, .method = m};
      if (rng() % 3 == 0) {
        t.bytes = total;
      } else {
        t.skip = uniform(0, total - 1);
        t.bytes = uniform(1, total);  // may run past the end
      }
      const int64_t chunks[] = {1, 3, 16, 100, 4096, int64_t{1} << 20};
      t.chunk = chunks[uniform(0, 5)];
      if (t.chunk < 16 && std::min(t.bytes, total - t.skip) > 2048) t.chunk = 256;  // bounded step count
      SCOPED_TRACE("seed " + std::to_string(seed) + " iteration " + std::to_string(iter) + ": " + describe(l, t));
      check_transfer(rt, l, t, rng);
      if (HasFatalFailure()) return;
    }
    ++checked;
  }
  EXPECT_GE(checked, 200);
}

TEST_F(DeviceTransfer, DdtbenchLayouts) {
  std::mt19937_64 rng(2012);
  for (const veneer::test::Shape& shape : veneer::test::ddtbench_shapes()) {
    const int64_t total = shape.layout.size * shape.count;
    for (DeviceMethod m : kMethods) {
      for (int64_t chunk : {int64_t{1}, int64_t{4096}, int64_t{1} << 20}) {
        if (chunk == 1 && (m != DeviceMethod::staged || total > 4096)) continue;
        for (bool delayed : {false, true}) {
          // Delays on the pipelined method only, with chunks enough to overlap but not thousands.
          if (delayed && (m != DeviceMethod::staged || chunk == 1)) continue;
          rt.set_delay_us(delayed ? 10 : 0);
          const Transfer whole{
              .count = shape.count, .bytes = total, .method = m, .chunk = chunk, .absolute = shape.absolute};
          SCOPED_TRACE(shape.name + ": " + describe(shape.layout, whole));
          check_transfer(rt, shape.layout, whole, rng);
          if (HasFatalFailure()) return;
          const Transfer window{.count = shape.count,
                                .skip = total / 3,
                                .bytes = total / 2 + 1,
                                .method = m,
                                .chunk = chunk == 1 ? 7
                                         : delayed  ? 500
                                                    : chunk / 3,
                                .absolute = shape.absolute};
          SCOPED_TRACE(shape.name + ": " + describe(shape.layout, window));
          check_transfer(rt, shape.layout, window, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
  rt.set_delay_us(0);
}

// Several threads at once on one runtime, each on its own streams, sharing
// the pools, under random delays.
TEST_F(DeviceTransfer, ThreadsAtOnce) {
  rt.set_delay_us(10);
  const std::vector<veneer::test::Shape> shapes = veneer::test::ddtbench_shapes();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      for (int i = 0; i < 12; ++i) {
        const veneer::test::Shape& shape = shapes[static_cast<size_t>(t * 12 + i) % shapes.size()];
        const int64_t total = shape.layout.size * shape.count;
        const Transfer x{.count = shape.count,
                         .bytes = total,
                         .method = kMethods[(t + i) % 3],
                         .chunk = 512 + 256 * t,
                         .absolute = shape.absolute};
        check_transfer(rt, shape.layout, x, rng);
        if (::testing::Test::HasFailure()) ++failures;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(rt.counters().failed_steps, 0);
  EXPECT_GE(rt.counters().streams, 8);
}

}  // namespace
