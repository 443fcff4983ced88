// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Division by a divisor fixed at launch time, the way GPUs want it.
//
// The pack kernels turn every thread's index into a block position with one
// division per dimension. A GPU has no integer divider: a 64-bit `/` is a
// library call of ~70 instructions, while a divisor known in advance needs one
// multiply-high, an add and a shift (Granlund and Montgomery, "Division by
// invariant integers using multiplication", 1994, the round-up method). The
// 32-bit form serves every launch whose stream fits in 2^32 bytes; larger ones
// use Divmod64, which divides plainly.
#include <bit>
#include <cstdint>

#if defined(__CUDACC__)
#define VENEER_HD __host__ __device__ __forceinline__
#else
#define VENEER_HD inline
#endif

namespace veneer::kernels {

class FastDivmod32 {
 public:
  FastDivmod32() = default;
  // d must be at least 1.
  explicit FastDivmod32(uint32_t d) : divisor_(d) {
    // shift = ceil(log2 d); multiplier = floor(2^32 (2^shift - d) / d) + 1,
    // which fits in 32 bits for every d >= 1.
    const uint32_t shift = static_cast<uint32_t>(std::bit_width(d - 1));
    shift_ = shift;
    multiplier_ = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }

  VENEER_HD uint32_t divisor() const { return divisor_; }

  // n / d for every n < 2^32; the sum takes 33 bits, hence the 64-bit add.
  VENEER_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(n, multiplier_);
#else
    const uint32_t high = static_cast<uint32_t>((static_cast<uint64_t>(n) * multiplier_) >> 32);
#endif
    return static_cast<uint32_t>((static_cast<uint64_t>(high) + n) >> shift_);
  }

  VENEER_HD void divmod(uint32_t n, uint32_t& quotient, uint32_t& remainder) const {
    quotient = div(n);
    remainder = n - quotient * divisor_;
  }

 private:
  uint32_t divisor_ = 1;
  uint32_t multiplier_ = 1;
  uint32_t shift_ = 0;
};

class Divmod64 {
 public:
  Divmod64() = default;
  explicit Divmod64(uint64_t d) : divisor_(d) {}
  VENEER_HD uint64_t divisor() const { return divisor_; }
  VENEER_HD uint64_t div(uint64_t n) const { return n / divisor_; }
  VENEER_HD void divmod(uint64_t n, uint64_t& quotient, uint64_t& remainder) const {
    quotient = n / divisor_;
    remainder = n - quotient * divisor_;
  }

 private:
  uint64_t divisor_ = 1;
};

// The divider that goes with an index type.
template <class Index>
struct DivmodFor;
template <>
struct DivmodFor<uint32_t> {
  using type = FastDivmod32;
};
template <>
struct DivmodFor<uint64_t> {
  using type = Divmod64;
};
template <class Index>
using Divmod = typename DivmodFor<Index>::type;

}  // namespace veneer::kernels
