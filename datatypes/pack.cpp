// SPDX-License-Identifier: BSD-3-Clause
#include "datatypes/pack.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "support/address.h"
#include "support/config.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace veneer::datatypes {
namespace {

// A leaf as the kernels see it: dims may have one extra outer dimension (the
// instance count) that lives on the caller's stack.
struct LeafView {
  int64_t offset;
  const Dim* dims;
  int nd;
  int64_t block;
  const int64_t* offsets;  // irregular innermost level, or null
  int64_t noffsets;
};

template <bool Pack>
inline void move_bytes(char* user, char*& io, int64_t n) {
  if constexpr (Pack) {
    std::memcpy(io, user, static_cast<size_t>(n));
  } else {
    std::memcpy(user, io, static_cast<size_t>(n));
  }
  io += n;
}

#if defined(__SSE2__)
// Blocks of B bytes at a stride of 2B (every other element: real parts of
// complex numbers, one channel of two): 16/B of them taken from 32 bytes with
// a few SSE2 operations. Reads the gap after the last of them, so callers use
// it only when another block of the run follows.
template <int64_t B>
inline __m128i deinterleave_pairs(const char* p) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
  if constexpr (B == 1) {
    const __m128i low = _mm_set1_epi16(0x00FF);
    return _mm_packus_epi16(_mm_and_si128(a, low), _mm_and_si128(b, low));
  } else if constexpr (B == 2) {
    // Sign-extend each low half to 32 bits, then pack back without saturating.
    return _mm_packs_epi32(_mm_srai_epi32(_mm_slli_epi32(a, 16), 16), _mm_srai_epi32(_mm_slli_epi32(b, 16), 16));
  } else if constexpr (B == 4) {
    return _mm_unpacklo_epi64(_mm_shuffle_epi32(a, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm_shuffle_epi32(b, _MM_SHUFFLE(2, 0, 2, 0)));
  } else {
    static_assert(B == 8);
    return _mm_unpacklo_epi64(a, b);
  }
}
#endif

#if defined(__SSE2__)
// Small blocks (1-8 bytes) of one strided run, packed into an output too big
// for the caches: 16/B blocks are gathered into one 16-byte register and
// written with a streaming store, which neither reads the destination line
// first nor evicts the source. Blocks before the output is 16-byte aligned,
// and the last few, go one at a time. Returns the new output position.
template <int64_t B>
char* gather_run_stream(const char* p, int64_t stride, int64_t n, char* out) {
  static_assert(B == 1 || B == 2 || B == 4 || B == 8);
  constexpr int64_t per = 16 / B;
  auto one = [&] {
    std::memcpy(out, p, B);
    out += B;
    p += stride;
    --n;
  };
  // out % B == 0 reaches 16-byte alignment within per - 1 blocks; else never.
  const bool alignable = address::of(out) % B == 0;
  while (n > 0 && alignable && address::of(out) % 16 != 0) one();
  if (alignable) {
    if (stride == 2 * B) {
      for (; n > per; n -= per) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(out), deinterleave_pairs<B>(p));
        out += 16;
        p += 32;
      }
    }
    for (; n >= per; n -= per) {
      __m128i v;
      if constexpr (B == 8) {
        v = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                               _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + stride)));
      } else {
        uint64_t half[2] = {0, 0};
        for (int h = 0; h < 2; ++h) {
          for (int64_t k = 0; k < per / 2; ++k) {
            using Word = std::conditional_t<B == 1, uint8_t, std::conditional_t<B == 2, uint16_t, uint32_t>>;
            Word w;
            std::memcpy(&w, p + (h * (per / 2) + k) * stride, B);
            half[h] |= static_cast<uint64_t>(w) << (8 * B * k);
          }
        }
        v = _mm_set_epi64x(static_cast<long long>(half[1]), static_cast<long long>(half[0]));
      }
      _mm_stream_si128(reinterpret_cast<__m128i*>(out), v);
      out += 16;
      p += per * stride;
    }
  }
  while (n > 0) one();  // NOLINT(bugprone-infinite-loop): one() decrements n
  return out;
}
#endif

