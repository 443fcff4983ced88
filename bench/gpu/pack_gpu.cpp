// SPDX-License-Identifier: BSD-3-Clause
// GPU packing throughput: Veneer's device pack and unpack against, in the same
// run and on the same bytes, a device-to-device cudaMemcpy of the packed size
// (the practical bound: packing reads and writes each byte once, as a copy
// does) and, for 2-D objects, cudaMemcpy2D (what a CUDA programmer would call
// instead of a datatype). Objects are 2-D (vector: rows of one block at twice
// the block's stride) and 3-D (a face: blocks in a 2-D grid of rows and
// planes) with blocks of 1 to 512 bytes and 1 KiB to 4 MiB packed.
// No MPI: the layouts are built by hand, as the decoder would build them.
//
// A second table gives, for the same objects, what sending a device buffer
// through a library that is not CUDA-aware costs: pack_from_device() into
// pinned host memory, one-shot (the kernel writes mapped host memory) and
// staged (1 MiB chunks through device scratch), against a cudaMemcpy of the
// packed bytes from the device into the same pinned memory. Each call there
// is synchronous, as a send needs it, and timed on the host's clock.
//
//   veneer-bench-gpu-pack [--quick] [--csv FILE] [--d2h-csv FILE] [--min-ms N]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "datatypes/layout.h"
#include "datatypes/pack.h"
#include "kernels/device_pack.h"
#include "kernels/device_runtime.h"
#include "kernels/device_transfer.h"

