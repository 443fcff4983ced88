// SPDX-License-Identifier: BSD-3-Clause
// Reductions staged from device buffers, every predefined op on the C
// integer and floating types. With VENEER_DEVICE_REDUCE=device (the
// device_mpi_test.reduce_device runs) Veneer's algorithms combine on the
// emulated GPU; otherwise on the host, and the emulator must see no
// reduction at all. Checked against the library on host copies (integers:
// any order of combining gives the same bits; floats: small integers, so it
// does too) and, with random doubles, bit for bit against Veneer on host
// buffers: the same algorithm, the same operands in the same order.
// Part of device_mpi_test: the shared helpers and the fixture are in device_mpi.h.
#include <cmath>
#include <type_traits>
#include <vector>

#include "test/device/device_mpi.h"

namespace veneer::test {
namespace {

bool combines_on_device() { return env_is("VENEER_DEVICE_REDUCE", "device"); }

struct ReduceCase {
  MPI_Op op;
  const char* name;
  bool arithmetic;  // SUM, PROD, MIN, MAX: also on floats
};
const ReduceCase kReduceCases[] = {{MPI_SUM, "sum", true},    {MPI_PROD, "prod", true},  {MPI_MIN, "min", true},
                                   {MPI_MAX, "max", true},    {MPI_LAND, "land", false}, {MPI_LOR, "lor", false},
                                   {MPI_LXOR, "lxor", false}, {MPI_BAND, "band", false}, {MPI_BOR, "bor", false},
                                   {MPI_BXOR, "bxor", false}};

// Different on every rank and element; zeros for the logical ops; for
// products, factors of magnitude 1 or 2 (exact in floats at any order).
template <class T>
std::vector<T> reduce_values(size_t n, int rank, MPI_Op op) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    const int k = static_cast<int>((i * 11 + static_cast<size_t>(rank) * 37) % 101);
    if (op == MPI_PROD) {
      const int f = (k % 2 == 0 ? 1 : 2) * (std::is_signed_v<T> && k % 3 == 0 ? -1 : 1);
      v[i] = static_cast<T>(f);
    } else if (k % 5 == 0) {
      v[i] = T{0};
    } else {
      v[i] = static_cast<T>(std::is_signed_v<T> ? k - 50 : k * 3);
    }
  }
  return v;
}

template <class T>
testing::AssertionResult same_bits(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return testing::AssertionFailure() << "element " << i << ": " << +got[i] << " instead of " << +want[i];
  return testing::AssertionSuccess();
}

template <class T>
void check_reductions(MPI_Datatype type, const char* type_name) {
  const int me = rank_of(), p = size_of();
  const bool is_float = std::is_floating_point_v<T>;
  const int root = p - 1;
  for (const ReduceCase& c : kReduceCases) {
    if (is_float && !c.arithmetic) continue;  // MPI allows logical and bitwise ops on integers only
    for (int n : {1, 300}) {
      SCOPED_TRACE(testing::Message() << type_name << " " << c.name << " n=" << n);
      const auto in = reduce_values<T>(static_cast<size_t>(n), me, c.op);
      std::vector<T> want(in.size());
      PMPI_Allreduce(in.data(), want.data(), n, type, c.op, MPI_COMM_WORLD);
      DeviceArray<T> s(in), r(reduce_values<T>(in.size(), 99, MPI_SUM));
      ASSERT_EQ(MPI_Allreduce(s.dev(), r.dev(), n, type, c.op, MPI_COMM_WORLD), MPI_SUCCESS);
      EXPECT_TRUE(same_bits(r.get(), want));
      DeviceArray<T> io(in);
      ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, io.dev(), n, type, c.op, MPI_COMM_WORLD), MPI_SUCCESS);
      EXPECT_TRUE(same_bits(io.get(), want));
      // Reduce to the last rank (under 512 elements: see ReduceToEveryRoot).
      std::vector<T> want_root(in.size());
      PMPI_Reduce(in.data(), want_root.data(), n, type, c.op, root, MPI_COMM_WORLD);
      DeviceArray<T> rr(reduce_values<T>(in.size(), 98, MPI_SUM));
      ASSERT_EQ(MPI_Reduce(s.dev(), me == root ? rr.dev() : nullptr, n, type, c.op, root, MPI_COMM_WORLD), MPI_SUCCESS);
      if (me == root) EXPECT_TRUE(same_bits(rr.get(), want_root));
      EXPECT_TRUE(same_bits(s.get(), in));
    }
  }
}