// The walk over a leaf's blocks: the innermost level is walked as runs (a
// strided dimension, or the irregular offsets), the outer levels as an
// odometer whose position is `row`.
class LeafWalk {
 public:
  // Positioned at block b0.
  [[gnu::always_inline]] LeafWalk(const LeafView& v, char* base, int64_t b0) : v_(v) {
    if (v.offsets != nullptr) {
      inner_count_ = v.noffsets;
    } else if (v.nd > 0) {
      inner_count_ = v.dims[v.nd - 1].count;
      inner_stride_ = v.dims[v.nd - 1].stride;
      outer_nd_ = v.nd - 1;
    }
    if (outer_nd_ > 16) {
      large_.resize(static_cast<size_t>(outer_nd_));
      idx_ = large_.data();
    }
    int64_t rest = b0 / inner_count_;
    j_ = b0 % inner_count_;
    row_ = address::at(base, v.offset);
    for (int k = outer_nd_ - 1; k >= 0; --k) {
      idx_[k] = rest % v.dims[k].count;
      rest /= v.dims[k].count;
      row_ += idx_[k] * v.dims[k].stride;
    }
  }
  LeafWalk(const LeafWalk&) = delete;
  LeafWalk& operator=(const LeafWalk&) = delete;

  char* row() const { return row_; }
  int64_t first() const { return j_; }  // the run's first block within the innermost level
  int64_t inner_stride() const { return inner_stride_; }
  // Blocks left in the current run, at most nb.
  int64_t run(int64_t nb) const { return std::min(inner_count_ - j_, nb); }
  // To the start of the next run (the odometer's next position).
  [[gnu::always_inline]] void next_run() {
    j_ = 0;
    for (int k = outer_nd_ - 1; k >= 0; --k) {
      row_ += v_.dims[k].stride;
      if (++idx_[k] < v_.dims[k].count) break;
      row_ -= v_.dims[k].count * v_.dims[k].stride;
      idx_[k] = 0;
    }
  }

 private:
  const LeafView& v_;
  int outer_nd_ = v_.nd;
  int64_t inner_count_ = 1;
  int64_t inner_stride_ = 0;
  int64_t j_ = 0;
  char* row_ = nullptr;
  int64_t small_[16];  // the odometer, up to 16 outer levels without allocating
  std::vector<int64_t> large_;
  int64_t* idx_ = small_;
};

// One run of an irregular innermost level: `run` blocks of bs bytes at
// row + off[t]. Returns the new packed position.
template <int64_t B, bool Pack>
[[gnu::always_inline]] inline char* irregular_run(char* row, const int64_t* off, int64_t run, int64_t bs, char* out) {
  int64_t t = 0;
  if constexpr (B > 0 && B <= 16) {
    // Small gathered blocks: four per iteration, as for strided ones.
    for (; t + 4 <= run; t += 4) {
      for (int u = 0; u < 4; ++u) {
        if constexpr (Pack) std::memcpy(out + u * B, row + off[t + u], B);
        else std::memcpy(row + off[t + u], out + u * B, B);
      }
      out += 4 * B;
    }
  }
  for (; t < run; ++t) {
    char* p = row + off[t];
    if constexpr (Pack) std::memcpy(out, p, static_cast<size_t>(bs));
    else std::memcpy(p, out, static_cast<size_t>(bs));
    out += bs;
  }
  return out;
}

#if defined(__SSE2__)
// Packing 1-8 byte blocks at a stride of twice their size: 16 bytes per
// store while another block follows. Returns how many blocks it packed.
template <int64_t B, bool Pack, bool Stream>
[[gnu::always_inline]] inline int64_t strided_pairs_run(char*& p, int64_t stride, int64_t run, char*& out) {
  int64_t t = 0;
  if constexpr (Pack && !Stream && (B == 1 || B == 2 || B == 4 || B == 8)) {
    if (stride == 2 * B) {
      for (; t + 16 / B < run; t += 16 / B) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), deinterleave_pairs<B>(p));
        out += 16;
        p += 32;
      }
    }
  }
  return t;
}
#endif

// Blocks [t, run) of a strided run starting at p (stride apart); t blocks
// already done. Returns the new packed position.
template <int64_t B, bool Pack, bool Stream>
[[gnu::always_inline]] inline char* strided_tail(char* p, int64_t stride, int64_t t, int64_t run, int64_t bs,
                                                 char* out) {
  if constexpr (B > 0 && B <= 16 && !Stream) {
    // Small blocks: four per iteration keeps more loads in flight.
    for (; t + 4 <= run; t += 4) {
      if constexpr (Pack) {
        std::memcpy(out, p, B);
        std::memcpy(out + B, p + stride, B);
        std::memcpy(out + 2 * B, p + 2 * stride, B);
        std::memcpy(out + 3 * B, p + 3 * stride, B);
      } else {
        std::memcpy(p, out, B);
        std::memcpy(p + stride, out + B, B);
        std::memcpy(p + 2 * stride, out + 2 * B, B);
        std::memcpy(p + 3 * stride, out + 3 * B, B);
      }
      out += 4 * B;
      p += 4 * stride;
    }
  }
  for (; t < run; ++t) {
    if constexpr (Pack) std::memcpy(out, p, static_cast<size_t>(bs));
    else std::memcpy(p, out, static_cast<size_t>(bs));
    out += bs;
    p += stride;
  }
  return out;
}

