// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// What the MPI tests of Veneer's device-buffer paths (interposer/device.h)
// share: the device emulator (test/device/emulator.h) installed before
// MPI_Init, device buffers with host images, the set of test types, the
// library's own pack and unpack as references, and the test fixture.
//
// The emulator's device memory is memory the host cannot touch, so any byte
// Veneer or the library read from it without the runtime faults.
//
// Every test asserts on data. The reference is what the library does with
// host copies of the same buffers (PMPI_Pack / PMPI_Unpack / PMPI_* calls),
// compared byte for byte over the whole footprint of each receive buffer, so
// the gaps of receive types (which must stay untouched) are checked too.
//
// CMake runs the test binary (device_mpi_test, one source file per subject:
// see test/device/README.md) once per way of carrying device buffers:
// automatic, VENEER_DEVICE_METHOD=staged (4 KiB chunks), =oneshot,
// VENEER_CUDA_AWARE=1 (the emulator then lets the library read and write
// device memory, as a CUDA-aware one would) and VENEER_TEST_EMULATOR_REFUSE=1
// (the device packer refuses every layout: Veneer copies each buffer's span
// through host memory and packs it there), and both (a CUDA-aware library is
// handed refused layouts as they are).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "test/device/emulator.h"

namespace veneer::test {

enum class Mode { automatic, staged, oneshot, cuda_aware, refused, refused_cuda_aware };

bool is_mpich();
bool env_is(const char* name, std::string_view value);
// Read from the same variables Veneer reads at MPI_Init, so both agree.
Mode mode();
// The emulated GPU, installed as Veneer's device runtime during static
// initialisation (before MPI_Init and any traffic); never destroyed.
EmulatedRuntime& emu();

int rank_of(MPI_Comm c = MPI_COMM_WORLD);
int size_of(MPI_Comm c = MPI_COMM_WORLD);
int type_size(MPI_Datatype t);

// Bytes that differ from buffer to buffer and from rank to rank.
std::vector<char> pattern(size_t n, uint32_t seed);
inline uint32_t data_seed(int rank, int salt) { return static_cast<uint32_t>(rank * 1000 + salt + 1); }
inline uint32_t sentinel_seed(int rank, int salt) { return static_cast<uint32_t>(0x5e000 + rank * 1000 + salt); }

testing::AssertionResult same_bytes(const std::vector<char>& got, const std::vector<char>& want);

// Emulated device memory, freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes), p_(static_cast<char*>(emu().device_alloc(bytes))) {}
  ~DeviceBuffer() {
    if (p_) emu().device_free(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* get() const { return p_; }
  bool upload(const std::vector<char>& host) { return host.size() == bytes_ && emu().upload(p_, host.data(), bytes_); }
  std::vector<char> download() const {
    std::vector<char> out(bytes_);
    if (!emu().download(out.data(), p_, bytes_)) out.clear();
    return out;
  }

 private:
  size_t bytes_;
  char* p_;
};

// The bytes `count` instances of `type` may touch, relative to the buffer
// pointer: [lo, lo + span). lo is negative for a negative lower bound.
struct Footprint {
  int64_t lo = 0, span = 0;
};
Footprint footprint(MPI_Datatype type, int count);

// `count` instances of `type` held twice: a host image and a device copy of
// the same bytes. The user pointers are offset so that the lower bound lands
// on the first byte of each allocation.
class Typed {
 public:
  Typed(MPI_Datatype type, int count, uint32_t seed)
      : type_(type),
        count_(count),
        fp_(footprint(type, count)),
        image_(pattern(static_cast<size_t>(fp_.span), seed)),
        device_(static_cast<size_t>(fp_.span)) {
    device_.upload(image_);
  }
  MPI_Datatype type() const { return type_; }
  int count() const { return count_; }
  void* dev() const { return device_.get() - fp_.lo; }
  void* host() { return image_.data() - fp_.lo; }
  std::vector<char>& image() { return image_; }
  std::vector<char> download() const { return device_.download(); }
  // Makes the device copy equal the host image again.
  void sync() { device_.upload(image_); }

 private:
  MPI_Datatype type_;
  int count_;
  Footprint fp_;
  std::vector<char> image_;
  DeviceBuffer device_;
};

// The library's packed bytes of `count` instances at `buf`.
std::vector<char> library_pack(const void* buf, int count, MPI_Datatype type);
// What a receive of `packed` into `count` instances over `image` (a buffer of
// footprint(type, count)) must leave: the library's unpack of the same bytes.
std::vector<char> library_unpacked(std::vector<char> image, MPI_Datatype type, int count,
                                   const std::vector<char>& packed);

// A type of the test set, with the instance count the tests use for it.
struct TestType {
  std::string name;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int count = 1;
  bool owned = true;  // derived: freed with the set
};

// DDTBench-like and random-ish derived types, and contiguous ones.
class TypeSet {
 public:
  TypeSet();
  ~TypeSet();
  TypeSet(const TypeSet&) = delete;
  TypeSet& operator=(const TypeSet&) = delete;
  std::vector<TestType> types;

 private:
  void add(const char* name, MPI_Datatype t, int count);
};

// Every test checks that no step of the emulator failed (a kernel handed
// pageable memory, a copy out of bounds, a host access refused).
class Device : public testing::Test {
 protected:
  void SetUp() override { before_ = emu().counters(); }
  void TearDown() override { EXPECT_EQ(emu().counters().failed_steps, before_.failed_steps); }
  EmulatorCounters before_;
};

// Point to point in a ring: each rank sends to the right, receives from the left.
struct Ring {
  int me, p, right, left;
  Ring() : me(rank_of()), p(size_of()), right((me + 1) % p), left((me + p - 1) % p) {}
};

// The completion calls a nonblocking exchange may finish with.
enum class Completion { wait, waitall, testall_loop, waitany, test_loop, waitsome, testany_loop };
inline constexpr Completion kCompletions[] = {Completion::wait,        Completion::waitall,   Completion::testall_loop,
                                              Completion::waitany,     Completion::test_loop, Completion::waitsome,
                                              Completion::testany_loop};

// Completes reqs[0] (the receive) and reqs[1] (the send); the receive's status in *st.
void complete(Completion how, MPI_Request reqs[2], MPI_Status* st);

// Small integers, so every order of summation gives the same bits.
template <class T>
std::vector<T> values(size_t n, int seed) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>((seed * 37 + static_cast<int>(i) * 11) % 101 - 50);
  return v;
}

// A device array of T, with a host copy to compare against.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& init) : n_(init.size()), buf_(bytes()) { set(init); }
  T* dev() const { return reinterpret_cast<T*>(buf_.get()); }
  void set(const std::vector<T>& v) {
    std::vector<char> b(bytes());
    if (n_ > 0) std::memcpy(b.data(), v.data(), n_ * sizeof(T));
    buf_.upload(b);
  }
  std::vector<T> get() const {
    std::vector<char> b = buf_.download();
    std::vector<T> v(n_);
    if (n_ > 0) std::memcpy(v.data(), b.data(), std::min(b.size(), n_ * sizeof(T)));
    return v;
  }

 private:
  size_t bytes() const { return std::max<size_t>(n_ * sizeof(T), 1); }
  size_t n_;
  DeviceBuffer buf_;
};

}  // namespace veneer::test
