// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// What one GPU thread of the pack kernels does, written once for both sides:
// device_pack.cu runs these functions in its kernels, and the tests run the
// very same functions on the host, thread index by thread index, against the
// host packer (so the index arithmetic is checked on machines with no GPU).
//
// Two forms (see pack_plan.h for how a Layout becomes one of them):
//  - a strided leaf: `block` bytes at offset + sum(index_k * stride_k), with
//    an optional irregular innermost level of `offsets`; a thread moves one
//    word of W bytes (W = 16, 8, 4, 2 or 1, chosen so every access is aligned);
//  - segments: one repetition of the layout flattened into a list of
//    (user offset, packed offset, bytes), repeated over strided dimensions;
//    a group of G threads moves one segment.
#include <cstdint>
#include <type_traits>

#include "kernels/fast_divmod.h"
#include "support/address.h"

#if !defined(__CUDA_ARCH__) && defined(VENEER_KERNELS_CHECK_ALIGNMENT)
#include <stdexcept>
#endif

namespace veneer::kernels {

// Dimensions a launch can carry, the instance count included.
inline constexpr int kMaxDims = 8;

// One contiguous piece of a repetition of the general form.
struct Segment {
  int64_t user = 0;    // byte offset in the user's buffer, from the repetition's origin
  int64_t packed = 0;  // byte offset in the packed stream, from the repetition's start
  int64_t bytes = 0;
};

// Dimensions as the threads read them: innermost first, so that the unrolled
// loops below index them with compile-time constants (kernel parameters
// indexed at run time would be copied to local memory).
template <class Index>
struct Dims {
  int nd = 0;
  Divmod<Index> count[kMaxDims];
  int64_t stride[kMaxDims] = {};

  // Byte offset of repetition `r` (r < product of counts).
  VENEER_HD int64_t offset_of(Index r) const {
    int64_t offset = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int k = 0; k < kMaxDims; ++k) {
      if (k < nd) {
        Index q, i;
        count[k].divmod(r, q, i);
        offset += static_cast<int64_t>(i) * stride[k];
        r = q;
      }
    }
    return offset;
  }
};

template <class Index>
struct LeafParams {
  uintptr_t user = 0;                // the user's buffer as an integer: MPI_BOTTOM plus absolute offsets is fine
  char* packed = nullptr;            // packed[0] is byte `first` of the stream
  int64_t offset = 0;                // of block 0, from `user`
  Dims<Index> dims;                  // over blocks (after the irregular level)
  const int64_t* offsets = nullptr;  // irregular innermost level, or null
  Divmod<Index> noffsets;
  Divmod<Index> block_bytes;  // the block, in bytes
  Divmod<Index> block_words;  // the block, in words of the launch's width
  Index first = 0;            // stream byte at packed[0]
  Index first_word = 0;       // stream word of the first whole word
  Index words = 0;            // whole words to move
  Index head = 0;             // bytes before the first whole word
  Index tail = 0;             // bytes after the last whole word
  Index threads = 0;          // max(words, head + tail)
};

template <class Index>
struct SegmentParams {
  uintptr_t user = 0;
  char* packed = nullptr;  // packed[0] is stream byte `first`
  const Segment* segments = nullptr;
  Divmod<Index> nsegments;
  Dims<Index> reps;   // repetitions of the segment list
  int64_t unit = 0;   // packed bytes per repetition
  int64_t first = 0;  // stream window [first, last)
  int64_t last = 0;
  Index first_item = 0;  // item = repetition * nsegments + segment
  Index items = 0;
  Index threads = 0;  // items * G
};

// Words of W bytes; 16 is two 64-bit halves under 16-byte alignment, which
// the compiler turns into one 128-bit load or store.
struct alignas(16) Word16 {
  uint64_t low, high;
};
template <int W>
using WordOf = std::conditional_t<
    W == 1, uint8_t,
    std::conditional_t<W == 2, uint16_t,
                       std::conditional_t<W == 4, uint32_t, std::conditional_t<W == 8, uint64_t, Word16>>>>;

template <int W>
VENEER_HD void check_aligned([[maybe_unused]] uintptr_t address) {
#if !defined(__CUDA_ARCH__) && defined(VENEER_KERNELS_CHECK_ALIGNMENT)
  if (address % W != 0) throw std::logic_error("pack kernel: misaligned access");
#endif
}