// One run of a strided innermost level: `run` blocks from p, stride apart.
// Returns the new packed position.
template <int64_t B, bool Pack, bool Stream>
[[gnu::always_inline]] inline char* strided_run(char* p, int64_t stride, int64_t run, int64_t bs, char* out) {
#if defined(__SSE2__)
  if constexpr (Stream) {
    return gather_run_stream<B>(p, stride, run, out);
  } else {
    const int64_t t = strided_pairs_run<B, Pack, Stream>(p, stride, run, out);
    return strided_tail<B, Pack, Stream>(p, stride, t, run, bs, out);
  }
#else
  return strided_tail<B, Pack, Stream>(p, stride, 0, run, bs, out);
#endif
}

// Copies blocks [b0, b0 + nb) of a leaf; B is the block size when known at
// compile time (0: use v.block). Fixed sizes compile to plain loads/stores.
// Stream (packing only, B of 1-8, no irregular level): streaming stores.
template <int64_t B, bool Pack, bool Stream = false>
void leaf_blocks(const LeafView& v, char* base, int64_t b0, int64_t nb, char*& io) {
  const int64_t bs = B ? B : v.block;
  LeafWalk walk(v, base, b0);
  char* out = io;
  while (nb > 0) {
    const int64_t run = walk.run(nb);
    if (v.offsets != nullptr) {
      out = irregular_run<B, Pack>(walk.row(), v.offsets + walk.first(), run, bs, out);
    } else {
      out = strided_run<B, Pack, Stream>(walk.row() + walk.first() * walk.inner_stride(), walk.inner_stride(), run, bs,
                                         out);
    }
    nb -= run;
    walk.next_run();
  }
#if defined(__SSE2__)
  if constexpr (Stream) _mm_sfence();
#endif
  io = out;
}

char* leaf_block_address(const LeafView& v, char* base, int64_t b);

#if defined(__SSE2__)
// Packing into an output that, with the source lines read, does not fit in
// the last-level cache: streaming (non-temporal) stores neither read the
// destination lines first nor evict the source, which is most of the gap to
// memcpy (glibc's memcpy switches the same way, at 3/4 of the cache). Below
// that, ordinary stores win: the packed bytes stay in cache for the send
// that follows, and the next pack finds its output lines already there.

// Bytes of the last-level cache (sysfs; the CPUID figure is wrong in VMs).
int64_t last_level_cache_bytes() {
  static const int64_t bytes = [] {
    for (int index = 4; index >= 0; --index) {
      const std::string path = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size";
      if (FILE* f = std::fopen(path.c_str(), "r")) {
        long long n = 0;
        char unit = 0;
        const int got = std::fscanf(f, "%lld%c", &n, &unit);
        std::fclose(f);
        if (got >= 1 && n > 0) return static_cast<int64_t>(n) << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0);
      }
    }
    return int64_t{32} << 20;
  }();
  return bytes;
}

bool streaming_pays(const LeafView& v, int64_t nb) {
  const int64_t threshold = config().pack_stream_min >= 0 ? config().pack_stream_min : last_level_cache_bytes() / 4 * 3;
  // Source lines touched: the whole span when the gaps are under a line, else
  // whole lines per block.
  const int64_t line = 64;
  const int64_t stride = v.offsets == nullptr && v.nd > 0 ? std::abs(v.dims[v.nd - 1].stride) : 0;
  const int64_t per_block = stride > 0 && stride - v.block < line ? stride : (v.block + line - 1) / line * line;
  return nb * (v.block + per_block) >= threshold;
}

bool stream_worthwhile(const LeafView& v, int64_t nb, const char* out) {
  return v.block >= 16 && v.block % 16 == 0 && address::of(out) % 16 == 0 && streaming_pays(v, nb);
}

// Small blocks: gathered into 16-byte streaming stores (gather_run_stream).
bool small_stream_worthwhile(const LeafView& v, int64_t nb) {
  return v.block <= 8 && (v.block & (v.block - 1)) == 0 && v.offsets == nullptr && v.nd > 0 && streaming_pays(v, nb);
}

