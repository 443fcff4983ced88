// SPDX-License-Identifier: BSD-3-Clause
// The host packers and the simplifier against a naive reference that expands
// a layout into its list of bytes (no MPI involved).
#include "datatypes/pack.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include "datatypes/layout.h"
#include "support/config.h"

using veneer::datatypes::Dim;
using veneer::datatypes::Layout;
using veneer::datatypes::Node;

namespace {

// Every byte offset of the node's stream, in order (the reference).
void expand(const Node& n, int64_t base, std::vector<int64_t>& out) {
  std::vector<int64_t> idx(n.dims.size(), 0);
  const int64_t reps = [&] {
    int64_t r = 1;
    for (const Dim& d : n.dims) r *= d.count;
    return r;
  }();
  for (int64_t r = 0; r < reps; ++r) {
    int64_t pos = base + n.offset;
    int64_t rest = r;
    for (size_t k = n.dims.size(); k-- > 0;) {
      pos += (rest % n.dims[k].count) * n.dims[k].stride;
      rest /= n.dims[k].count;
    }
    if (n.is_leaf()) {
      if (n.offsets.empty()) {
        for (int64_t b = 0; b < n.block; ++b) out.push_back(pos + b);
      } else {
        for (int64_t o : n.offsets)
          for (int64_t b = 0; b < n.block; ++b) out.push_back(pos + o + b);
      }
    } else {
      for (const Node& c : n.children) expand(c, pos, out);
    }
  }
}

// A random tree with strides that never make two bytes of the stream overlap
// in a way that matters (overlap is fine for packing; we only read).
Node random_node(std::mt19937_64& rng, int depth) {
  std::uniform_int_distribution<int> pick(0, 9);
  Node n;
  n.offset = std::uniform_int_distribution<int64_t>(-64, 64)(rng);
  const int nd = std::uniform_int_distribution<int>(0, 2)(rng);
  for (int k = 0; k < nd; ++k) {
    n.dims.push_back(
        {std::uniform_int_distribution<int64_t>(0, 4)(rng), std::uniform_int_distribution<int64_t>(-300, 300)(rng)});
  }
  if (depth >= 3 || pick(rng) < 5) {
    static const int64_t blocks[] = {1, 2, 3, 4, 8, 12, 16, 24, 40, 64, 100};
    n.block = blocks[std::uniform_int_distribution<int>(0, 10)(rng)];
    if (pick(rng) < 3) {
      const int m = std::uniform_int_distribution<int>(1, 5)(rng);
      for (int i = 0; i < m; ++i) n.offsets.push_back(std::uniform_int_distribution<int64_t>(-200, 200)(rng));
    }
  } else {
    const int m = std::uniform_int_distribution<int>(1, 4)(rng);
    for (int i = 0; i < m; ++i) n.children.push_back(random_node(rng, depth + 1));
  }
  return n;
}

// Fills unit fields bottom-up without simplifying (the raw tree as decoded).
void fill_units(Node& n) {
  if (n.is_leaf()) {
    n.unit = n.block * (n.offsets.empty() ? 1 : static_cast<int64_t>(n.offsets.size()));
    return;
  }
  n.unit = 0;
  for (Node& c : n.children) {
    fill_units(c);
    n.unit += c.bytes();
  }
}

}  // namespace

TEST(Simplify, KeepsTheByteStream) {
  std::mt19937_64 rng(12345);
  for (int iter = 0; iter < 3000; ++iter) {
    Node raw = random_node(rng, 0);
    fill_units(raw);
    std::vector<int64_t> before, after;
    expand(raw, 0, before);
    Node simple = raw;
    veneer::datatypes::simplify(simple);
    expand(simple, 0, after);
    ASSERT_EQ(before, after) << "iteration " << iter << ": " << veneer::datatypes::describe(raw) << " -> "
                             << veneer::datatypes::describe(simple);
    ASSERT_EQ(simple.bytes(), static_cast<int64_t>(before.size()));
  }
}

