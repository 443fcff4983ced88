// SPDX-License-Identifier: BSD-3-Clause
// DeviceRuntime::reduce() on the emulator (kernels/device_reduce.h's functor,
// run as a queued step on device memory) against a loop written here, for
// every predefined op on every element type it takes; and what it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/device_reduce.h"
#include "test/device/emulator.h"

namespace vk = veneer::kernels;
using veneer::test::EmulatedRuntime;
using vk::ReduceOp;
using vk::ReduceType;

namespace {

constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,  ReduceOp::max, ReduceOp::land,
                             ReduceOp::lor, ReduceOp::lxor, ReduceOp::band, ReduceOp::bor, ReduceOp::bxor};

// in op inout, the MPI way, without the library's functor.
template <class T>
T expected(ReduceOp op, T in, T inout) {
  if constexpr (std::is_integral_v<T>) {
    // Two's complement wrap: the low bits of the 64-bit result.
    const auto a = static_cast<uint64_t>(in), b = static_cast<uint64_t>(inout);
    switch (op) {
      case ReduceOp::sum: return static_cast<T>(a + b);
      case ReduceOp::prod: return static_cast<T>(a * b);
      case ReduceOp::min: return std::min(in, inout);
      case ReduceOp::max: return std::max(in, inout);
      case ReduceOp::land: return (in && inout) ? 1 : 0;
      case ReduceOp::lor: return (in || inout) ? 1 : 0;
      case ReduceOp::lxor: return (!in != !inout) ? 1 : 0;
      case ReduceOp::band: return static_cast<T>(a & b);
      case ReduceOp::bor: return static_cast<T>(a | b);
      case ReduceOp::bxor: return static_cast<T>(a ^ b);
    }
  } else {
    switch (op) {
      case ReduceOp::sum: return in + inout;
      case ReduceOp::prod: return in * inout;
      case ReduceOp::min: return std::min(in, inout);
      case ReduceOp::max: return std::max(in, inout);
      default: break;
    }
  }
  ADD_FAILURE() << "no reference for this op";
  return T{};
}

template <class T>
std::vector<T> random_values(std::mt19937_64& rng, size_t n) {
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_integral_v<T>) {
      // Zeros (for the logical ops), small values and the full range (wrapping).
      const uint64_t r = rng();
      x = (r % 4 == 0) ? T{0} : (r % 4 == 1) ? static_cast<T>(r % 7) : static_cast<T>(r >> 3);
    } else {
      x = static_cast<T>(std::uniform_real_distribution<double>(-3.0, 3.0)(rng));
    }
  }
  return v;
}

template <class T>
void check_type(ReduceType type) {
  EmulatedRuntime rt;
  vk::DeviceStream s = rt.stream(0);
  std::mt19937_64 rng(static_cast<uint64_t>(type) * 7919 + 1);
  for (ReduceOp op : kOps) {
    const bool supported = vk::reduce_supported(op, type);
    EXPECT_EQ(supported, std::is_integral_v<T> || op <= ReduceOp::max);
    for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, size_t{65537}}) {
      SCOPED_TRACE(testing::Message() << "op " << static_cast<int>(op) << " type " << static_cast<int>(type) << " n "
                                      << n);
      const std::vector<T> in = random_values<T>(rng, n), inout = random_values<T>(rng, n);
      const size_t bytes = n * sizeof(T);
      void* d_in = rt.device_alloc(bytes);
      void* d_inout = rt.device_alloc(bytes);
      ASSERT_TRUE(rt.upload(d_in, in.data(), bytes));
      ASSERT_TRUE(rt.upload(d_inout, inout.data(), bytes));
      const bool queued = rt.reduce(op, type, d_inout, d_in, static_cast<int64_t>(n), s);
      EXPECT_EQ(queued, supported);
      EXPECT_TRUE(rt.synchronize(s));
      std::vector<T> got(n), in_after(n);
      ASSERT_TRUE(rt.download(got.data(), d_inout, bytes));
      ASSERT_TRUE(rt.download(in_after.data(), d_in, bytes));
      EXPECT_EQ(std::memcmp(in_after.data(), in.data(), bytes), 0) << "in was written";
      if (supported) {
        std::vector<T> want(n);
        for (size_t i = 0; i < n; ++i) want[i] = expected(op, in[i], inout[i]);
        // The same bits, not just equal values.
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0)
              << "element " << i << ": " << +got[i] << " instead of " << +want[i];
      } else {
        EXPECT_EQ(std::memcmp(got.data(), inout.data(), bytes), 0) << "a refused reduction wrote";
      }
      rt.device_free(d_in);
      rt.device_free(d_inout);
    }
  }
}

}  // namespace

