// SPDX-License-Identifier: BSD-3-Clause
// Every VENEER_ switch on every path (interposer/switchboard.h): CMake runs
// this binary on 2 ranks once with all switches on and once per switch
// (VENEER_DISABLE=1, VENEER_DATATYPES=0, VENEER_PACK=0, VENEER_P2P=0,
// VENEER_ALLTOALLV=0, VENEER_COLLECTIVES=0, VENEER_DEVICE=0). Each test makes
// one call on one path, asserts through Veneer's counters (support/counters.h,
// on with VENEER_REPORT=1) whether Veneer took it or passed it to the library,
// and compares the data with what the library (PMPI_*) gives for host copies.
//
// Device buffers live on the emulated GPU (test/device/emulator.h). Its device
// memory is readable by the host here, so a buffer Veneer passes through does
// not fault in the library; Veneer is told the library is not CUDA-aware
// (VENEER_CUDA_AWARE=0), so what it takes it carries through pinned memory.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "kernels/device_runtime.h"
#include "support/counters.h"
#include "test/device/emulator.h"

namespace {

using veneer::Counter;
using veneer::counters;

// Read from the variables Veneer reads at MPI_Init (support/config.cpp's spelling of on/off: 1/0).
bool env_is(const char* name, std::string_view value) {
  const char* v = std::getenv(name);
  return v && std::string_view(v) == value;
}
bool off(const char* name) { return env_is(name, "0"); }

struct Switches {
  bool disabled = env_is("VENEER_DISABLE", "1");
  bool datatypes = !off("VENEER_DATATYPES");
  bool pack = !off("VENEER_PACK");
  bool p2p = !off("VENEER_P2P");
  bool alltoallv = !off("VENEER_ALLTOALLV");
  bool collectives = !off("VENEER_COLLECTIVES");
  bool device = !off("VENEER_DEVICE");
};
const Switches& on() {
  static const Switches s;
  return s;
}

// The rules the switchboard must follow (README's VENEER_ table): whether
// Veneer takes the call on each path.
bool host_pack() { return !on().disabled && on().datatypes && on().pack; }
bool host_send() { return !on().disabled && on().p2p && on().datatypes; }
bool host_alltoallv() { return !on().disabled && on().alltoallv && on().datatypes; }
bool collective() { return !on().disabled && on().collectives; }
bool device_pack() { return host_pack() && on().device; }
// Device data of a type that is (not) contiguous: with VENEER_DATATYPES=0 only contiguous data is carried.
bool device_send(bool contiguous) {
  return !on().disabled && on().p2p && on().device && (contiguous || on().datatypes);
}
bool device_alltoallv(bool contiguous) {
  return !on().disabled && on().alltoallv && on().device && (contiguous || on().datatypes);
}

// Before MPI_Init reads them: counters on, report thrown away, a library
// that is not CUDA-aware, Allreduce forced to one of Veneer's algorithms.
const bool g_environment = [] {
  setenv("VENEER_REPORT", "1", 1);
  setenv("VENEER_REPORT_FILE", "/dev/null", 1);
  setenv("VENEER_CUDA_AWARE", "0", 1);
  setenv("VENEER_ALLREDUCE", "ring", 1);
  setenv("VENEER_PROFILE", "off", 1);
  return true;
}();

veneer::test::EmulatedRuntime& emu() {
  // Never destroyed: MPI_Finalize hands Veneer's pooled buffers back to it.
  static veneer::test::EmulatedRuntime* e = [] {
    veneer::test::EmulatorOptions o;
    o.host_accessible = true;  // the library may read what Veneer passes through
    auto* r = new veneer::test::EmulatedRuntime(o);
    veneer::kernels::install_device_runtime(r);
    return r;
  }();
  return *e;
}
[[maybe_unused]] const bool g_installed = (emu(), true);

int rank() {
  int r = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size() {
  int s = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::vector<double> pattern(size_t n, int salt) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = rank() * 1000.0 + salt * 100000.0 + static_cast<double>(i) * 0.5;
  return v;
}

// Whether the call between construction and check() was taken or passed,
// on this rank: the `taken` counter moved by `calls` and `passed` not, or
// the other way round.
class Decision {
 public:
  Decision(Counter taken, Counter passed) : taken_(taken), passed_(passed) {
    t0_ = counters().get(taken);
    p0_ = counters().get(passed);
  }
  void check(bool expect_taken, uint64_t calls = 1) const {
    const uint64_t t = counters().get(taken_) - t0_, p = counters().get(passed_) - p0_;
    EXPECT_EQ(t, expect_taken ? calls : 0) << veneer::counter_name(taken_);
    EXPECT_EQ(p, expect_taken ? 0 : calls) << veneer::counter_name(passed_);
  }

 private:
  Counter taken_, passed_;
  uint64_t t0_ = 0, p0_ = 0;
};

// A committed type, freed at the end of the scope; made, committed and freed
// through Veneer, which learns types at MPI_Type_commit.
struct Type {
  MPI_Datatype t = MPI_DATATYPE_NULL;
  explicit Type(MPI_Datatype made) : t(made) { MPI_Type_commit(&t); }
  ~Type() { MPI_Type_free(&t); }
  Type(const Type&) = delete;
  Type& operator=(const Type&) = delete;
};
// 64 doubles, every other one: 8-byte blocks, taken on every path when the switches allow.
constexpr int n_blocks = 64;
constexpr size_t span_doubles = 2 * n_blocks;
MPI_Datatype strided() {
  MPI_Datatype v = MPI_DATATYPE_NULL;
  MPI_Type_vector(n_blocks, 1, 2, MPI_DOUBLE, &v);
  return v;
}

// A device copy of a host vector, downloaded again by host().
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<double>& init) : n_(init.size()) {
    p_ = emu().device_alloc(bytes());
    EXPECT_TRUE(emu().upload(p_, init.data(), bytes()));
  }
  ~DeviceBuffer() { emu().device_free(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  std::vector<double> host() const {
    std::vector<double> v(n_);
    EXPECT_TRUE(emu().download(v.data(), p_, bytes()));
    return v;
  }

 private:
  size_t bytes() const { return n_ * sizeof(double); }
  size_t n_;
  void* p_ = nullptr;
};

class Switch : public testing::Test {
 protected:
  void SetUp() override {
    if (size() != 2) GTEST_SKIP() << "registered on 2 ranks";
    peer_ = 1 - rank();
  }
  int peer_ = 0;
};

// ---- host paths ---------------------------------------------------------------

TEST_F(Switch, HostPackAndUnpack) {
  Type type(strided());
  const std::vector<double> in = pattern(span_doubles, 1);
  std::vector<char> packed(n_blocks * sizeof(double)), ref(packed.size());
  int pos = 0, ref_pos = 0;
  {
    Decision d(Counter::pack_taken, Counter::pack_passed);
    ASSERT_EQ(MPI_Pack(in.data(), 1, type.t, packed.data(), static_cast<int>(packed.size()), &pos, MPI_COMM_WORLD),
              MPI_SUCCESS);
    d.check(host_pack());
  }
  PMPI_Pack(in.data(), 1, type.t, ref.data(), static_cast<int>(ref.size()), &ref_pos, MPI_COMM_WORLD);
  EXPECT_EQ(pos, ref_pos);
  EXPECT_EQ(packed, ref);
  std::vector<double> out(span_doubles, -1.0), out_ref(span_doubles, -1.0);
  pos = ref_pos = 0;
  {
    Decision d(Counter::unpack_taken, Counter::unpack_passed);
    ASSERT_EQ(MPI_Unpack(packed.data(), static_cast<int>(packed.size()), &pos, out.data(), 1, type.t, MPI_COMM_WORLD),
              MPI_SUCCESS);
    d.check(host_pack());
  }
  PMPI_Unpack(ref.data(), static_cast<int>(ref.size()), &ref_pos, out_ref.data(), 1, type.t, MPI_COMM_WORLD);
  EXPECT_EQ(pos, ref_pos);
  EXPECT_EQ(out, out_ref);
}

// Send then Recv (rank 0 sends first), and Sendrecv.
TEST_F(Switch, HostSendsAndReceives) {
  Type type(strided());
  const std::vector<double> in = pattern(span_doubles, 2);
  std::vector<double> out(span_doubles, -1.0), ref(span_doubles, -1.0);
  {
    Decision ds(Counter::send_taken, Counter::send_passed), dr(Counter::recv_taken, Counter::recv_passed);
    for (int turn = 0; turn < 2; ++turn) {
      if (rank() == turn) {
        ASSERT_EQ(MPI_Send(in.data(), 1, type.t, peer_, 7, MPI_COMM_WORLD), MPI_SUCCESS);
      } else {
        ASSERT_EQ(MPI_Recv(out.data(), 1, type.t, peer_, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
      }
    }
    ds.check(host_send());
    dr.check(host_send());
  }
  PMPI_Sendrecv(in.data(), 1, type.t, peer_, 8, ref.data(), 1, type.t, peer_, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  EXPECT_EQ(out, ref);
  std::fill(out.begin(), out.end(), -1.0);
  {
    Decision ds(Counter::send_taken, Counter::send_passed), dr(Counter::recv_taken, Counter::recv_passed);
    ASSERT_EQ(MPI_Sendrecv(in.data(), 1, type.t, peer_, 9, out.data(), 1, type.t, peer_, 9, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE),
              MPI_SUCCESS);
    ds.check(host_send());
    dr.check(host_send());
  }
  EXPECT_EQ(out, ref);
}

TEST_F(Switch, HostAlltoallvAndAlltoallw) {
  Type type(strided());
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(type.t, &lb, &extent);
  const size_t per_peer = static_cast<size_t>(extent) / sizeof(double);
  const std::vector<double> in = pattern(2 * per_peer, 3);
  std::vector<double> out(2 * per_peer, -1.0), ref(2 * per_peer, -1.0);
  const int counts[2] = {1, 1}, displs[2] = {0, 1};
  {
    Decision d(Counter::alltoall_taken, Counter::alltoall_passed);
    ASSERT_EQ(MPI_Alltoallv(in.data(), counts, displs, type.t, out.data(), counts, displs, type.t, MPI_COMM_WORLD),
              MPI_SUCCESS);
    d.check(host_alltoallv());
  }
  PMPI_Alltoallv(in.data(), counts, displs, type.t, ref.data(), counts, displs, type.t, MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);
  std::fill(out.begin(), out.end(), -1.0);
  const int bdispls[2] = {0, static_cast<int>(extent)};
  const MPI_Datatype types[2] = {type.t, type.t};
  {
    Decision d(Counter::alltoall_taken, Counter::alltoall_passed);
    ASSERT_EQ(MPI_Alltoallw(in.data(), counts, bdispls, types, out.data(), counts, bdispls, types, MPI_COMM_WORLD),
              MPI_SUCCESS);
    d.check(host_alltoallv());
  }
  EXPECT_EQ(out, ref);
}

// VENEER_ALLREDUCE=ring (set above) forces one of Veneer's algorithms.
TEST_F(Switch, CollectiveWithForcedAlgorithm) {
  std::vector<int> in(256), out(256, -1), ref(256, -2);
  for (size_t i = 0; i < in.size(); ++i) in[i] = rank() * 7 + static_cast<int>(i);
  {
    Decision d(Counter::coll_taken, Counter::coll_passed);
    ASSERT_EQ(MPI_Allreduce(in.data(), out.data(), 256, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    d.check(collective());
  }
  PMPI_Allreduce(in.data(), ref.data(), 256, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);
}

// ---- device paths -------------------------------------------------------------

TEST_F(Switch, DevicePackAndUnpack) {
  Type type(strided());
  const std::vector<double> in = pattern(span_doubles, 4);
  DeviceBuffer dev_in(in);
  std::vector<char> packed(n_blocks * sizeof(double)), ref(packed.size());
  int pos = 0, ref_pos = 0;
  {
    Decision d(Counter::pack_taken, Counter::pack_passed);
    ASSERT_EQ(MPI_Pack(dev_in.get(), 1, type.t, packed.data(), static_cast<int>(packed.size()), &pos, MPI_COMM_WORLD),
              MPI_SUCCESS);
    d.check(device_pack());
  }
  PMPI_Pack(in.data(), 1, type.t, ref.data(), static_cast<int>(ref.size()), &ref_pos, MPI_COMM_WORLD);
  EXPECT_EQ(pos, ref_pos);
  EXPECT_EQ(packed, ref);
  std::vector<double> out_ref(span_doubles, -1.0);
  DeviceBuffer dev_out(out_ref);
  pos = ref_pos = 0;
  {
    Decision d(Counter::unpack_taken, Counter::unpack_passed);
    ASSERT_EQ(
        MPI_Unpack(packed.data(), static_cast<int>(packed.size()), &pos, dev_out.get(), 1, type.t, MPI_COMM_WORLD),
        MPI_SUCCESS);
    d.check(device_pack());
  }
  PMPI_Unpack(ref.data(), static_cast<int>(ref.size()), &ref_pos, out_ref.data(), 1, type.t, MPI_COMM_WORLD);
  EXPECT_EQ(pos, ref_pos);
  EXPECT_EQ(dev_out.host(), out_ref);
}

// Non-contiguous (the strided type) and contiguous (doubles) device data:
// Send/Recv and Sendrecv, against the library's Sendrecv of host copies.
TEST_F(Switch, DeviceSendsAndReceives) {
  Type type(strided());
  for (const bool contiguous : {false, true}) {
    SCOPED_TRACE(contiguous ? "contiguous" : "strided");
    const MPI_Datatype t = contiguous ? MPI_DOUBLE : type.t;
    const int count = contiguous ? static_cast<int>(span_doubles) : 1;
    const std::vector<double> in = pattern(span_doubles, 5);
    std::vector<double> ref(span_doubles, -1.0);
    PMPI_Sendrecv(in.data(), count, t, peer_, 8, ref.data(), count, t, peer_, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    DeviceBuffer src(in), dst(std::vector<double>(span_doubles, -1.0));
    {
      Decision ds(Counter::send_taken, Counter::send_passed), dr(Counter::recv_taken, Counter::recv_passed);
      for (int turn = 0; turn < 2; ++turn) {
        if (rank() == turn) {
          ASSERT_EQ(MPI_Send(src.get(), count, t, peer_, 7, MPI_COMM_WORLD), MPI_SUCCESS);
        } else {
          ASSERT_EQ(MPI_Recv(dst.get(), count, t, peer_, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
        }
      }
      ds.check(device_send(contiguous));
      dr.check(device_send(contiguous));
    }
    EXPECT_EQ(dst.host(), ref);
    DeviceBuffer dst2(std::vector<double>(span_doubles, -1.0));
    {
      Decision ds(Counter::send_taken, Counter::send_passed), dr(Counter::recv_taken, Counter::recv_passed);
      ASSERT_EQ(MPI_Sendrecv(src.get(), count, t, peer_, 9, dst2.get(), count, t, peer_, 9, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE),
                MPI_SUCCESS);
      ds.check(device_send(contiguous));
      dr.check(device_send(contiguous));
    }
    EXPECT_EQ(dst2.host(), ref);
  }
}

TEST_F(Switch, DeviceAlltoallv) {
  Type type(strided());
  for (const bool contiguous : {false, true}) {
    SCOPED_TRACE(contiguous ? "contiguous" : "strided");
    const MPI_Datatype t = contiguous ? MPI_DOUBLE : type.t;
    const int count = contiguous ? static_cast<int>(span_doubles) : 1;
    // One block per peer; displacements in units of the type's extent.
    const int counts[2] = {count, count}, displs[2] = {0, contiguous ? count : 1};
    const std::vector<double> in = pattern(2 * span_doubles, 6);
    std::vector<double> ref(2 * span_doubles, -1.0);
    PMPI_Alltoallv(in.data(), counts, displs, t, ref.data(), counts, displs, t, MPI_COMM_WORLD);
    DeviceBuffer src(in), dst(std::vector<double>(2 * span_doubles, -1.0));
    {
      Decision d(Counter::alltoall_taken, Counter::alltoall_passed);
      ASSERT_EQ(MPI_Alltoallv(src.get(), counts, displs, t, dst.get(), counts, displs, t, MPI_COMM_WORLD), MPI_SUCCESS);
      d.check(device_alltoallv(contiguous));
    }
    EXPECT_EQ(dst.host(), ref);
  }
}

}  // namespace