TEST(Simplify, MergesVectorsIntoBlocks) {
  // contiguous(4) of vector(3, 2 doubles, stride 2) is 24 contiguous doubles.
  Node leaf;
  leaf.block = 8;
  Node row;
  row.dims = {{2, 8}};
  row.children = {leaf};
  Node vec;
  vec.dims = {{3, 16}};
  vec.children = {row};
  Node top;
  top.dims = {{4, 48}};
  top.children = {vec};
  veneer::datatypes::simplify(top);
  EXPECT_TRUE(top.is_leaf());
  EXPECT_TRUE(top.dims.empty());
  EXPECT_EQ(top.block, 24 * 8);
}

namespace {

// Random layouts, packed whole and in fragments (outputs at every alignment)
// and unpacked, against the expanded reference.
void check_random_layouts(uint64_t seed, int iterations) {
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < iterations; ++iter) {
    Layout l;
    l.root = random_node(rng, 0);
    veneer::datatypes::simplify(l.root);
    std::vector<int64_t> offs;
    expand(l.root, 0, offs);
    l.size = static_cast<int64_t>(offs.size());
    if (l.size == 0) continue;
    int64_t lo = *std::min_element(offs.begin(), offs.end());
    int64_t hi = *std::max_element(offs.begin(), offs.end());
    l.true_lb = lo;
    l.true_extent = hi - lo + 1;
    l.lb = lo;
    l.extent = std::uniform_int_distribution<int64_t>(1, 2 * (hi - lo + 1))(rng);
    veneer::datatypes::finish(l);
    const int64_t count = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    // Source memory covering every instance.
    const int64_t span_lo = std::min<int64_t>(lo, lo + (count - 1) * l.extent);
    const int64_t span_hi = std::max<int64_t>(hi, hi + (count - 1) * l.extent);
    std::vector<unsigned char> mem(static_cast<size_t>(span_hi - span_lo + 1));
    for (size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<unsigned char>(i * 131 + 7);
    unsigned char* base = mem.data() - span_lo;
    std::vector<unsigned char> expect;
    for (int64_t c = 0; c < count; ++c)
      for (int64_t o : offs) expect.push_back(base[o + c * l.extent]);
    const int64_t total = l.size * count;
    // Whole, then fragments of assorted sizes.
    std::vector<unsigned char> got(static_cast<size_t>(total));
    ASSERT_EQ(veneer::datatypes::pack_all(l, count, base, got.data()), total);
    ASSERT_EQ(got, expect) << veneer::datatypes::describe(l.root);
    for (int64_t frag : {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{64}, total}) {
      std::vector<unsigned char> pieces(static_cast<size_t>(total), 0);
      int64_t done = 0;
      while (done < total) {
        const int64_t n = veneer::datatypes::pack(l, count, base, done, frag, pieces.data() + done);
        ASSERT_GT(n, 0);
        done += n;
      }
      ASSERT_EQ(pieces, expect) << "fragment " << frag << ": " << veneer::datatypes::describe(l.root);
    }
    // Unpack into a zeroed copy: exactly the type map's bytes come back.
    std::vector<unsigned char> back(mem.size(), 0);
    unsigned char* bbase = back.data() - span_lo;
    int64_t done = 0;
    while (done < total) done += veneer::datatypes::unpack(l, count, bbase, done, 5, expect.data() + done);
    for (int64_t c = 0; c < count; ++c)
      for (int64_t o : offs) ASSERT_EQ(bbase[o + c * l.extent], base[o + c * l.extent]);
  }
}

// Sets VENEER_PACK_STREAM_MIN's setting for one scope.
struct StreamThreshold {
  explicit StreamThreshold(int64_t bytes) : saved(veneer::g_config.pack_stream_min) {
    veneer::g_config.pack_stream_min = bytes;
  }
  ~StreamThreshold() { veneer::g_config.pack_stream_min = saved; }
  int64_t saved;
};

}  // namespace

TEST(Pack, PartialRangesMatchReference) { check_random_layouts(777, 2000); }

TEST(Pack, StreamingStoresMatchReference) {
  // Streaming everywhere: small blocks gathered into 16-byte stores and
  // 16-byte-multiple blocks streamed, at every output alignment and fragment.
  StreamThreshold always(0);
  check_random_layouts(778, 2000);
}