void leaf_blocks_stream(const LeafView& v, char* base, int64_t b0, int64_t nb, char*& io) {
  // Same walk as leaf_blocks, copying each block with 16-byte streaming stores.
  int64_t done = 0;
  while (done < nb) {
    // One block at a time through the generic address computation would be
    // slow; walk runs of the innermost level instead.
    const int64_t b = b0 + done;
    const bool irregular = v.offsets != nullptr;
    const int64_t inner_count = irregular ? v.noffsets : (v.nd > 0 ? v.dims[v.nd - 1].count : 1);
    const int64_t j = b % inner_count;
    const int64_t run = std::min(inner_count - j, nb - done);
    char* first = leaf_block_address(v, base, b);
    const int64_t stride = irregular || v.nd == 0 ? 0 : v.dims[v.nd - 1].stride;
    for (int64_t t = 0; t < run; ++t) {
      const char* src = irregular ? leaf_block_address(v, base, b + t) : first + t * stride;
      for (int64_t k = 0; k < v.block; k += 16)
        _mm_stream_si128(reinterpret_cast<__m128i*>(io + k),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k)));
      io += v.block;
    }
    done += run;
  }
  _mm_sfence();
}
#endif

template <bool Pack>
void leaf_blocks_dispatch(const LeafView& v, char* base, int64_t b0, int64_t nb, char*& io) {
#if defined(__SSE2__)
  if constexpr (Pack) {
    if (stream_worthwhile(v, nb, io)) return leaf_blocks_stream(v, base, b0, nb, io);
    if (small_stream_worthwhile(v, nb)) {
      switch (v.block) {
        case 1: return leaf_blocks<1, true, true>(v, base, b0, nb, io);
        case 2: return leaf_blocks<2, true, true>(v, base, b0, nb, io);
        case 4: return leaf_blocks<4, true, true>(v, base, b0, nb, io);
        case 8: return leaf_blocks<8, true, true>(v, base, b0, nb, io);
        default: break;
      }
    }
  }
#endif
  switch (v.block) {
    case 1: return leaf_blocks<1, Pack>(v, base, b0, nb, io);
    case 2: return leaf_blocks<2, Pack>(v, base, b0, nb, io);
    case 4: return leaf_blocks<4, Pack>(v, base, b0, nb, io);
    case 8: return leaf_blocks<8, Pack>(v, base, b0, nb, io);
    case 12: return leaf_blocks<12, Pack>(v, base, b0, nb, io);
    case 16: return leaf_blocks<16, Pack>(v, base, b0, nb, io);
    case 24: return leaf_blocks<24, Pack>(v, base, b0, nb, io);
    case 32: return leaf_blocks<32, Pack>(v, base, b0, nb, io);
    case 40: return leaf_blocks<40, Pack>(v, base, b0, nb, io);
    case 48: return leaf_blocks<48, Pack>(v, base, b0, nb, io);
    case 64: return leaf_blocks<64, Pack>(v, base, b0, nb, io);
    default: return leaf_blocks<0, Pack>(v, base, b0, nb, io);
  }
}

// Address of block `b` of a leaf (for partial blocks at the ends of a range).
char* leaf_block_address(const LeafView& v, char* base, int64_t b) {
  char* p = address::at(base, v.offset);
  if (v.offsets) {
    p += v.offsets[b % v.noffsets];
    b /= v.noffsets;
    for (int k = v.nd - 1; k >= 0; --k) {
      p += (b % v.dims[k].count) * v.dims[k].stride;
      b /= v.dims[k].count;
    }
  } else {
    for (int k = v.nd - 1; k >= 0; --k) {
      p += (b % v.dims[k].count) * v.dims[k].stride;
      b /= v.dims[k].count;
    }
  }
  return p;
}

// Bytes [skip, skip + len) of a leaf's stream; len is within the leaf.
template <bool Pack>
void leaf_range(const LeafView& v, char* base, int64_t skip, int64_t len, char*& io) {
  int64_t b = skip / v.block;
  const int64_t intra = skip % v.block;
  if (intra) {
    const int64_t n = std::min(v.block - intra, len);
    move_bytes<Pack>(leaf_block_address(v, base, b) + intra, io, n);
    len -= n;
    ++b;
  }
  const int64_t full = len / v.block;
  if (full) leaf_blocks_dispatch<Pack>(v, base, b, full, io);
  const int64_t tail = len - full * v.block;
  if (tail) move_bytes<Pack>(leaf_block_address(v, base, b + full), io, tail);
}

LeafView view_of(const Node& n) {
  return {n.offset,
          n.dims.data(),
          static_cast<int>(n.dims.size()),
          n.block,
          n.offsets.empty() ? nullptr : n.offsets.data(),
          static_cast<int64_t>(n.offsets.size())};
}

