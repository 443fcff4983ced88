// SPDX-License-Identifier: BSD-3-Clause
// cuda_runtime() (kernels/cuda_runtime.cpp), and the transfer pipelines of
// kernels/device_transfer.h over it, on a GPU against the host packer: every
// DeviceMethod, staged chunks small and large, windows of the packed stream,
// random and DDTBench layouts, the bytes around every buffer; streams and
// events per thread and device; memory kinds; failures as values. Each test
// that needs a GPU skips, saying why, where there is none; the first two run
// anywhere (the second only where there is no GPU).
#include "kernels/device_runtime.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "datatypes/pack.h"
#include "kernels/device_transfer.h"
#include "test/kernels/test_layouts.h"

namespace vk = veneer::kernels;
namespace vd = veneer::datatypes;
using veneer::test::Layout;
using veneer::test::leaf;
using veneer::test::make_layout;
using veneer::test::sequence;

namespace {

bool driver_in_process() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  if (driver) dlclose(driver);
  return driver != nullptr;
}

// First, before any test makes a CUDA call (ctest runs each test in a process
// of its own; a plain run runs this one first): getting the runtime and asking
// it about host memory loads nothing, so libveneer stays inert on GPU-less hosts.
TEST(CudaRuntime, AskingAboutHostMemoryLoadsNoDriver) {
  const bool loaded_before = driver_in_process();
  vk::DeviceRuntime* rt = vk::cuda_runtime();
  ASSERT_NE(rt, nullptr);
  EXPECT_STREQ(rt->name(), "cuda");
  EXPECT_EQ(vk::cuda_runtime(), rt) << "one runtime per process";
  std::vector<char> heap(100);
  int on_stack = 0, device = -2;
  EXPECT_EQ(rt->kind(heap.data(), &device), vk::MemoryKind::host);
  EXPECT_EQ(device, -1);
  EXPECT_EQ(rt->kind(&on_stack, nullptr), vk::MemoryKind::host);
  if (loaded_before) GTEST_SKIP() << "the CUDA driver was already loaded when this test began";
  EXPECT_FALSE(driver_in_process()) << "the CUDA runtime object loaded the driver";
  // Without the driver no buffer can be device memory: no runtime is offered.
  EXPECT_EQ(vk::device_runtime(), nullptr);
}

std::string why_no_gpu() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  cudaGetLastError();
  if (e != cudaSuccess) return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(e);
  if (n == 0) return "cudaGetDeviceCount found no device";
  return "";
}

const std::string& no_gpu() {
  static const std::string why = why_no_gpu();
  return why;
}

#define SKIP_WITHOUT_GPU() \
  if (!no_gpu().empty()) GTEST_SKIP() << "needs a CUDA GPU; " << no_gpu()

#define CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call

// Irregular offsets: a layout whose packer needs device memory.
Layout indexed_layout() { return make_layout(leaf(0, {}, 8, {0, 40, 24})); }

// Where there is no GPU (or no driver) every call fails as a value and
// nothing aborts. (A failed initialisation is permanent: every CUDA call,
// cudaGetLastError() included, reports it again, so there is nothing to clear.)
TEST(CudaRuntime, FailsAsValuesWithoutGpu) {
  if (no_gpu().empty()) GTEST_SKIP() << "for machines without a usable GPU; this one has one";
  vk::DeviceRuntime& rt = *vk::cuda_runtime();
  EXPECT_EQ(rt.current_device(), -1);
  EXPECT_FALSE(rt.set_device(0));
  EXPECT_EQ(rt.alloc_device(64), nullptr);
  EXPECT_EQ(rt.alloc_host(64), nullptr);
  EXPECT_EQ(rt.stream(0), nullptr);
  EXPECT_EQ(rt.stream(1), nullptr);
  EXPECT_EQ(rt.create_event(), nullptr);
  EXPECT_EQ(rt.make_packer(indexed_layout()), nullptr);
  EXPECT_EQ(rt.make_packer(make_layout(leaf(0, {{4, 16}}, 8))), nullptr) << "no device: no packer";
  std::vector<char> a(64, 1), b(64, 2);
  EXPECT_FALSE(rt.copy(a.data(), b.data(), a.size(), nullptr));
  EXPECT_FALSE(rt.synchronize(nullptr));
  EXPECT_FALSE(rt.record(nullptr, nullptr));
  EXPECT_FALSE(rt.wait(nullptr, nullptr));
  rt.free_host(nullptr);
  rt.free_device(nullptr);
  rt.destroy_event(nullptr);
  EXPECT_EQ(a, std::vector<char>(64, 1));
}