TEST(Pack, LargeBlocksIntoLargeOutputs) {
  // Outputs of 3 MiB, with the default threshold and with streaming stores
  // forced: 2-D strided, irregular offsets, and a partial window into both.
  for (int64_t threshold : {int64_t{-1}, int64_t{0}}) {
    StreamThreshold set(threshold);
    for (int64_t block : {int64_t{4}, int64_t{8}, int64_t{64}, int64_t{256}, int64_t{1040}}) {
      for (bool irregular : {false, true}) {
        Layout l;
        const int64_t rows = 40, cols = (int64_t{3} << 20) / (rows * block) + 1;
        l.root.block = block;
        if (irregular) {
          for (int64_t c = 0; c < cols; ++c) l.root.offsets.push_back(((c * 7919) % cols) * block * 2);
          l.root.dims = {{rows, cols * block * 2 + 48}};
        } else {
          l.root.dims = {{rows, cols * block * 2 + 48}, {cols, block * 2}};
        }
        veneer::datatypes::simplify(l.root);
        std::vector<int64_t> offs;
        expand(l.root, 0, offs);
        l.size = static_cast<int64_t>(offs.size());
        l.extent = rows * (cols * block * 2 + 48);
        l.true_extent = l.extent;
        veneer::datatypes::finish(l);
        std::vector<unsigned char> mem(static_cast<size_t>(l.extent));
        for (size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
        std::vector<unsigned char> expect;
        expect.reserve(offs.size());
        for (int64_t o : offs) expect.push_back(mem[static_cast<size_t>(o)]);
        // 16-byte aligned output (new[] of a large buffer is), whole and a
        // 16-aligned window.
        std::vector<unsigned char> got(expect.size());
        ASSERT_EQ(veneer::datatypes::pack_all(l, 1, mem.data(), got.data()), l.size);
        ASSERT_EQ(got, expect) << "block " << block << (irregular ? " irregular" : "");
        const int64_t skip = block * 3, len = l.size - block * 5;
        std::vector<unsigned char> part(static_cast<size_t>(len));
        ASSERT_EQ(veneer::datatypes::pack(l, 1, mem.data(), skip, len, part.data()), len);
        ASSERT_TRUE(std::equal(part.begin(), part.end(), expect.begin() + skip)) << "window, block " << block;
      }
    }
  }
}

TEST(Pack, EveryOtherElementNeverReadsPastTheLastBlock) {
  // Blocks of 1-8 bytes at a stride of twice their size take a SIMD path that
  // reads the gap after a group of blocks. The source ends exactly at a page
  // that cannot be read: a read past the last block would crash the test.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = 64;
  auto* region = static_cast<unsigned char*>(
      mmap(nullptr, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  ASSERT_EQ(mprotect(region + pages * page, page, PROT_NONE), 0);
  for (size_t i = 0; i < pages * page; ++i) region[i] = static_cast<unsigned char>(i * 37 + 11);
  for (int64_t threshold : {int64_t{-1}, int64_t{0}}) {
    StreamThreshold set(threshold);
    for (int64_t block : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}}) {
      for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{33}, int64_t{1000}}) {
        Layout l;
        l.root.block = block;
        l.root.dims = {{n, 2 * block}};
        veneer::datatypes::simplify(l.root);
        l.size = n * block;
        l.extent = (n - 1) * 2 * block + block;  // the last block ends the extent
        l.true_extent = l.extent;
        veneer::datatypes::finish(l);
        const unsigned char* src = region + pages * page - l.extent;
        std::vector<unsigned char> expect;
        for (int64_t b = 0; b < n; ++b) expect.insert(expect.end(), src + 2 * b * block, src + 2 * b * block + block);
        for (int64_t shift : {int64_t{0}, int64_t{1}, int64_t{4}, int64_t{8}}) {
          std::vector<unsigned char> out(static_cast<size_t>(l.size + 32), 0);
          ASSERT_EQ(veneer::datatypes::pack_all(l, 1, src, out.data() + shift), l.size);
          ASSERT_TRUE(std::equal(expect.begin(), expect.end(), out.begin() + shift))
              << "block " << block << " count " << n << " output offset " << shift;
        }
      }
    }
  }
  munmap(region, (pages + 1) * page);
}