TEST_F(Device, ReductionsOfEveryOpAndTypeAgainstTheLibrary) {
  const int64_t reductions_before = emu().counters().reductions;
  check_reductions<signed char>(MPI_SIGNED_CHAR, "signed char");
  check_reductions<unsigned char>(MPI_UNSIGNED_CHAR, "unsigned char");
  check_reductions<short>(MPI_SHORT, "short");
  check_reductions<unsigned short>(MPI_UNSIGNED_SHORT, "unsigned short");
  check_reductions<int>(MPI_INT, "int");
  check_reductions<unsigned>(MPI_UNSIGNED, "unsigned");
  check_reductions<long>(MPI_LONG, "long");
  check_reductions<unsigned long>(MPI_UNSIGNED_LONG, "unsigned long");
  check_reductions<long long>(MPI_LONG_LONG, "long long");
  check_reductions<unsigned long long>(MPI_UNSIGNED_LONG_LONG, "unsigned long long");
  check_reductions<int64_t>(MPI_INT64_T, "int64_t");
  check_reductions<uint32_t>(MPI_UINT32_T, "uint32_t");
  check_reductions<float>(MPI_FLOAT, "float");
  check_reductions<double>(MPI_DOUBLE, "double");
  const int64_t mine = emu().counters().reductions - reductions_before;
  // Over all ranks: a rank may never combine (the extra rank of recursive doubling on 3).
  int64_t device_reductions = 0;
  PMPI_Allreduce(&mine, &device_reductions, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (!combines_on_device()) {
    EXPECT_EQ(device_reductions, 0) << "combined on the device without VENEER_DEVICE_REDUCE=device";
  } else if (size_of() > 1) {
    // The runs that set it also force Veneer's algorithms (test/device/CMakeLists.txt).
    EXPECT_GT(device_reductions, 0) << "VENEER_DEVICE_REDUCE=device, yet nothing combined on the device";
  }
}

// Random doubles: only the same combine order gives the same bits.
std::vector<double> random_doubles(size_t n, int rank) {
  std::vector<double> v(n);
  uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1);
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = (static_cast<double>(x >> 11) / 9007199254740992.0 - 0.5) * std::ldexp(1.0, static_cast<int>(x % 40) - 20);
  }
  return v;
}

TEST_F(Device, DeviceAndHostBuffersReduceToTheSameBits) {
  const int me = rank_of(), p = size_of();
  for (int n : {3, 5000}) {
    SCOPED_TRACE(n);
    const auto in = random_doubles(static_cast<size_t>(n), me);
    // Veneer on host buffers: the host's combines.
    std::vector<double> host(in.size());
    ASSERT_EQ(MPI_Allreduce(in.data(), host.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    DeviceArray<double> s(in), r(random_doubles(in.size(), 50));
    ASSERT_EQ(MPI_Allreduce(s.dev(), r.dev(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    const std::vector<double> dev = r.get();
    EXPECT_TRUE(same_bits(dev, host));
    // Every rank holds the same bits.
    std::vector<double> first = dev;
    PMPI_Bcast(first.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    EXPECT_TRUE(same_bits(dev, first));
    // Reduce (to rank 0) and Reduce_scatter_block the same way.
    std::vector<double> host_root(in.size());
    ASSERT_EQ(MPI_Reduce(in.data(), host_root.data(), n, MPI_DOUBLE, MPI_PROD, 0, MPI_COMM_WORLD), MPI_SUCCESS);
    DeviceArray<double> rr(random_doubles(in.size(), 51));
    ASSERT_EQ(MPI_Reduce(s.dev(), me == 0 ? rr.dev() : nullptr, n, MPI_DOUBLE, MPI_PROD, 0, MPI_COMM_WORLD),
              MPI_SUCCESS);
    if (me == 0) EXPECT_TRUE(same_bits(rr.get(), host_root));
    const auto block_in = random_doubles(static_cast<size_t>(n) * p, me + 7);
    std::vector<double> host_block(static_cast<size_t>(n));
    ASSERT_EQ(MPI_Reduce_scatter_block(block_in.data(), host_block.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
              MPI_SUCCESS);
    DeviceArray<double> bs(block_in), br(random_doubles(static_cast<size_t>(n), 52));
    ASSERT_EQ(MPI_Reduce_scatter_block(bs.dev(), br.dev(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_TRUE(same_bits(br.get(), host_block));
  }
}

}  // namespace
}  // namespace veneer::test