// RAII for the test's own CUDA memory.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t bytes) : bytes_(std::max<int64_t>(bytes, 1)) {
    if (cudaMalloc(&data_, static_cast<size_t>(bytes_)) != cudaSuccess) data_ = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }
  unsigned char* data() const { return static_cast<unsigned char*>(data_); }
  int64_t bytes() const { return bytes_; }

 private:
  int64_t bytes_;
  void* data_ = nullptr;
};

// Mapped pinned memory from the runtime under test.
class MappedBuffer {
 public:
  MappedBuffer(vk::DeviceRuntime& rt, int64_t bytes) : rt_(rt) {
    data_ = static_cast<unsigned char*>(rt.alloc_host(static_cast<size_t>(std::max<int64_t>(bytes, 1))));
  }
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  ~MappedBuffer() { rt_.free_host(data_); }
  unsigned char* data() const { return data_; }

 private:
  vk::DeviceRuntime& rt_;
  unsigned char* data_ = nullptr;
};

// Host to device, finished when it returns. A cudaMemcpy from pageable memory
// may return before its DMA has landed, and Veneer's streams, being
// non-blocking, would not wait for it.
cudaError_t upload(void* device, const void* host, size_t bytes) {
  if (const cudaError_t e = cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice); e != cudaSuccess) return e;
  return cudaDeviceSynchronize();
}

// Says how many bytes differ and where the first is (the vectors are large).
::testing::AssertionResult same_bytes(const std::vector<unsigned char>& got, const std::vector<unsigned char>& expect) {
  if (got.size() != expect.size())
    return ::testing::AssertionFailure() << got.size() << " bytes instead of " << expect.size();
  const auto first = std::mismatch(got.begin(), got.end(), expect.begin());
  if (first.first == got.end()) return ::testing::AssertionSuccess();
  int64_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += got[i] != expect[i];
  return ::testing::AssertionFailure() << differ << " of " << got.size() << " bytes differ, the first at "
                                       << (first.first - got.begin()) << ": " << int{*first.first} << " instead of "
                                       << int{*first.second};
}

std::vector<unsigned char> pattern(int64_t n, unsigned seed) {
  std::vector<unsigned char> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<unsigned char>(i * 131 + i / 256 + seed);
  return v;
}

// How a test moves packed bytes: the method, the staged chunk, and where the
// host side of a staged transfer lives (mapped pinned or pageable memory).
struct Way {
  vk::DeviceMethod method;
  int64_t chunk = int64_t{1} << 20;
  bool pinned = false;
  std::string describe() const {
    std::string s = vk::to_string(method);
    if (method == vk::DeviceMethod::staged)
      s += " chunk " + std::to_string(chunk) + (pinned ? " into pinned" : " into pageable");
    return s;
  }
};

const std::vector<Way>& usual_ways() {
  static const std::vector<Way> ways = {{vk::DeviceMethod::oneshot},
                                        {vk::DeviceMethod::staged, 4096, false},
                                        {vk::DeviceMethod::staged, 4096, true},
                                        {vk::DeviceMethod::staged, int64_t{1} << 20, false},
                                        {vk::DeviceMethod::on_device}};
  return ways;
}

// A window of the packed stream: skip, then at most `bytes`.
struct Window {
  int64_t skip, bytes;
};

// The whole stream, more than the whole, a window inside, one that runs off
// the end, one byte, and empty ones (at the start and past the end).
std::vector<Window> windows_of(int64_t total) {
  std::vector<Window> w = {{0, total}, {0, total + 100}, {0, 0}, {total, 10}};
  if (total >= 3) w.push_back({1, total - 2});
  if (total >= 4) w.push_back({total / 3, total / 2});
  if (total >= 1) w.push_back({total - 1, 5});
  if (total >= 2) w.push_back({total / 2, 1});
  return w;
}

constexpr int64_t kMargin = 64;         // bytes checked on either side of every buffer
constexpr unsigned char kGuard = 0xEE;  // what the margins and untouched outputs hold

