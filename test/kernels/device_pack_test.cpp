// SPDX-License-Identifier: BSD-3-Clause
// device_pack() and device_unpack() on a GPU against the host packer
// (datatypes::pack): random layouts, the DDTBench layouts, fragments, buffer
// alignments, absolute addresses, a stream past 4 GiB; and memory_kind() on
// every kind of CUDA memory. Each test that needs a GPU skips, saying why,
// where there is none; the first two run anywhere.
#include "kernels/device_pack.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "datatypes/pack.h"
#include "kernels/memory_kind.h"
#include "test/kernels/test_layouts.h"

namespace vk = veneer::kernels;
namespace vd = veneer::datatypes;
using veneer::test::Layout;
using veneer::test::leaf;
using veneer::test::make_layout;

namespace {

// First, before any test makes a CUDA call (and ctest runs each test in a
// process of its own): layouts that need no device memory make no CUDA call,
// and linking the kernels does not load the driver.
TEST(DeviceLayout, PlainLayoutsNeedNoCudaCall) {
  const vk::DeviceLayout contiguous(make_layout(leaf(0, {}, 64)));
  const vk::DeviceLayout strided(make_layout(leaf(0, {{4, 16}}, 8)));
  EXPECT_TRUE(contiguous.ok());
  EXPECT_TRUE(strided.ok());
  EXPECT_EQ(strided.device(), -1);
  EXPECT_EQ(strided.packed_bytes(3, 8, 1000), 88);
  void* driver = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  EXPECT_EQ(driver, nullptr) << "the CUDA driver was loaded by merely linking the kernels";
  if (driver) dlclose(driver);
}

std::string why_no_gpu() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
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

TEST(DeviceLayout, ReportsCudaFailuresAsValues) {
  if (no_gpu().empty()) GTEST_SKIP() << "for machines without a usable GPU; this one has one";
  // Irregular offsets need device memory, which cannot be had here.
  const vk::DeviceLayout indexed(make_layout(leaf(0, {}, 8, {0, 40, 24})));
  EXPECT_FALSE(indexed.ok());
  EXPECT_NE(indexed.status(), cudaSuccess);
  std::vector<char> in(64), out(64);
  int64_t packed = -1;
  EXPECT_NE(vk::device_pack(indexed, 1, in.data(), 0, 24, out.data(), nullptr, &packed), cudaSuccess);
  EXPECT_EQ(packed, 0);
}

// Device memory, freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t bytes) {
    if (cudaMalloc(&data_, static_cast<size_t>(std::max<int64_t>(bytes, 1))) != cudaSuccess) data_ = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }
  unsigned char* data() const { return static_cast<unsigned char*>(data_); }

 private:
  void* data_ = nullptr;
};

