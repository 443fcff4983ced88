// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Element-wise reductions (the predefined MPI ops on the predefined C number
// types) as GPU threads do them, written once for both sides: the CUDA kernel
// (device_reduce.cu) applies Combine<Op> to one element per thread, and the
// emulator (test/device/emulator.cpp) and the tests run the same functor on
// the host. Plain C++; no MPI, no CUDA headers.
//
// The operand order is MPI_Reduce_local's: inout[i] = in[i] op inout[i].
// Integer sums and products wrap (computed unsigned, so no signed overflow);
// float sums and products are one IEEE operation each, so they give the
// bits a CPU gives (NaN payloads aside: a GPU returns the canonical NaN).
#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define VENEER_HOST_DEVICE __host__ __device__
#else
#define VENEER_HOST_DEVICE
#endif

namespace veneer::kernels {

enum class ReduceOp : uint8_t { sum, prod, min, max, land, lor, lxor, band, bor, bxor };
enum class ReduceType : uint8_t { i8, i16, i32, i64, u8, u16, u32, u64, f32, f64 };

constexpr size_t reduce_type_size(ReduceType t) {
  switch (t) {
    case ReduceType::i8:
    case ReduceType::u8: return 1;
    case ReduceType::i16:
    case ReduceType::u16: return 2;
    case ReduceType::i32:
    case ReduceType::u32:
    case ReduceType::f32: return 4;
    case ReduceType::i64:
    case ReduceType::u64:
    case ReduceType::f64: return 8;
  }
  return 0;
}
constexpr bool reduce_type_is_float(ReduceType t) { return t == ReduceType::f32 || t == ReduceType::f64; }
// As MPI allows: arithmetic ops on every type; logical and bitwise ops on integers only.
constexpr bool reduce_supported(ReduceOp op, ReduceType t) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::prod:
    case ReduceOp::min:
    case ReduceOp::max: return true;
    default: return !reduce_type_is_float(t);
  }
}

// in op inout, for one element.
template <ReduceOp Op>
struct Combine {
  template <class T>
  VENEER_HOST_DEVICE T operator()(T in, T inout) const {
    if constexpr (std::is_integral_v<T> && (Op == ReduceOp::sum || Op == ReduceOp::prod)) {
      // Unsigned arithmetic at least as wide as int: wraps, never overflows a signed int.
      using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
      // Through T's own unsigned type, so a signed char is not sign-extended
      // (the low bits of a sum or product are the same either way).
      using UT = std::make_unsigned_t<T>;
      const U a = static_cast<U>(static_cast<UT>(in)), b = static_cast<U>(static_cast<UT>(inout));
      return static_cast<T>(Op == ReduceOp::sum ? static_cast<U>(a + b) : static_cast<U>(a * b));
    } else if constexpr (Op == ReduceOp::sum) {
      return in + inout;
    } else if constexpr (Op == ReduceOp::prod) {
      return in * inout;
    } else if constexpr (Op == ReduceOp::min) {
      return in < inout ? in : inout;
    } else if constexpr (Op == ReduceOp::max) {
      return in > inout ? in : inout;
    } else if constexpr (Op == ReduceOp::land) {
      return static_cast<T>((in != 0) && (inout != 0));
    } else if constexpr (Op == ReduceOp::lor) {
      return static_cast<T>((in != 0) || (inout != 0));
    } else if constexpr (Op == ReduceOp::lxor) {
      return static_cast<T>((in != 0) != (inout != 0));
    } else if constexpr (Op == ReduceOp::band) {
      return static_cast<T>(in & inout);
    } else if constexpr (Op == ReduceOp::bor) {
      return static_cast<T>(in | inout);
    } else {
      return static_cast<T>(in ^ inout);
    }
  }
};

// Calls f.template operator()<T, Op>() for the C++ type of `type` and `op`;
// false (f not called) for a pair reduce_supported() refuses.
template <class F>
bool visit_reduction(ReduceOp op, ReduceType type, F&& f) {
  if (!reduce_supported(op, type)) return false;
  auto with_type = [&]<ReduceOp Op>() {
    switch (type) {
      case ReduceType::i8: return f.template operator()<int8_t, Op>();
      case ReduceType::i16: return f.template operator()<int16_t, Op>();
      case ReduceType::i32: return f.template operator()<int32_t, Op>();
      case ReduceType::i64: return f.template operator()<int64_t, Op>();
      case ReduceType::u8: return f.template operator()<uint8_t, Op>();
      case ReduceType::u16: return f.template operator()<uint16_t, Op>();
      case ReduceType::u32: return f.template operator()<uint32_t, Op>();
      case ReduceType::u64: return f.template operator()<uint64_t, Op>();
      case ReduceType::f32:
      case ReduceType::f64:  // arithmetic ops only (reduce_supported)
        if constexpr (Op <= ReduceOp::max)
          return type == ReduceType::f32 ? f.template operator()<float, Op>() : f.template operator()<double, Op>();
        else return false;
    }
    return false;
  };
  switch (op) {
    case ReduceOp::sum: return with_type.template operator()<ReduceOp::sum>();
    case ReduceOp::prod: return with_type.template operator()<ReduceOp::prod>();
    case ReduceOp::min: return with_type.template operator()<ReduceOp::min>();
    case ReduceOp::max: return with_type.template operator()<ReduceOp::max>();
    case ReduceOp::land: return with_type.template operator()<ReduceOp::land>();
    case ReduceOp::lor: return with_type.template operator()<ReduceOp::lor>();
    case ReduceOp::lxor: return with_type.template operator()<ReduceOp::lxor>();
    case ReduceOp::band: return with_type.template operator()<ReduceOp::band>();
    case ReduceOp::bor: return with_type.template operator()<ReduceOp::bor>();
    case ReduceOp::bxor: return with_type.template operator()<ReduceOp::bxor>();
  }
  return false;
}

// The reduction on the host, element by element in the functor above (the
// emulator's "kernel"). Both buffers hold `count` aligned elements; false for
// an unsupported pair.
inline bool reduce_elements(ReduceOp op, ReduceType type, void* inout, const void* in, int64_t count) {
  return visit_reduction(op, type, [&]<class T, ReduceOp Op>() {
    T* io = static_cast<T*>(inout);
    const T* src = static_cast<const T*>(in);
    const Combine<Op> combine;
    for (int64_t i = 0; i < count; ++i) io[i] = combine(src[i], io[i]);
    return true;
  });
}

}  // namespace veneer::kernels