template <bool Pack>
void node_range(const Node& n, char* base, int64_t skip, int64_t len, char*& io);

template <bool Pack>
void sequence_range(const Node& n, char* base, int64_t skip, int64_t len, char*& io) {
  const int nd = static_cast<int>(n.dims.size());
  int64_t small[16];
  std::vector<int64_t> large;
  int64_t* idx = small;
  if (nd > 16) {
    large.resize(static_cast<size_t>(nd));
    idx = large.data();
  }
  int64_t rep = skip / n.unit;
  int64_t within = skip % n.unit;
  char* pos = address::at(base, n.offset);
  for (int k = nd - 1; k >= 0; --k) {
    idx[k] = rep % n.dims[k].count;
    rep /= n.dims[k].count;
    pos += idx[k] * n.dims[k].stride;
  }
  while (len > 0) {
    for (const Node& c : n.children) {
      const int64_t cb = c.bytes();
      if (within >= cb) {
        within -= cb;
        continue;
      }
      const int64_t take = std::min(cb - within, len);
      if (c.block > 0 && c.dims.empty() && c.offsets.empty()) {
        move_bytes<Pack>(address::at(pos, c.offset + within), io,
                         take);  // a plain block: no dispatch
      } else {
        node_range<Pack>(c, pos, within, take, io);
      }
      within = 0;
      len -= take;
      if (len == 0) return;
    }
    for (int k = nd - 1; k >= 0; --k) {
      pos += n.dims[k].stride;
      if (++idx[k] < n.dims[k].count) break;
      pos -= n.dims[k].count * n.dims[k].stride;
      idx[k] = 0;
    }
  }
}

template <bool Pack>
void node_range(const Node& n, char* base, int64_t skip, int64_t len, char*& io) {
  if (len <= 0) return;
  if (n.is_leaf()) {
    leaf_range<Pack>(view_of(n), base, skip, len, io);
  } else {
    sequence_range<Pack>(n, base, skip, len, io);
  }
}

template <bool Pack>
int64_t transfer(const Layout& l, int64_t count, char* buf, int64_t skip, int64_t max_bytes, char* io) {
  const int64_t total = l.size * count;
  if (count <= 0 || skip < 0 || skip >= total || max_bytes <= 0) return 0;
  const int64_t len = std::min(max_bytes, total - skip);
  if (l.contiguous) {
    char* p = address::at(buf, l.true_lb + skip);
    char* cursor = io;
    move_bytes<Pack>(p, cursor, len);
    return len;
  }
  const Node& root = l.root;
  char* cursor = io;
  if (root.is_leaf() && root.dims.size() < 15) {
    // Instances become one more outer dimension, merged when they line up.
    Dim dims[16];
    int nd = 0;
    int64_t block = root.block;
    const bool irregular = !root.offsets.empty();
    if (!root.dims.empty() && l.extent == root.dims[0].count * root.dims[0].stride) {
      dims[nd++] = {count * root.dims[0].count, root.dims[0].stride};
      for (size_t k = 1; k < root.dims.size(); ++k) dims[nd++] = root.dims[k];
    } else if (root.dims.empty() && !irregular && l.extent == block) {
      block *= count;
    } else {
      if (count > 1) dims[nd++] = {count, l.extent};
      for (const Dim& d : root.dims) dims[nd++] = d;
    }
    LeafView v{root.offset,
               dims,
               nd,
               block,
               irregular ? root.offsets.data() : nullptr,
               static_cast<int64_t>(root.offsets.size())};
    leaf_range<Pack>(v, buf, skip, len, cursor);
    return len;
  }
  // General form: walk the instances one by one.
  const int64_t per = l.size;
  int64_t instance = skip / per;
  int64_t within = skip % per;
  int64_t left = len;
  while (left > 0) {
    const int64_t take = std::min(per - within, left);
    node_range<Pack>(root, address::at(buf, instance * l.extent), within, take, cursor);
    left -= take;
    within = 0;
    ++instance;
  }
  return len;
}

}  // namespace

int64_t pack(const Layout& layout, int64_t count, const void* buf, int64_t skip, int64_t max_bytes, void* out) {
  return transfer<true>(layout, count, const_cast<char*>(static_cast<const char*>(buf)), skip, max_bytes,
                        static_cast<char*>(out));
}

int64_t unpack(const Layout& layout, int64_t count, void* buf, int64_t skip, int64_t max_bytes, const void* in) {
  return transfer<false>(layout, count, static_cast<char*>(buf), skip, max_bytes,
                         const_cast<char*>(static_cast<const char*>(in)));
}

}  // namespace veneer::datatypes