class Stream {
 public:
  Stream() {
    if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess) stream_ = nullptr;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

std::vector<unsigned char> pattern(int64_t n, unsigned seed) {
  std::vector<unsigned char> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<unsigned char>(i * 131 + seed);
  return v;
}

// Packs `count` instances on the device, whole and in fragments, all queued on
// one stream with a single wait at the end, and unpacks them again; compares
// with the host packer. `absolute`: the layout's offsets are relative to the
// device buffer's address and the buffer passed is null (MPI_BOTTOM).
void check_on_device(Layout l, int64_t count, int64_t user_shift, int64_t packed_shift, bool absolute,
                     const std::vector<int64_t>& fragments, const std::string& what) {
  const veneer::test::Span span = veneer::test::span_of(l, count);
  const int64_t total = l.size * count;
  DeviceBuffer user_memory(span.bytes() + 128);
  ASSERT_NE(user_memory.data(), nullptr);
  // The buffer pointer (which the offsets are relative to) `user_shift` bytes
  // past a 64-byte boundary, as an application's arrays are.
  const uintptr_t start = reinterpret_cast<uintptr_t>(user_memory.data()) - static_cast<uintptr_t>(span.lo);
  uintptr_t base = (start + 63) / 64 * 64 + static_cast<uintptr_t>(user_shift);
  unsigned char* first = reinterpret_cast<unsigned char*>(base + static_cast<uintptr_t>(span.lo));
  const std::vector<unsigned char> source = pattern(span.bytes(), 5);
  // The host reference, on a host copy of the same bytes.
  std::vector<unsigned char> expect(static_cast<size_t>(total));
  const unsigned char* host_base = source.data() - span.lo;
  ASSERT_EQ(vd::pack_all(l, count, host_base, expect.data()), total);
  std::vector<unsigned char> reference(static_cast<size_t>(span.bytes()), 0);
  vd::unpack_all(l, count, reference.data() - span.lo, expect.data());
  if (absolute) {
    l.root.offset += static_cast<int64_t>(base);
    l.true_lb += static_cast<int64_t>(base);
    l.lb += static_cast<int64_t>(base);
    base = 0;
  }
  const void* buf = reinterpret_cast<const void*>(base);
  const vk::DeviceLayout dl(l);
  ASSERT_TRUE(dl.ok()) << what << ": " << cudaGetErrorString(dl.status());
  Stream stream;
  ASSERT_NE(stream.get(), nullptr);
  const cudaStream_t s = stream.get();

  // Each fragment is packed into a slot of its own, guarded on both sides, at
  // the alignment it would have inside one packed buffer: a write outside a
  // fragment's window shows even where it would write the right value. The
  // image of the slots, as they must come out, is built on the host.
  struct Slots {
    int64_t fragment, pieces, slot;
    std::vector<unsigned char> image;
    std::unique_ptr<DeviceBuffer> memory;
    int64_t at(int64_t piece, int64_t packed_shift) const {
      return piece * slot + 64 + (packed_shift + piece * fragment) % 64;
    }
  };
  std::vector<Slots> all;
  for (int64_t fragment : fragments) {
    Slots sl;
    sl.fragment = std::min(fragment, total);
    sl.pieces = (total + sl.fragment - 1) / sl.fragment;
    sl.slot = (sl.fragment + 192 + 63) / 64 * 64;
    sl.image.assign(static_cast<size_t>(sl.pieces * sl.slot), 0xEE);
    for (int64_t i = 0; i < sl.pieces; ++i) {
      const int64_t from = i * sl.fragment, len = std::min(sl.fragment, total - from);
      std::copy(expect.begin() + from, expect.begin() + from + len, sl.image.begin() + sl.at(i, packed_shift));
    }
    sl.memory = std::make_unique<DeviceBuffer>(sl.pieces * sl.slot);
    ASSERT_NE(sl.memory->data(), nullptr);
    all.push_back(std::move(sl));
  }

  CUDA_OK(cudaMemcpyAsync(first, source.data(), source.size(), cudaMemcpyHostToDevice, s));
  std::vector<std::vector<unsigned char>> results;
  for (const Slots& sl : all) {
    CUDA_OK(cudaMemsetAsync(sl.memory->data(), 0xEE, sl.image.size(), s));
    for (int64_t i = 0; i < sl.pieces; ++i) {
      int64_t n = 0;
      CUDA_OK(vk::device_pack(dl, count, buf, i * sl.fragment, sl.fragment, sl.memory->data() + sl.at(i, packed_shift),
                              s, &n))
          << what;
      ASSERT_EQ(n, std::min(sl.fragment, total - i * sl.fragment)) << what;
    }
    results.emplace_back(sl.image.size());
    CUDA_OK(cudaMemcpyAsync(results.back().data(), sl.memory->data(), sl.image.size(), cudaMemcpyDeviceToHost, s));
  }
  CUDA_OK(cudaStreamSynchronize(s));
  for (size_t i = 0; i < all.size(); ++i)
    EXPECT_EQ(results[i], all[i].image) << what << " in fragments of " << all[i].fragment << "; "
                                        << dl.plan().describe();

  // Unpack into zeroed memory, from the same guarded slots, the fragments
  // forwards and then backwards (so that a read outside a window shows): the
  // same bytes as the host unpacker writes.
  std::vector<unsigned char> back(static_cast<size_t>(span.bytes()));
  for (const Slots& sl : all) {
    CUDA_OK(cudaMemcpyAsync(sl.memory->data(), sl.image.data(), sl.image.size(), cudaMemcpyHostToDevice, s));
    for (bool backwards : {false, true}) {
      CUDA_OK(cudaMemsetAsync(first, 0, static_cast<size_t>(span.bytes()), s));
      for (int64_t k = 0; k < sl.pieces; ++k) {
        const int64_t i = backwards ? sl.pieces - 1 - k : k;
        CUDA_OK(vk::device_unpack(dl, count, const_cast<void*>(buf), i * sl.fragment, sl.fragment,
                                  sl.memory->data() + sl.at(i, packed_shift), s))
            << what;
      }
      CUDA_OK(cudaMemcpyAsync(back.data(), first, back.size(), cudaMemcpyDeviceToHost, s));
      CUDA_OK(cudaStreamSynchronize(s));
      EXPECT_EQ(back, reference) << what << " unpacked in fragments of " << sl.fragment
                                 << (backwards ? " backwards" : "");
    }
  }
}

TEST(DevicePack, RandomLayoutsMatchHostPacker) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(99);
  int checked = 0;
  for (int iter = 0; iter < 800; ++iter) {
    veneer::test::Node raw = veneer::test::random_node(rng, 0, rng() % 4 == 0 ? 16 : 0);
    const Layout probe = make_layout(raw);
    if (probe.size == 0 || probe.size > (32 << 10)) continue;
    const int64_t extent = std::uniform_int_distribution<int64_t>(1, 2 * probe.true_extent)(rng);
    const Layout l = make_layout(raw, rng() % 2 ? (extent + 15) / 16 * 16 : extent);
    const int64_t count = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    const int64_t shifts[] = {0, 0, 1, 4, 8};
    const int64_t user_shift = shifts[rng() % 5], packed_shift = shifts[rng() % 5];
    const std::string what = "iteration " + std::to_string(iter) + ": " + l.describe() + " count " +
                             std::to_string(count) + " shifts " + std::to_string(user_shift) + "/" +
                             std::to_string(packed_shift);
    check_on_device(l, count, user_shift, packed_shift, false, {l.size * count, 7, 64, 1000}, what);
    if (HasFailure()) FAIL() << what;
    ++checked;
  }
  EXPECT_GT(checked, 600);
}