// Moves one word between the user's buffer and the packed stream.
template <int W, bool Pack>
VENEER_HD void move_word(uintptr_t user, char* packed) {
  static_assert(W == 1 || W == 2 || W == 4 || W == 8 || W == 16, "a word is 1, 2, 4, 8 or 16 bytes");
  using Word = WordOf<W>;
  const uintptr_t p = address::of(packed);
  check_aligned<W>(user);
  check_aligned<W>(p);
  if constexpr (Pack) {
    *reinterpret_cast<Word*>(p) = *reinterpret_cast<const Word*>(user);
  } else {
    *reinterpret_cast<Word*>(user) = *reinterpret_cast<const Word*>(p);
  }
}

// Byte offset of block `b` of a leaf, from the user's buffer.
template <class Index>
VENEER_HD int64_t leaf_block_offset(const LeafParams<Index>& p, Index b) {
  int64_t offset = p.offset;
  if (p.offsets) {
    Index q, j;
    p.noffsets.divmod(b, q, j);
    offset += p.offsets[j];
    b = q;
  }
  return offset + p.dims.offset_of(b);
}

// Thread t of a leaf launch: whole word t, then straggler byte t.
template <int W, bool Pack, class Index>
VENEER_HD void leaf_thread(const LeafParams<Index>& p, Index t) {
  if (t < p.words) {
    const Index word = p.first_word + t;
    Index b, k;
    p.block_words.divmod(word, b, k);
    const int64_t offset = leaf_block_offset(p, b) + static_cast<int64_t>(k) * W;
    move_word<W, Pack>(address::advance(p.user, offset), p.packed + (word * Index{W} - p.first));
  }
  if (t < p.head + p.tail) {
    // The few bytes at the ends of a window that starts or stops inside a word.
    const Index at = t < p.head ? p.first + t : (p.first_word + p.words) * Index{W} + (t - p.head);
    Index b, k;
    p.block_bytes.divmod(at, b, k);
    const int64_t offset = leaf_block_offset(p, b) + static_cast<int64_t>(k);
    move_word<1, Pack>(address::advance(p.user, offset), p.packed + (at - p.first));
  }
}

// Moves bytes [done, n) of a run, as far as whole words of W reach, with the
// G threads of a group; returns where it stopped.
template <int W, int G, bool Pack>
VENEER_HD int64_t move_run(uintptr_t user, char* packed, int64_t done, int64_t n, int lane) {
  const int64_t end = done + (n - done) / W * W;
  for (int64_t i = done + int64_t{lane} * W; i < end; i += int64_t{G} * W)
    move_word<W, Pack>(address::advance(user, i), packed + i);
  return end;
}

// Thread t of a segment launch: lane t % G of the group that moves item t / G.
template <int G, bool Pack, class Index>
VENEER_HD void segment_thread(const SegmentParams<Index>& p, Index t) {
  const Index item = p.first_item + t / G;
  const int lane = static_cast<int>(t % G);
  Index rep, s;
  p.nsegments.divmod(item, rep, s);
  const Segment seg = p.segments[s];
  const int64_t start = static_cast<int64_t>(rep) * p.unit + seg.packed;
  const int64_t lo = start > p.first ? start : p.first;
  const int64_t end = start + seg.bytes;
  const int64_t hi = end < p.last ? end : p.last;
  if (lo >= hi) return;
  const uintptr_t user = address::advance(p.user, p.reps.offset_of(rep) + seg.user + (lo - start));
  char* packed = p.packed + (lo - p.first);
  const int64_t n = hi - lo;
  // Segments differ in alignment, so each picks its own widest word: the body
  // in the widest word both ends allow, the last few bytes in narrower ones.
  // Every branch is the same for the whole group.
  const uintptr_t bits = user | address::of(packed);
  int64_t done = 0;
  if (bits % 16 == 0) done = move_run<16, G, Pack>(user, packed, done, n, lane);
  if (bits % 8 == 0) done = move_run<8, G, Pack>(user, packed, done, n, lane);
  if (bits % 4 == 0) done = move_run<4, G, Pack>(user, packed, done, n, lane);
  if (bits % 2 == 0) done = move_run<2, G, Pack>(user, packed, done, n, lane);
  move_run<1, G, Pack>(user, packed, done, n, lane);
}

}  // namespace veneer::kernels