// One layout's instances in device memory: the allocation, with kMargin bytes
// either side of the span the instances touch, and `base`, the buffer pointer
// the layout's offsets are relative to, on a 64-byte boundary.
struct Placement {
  veneer::test::Span span;
  std::unique_ptr<DeviceBuffer> memory;
  uintptr_t base = 0;
  int64_t first = 0;  // the span's first byte, as an offset into the allocation

  Placement(const Layout& l, int64_t count) : span(veneer::test::span_of(l, count)) {
    memory = std::make_unique<DeviceBuffer>(span.bytes() + 64 + 2 * kMargin);
    if (!memory->data()) return;
    const uintptr_t start = reinterpret_cast<uintptr_t>(memory->data()) + kMargin;
    base = (start - static_cast<uintptr_t>(span.lo) + 63) / 64 * 64;
    first = static_cast<int64_t>(base + static_cast<uintptr_t>(span.lo) - reinterpret_cast<uintptr_t>(memory->data()));
  }
  // The host image of the allocation, and the buffer pointer into it.
  unsigned char* host_base(std::vector<unsigned char>& image) const { return image.data() + first - span.lo; }
};

// The output (pack) or input (unpack) of a transfer in the memory `way`
// wants, with kMargin guard bytes either side of `bytes` payload bytes.
class Packed {
 public:
  Packed(vk::DeviceRuntime& rt, const Way& way, int64_t bytes) : size_(bytes + 2 * kMargin) {
    if (way.method == vk::DeviceMethod::on_device) {
      device_ = std::make_unique<DeviceBuffer>(size_);
      data_ = device_->data();
    } else if (way.method == vk::DeviceMethod::oneshot || way.pinned) {
      mapped_ = std::make_unique<MappedBuffer>(rt, size_);
      data_ = mapped_->data();
    } else {
      pageable_.resize(static_cast<size_t>(size_));
      data_ = pageable_.data();
    }
  }
  bool ok() const { return data_ != nullptr; }
  unsigned char* payload() const { return data_ + kMargin; }
  // Sets the whole buffer, margins included.
  void put(const std::vector<unsigned char>& image) const {
    if (device_) EXPECT_EQ(upload(data_, image.data(), image.size()), cudaSuccess);
    else std::copy(image.begin(), image.end(), data_);
  }
  std::vector<unsigned char> get() const {
    std::vector<unsigned char> out(static_cast<size_t>(size_));
    if (device_) EXPECT_EQ(cudaMemcpy(out.data(), data_, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    else std::copy(data_, data_ + size_, out.begin());
    return out;
  }
  int64_t size() const { return size_; }

 private:
  int64_t size_;
  unsigned char* data_ = nullptr;
  std::unique_ptr<DeviceBuffer> device_;
  std::unique_ptr<MappedBuffer> mapped_;
  std::vector<unsigned char> pageable_;
};

// pack_from_device() and unpack_to_device() of `count` instances of `l` in
// every way and window, against datatypes::pack() and unpack() on a host copy
// of the same bytes; whole buffers compared, margins and gaps included.
// `absolute`: the layout's offsets are addresses (MPI_BOTTOM); the buffer
// passed is null.
void check_transfers(vk::DeviceRuntime& rt, const Layout& l, int64_t count, bool absolute, const std::vector<Way>& ways,
                     const std::vector<Window>& windows, const std::string& what) {
  const int64_t total = l.size * count;
  const Placement at(l, count);
  ASSERT_NE(at.memory->data(), nullptr) << what;
  const int64_t alloc = at.memory->bytes();
  Layout on_device = l;
  const void* buf = reinterpret_cast<const void*>(at.base);
  if (absolute) {
    const auto shift = static_cast<int64_t>(at.base);
    on_device.root.offset += shift;
    on_device.true_lb += shift;
    on_device.lb += shift;
    buf = nullptr;
  }
  const std::unique_ptr<vk::DevicePacker> packer = rt.make_packer(on_device);
  ASSERT_NE(packer, nullptr) << what;
  EXPECT_EQ(packer->device(), rt.current_device());

  // Packing reads `source` (and must leave it as it was).
  std::vector<unsigned char> source = pattern(alloc, 5);
  CUDA_OK(upload(at.memory->data(), source.data(), source.size()));
  const unsigned char* host_source = at.host_base(source);
  for (const Way& way : ways) {
    const vk::TransferOptions options{way.chunk};
    for (const Window& w : windows) {
      const std::string where = what + ", " + way.describe() + ", window " + std::to_string(w.skip) + "+" +
                                std::to_string(w.bytes) + " of " + std::to_string(total);
      std::vector<unsigned char> expect(static_cast<size_t>(std::max<int64_t>(w.bytes, 0)));
      const int64_t n = vd::pack(l, count, host_source, w.skip, w.bytes, expect.data());
      expect.resize(static_cast<size_t>(n));
      std::vector<unsigned char> image(static_cast<size_t>(n + 2 * kMargin), kGuard);

      const Packed out(rt, way, n);
      ASSERT_TRUE(out.ok()) << where;
      out.put(image);
      ASSERT_TRUE(
          vk::pack_from_device(rt, *packer, on_device, count, buf, w.skip, w.bytes, out.payload(), way.method, options))
          << where;
      std::copy(expect.begin(), expect.end(), image.begin() + kMargin);
      EXPECT_TRUE(same_bytes(out.get(), image))
          << "packed " << where << " (offsets include the " << kMargin << "-byte margin); " << l.describe();

      // Unpacking the same bytes into a different background writes exactly
      // the window's bytes of the type map (overlapping bytes get one value).
      std::vector<unsigned char> background = pattern(alloc, 77);
      CUDA_OK(upload(at.memory->data(), background.data(), background.size()));
      const Packed in(rt, way, n);
      ASSERT_TRUE(in.ok()) << where;
      in.put(image);
      ASSERT_TRUE(vk::unpack_to_device(rt, *packer, on_device, count, const_cast<void*>(buf), w.skip, w.bytes,
                                       in.payload(), way.method, options))
          << where;
      EXPECT_EQ(vd::unpack(l, count, at.host_base(background), w.skip, w.bytes, expect.data()), n);
      std::vector<unsigned char> got(static_cast<size_t>(alloc));
      CUDA_OK(cudaMemcpy(got.data(), at.memory->data(), got.size(), cudaMemcpyDeviceToHost));
      EXPECT_TRUE(same_bytes(got, background))
          << "unpacked " << where << " (offsets in the allocation, the span at " << at.first << "); " << l.describe();
      EXPECT_TRUE(same_bytes(in.get(), image)) << "unpacking changed its input: " << where;
      CUDA_OK(upload(at.memory->data(), source.data(), source.size()));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(DeviceTransfer, RandomLayoutsMatchHostPacker) {
  SKIP_WITHOUT_GPU();
  vk::DeviceRuntime& rt = *vk::cuda_runtime();
  std::mt19937_64 rng(4);
  int checked = 0, contiguous = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const veneer::test::Node raw = veneer::test::random_node(rng, 0, rng() % 4 == 0 ? 16 : 0);
    const Layout probe = make_layout(raw);
    if (probe.size == 0 || probe.size > (16 << 10)) continue;
    const int64_t extent = std::uniform_int_distribution<int64_t>(1, 2 * probe.true_extent)(rng);
    // Some with the true extent, so that contiguous layouts (a plain copy) come up.
    const Layout l = make_layout(raw, rng() % 3 == 0 ? 0 : (rng() % 2 ? (extent + 15) / 16 * 16 : extent));
    const int64_t count = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    const std::string what =
        "iteration " + std::to_string(iter) + ": " + l.describe() + " count " + std::to_string(count);
    check_transfers(rt, l, count, false, usual_ways(), windows_of(l.size * count), what);
    if (HasFailure()) FAIL() << what;
    ++checked;
    contiguous += l.contiguous;
  }
  EXPECT_GT(checked, 150);
  EXPECT_GT(contiguous, 0) << "no contiguous layout came up: the copy path went unchecked";
}

TEST(DeviceTransfer, DdtbenchShapesMatchHostPacker) {
  SKIP_WITHOUT_GPU();
  vk::DeviceRuntime& rt = *vk::cuda_runtime();
  std::vector<Way> ways = usual_ways();
  // Chunks that cut elements and words in the middle.
  ways.push_back({vk::DeviceMethod::staged, 100, false});
  ways.push_back({vk::DeviceMethod::staged, 7, true});
  for (const veneer::test::Shape& shape : veneer::test::ddtbench_shapes()) {
    const int64_t total = shape.layout.size * shape.count;
    check_transfers(rt, shape.layout, shape.count, shape.absolute, ways, windows_of(total),
                    shape.name + ": " + shape.layout.describe());
    if (HasFailure()) FAIL() << shape.name;
  }
}

// Messages of several chunks of the default size: a 2-D vector and a struct,
// a few MiB each, cut at windows that do not fall on chunk boundaries.
TEST(DeviceTransfer, LargeMessagesInManyChunks) {
  SKIP_WITHOUT_GPU();
  vk::DeviceRuntime& rt = *vk::cuda_runtime();
  const std::vector<Way> ways = {{vk::DeviceMethod::oneshot},
                                 {vk::DeviceMethod::staged, int64_t{1} << 20, false},
                                 {vk::DeviceMethod::staged, int64_t{1} << 20, true},
                                 {vk::DeviceMethod::staged, int64_t{64} << 10, true},
                                 {vk::DeviceMethod::on_device}};
  const int64_t mib = int64_t{1} << 20;
  for (int64_t block : {8, 12, 512}) {
    const int64_t rows = 3 * mib / block + 1;
    const Layout l = make_layout(leaf(0, {{rows, 2 * block}}, block));
    const int64_t total = l.size;
    check_transfers(rt, l, 1, false, ways, {{0, total}, {mib - 3, 2 * mib + 7}, {total - mib - 1, mib + 50}},
                    "2-D block " + std::to_string(block));
    if (HasFailure()) return;
  }
  const Layout structs = make_layout(sequence(0, {}, {leaf(0, {}, 8), leaf(8, {}, 1), leaf(12, {}, 4)}), 24);
  check_transfers(rt, structs, (5 * mib) / 13, false, ways, {{0, 5 * mib}, {mib + 1, 3 * mib}},
                  "struct of 13 bytes in 24");
}

// Every thread has its own streams, and threads share a packer (as they share
// a datatype): concurrent transfers from several threads all come out right.
TEST(DeviceTransfer, ThreadsShareAPacker) {
  SKIP_WITHOUT_GPU();
  vk::DeviceRuntime& rt = *vk::cuda_runtime();
  const int device = rt.current_device();
  ASSERT_GE(device, 0);
  // Irregular offsets: the packer's arrays in device memory, read by all.
  const Layout l = make_layout(leaf(4, {{3000, 64}}, 8, {0, 40, 24}));
  const std::unique_ptr<vk::DevicePacker> packer = rt.make_packer(l);
  ASSERT_NE(packer, nullptr);
  constexpr int kThreads = 4;
  std::atomic<int> wrong{0}, failed{0};
  std::vector<vk::DeviceStream> streams(2 * kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // A new thread's current device is 0, not the caller's.
      if (!rt.set_device(device)) {
        ++failed;
        return;
      }
      streams[2 * t] = rt.stream(0);
      streams[2 * t + 1] = rt.stream(1);
      const veneer::test::Span span = veneer::test::span_of(l, 1);
      DeviceBuffer memory(span.bytes());
      const std::vector<unsigned char> source = pattern(span.bytes(), static_cast<unsigned>(t));
      if (!memory.data() || upload(memory.data(), source.data(), source.size()) != cudaSuccess) {
        ++failed;
        return;
      }
      const void* buf = memory.data() - span.lo;
      std::vector<unsigned char> expect(static_cast<size_t>(l.size));
      vd::pack_all(l, 1, source.data() - span.lo, expect.data());
      MappedBuffer mapped(rt, l.size);
      std::vector<unsigned char> pageable(static_cast<size_t>(l.size));
      for (int round = 0; round < 20; ++round) {
        const bool oneshot = round % 2 == 0;
        unsigned char* out = oneshot ? mapped.data() : pageable.data();
        std::fill(out, out + l.size, 0);
        if (!vk::pack_from_device(rt, *packer, l, 1, buf, 0, l.size, out,
                                  oneshot ? vk::DeviceMethod::oneshot : vk::DeviceMethod::staged, {8192})) {
          ++failed;
          return;
        }
        if (!std::equal(expect.begin(), expect.end(), out)) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  for (size_t i = 0; i < streams.size(); ++i) {
    EXPECT_NE(streams[i], nullptr);
    for (size_t j = 0; j < i; ++j) EXPECT_NE(streams[i], streams[j]) << "threads or slots share a stream";
  }
}

TEST(CudaRuntime, StreamsAreThePerThreadPerDevicePair) {
  SKIP_WITHOUT_GPU();
  vk::DeviceRuntime& rt = *vk::cuda_runtime();
  const vk::DeviceStream s0 = rt.stream(0), s1 = rt.stream(1);
  ASSERT_NE(s0, nullptr);
  ASSERT_NE(s1, nullptr);
  EXPECT_NE(s0, s1);
  EXPECT_EQ(rt.stream(0), s0) << "made once, then reused";
  EXPECT_EQ(rt.stream(1), s1);
  EXPECT_EQ(rt.stream(2), nullptr);
  EXPECT_EQ(rt.stream(-1), nullptr);
  // Non-blocking: they do not wait for the legacy default stream.
  unsigned flags = 0;
  CUDA_OK(cudaStreamGetFlags(static_cast<cudaStream_t>(s0), &flags));
  EXPECT_EQ(flags & cudaStreamNonBlocking, cudaStreamNonBlocking);
  vk::DeviceStream other = nullptr;
  const int device = rt.current_device();
  std::thread([&] {
    rt.set_device(device);
    other = rt.stream(0);
  }).join();
  EXPECT_NE(other, nullptr);
  EXPECT_NE(other, s0);

  int devices = 0;
  CUDA_OK(cudaGetDeviceCount(&devices));
  EXPECT_FALSE(rt.set_device(devices)) << "no such device";
  EXPECT_FALSE(rt.set_device(-1));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(rt.current_device(), device) << "a refused set_device changed the current device";
  if (devices >= 2) {
    const int next = (device + 1) % devices;
    ASSERT_TRUE(rt.set_device(next));
    EXPECT_EQ(rt.current_device(), next);
    const vk::DeviceStream there = rt.stream(0);
    EXPECT_NE(there, nullptr);
    EXPECT_NE(there, s0) << "each device has its own streams";
    ASSERT_TRUE(rt.set_device(device));
    EXPECT_EQ(rt.stream(0), s0);
  }
}

// An event recorded on one stream orders work queued on the other after it.
TEST(CudaRuntime, EventsOrderTheTwoStreams) {
  SKIP_WITHOUT_GPU();
  vk::DeviceRuntime& rt = *vk::cuda_runtime();
  const vk::DeviceStream s0 = rt.stream(0), s1 = rt.stream(1);
  ASSERT_NE(s0, nullptr);
  ASSERT_NE(s1, nullptr);
  const int64_t bytes = int64_t{64} << 20;  // long enough that a missing wait shows
  void* device = rt.alloc_device(static_cast<size_t>(bytes));
  ASSERT_NE(device, nullptr);
  const std::vector<unsigned char> source = pattern(bytes, 3);
  std::vector<unsigned char> back(static_cast<size_t>(bytes), 0);
  vk::DeviceEvent arrived = rt.create_event();
  ASSERT_NE(arrived, nullptr);
  for (int round = 0; round < 3; ++round) {
    std::fill(back.begin(), back.end(), 0);
    ASSERT_TRUE(rt.copy(device, source.data(), source.size(), s0));
    ASSERT_TRUE(rt.record(arrived, s0));
    ASSERT_TRUE(rt.wait(s1, arrived));
    ASSERT_TRUE(rt.copy(back.data(), device, back.size(), s1));
    ASSERT_TRUE(rt.synchronize(s1));
    EXPECT_TRUE(same_bytes(back, source)) << "round " << round;
    // On s0, so that the next round's copy comes after it.
    CUDA_OK(cudaMemsetAsync(device, 0, static_cast<size_t>(bytes), static_cast<cudaStream_t>(s0)));
  }
  EXPECT_TRUE(rt.synchronize(s0));
  EXPECT_TRUE(rt.copy(back.data(), source.data(), 0, s0)) << "nothing to copy is no failure";
  rt.destroy_event(arrived);
  rt.free_device(device);
}

// A packer that is not the CUDA runtime's.
class ForeignPacker final : public vk::DevicePacker {
 public:
  int device() const override { return 0; }
};

// Refusals are values, and leave nothing behind: the next call works.
TEST(CudaRuntime, FailuresAreValuesAndDoNotPoisonTheNextCall) {
  SKIP_WITHOUT_GPU();
  vk::DeviceRuntime& rt = *vk::cuda_runtime();
  const vk::DeviceStream s = rt.stream(0);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(rt.alloc_device(size_t{1} << 62), nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(rt.alloc_host(size_t{1} << 62), nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  Layout malformed = indexed_layout();
  malformed.size += 1;
  EXPECT_EQ(rt.make_packer(malformed), nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  const Layout l = indexed_layout();
  const std::unique_ptr<vk::DevicePacker> packer = rt.make_packer(l);
  ASSERT_NE(packer, nullptr);
  DeviceBuffer user(64), out(64);
  EXPECT_FALSE(rt.pack(ForeignPacker(), 1, user.data(), 0, 24, out.data(), s)) << "a packer of another runtime";
  EXPECT_FALSE(rt.pack(*packer, 1, user.data(), 0, 24, out.data(), nullptr)) << "no stream";
  EXPECT_FALSE(rt.unpack(*packer, 1, user.data(), 0, 24, out.data(), nullptr));
  EXPECT_FALSE(rt.copy(out.data(), user.data(), 64, nullptr));
  EXPECT_FALSE(rt.synchronize(nullptr));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  // And the ordinary path still works.
  const std::vector<unsigned char> source = pattern(64, 1);
  CUDA_OK(upload(user.data(), source.data(), 64));
  ASSERT_TRUE(rt.pack(*packer, 1, user.data(), 0, 24, out.data(), s));
  ASSERT_TRUE(rt.synchronize(s));
  std::vector<unsigned char> got(24), expect(24);
  CUDA_OK(cudaMemcpy(got.data(), out.data(), 24, cudaMemcpyDeviceToHost));
  vd::pack_all(l, 1, source.data(), expect.data());
  EXPECT_EQ(got, expect);

  // A packer whose arrays live on another device is refused there.
  int devices = 0;
  CUDA_OK(cudaGetDeviceCount(&devices));
  if (devices >= 2) {
    const int here = rt.current_device();
    ASSERT_TRUE(rt.set_device((here + 1) % devices));
    const vk::DeviceStream there = rt.stream(0);
    EXPECT_FALSE(rt.pack(*packer, 1, user.data(), 0, 24, out.data(), there));
    ASSERT_TRUE(rt.set_device(here));
  }
}

TEST(CudaRuntime, TellsEveryKindOfCudaMemory) {
  SKIP_WITHOUT_GPU();
  vk::DeviceRuntime& rt = *vk::cuda_runtime();
  const int current = rt.current_device();
  ASSERT_GE(current, 0);
  int ordinal = -2;

  DeviceBuffer device(4096);
  ASSERT_NE(device.data(), nullptr);
  EXPECT_EQ(rt.kind(device.data(), &ordinal), vk::MemoryKind::device);
  EXPECT_EQ(ordinal, current);
  EXPECT_EQ(rt.kind(device.data() + 4000, &ordinal), vk::MemoryKind::device);

  void* managed = nullptr;
  CUDA_OK(cudaMallocManaged(&managed, 4096));
  ordinal = -2;
  EXPECT_EQ(rt.kind(managed, &ordinal), vk::MemoryKind::managed);
  cudaFree(managed);

  void* pinned = nullptr;
  CUDA_OK(cudaHostAlloc(&pinned, 4096, cudaHostAllocDefault));
  EXPECT_EQ(rt.kind(pinned, &ordinal), vk::MemoryKind::host);
  EXPECT_EQ(ordinal, -1);
  cudaFreeHost(pinned);

  std::unique_ptr<char, decltype(&std::free)> heap(static_cast<char*>(std::malloc(4096)), &std::free);
  ASSERT_NE(heap, nullptr);
  EXPECT_EQ(rt.kind(heap.get(), &ordinal), vk::MemoryKind::host);
  EXPECT_EQ(ordinal, -1);

  // The runtime's own allocations.
  void* mapped = rt.alloc_host(4096);
  ASSERT_NE(mapped, nullptr);
  EXPECT_EQ(rt.kind(mapped, &ordinal), vk::MemoryKind::host);
  // Mapped: under unified addressing the host pointer is also the device's.
  cudaPointerAttributes attributes{};
  CUDA_OK(cudaPointerGetAttributes(&attributes, mapped));
  EXPECT_EQ(attributes.devicePointer, mapped);
  rt.free_host(mapped);
  void* ours = rt.alloc_device(0);
  ASSERT_NE(ours, nullptr) << "zero bytes still make a buffer";
  EXPECT_EQ(rt.kind(ours, &ordinal), vk::MemoryKind::device);
  rt.free_device(ours);

  // Once the driver is in, the process's runtime is this one.
  EXPECT_EQ(vk::device_runtime(), &rt);
  EXPECT_EQ(vk::buffer_kind(device.data()), vk::MemoryKind::device);
}

}  // namespace

// DeviceRuntime::reduce() (kernels/device_reduce.cu) on a GPU against the
// same functor run on the CPU, bit for bit, for every op on every type, with
// counts past one block and past the grid's 8192 blocks (grid-stride).
namespace {
template <class T>
std::vector<T> random_elements(std::mt19937_64& rng, size_t n) {
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_integral_v<T>) {
      const uint64_t r = rng();
      x = (r % 4 == 0) ? T{0} : static_cast<T>(r >> 7);
    } else {
      x = static_cast<T>(std::uniform_real_distribution<double>(-1e3, 1e3)(rng));  // no NaN: payloads may differ
    }
  }
  return v;
}
}  // namespace

TEST(CudaRuntime, ReduceMatchesTheHostFunctor) {
  SKIP_WITHOUT_GPU();
  vk::DeviceRuntime* rt = vk::cuda_runtime();
  ASSERT_NE(rt, nullptr);
  vk::DeviceStream s = rt->stream(0);
  ASSERT_NE(s, nullptr);
  std::mt19937_64 rng(17);
  const vk::ReduceType types[] = {vk::ReduceType::i8,  vk::ReduceType::i16, vk::ReduceType::i32, vk::ReduceType::i64,
                                  vk::ReduceType::u8,  vk::ReduceType::u16, vk::ReduceType::u32, vk::ReduceType::u64,
                                  vk::ReduceType::f32, vk::ReduceType::f64};
  for (vk::ReduceType type : types) {
    for (int o = 0; o <= static_cast<int>(vk::ReduceOp::bxor); ++o) {
      const auto op = static_cast<vk::ReduceOp>(o);
      for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{3} << 21}) {
        SCOPED_TRACE(testing::Message() << "type " << int(type) << " op " << o << " n " << n);
        vk::visit_reduction(op, type, [&]<class T, vk::ReduceOp Op>() {
          const auto count = static_cast<size_t>(n);
          const std::vector<T> in = random_elements<T>(rng, count), inout = random_elements<T>(rng, count);
          const size_t bytes = count * sizeof(T);
          void* d_in = rt->alloc_device(bytes);
          void* d_io = rt->alloc_device(bytes);
          EXPECT_TRUE(d_in && d_io);
          if (!d_in || !d_io) return false;
          EXPECT_TRUE(rt->copy(d_in, in.data(), bytes, s));
          EXPECT_TRUE(rt->copy(d_io, inout.data(), bytes, s));
          EXPECT_TRUE(rt->reduce(op, type, d_io, d_in, n, s));
          std::vector<T> got(count);
          EXPECT_TRUE(rt->copy(got.data(), d_io, bytes, s));
          EXPECT_TRUE(rt->synchronize(s));
          std::vector<T> want = inout;
          vk::reduce_elements(op, type, want.data(), in.data(), n);
          size_t first_bad = count;
          for (size_t i = 0; i < count && first_bad == count; ++i)
            if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) first_bad = i;
          EXPECT_EQ(first_bad, count) << "first differing element";
          rt->free_device(d_in);
          rt->free_device(d_io);
          return true;
        });
      }
    }
  }
  // Refused, nothing queued: misaligned, bitwise on floats.
  void* d = rt->alloc_device(64);
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(rt->reduce(vk::ReduceOp::sum, vk::ReduceType::f64, static_cast<char*>(d) + 4, d, 1, s));
  EXPECT_FALSE(rt->reduce(vk::ReduceOp::band, vk::ReduceType::f32, d, d, 4, s));
  EXPECT_TRUE(rt->synchronize(s));
  rt->free_device(d);
}
