// SPDX-License-Identifier: BSD-3-Clause
// The combine step of Veneer's reduction algorithms on the GPU, for
// collectives staged from device buffers (interposer/collectives.cpp).
//
// How it fits: a reduction collective on device buffers is staged (its
// buffers mirrored in pinned host memory) and runs the same algorithm as on
// host buffers, so that every rank runs the same one whatever its buffers.
// With VENEER_DEVICE_REDUCE=device the staged call installs
// combine_on_device() as the thread's algorithms::Combiner: each combine the
// algorithm makes (the same operands, in the same order) copies both operands
// to device memory, runs DeviceRuntime::reduce() there and copies the result
// back. The order, and so the bits, are those of the host path on every rank.
//
// Why `auto` means host: in this form every combine adds two copies in and
// one out over PCIe to one element-wise pass that the CPU does at memory
// speed, so it cannot pay; it is the kernel path, checked end to end, that a
// reduction keeping its accumulator in device memory would build on.
// Nothing here has been measured on a GPU.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <utility>

#include "interposer/device.h"
#include "kernels/device_reduce.h"
#include "support/config.h"
#include "support/counters.h"

namespace veneer::device {
namespace {

using kernels::ReduceOp;
using kernels::ReduceType;

std::optional<ReduceOp> op_of(MPI_Op op) {
  // In ReduceOp's order (kernels/device_reduce.h).
  static const std::array<MPI_Op, 10> ops{MPI_SUM, MPI_PROD, MPI_MIN,  MPI_MAX, MPI_LAND,
                                          MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
  static_assert(static_cast<int>(ReduceOp::sum) == 0 && static_cast<int>(ReduceOp::bxor) == 9);
  const auto* const it = std::ranges::find(ops, op);
  if (it == ops.end()) return std::nullopt;
  return static_cast<ReduceOp>(it - ops.begin());
}

template <class T>
constexpr ReduceType integer_type() {
  constexpr bool is_signed = static_cast<T>(-1) < static_cast<T>(0);
  switch (sizeof(T)) {
    case 1: return is_signed ? ReduceType::i8 : ReduceType::u8;
    case 2: return is_signed ? ReduceType::i16 : ReduceType::u16;
    case 4: return is_signed ? ReduceType::i32 : ReduceType::u32;
    default: return is_signed ? ReduceType::i64 : ReduceType::u64;
  }
}

// The C integer and floating types of MPI's reduction rules (MPI_CHAR is
// not one of them), by the C type each stands for.
std::optional<ReduceType> type_of(MPI_Datatype t) {
  static const std::array<std::pair<MPI_Datatype, ReduceType>, 21> types{
      {{MPI_SIGNED_CHAR, ReduceType::i8},
       {MPI_INT8_T, ReduceType::i8},
       {MPI_UNSIGNED_CHAR, ReduceType::u8},
       {MPI_UINT8_T, ReduceType::u8},
       {MPI_SHORT, integer_type<short>()},
       {MPI_UNSIGNED_SHORT, integer_type<unsigned short>()},
       {MPI_INT, integer_type<int>()},
       {MPI_UNSIGNED, integer_type<unsigned>()},
       {MPI_LONG, integer_type<long>()},
       {MPI_UNSIGNED_LONG, integer_type<unsigned long>()},
       {MPI_LONG_LONG, integer_type<long long>()},
       {MPI_LONG_LONG_INT, integer_type<long long>()},
       {MPI_UNSIGNED_LONG_LONG, integer_type<unsigned long long>()},
       {MPI_INT16_T, ReduceType::i16},
       {MPI_UINT16_T, ReduceType::u16},
       {MPI_INT32_T, ReduceType::i32},
       {MPI_UINT32_T, ReduceType::u32},
       {MPI_INT64_T, ReduceType::i64},
       {MPI_UINT64_T, ReduceType::u64},
       {MPI_FLOAT, ReduceType::f32},
       {MPI_DOUBLE, ReduceType::f64}}};
  const auto* const it = std::ranges::find(types, t, &std::pair<MPI_Datatype, ReduceType>::first);
  if (it == types.end()) return std::nullopt;
  return it->second;
}

// Operand bytes moved per round: bounds the device scratch (twice this).
constexpr int64_t kChunkBytes = int64_t{8} << 20;
// The second operand's place in the scratch: aligned for any element.
constexpr int64_t kAlign = 256;

}  // namespace

bool combine_on_device_wanted() { return config().device_reduce == DeviceReduce::device; }

std::optional<int> combine_on_device(const void* in, void* inout, int64_t count, const algorithms::ElementType& t,
                                     MPI_Op op) {
  if (count <= 0 || !t.named || !t.contiguous() || t.layout->true_lb != 0) return std::nullopt;
  const std::optional<ReduceOp> rop = op_of(op);
  const std::optional<ReduceType> rtype = type_of(t.handle);
  if (!rop || !rtype || static_cast<int64_t>(kernels::reduce_type_size(*rtype)) != t.size() ||
      !kernels::reduce_supported(*rop, *rtype))
    return std::nullopt;
  // MIN and MAX of floats: the libraries differ on which of two equal
  // operands (0.0 and -0.0) they keep, and so would the bits.
  if (kernels::reduce_type_is_float(*rtype) && (*rop == ReduceOp::min || *rop == ReduceOp::max)) return std::nullopt;
  // SUM, PROD, MIN and MAX of 8- and 16-bit integers: the libraries get some
  // of them wrong, so a rank combining on the host could get other bits than
  // the kernel's. Observed: Open MPI 4.1's vectorised sums saturate
  // (MPI_Reduce_local of unsigned char 125 + 250 gives 255 from 16 elements
  // on, 119 below; shorts from 8 on); MPICH 4.0 compares MPI_UNSIGNED_CHAR as
  // signed in MIN and MAX (min(33, 144) is 144).
  if (!kernels::reduce_type_is_float(*rtype) && t.size() < 4 && *rop <= ReduceOp::max) return std::nullopt;
  kernels::DeviceRuntime* rt = kernels::device_runtime();
  if (!rt) return std::nullopt;
  kernels::DeviceStream stream = rt->stream(0);
  if (!stream) return std::nullopt;

  const int64_t per_chunk = std::max<int64_t>(1, kChunkBytes / t.size());
  const int64_t chunk_bytes = std::min(count, per_chunk) * t.size();
  const int64_t second = (chunk_bytes + kAlign - 1) / kAlign * kAlign;
  kernels::PooledBuffer scratch(*rt, kernels::PooledBuffer::Kind::device, static_cast<size_t>(second + chunk_bytes));
  if (!scratch.get()) return std::nullopt;
  char* d_inout = scratch.get();
  char* d_in = scratch.get() + second;

  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(per_chunk, count - done);
    const auto bytes = static_cast<size_t>(n * t.size());
    const char* src = static_cast<const char*>(in) + done * t.size();
    char* dst = static_cast<char*>(inout) + done * t.size();
    // Nothing of `inout` is written before the combine has run: a failure
    // there leaves the rest to the host (the chunks done are final).
    if (!rt->copy(d_in, src, bytes, stream) || !rt->copy(d_inout, dst, bytes, stream) ||
        !rt->reduce(*rop, *rtype, d_inout, d_in, n, stream) || !rt->synchronize(stream)) {
      rt->synchronize(stream);  // drains what was queued; its failure is known
      if (done == 0) return std::nullopt;
      const algorithms::ScopedCombiner on_host(nullptr);
      return algorithms::reduce_local(src, dst, count - done, t, op);
    }
    if (!rt->copy(dst, d_inout, bytes, stream) || !rt->synchronize(stream)) return MPI_ERR_INTERN;
    done += n;
  }
  counters().add(Counter::device_combines);
  return MPI_SUCCESS;
}

}  // namespace veneer::device
