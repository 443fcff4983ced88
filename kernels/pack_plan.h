// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// How a canonical layout is packed on the GPU, decided on the host: once per
// layout (make_plan) and then once per call (plan_launch), which turns a
// transfer (count instances, a window of the packed stream, the two buffers)
// into the parameters of one kernel launch. Plain C++, no CUDA: device_pack.cu
// launches what this describes, and the tests run it on the host.
//
// Forms, cheapest first:
//  - contiguous: one run of bytes, a memcpy;
//  - leaf: the layout is one strided leaf (vectors, subarrays, indexed
//    blocks), packed by the N-dimensional strided kernel;
//  - segments: anything else (structs, mixed block sizes, deep nesting): one
//    repetition of the root is flattened into (user offset, packed offset,
//    bytes) segments, repeated over the root's outer dimensions.
#include <cstdint>
#include <string>
#include <vector>

#include "datatypes/layout.h"
#include "kernels/pack_items.h"

namespace veneer::kernels {

enum class PlanForm { empty, contiguous, leaf, segments };

struct PlanLimits {
  // Segments one repetition may hold (24 bytes of device memory each);
  // a layout that needs more is not taken (the caller passes it through).
  int64_t max_segments = int64_t{1} << 20;
  // Longer runs are cut into pieces of this many bytes (a multiple of 16) so
  // that many threads share one long run.
  int64_t piece_bytes = 4096;
};

struct PackPlan {
  PlanForm form = PlanForm::empty;
  int64_t size = 0;     // packed bytes per instance
  int64_t extent = 0;   // instance i starts at buf + i * extent
  int64_t true_lb = 0;  // contiguous: where the run starts

  // leaf: blocks of `block` bytes at offset + offsets[j] + sum(index_k * stride_k)
  // over `dims` (outermost first, at most kMaxDims - 1 so the instance count fits).
  // segments: `dims` are the repeated outer dimensions of the root.
  int64_t offset = 0;
  std::vector<datatypes::Dim> dims;
  int64_t block = 0;
  std::vector<int64_t> offsets;

  // segments: one repetition, in stream order; `unit` packed bytes in all.
  std::vector<Segment> segments;
  int64_t unit = 0;
  int group = 1;  // threads per segment: 1, 8 or 32

  // leaf: OR of the block, offset, strides and offsets; its lowest set bit
  // bounds the word width.
  uint64_t align_bits = 0;

  std::string describe() const;
};

// too_many_segments: the general form would need more than PlanLimits allow;
// malformed: the layout's sizes disagree with its tree. Either way, pass through.
enum class PlanStatus { ok, too_many_segments, malformed };

PlanStatus make_plan(const datatypes::Layout& layout, const PlanLimits& limits, PackPlan& plan);

// Packed bytes a transfer moves: min(max_bytes, count * size - skip), or 0.
int64_t window_bytes(const PackPlan& plan, int64_t count, int64_t skip, int64_t max_bytes);

// One launch. `copy`: `bytes` bytes between user_address and the packed buffer.
struct Launch {
  enum class Kind { none, copy, leaf, segments };
  Kind kind = Kind::none;
  int64_t bytes = 0;           // packed bytes moved
  uintptr_t user_address = 0;  // copy
  char* packed = nullptr;      // copy
  int width = 1;               // leaf: word bytes
  int group = 1;               // segments: threads per segment
  bool wide_index = false;     // 64-bit indices (streams of 4 GiB and more)
  LeafParams<uint32_t> leaf32;
  LeafParams<uint64_t> leaf64;
  SegmentParams<uint32_t> segments32;
  SegmentParams<uint64_t> segments64;
  uint64_t threads() const;
};

// `device_offsets` and `device_segments` are the plan's offsets and segments
// where the threads can read them (device memory, or the plan's own vectors
// when the host runs the threads). `wide_index` forces 64-bit indices, which
// otherwise only streams of 4 GiB and more get (for tests).
Launch plan_launch(const PackPlan& plan, const int64_t* device_offsets, const Segment* device_segments, int64_t count,
                   uintptr_t user, char* packed, int64_t skip, int64_t max_bytes, bool wide_index = false);

// Runs a launch through `runner`, which provides
//   copy<Pack>(uintptr_t user, char* packed, int64_t bytes),
//   leaf<W, Pack>(const LeafParams<Index>&) and
//   segments<G, Pack>(const SegmentParams<Index>&),
// so the CUDA launcher and the host emulation share one dispatch.
template <bool Pack, class Runner>
auto dispatch(const Launch& l, Runner& runner) {
  using Kind = Launch::Kind;
  auto leaf = [&](const auto& p) {
    switch (l.width) {
      case 16: return runner.template leaf<16, Pack>(p);
      case 8: return runner.template leaf<8, Pack>(p);
      case 4: return runner.template leaf<4, Pack>(p);
      case 2: return runner.template leaf<2, Pack>(p);
      default: return runner.template leaf<1, Pack>(p);
    }
  };
  auto segments = [&](const auto& p) {
    switch (l.group) {
      case 32: return runner.template segments<32, Pack>(p);
      case 8: return runner.template segments<8, Pack>(p);
      default: return runner.template segments<1, Pack>(p);
    }
  };
  switch (l.kind) {
    case Kind::copy: return runner.template copy<Pack>(l.user_address, l.packed, l.bytes);
    case Kind::leaf: return l.wide_index ? leaf(l.leaf64) : leaf(l.leaf32);
    case Kind::segments: return l.wide_index ? segments(l.segments64) : segments(l.segments32);
    case Kind::none: break;
  }
  return runner.nothing();
}

}  // namespace veneer::kernels