TEST(DevicePack, DdtbenchShapesMatchHostPacker) {
  SKIP_WITHOUT_GPU();
  for (const veneer::test::Shape& shape : veneer::test::ddtbench_shapes()) {
    for (int64_t shift : {0, 4}) {
      const std::string what = shape.name + " shift " + std::to_string(shift) + ": " + shape.layout.describe();
      check_on_device(shape.layout, shape.count, shift, shift, shape.absolute,
                      {shape.layout.size * shape.count, 1, 5, 16, 100, 4096}, what);
    }
  }
}

// Larger objects, as the benchmark packs them: 2-D and 3-D at every block size.
TEST(DevicePack, BenchmarkShapesMatchHostPacker) {
  SKIP_WITHOUT_GPU();
  for (int64_t block : {1, 2, 4, 8, 12, 16, 24, 64, 512}) {
    const int64_t rows = std::max<int64_t>(1, (int64_t{256} << 10) / block);
    check_on_device(make_layout(leaf(0, {{rows, 2 * block}}, block)), 1, 0, 0, false, {rows * block, 65536, 1000},
                    "2-D block " + std::to_string(block));
    const int64_t side = 32;
    check_on_device(make_layout(leaf(block, {{side, side * 3 * block}, {side, 3 * block}}, block)), 2, 0, 0, false,
                    {2 * side * side * block, 4096}, "3-D block " + std::to_string(block));
  }
}