TEST(EmulatorReduce, EveryOpOnEveryTypeAgainstAHostLoop) {
  check_type<int8_t>(ReduceType::i8);
  check_type<int16_t>(ReduceType::i16);
  check_type<int32_t>(ReduceType::i32);
  check_type<int64_t>(ReduceType::i64);
  check_type<uint8_t>(ReduceType::u8);
  check_type<uint16_t>(ReduceType::u16);
  check_type<uint32_t>(ReduceType::u32);
  check_type<uint64_t>(ReduceType::u64);
  check_type<float>(ReduceType::f32);
  check_type<double>(ReduceType::f64);
}

TEST(EmulatorReduce, IntegersWrap) {
  EmulatedRuntime rt;
  vk::DeviceStream s = rt.stream(0);
  const int32_t in[2] = {INT32_MAX, INT32_MIN}, inout[2] = {1, -1};
  auto* d = static_cast<int32_t*>(rt.device_alloc(16));
  ASSERT_TRUE(rt.upload(d, inout, 8));
  ASSERT_TRUE(rt.upload(d + 2, in, 8));
  ASSERT_TRUE(rt.reduce(ReduceOp::sum, ReduceType::i32, d, d + 2, 2, s));
  ASSERT_TRUE(rt.synchronize(s));
  int32_t got[2] = {};
  ASSERT_TRUE(rt.download(got, d, 8));
  EXPECT_EQ(got[0], INT32_MIN);
  EXPECT_EQ(got[1], INT32_MAX);
  rt.device_free(d);
}

TEST(EmulatorReduce, ReachesWhatAKernelReachesOnly) {
  EmulatedRuntime rt;
  vk::DeviceStream s = rt.stream(0);
  auto* dev = static_cast<double*>(rt.device_alloc(8 * sizeof(double)));
  auto* pinned = static_cast<double*>(rt.alloc_host(8 * sizeof(double)));
  for (int i = 0; i < 8; ++i) pinned[i] = i;
  std::vector<double> zeros(8, 1.5);
  ASSERT_TRUE(rt.upload(dev, zeros.data(), 8 * sizeof(double)));
  // Mapped pinned memory: yes.
  ASSERT_TRUE(rt.reduce(ReduceOp::sum, ReduceType::f64, dev, pinned, 8, s));
  EXPECT_TRUE(rt.synchronize(s));
  std::vector<double> got(8);
  ASSERT_TRUE(rt.download(got.data(), dev, 8 * sizeof(double)));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], i + 1.5);
  // Pageable host memory: the step fails, as a kernel would fault.
  std::vector<double> pageable(8, 1.0);
  ASSERT_TRUE(rt.reduce(ReduceOp::sum, ReduceType::f64, dev, pageable.data(), 8, s));
  EXPECT_FALSE(rt.synchronize(s));
  // Past the allocation's end: fails.
  ASSERT_TRUE(rt.reduce(ReduceOp::sum, ReduceType::f64, dev + 1, pinned, 8, s));
  EXPECT_FALSE(rt.synchronize(s));
  // Refused at once, nothing queued: misaligned, bitwise on floats, negative counts.
  EXPECT_FALSE(rt.reduce(ReduceOp::sum, ReduceType::f64, reinterpret_cast<char*>(dev) + 4, pinned, 1, s));
  EXPECT_FALSE(rt.reduce(ReduceOp::band, ReduceType::f64, dev, pinned, 8, s));
  EXPECT_FALSE(rt.reduce(ReduceOp::sum, ReduceType::f64, dev, pinned, -1, s));
  // Zero elements: nothing to touch.
  ASSERT_TRUE(rt.reduce(ReduceOp::sum, ReduceType::f64, dev, pageable.data(), 0, s));
  EXPECT_TRUE(rt.synchronize(s));
  ASSERT_TRUE(rt.download(got.data(), dev, 8 * sizeof(double)));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], i + 1.5) << "a failed step wrote";
  const veneer::test::EmulatorCounters c = rt.counters();
  EXPECT_EQ(c.reductions, 2);
  EXPECT_EQ(c.elements_reduced, 8);
  EXPECT_EQ(c.failed_steps, 2);
  rt.free_host(pinned);
  rt.device_free(dev);
}