namespace {

namespace vd = veneer::datatypes;
namespace vk = veneer::kernels;

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t bytes) {
    if (!check(cudaMalloc(&data_, static_cast<size_t>(bytes)), "cudaMalloc")) data_ = nullptr;
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

class Event {
 public:
  Event() { cudaEventCreate(&event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { cudaEventDestroy(event_); }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Pinned, mapped host memory from a DeviceRuntime.
class PinnedBuffer {
 public:
  PinnedBuffer(vk::DeviceRuntime& rt, int64_t bytes)
      : rt_(rt), data_(static_cast<unsigned char*>(rt.alloc_host(static_cast<size_t>(bytes)))) {}
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { rt_.free_host(data_); }
  unsigned char* data() const { return data_; }

 private:
  vk::DeviceRuntime& rt_;
  unsigned char* data_;
};

// One strided leaf: blocks of `block` bytes over `dims` (outermost first).
vd::Layout strided(std::vector<vd::Dim> dims, int64_t block) {
  vd::Layout l;
  l.root.block = block;
  l.root.dims = std::move(dims);
  l.root.unit = block;
  l.size = l.root.bytes();
  int64_t span = block;
  for (const vd::Dim& d : l.root.dims) span += (d.count - 1) * d.stride;
  l.true_extent = l.extent = span;
  vd::finish(l);
  return l;
}

struct Shape {
  std::string name;
  vd::Layout layout;
  int64_t block = 0;
  int64_t rows = 0;    // 2-D: rows of one block, for cudaMemcpy2D; 0 for 3-D
  int64_t stride = 0;  // 2-D: the row pitch
};

std::vector<Shape> shapes(bool quick) {
  std::vector<int64_t> blocks = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  std::vector<int64_t> sizes = {int64_t{1} << 10, int64_t{16} << 10, int64_t{256} << 10, int64_t{4} << 20};
  if (quick) {
    blocks = {1, 8, 64, 512};
    sizes = {int64_t{16} << 10, int64_t{1} << 20};
  }
  std::vector<Shape> out;
  for (int64_t size : sizes) {
    for (int64_t block : blocks) {
      const int64_t n = size / block;
      if (n < 1) continue;
      out.push_back({"2d", strided({{n, 2 * block}}, block), block, n, 2 * block});
      // 3-D: n = rows x columns blocks; rows a power of two near sqrt(n); a
      // gap between rows and a larger one between planes.
      int64_t rows = 1;
      while (rows * rows * 4 <= n) rows *= 2;
      const int64_t columns = n / rows;
      if (rows * columns != n || rows < 2) continue;
      const int64_t row_stride = 2 * block, plane_stride = (columns * row_stride) * 2;
      out.push_back({"3d", strided({{rows, plane_stride}, {columns, row_stride}}, block), block, 0, 0});
    }
  }
  return out;
}

// Seconds per call of `op`, measured with events over enough calls to take
// at least min_ms; the best of three such measurements.
template <class Op>
double seconds_per_call(Op op, cudaStream_t stream, double min_ms) {
  Event start, stop;
  for (int i = 0; i < 3; ++i) op();  // warm-up
  int64_t calls = 1;
  float ms = 0;
  for (;;) {
    cudaEventRecord(start.get(), stream);
    for (int64_t i = 0; i < calls; ++i) op();
    cudaEventRecord(stop.get(), stream);
    cudaEventSynchronize(stop.get());
    cudaEventElapsedTime(&ms, start.get(), stop.get());
    if (ms >= min_ms || calls >= (int64_t{1} << 22)) break;
    calls *= ms > 0 ? std::clamp<int64_t>(static_cast<int64_t>(min_ms / ms * 1.2) + 1, 2, 64) : 64;
  }
  double best = ms / 1e3 / static_cast<double>(calls);
  for (int r = 0; r < 2; ++r) {
    cudaEventRecord(start.get(), stream);
    for (int64_t i = 0; i < calls; ++i) op();
    cudaEventRecord(stop.get(), stream);
    cudaEventSynchronize(stop.get());
    cudaEventElapsedTime(&ms, start.get(), stop.get());
    best = std::min(best, ms / 1e3 / static_cast<double>(calls));
  }
  return best;
}

// Seconds per call of `op`, a call that returns once its work is done (true)
// or failed (false: the result is 0), on the host's clock; as above, enough
// calls to take min_ms, the best of three.
template <class Op>
double wall_seconds_per_call(Op op, double min_ms) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i)
    if (!op()) return 0;  // warm-up: pools, streams, first launches
  const auto run = [&](int64_t calls) {
    const auto start = clock::now();
    for (int64_t i = 0; i < calls; ++i)
      if (!op()) return -1.0;
    return std::chrono::duration<double, std::milli>(clock::now() - start).count();
  };
  int64_t calls = 1;
  double ms = 0;
  for (;;) {
    ms = run(calls);
    if (ms < 0) return 0;
    if (ms >= min_ms || calls >= (int64_t{1} << 22)) break;
    calls *= ms > 0 ? std::clamp<int64_t>(static_cast<int64_t>(min_ms / ms * 1.2) + 1, 2, 64) : 64;
  }
  double best = ms / 1e3 / static_cast<double>(calls);
  for (int r = 0; r < 2; ++r) {
    ms = run(calls);
    if (ms < 0) return 0;
    best = std::min(best, ms / 1e3 / static_cast<double>(calls));
  }
  return best;
}

// One row of the device-to-host table.
struct D2hRow {
  std::string shape;
  int64_t block, bytes;
  double oneshot_s, staged_s, memcpy_s;
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  double min_ms = 20;
  const char* csv_path = nullptr;
  const char* d2h_csv_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
      min_ms = 5;
    } else if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) {
      csv_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--d2h-csv") && i + 1 < argc) {
      d2h_csv_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--min-ms") && i + 1 < argc) {
      min_ms = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--csv FILE] [--d2h-csv FILE] [--min-ms N]\n", argv[0]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device: nothing to measure\n");
    return 77;  // "skipped", as ctest and automake read it
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("# device: %s, %d SMs; packed bytes per second; ratios side by side in one run\n", prop.name,
              prop.multiProcessorCount);
  std::FILE* csv = csv_path ? std::fopen(csv_path, "w") : nullptr;
  if (csv)
    std::fprintf(csv,
                 "shape,block,bytes,form,word,pack_gbs,unpack_gbs,memcpy_gbs,memcpy2d_gbs,pack_vs_memcpy,"
                 "pack_vs_memcpy2d\n");
  std::printf("%-4s %6s %9s %5s %11s %11s %11s %11s %10s %10s\n", "dim", "block", "bytes", "word", "pack GB/s",
              "unpack GB/s", "memcpy GB/s", "2D GB/s", "pack/copy", "pack/2D");

  cudaStream_t stream = nullptr;
  if (!check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;
  vk::DeviceRuntime* rt = vk::cuda_runtime();
  const vk::TransferOptions staged_options{int64_t{1} << 20};
  std::vector<D2hRow> d2h;
  int failures = 0;
  for (const Shape& s : shapes(quick)) {
    const vd::Layout& l = s.layout;
    const int64_t span = l.true_extent, bytes = l.size;
    DeviceBuffer source(span), packed(bytes), copied(bytes);
    if (!source.data() || !packed.data() || !copied.data()) return 1;
    std::vector<unsigned char> host(static_cast<size_t>(span));
    for (int64_t i = 0; i < span; ++i) host[static_cast<size_t>(i)] = static_cast<unsigned char>(i * 7 + i / 251);
    check(cudaMemcpy(source.data(), host.data(), host.size(), cudaMemcpyHostToDevice), "upload");
    const vk::DeviceLayout dl(l);
    if (!dl.ok()) {
      std::fprintf(stderr, "%s block %lld: %s\n", s.name.c_str(), static_cast<long long>(s.block),
                   cudaGetErrorString(dl.status()));
      return 1;
    }
    const vk::Launch launch = dl.launch(1, source.data(), packed.data(), 0, bytes);

    // Correct before fast: the device's bytes against the host packer's.
    std::vector<unsigned char> expect(static_cast<size_t>(bytes)), got(static_cast<size_t>(bytes));
    vd::pack_all(l, 1, host.data(), expect.data());
    check(vk::device_pack(dl, 1, source.data(), 0, bytes, packed.data(), stream), "device_pack");
    check(cudaStreamSynchronize(stream), "sync");
    check(cudaMemcpy(got.data(), packed.data(), got.size(), cudaMemcpyDeviceToHost), "download");
    if (got != expect) {
      std::fprintf(stderr, "WRONG BYTES: %s block %lld\n", s.name.c_str(), static_cast<long long>(s.block));
      ++failures;
      continue;
    }

    const double pack_s = seconds_per_call(
        [&] { vk::device_pack(dl, 1, source.data(), 0, bytes, packed.data(), stream); }, stream, min_ms);
    const double unpack_s = seconds_per_call(
        [&] { vk::device_unpack(dl, 1, source.data(), 0, bytes, packed.data(), stream); }, stream, min_ms);
    const double copy_s = seconds_per_call(
        [&] {
          cudaMemcpyAsync(copied.data(), packed.data(), static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream);
        },
        stream, min_ms);
    double copy2d_s = 0;
    if (s.rows) {
      copy2d_s = seconds_per_call(
          [&] {
            cudaMemcpy2DAsync(packed.data(), static_cast<size_t>(s.block), source.data(), static_cast<size_t>(s.stride),
                              static_cast<size_t>(s.block), static_cast<size_t>(s.rows), cudaMemcpyDeviceToDevice,
                              stream);
          },
          stream, min_ms);
    }
    const auto gbs = [&](double seconds) { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0; };
    const int word = launch.kind == vk::Launch::Kind::leaf ? launch.width : 0;
    std::printf("%-4s %6lld %9lld %5d %11.2f %11.2f %11.2f %11.2f %10.2f %10.2f\n", s.name.c_str(),
                static_cast<long long>(s.block), static_cast<long long>(bytes), word, gbs(pack_s), gbs(unpack_s),
                gbs(copy_s), copy2d_s > 0 ? gbs(copy2d_s) : NAN, copy_s / pack_s,
                copy2d_s > 0 ? copy2d_s / pack_s : NAN);
    if (csv)
      std::fprintf(csv, "%s,%lld,%lld,\"%s\",%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n", s.name.c_str(),
                   static_cast<long long>(s.block), static_cast<long long>(bytes), dl.plan().describe().c_str(), word,
                   gbs(pack_s), gbs(unpack_s), gbs(copy_s), copy2d_s > 0 ? gbs(copy2d_s) : 0.0, copy_s / pack_s,
                   copy2d_s > 0 ? copy2d_s / pack_s : 0.0);

    // Device to pinned host memory: Veneer's two ways against a plain copy of
    // the packed bytes (the floor for any way of doing it). Right bytes first.
    const std::unique_ptr<vk::DevicePacker> packer = rt->make_packer(l);
    const PinnedBuffer host_out(*rt, bytes);
    if (!packer || !host_out.data()) {
      std::fprintf(stderr, "%s block %lld: no packer or no pinned memory\n", s.name.c_str(),
                   static_cast<long long>(s.block));
      ++failures;
      continue;
    }
    const auto to_host = [&](vk::DeviceMethod method) {
      return vk::pack_from_device(*rt, *packer, l, 1, source.data(), 0, bytes, host_out.data(), method, staged_options);
    };
    bool right = true;
    for (vk::DeviceMethod method : {vk::DeviceMethod::oneshot, vk::DeviceMethod::staged}) {
      std::memset(host_out.data(), 0, static_cast<size_t>(bytes));
      if (!to_host(method) || std::memcmp(host_out.data(), expect.data(), static_cast<size_t>(bytes)) != 0) {
        std::fprintf(stderr, "WRONG BYTES to host (%s): %s block %lld\n", vk::to_string(method), s.name.c_str(),
                     static_cast<long long>(s.block));
        right = false;
      }
    }
    if (!right) {
      ++failures;
      continue;
    }
    const double oneshot_s = wall_seconds_per_call([&] { return to_host(vk::DeviceMethod::oneshot); }, min_ms);
    const double staged_s = wall_seconds_per_call([&] { return to_host(vk::DeviceMethod::staged); }, min_ms);
    const double memcpy_s = wall_seconds_per_call(
        [&] {
          return cudaMemcpyAsync(host_out.data(), packed.data(), static_cast<size_t>(bytes), cudaMemcpyDeviceToHost,
                                 stream) == cudaSuccess &&
                 cudaStreamSynchronize(stream) == cudaSuccess;
        },
        min_ms);
    if (oneshot_s <= 0 || staged_s <= 0 || memcpy_s <= 0) {
      std::fprintf(stderr, "%s block %lld: a transfer to the host failed while timed\n", s.name.c_str(),
                   static_cast<long long>(s.block));
      ++failures;
      continue;
    }
    d2h.push_back({s.name, s.block, bytes, oneshot_s, staged_s, memcpy_s});
  }
  std::printf(
      "# pack/copy: Veneer's pack time over a cudaMemcpy of the packed bytes (1 = at the bound);\n"
      "# pack/2D: cudaMemcpy2D's time over Veneer's (above 1: Veneer is faster)\n");
  if (csv) std::fclose(csv);

  std::printf(
      "\n# device to pinned host memory, each call synchronous: pack_from_device one-shot and staged (1 MiB chunks)\n"
      "# against cudaMemcpy of the packed bytes from the device (D2H); packed bytes per second\n");
  std::printf("%-4s %6s %9s %12s %12s %11s %12s %11s\n", "dim", "block", "bytes", "oneshot GB/s", "staged GB/s",
              "D2H GB/s", "oneshot/D2H", "staged/D2H");
  std::FILE* d2h_csv = d2h_csv_path ? std::fopen(d2h_csv_path, "w") : nullptr;
  if (d2h_csv)
    std::fprintf(d2h_csv,
                 "shape,block,bytes,oneshot_gbs,staged_gbs,memcpy_d2h_gbs,oneshot_vs_memcpy,staged_vs_memcpy\n");
  for (const D2hRow& r : d2h) {
    const auto gbs = [&](double seconds) { return static_cast<double>(r.bytes) / seconds / 1e9; };
    std::printf("%-4s %6lld %9lld %12.2f %12.2f %11.2f %12.2f %11.2f\n", r.shape.c_str(),
                static_cast<long long>(r.block), static_cast<long long>(r.bytes), gbs(r.oneshot_s), gbs(r.staged_s),
                gbs(r.memcpy_s), r.memcpy_s / r.oneshot_s, r.memcpy_s / r.staged_s);
    if (d2h_csv)
      std::fprintf(d2h_csv, "%s,%lld,%lld,%.4f,%.4f,%.4f,%.4f,%.4f\n", r.shape.c_str(), static_cast<long long>(r.block),
                   static_cast<long long>(r.bytes), gbs(r.oneshot_s), gbs(r.staged_s), gbs(r.memcpy_s),
                   r.memcpy_s / r.oneshot_s, r.memcpy_s / r.staged_s);
  }
  std::printf(
      "# oneshot/D2H, staged/D2H: the copy's time over Veneer's (1 = as fast as copying bytes already packed)\n");
  if (d2h_csv) std::fclose(d2h_csv);
  vk::release_pools();
  cudaStreamDestroy(stream);
  if (failures) std::fprintf(stderr, "%d shapes packed wrong bytes\n", failures);
  return failures ? 1 : 0;
}