// Past 4 GiB the kernels index in 64 bits: every 8-byte word at a 16-byte
// stride, 4 GiB + 40 bytes packed from 8 GiB.
TEST(DevicePack, StreamsPast4GiB) {
  SKIP_WITHOUT_GPU();
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_OK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const int64_t words = (int64_t{1} << 29) + 5;
  const int64_t source_bytes = words * 16, packed_bytes = words * 8;
  if (static_cast<int64_t>(free_bytes) < source_bytes + packed_bytes + (int64_t{1} << 30))
    GTEST_SKIP() << "needs " << (source_bytes + packed_bytes) / (1 << 20) << " MiB of free device memory";
  DeviceBuffer source(source_bytes), packed(packed_bytes);
  ASSERT_NE(source.data(), nullptr);
  ASSERT_NE(packed.data(), nullptr);
  // Source word i holds i: filled a chunk at a time from the host.
  const int64_t chunk_words = int64_t{1} << 23;
  std::vector<uint64_t> chunk(static_cast<size_t>(chunk_words));
  for (int64_t at = 0; at < 2 * words; at += chunk_words) {
    const int64_t n = std::min(chunk_words, 2 * words - at);
    for (int64_t i = 0; i < n; ++i) chunk[static_cast<size_t>(i)] = static_cast<uint64_t>(at + i);
    CUDA_OK(cudaMemcpy(source.data() + at * 8, chunk.data(), static_cast<size_t>(n * 8), cudaMemcpyHostToDevice));
  }
  const vk::DeviceLayout dl(make_layout(leaf(0, {{words, 16}}, 8)));
  ASSERT_TRUE(dl.ok());
  EXPECT_TRUE(dl.launch(1, source.data(), packed.data(), 0, packed_bytes).wide_index);
  int64_t n = 0;
  CUDA_OK(vk::device_pack(dl, 1, source.data(), 0, packed_bytes, packed.data(), nullptr, &n));
  EXPECT_EQ(n, packed_bytes);
  // A window that straddles the 4 GiB boundary of the stream, from an odd byte.
  const int64_t skip = (int64_t{1} << 32) - 1001;
  DeviceBuffer window(3000);
  CUDA_OK(vk::device_pack(dl, 1, source.data(), skip, 2001, window.data(), nullptr, &n));
  EXPECT_EQ(n, 2001);
  CUDA_OK(cudaDeviceSynchronize());
  // Packed word j is source word 2j.
  for (int64_t at = 0; at < words; at += chunk_words) {
    const int64_t m = std::min(chunk_words, words - at);
    CUDA_OK(cudaMemcpy(chunk.data(), packed.data() + at * 8, static_cast<size_t>(m * 8), cudaMemcpyDeviceToHost));
    for (int64_t j = 0; j < m; ++j)
      ASSERT_EQ(chunk[static_cast<size_t>(j)], static_cast<uint64_t>(2 * (at + j))) << "packed word " << at + j;
  }
  std::vector<unsigned char> got(2001), expect(2001);
  CUDA_OK(cudaMemcpy(got.data(), window.data(), got.size(), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < 2001; ++i) {
    const int64_t byte = skip + i;
    const uint64_t word = static_cast<uint64_t>(2 * (byte / 8));
    expect[static_cast<size_t>(i)] = static_cast<unsigned char>(word >> (8 * (byte % 8)));
  }
  EXPECT_EQ(got, expect);
}

TEST(MemoryKind, TellsEveryKindOfCudaMemory) {
  SKIP_WITHOUT_GPU();
  int current = -1;
  CUDA_OK(cudaGetDevice(&current));
  DeviceBuffer device(4096);
  ASSERT_NE(device.data(), nullptr);
  int ordinal = -2;
  EXPECT_EQ(vk::memory_kind(device.data(), &ordinal), vk::MemoryKind::device);
  EXPECT_EQ(ordinal, current);
  EXPECT_EQ(vk::memory_kind(device.data() + 1000), vk::MemoryKind::device);  // inside an allocation

  void* managed = nullptr;
  CUDA_OK(cudaMallocManaged(&managed, 4096));
  EXPECT_EQ(vk::memory_kind(managed, &ordinal), vk::MemoryKind::managed);
  cudaFree(managed);

  void* pinned = nullptr;
  CUDA_OK(cudaMallocHost(&pinned, 4096));
  EXPECT_EQ(vk::memory_kind(pinned, &ordinal), vk::MemoryKind::host);
  EXPECT_EQ(ordinal, -1);
  cudaFreeHost(pinned);

  std::vector<char> heap(100);
  EXPECT_EQ(vk::memory_kind(heap.data()), vk::MemoryKind::host);
  int on_stack = 0;
  EXPECT_EQ(vk::memory_kind(&on_stack), vk::MemoryKind::host);
  EXPECT_TRUE(vk::cuda_driver_loaded());
}

}  // namespace
